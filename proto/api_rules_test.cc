// The public API's rules, checked over the compiled descriptors so they stay
// true: AIP-126 enum naming, the style guide's names, and no breaking change
// against the committed snapshot of v1 (proto/benchd/v1/bench.snapshot.textproto).
//
// After a backward-compatible change (a new field, message, value or RPC),
// refresh the snapshot:  BENCHD_UPDATE_API_SNAPSHOT=1 build/bin/proto_test
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

namespace pb = google::protobuf;

const pb::FileDescriptor* PublicApi() { return v1::Job::descriptor()->file(); }

// "CollectiveBackend" -> "COLLECTIVE_BACKEND".
std::string UpperSnake(const std::string& camel) {
  std::string out;
  for (size_t i = 0; i < camel.size(); ++i) {
    const char c = camel[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 0) out += '_';
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

bool IsUpperCamel(const std::string& s) {
  if (s.empty() || !std::isupper(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IsLowerSnake(const std::string& s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

void ForEachMessage(const pb::Descriptor* m, const std::function<void(const pb::Descriptor*)>& f) {
  f(m);
  for (int i = 0; i < m->nested_type_count(); ++i) ForEachMessage(m->nested_type(i), f);
}

std::vector<const pb::EnumDescriptor*> AllEnums(const pb::FileDescriptor* file) {
  std::vector<const pb::EnumDescriptor*> out;
  for (int i = 0; i < file->enum_type_count(); ++i) out.push_back(file->enum_type(i));
  for (int i = 0; i < file->message_type_count(); ++i) {
    ForEachMessage(file->message_type(i), [&](const pb::Descriptor* m) {
      for (int e = 0; e < m->enum_type_count(); ++e) out.push_back(m->enum_type(e));
    });
  }
  return out;
}

std::vector<const pb::FileDescriptor*> OurFiles() {
  return {PublicApi(), internal::WorkerEvent::descriptor()->file()};
}

// AIP-126: every value carries its enum's name as a prefix, and zero is
// <PREFIX>_UNSPECIFIED, the default (never a real value).
TEST(ApiRulesTest, EnumValuesArePrefixedAndZeroIsUnspecified) {
  int enums = 0;
  for (const pb::FileDescriptor* file : OurFiles()) {
    for (const pb::EnumDescriptor* e : AllEnums(file)) {
      ++enums;
      const std::string prefix = UpperSnake(e->name()) + "_";
      for (int i = 0; i < e->value_count(); ++i) {
        EXPECT_TRUE(absl::StartsWith(e->value(i)->name(), prefix))
            << e->full_name() << "." << e->value(i)->name() << " lacks the prefix " << prefix;
      }
      const pb::EnumValueDescriptor* zero = e->FindValueByNumber(0);
      ASSERT_NE(zero, nullptr) << e->full_name() << " has no value 0";
      EXPECT_EQ(zero->name(), prefix + "UNSPECIFIED") << e->full_name();
    }
  }
  EXPECT_GE(enums, 12);  // the rule ran over the real API
}

TEST(ApiRulesTest, NamesFollowTheStyleGuide) {
  for (const pb::FileDescriptor* file : OurFiles()) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      ForEachMessage(file->message_type(i), [](const pb::Descriptor* m) {
        EXPECT_TRUE(IsUpperCamel(m->name())) << m->full_name();
        for (int f = 0; f < m->field_count(); ++f) {
          EXPECT_TRUE(IsLowerSnake(m->field(f)->name())) << m->field(f)->full_name();
        }
      });
    }
    for (int s = 0; s < file->service_count(); ++s) {
      for (int r = 0; r < file->service(s)->method_count(); ++r) {
        const pb::MethodDescriptor* rpc = file->service(s)->method(r);
        EXPECT_TRUE(IsUpperCamel(rpc->name())) << rpc->full_name();
      }
    }
  }
  // Public RPCs take <Rpc>Request.
  const pb::ServiceDescriptor* bench = PublicApi()->FindServiceByName("Bench");
  ASSERT_NE(bench, nullptr);
  for (int r = 0; r < bench->method_count(); ++r) {
    EXPECT_EQ(bench->method(r)->input_type()->name(), bench->method(r)->name() + "Request");
  }
}

// A request kind is implemented or absent: no empty placeholder messages in
// the JobSpec oneof.
TEST(ApiRulesTest, EveryRequestKindHasFields) {
  const pb::OneofDescriptor* kind = v1::JobSpec::descriptor()->FindOneofByName("kind");
  ASSERT_NE(kind, nullptr);
  for (int i = 0; i < kind->field_count(); ++i) {
    EXPECT_GT(kind->field(i)->message_type()->field_count(), 0) << kind->field(i)->full_name();
  }
}

std::string SnapshotPath() {
  return std::string(BENCHD_SOURCE_DIR) + "/proto/benchd/v1/bench.snapshot.textproto";
}

std::string CurrentText() {
  pb::FileDescriptorProto proto;
  PublicApi()->CopyTo(&proto);
  std::string text;
  pb::TextFormat::PrintToString(proto, &text);
  return text;
}

using Fields = std::map<int, const pb::FieldDescriptorProto*>;

void CompareMessages(const std::string& scope, const pb::DescriptorProto& old_m,
                     const std::map<std::string, const pb::DescriptorProto*>& now_messages,
                     std::vector<std::string>* breaks);

void CollectMessages(const std::string& scope, const pb::DescriptorProto& m,
                     std::map<std::string, const pb::DescriptorProto*>* out) {
  const std::string name = scope + "." + m.name();
  (*out)[name] = &m;
  for (const auto& n : m.nested_type()) CollectMessages(name, n, out);
}

void CollectEnums(const std::string& scope, const pb::DescriptorProto& m,
                  std::map<std::string, const pb::EnumDescriptorProto*>* out) {
  const std::string name = scope + "." + m.name();
  for (const auto& e : m.enum_type()) (*out)[name + "." + e.name()] = &e;
  for (const auto& n : m.nested_type()) CollectEnums(name, n, out);
}

// What buf's FILE breaking rules check, for what clients can hold on to:
// messages, fields (number, name, type, label, oneof), enums and their
// values, services and their RPCs; new ones are fine.
std::vector<std::string> BreakingChanges(const pb::FileDescriptorProto& old_file,
                                         const pb::FileDescriptorProto& new_file) {
  std::vector<std::string> breaks;
  const std::string pkg = old_file.package();
  std::map<std::string, const pb::DescriptorProto*> old_msgs, new_msgs;
  std::map<std::string, const pb::EnumDescriptorProto*> old_enums, new_enums;
  for (const auto& m : old_file.message_type()) CollectMessages(pkg, m, &old_msgs);
  for (const auto& m : new_file.message_type()) CollectMessages(pkg, m, &new_msgs);
  for (const auto& e : old_file.enum_type()) old_enums[pkg + "." + e.name()] = &e;
  for (const auto& e : new_file.enum_type()) new_enums[pkg + "." + e.name()] = &e;
  for (const auto& m : old_file.message_type()) CollectEnums(pkg, m, &old_enums);
  for (const auto& m : new_file.message_type()) CollectEnums(pkg, m, &new_enums);

  for (const auto& [name, old_m] : old_msgs) {
    auto it = new_msgs.find(name);
    if (it == new_msgs.end()) {
      breaks.push_back(absl::StrCat("message ", name, " was removed"));
      continue;
    }
    std::map<int, const pb::FieldDescriptorProto*> now;
    for (const auto& f : it->second->field()) now[f.number()] = &f;
    for (const auto& f : old_m->field()) {
      const std::string field = absl::StrCat(name, ".", f.name(), " = ", f.number());
      auto nf = now.find(f.number());
      if (nf == now.end()) {
        breaks.push_back(absl::StrCat("field ", field, " was removed or renumbered"));
        continue;
      }
      const pb::FieldDescriptorProto& g = *nf->second;
      if (g.name() != f.name()) {
        breaks.push_back(absl::StrCat("field ", field, " was renamed to ", g.name()));
      }
      if (g.type() != f.type() || g.type_name() != f.type_name()) {
        breaks.push_back(absl::StrCat("field ", field, " changed type"));
      }
      if (g.label() != f.label() || g.proto3_optional() != f.proto3_optional()) {
        breaks.push_back(absl::StrCat("field ", field, " changed cardinality"));
      }
      const bool in_oneof = f.has_oneof_index() && !f.proto3_optional();
      const bool now_in_oneof = g.has_oneof_index() && !g.proto3_optional();
      if (in_oneof != now_in_oneof ||
          (in_oneof && old_m->oneof_decl(f.oneof_index()).name() !=
                           it->second->oneof_decl(g.oneof_index()).name())) {
        breaks.push_back(absl::StrCat("field ", field, " moved into or out of a oneof"));
      }
    }
  }
  for (const auto& [name, old_e] : old_enums) {
    auto it = new_enums.find(name);
    if (it == new_enums.end()) {
      breaks.push_back(absl::StrCat("enum ", name, " was removed"));
      continue;
    }
    std::map<int, std::string> now;
    for (const auto& v : it->second->value()) now[v.number()] = v.name();
    for (const auto& v : old_e->value()) {
      auto nv = now.find(v.number());
      if (nv == now.end() || nv->second != v.name()) {
        breaks.push_back(absl::StrCat("enum value ", name, ".", v.name(), " = ", v.number(),
                                      nv == now.end() ? " was removed" : " was renamed"));
      }
    }
  }
  for (const auto& old_s : old_file.service()) {
    const pb::ServiceDescriptorProto* now_s = nullptr;
    for (const auto& s : new_file.service()) {
      if (s.name() == old_s.name()) now_s = &s;
    }
    if (now_s == nullptr) {
      breaks.push_back(absl::StrCat("service ", old_s.name(), " was removed"));
      continue;
    }
    for (const auto& rpc : old_s.method()) {
      const pb::MethodDescriptorProto* now_rpc = nullptr;
      for (const auto& r : now_s->method()) {
        if (r.name() == rpc.name()) now_rpc = &r;
      }
      if (now_rpc == nullptr) {
        breaks.push_back(absl::StrCat("rpc ", old_s.name(), ".", rpc.name(), " was removed"));
      } else if (now_rpc->input_type() != rpc.input_type() ||
                 now_rpc->output_type() != rpc.output_type() ||
                 now_rpc->client_streaming() != rpc.client_streaming() ||
                 now_rpc->server_streaming() != rpc.server_streaming()) {
        breaks.push_back(absl::StrCat("rpc ", old_s.name(), ".", rpc.name(), " changed signature"));
      }
    }
  }
  return breaks;
}

TEST(ApiRulesTest, NoBreakingChangeAgainstTheSnapshot) {
  const std::string current = CurrentText();
  if (std::getenv("BENCHD_UPDATE_API_SNAPSHOT") != nullptr) {
    std::ofstream(SnapshotPath()) << current;
    GTEST_SKIP() << "wrote " << SnapshotPath();
  }
  std::ifstream in(SnapshotPath());
  ASSERT_TRUE(in) << "no snapshot at " << SnapshotPath();
  std::stringstream text;
  text << in.rdbuf();
  pb::FileDescriptorProto old_file, new_file;
  ASSERT_TRUE(pb::TextFormat::ParseFromString(text.str(), &old_file));
  PublicApi()->CopyTo(&new_file);
  const std::vector<std::string> breaks = BreakingChanges(old_file, new_file);
  EXPECT_TRUE(breaks.empty()) << "benchd.v1 must stay backward compatible (add fields, never "
                                 "renumber, rename or remove):\n  "
                              << absl::StrJoin(breaks, "\n  ");
  EXPECT_EQ(text.str(), current)
      << "the API grew compatibly; refresh the snapshot with BENCHD_UPDATE_API_SNAPSHOT=1 "
         "build/bin/proto_test";
}

// The check itself catches what it should.
TEST(ApiRulesTest, TheCompatibilityCheckSeesBreaks) {
  pb::FileDescriptorProto base;
  PublicApi()->CopyTo(&base);
  EXPECT_TRUE(BreakingChanges(base, base).empty());
  auto broken = [&](const std::function<void(pb::FileDescriptorProto*)>& change) {
    pb::FileDescriptorProto next = base;
    change(&next);
    return BreakingChanges(base, next);
  };
  auto message = [](pb::FileDescriptorProto* f, const std::string& name) {
    for (auto& m : *f->mutable_message_type()) {
      if (m.name() == name) return &m;
    }
    return static_cast<pb::DescriptorProto*>(nullptr);
  };
  auto field = [&](pb::FileDescriptorProto* f, const std::string& m, const std::string& name) {
    for (auto& x : *message(f, m)->mutable_field()) {
      if (x.name() == name) return &x;
    }
    return static_cast<pb::FieldDescriptorProto*>(nullptr);
  };
  EXPECT_EQ(broken([&](auto* f) { field(f, "Job", "state")->set_number(99); }).size(), 1u);
  EXPECT_EQ(broken([&](auto* f) { field(f, "Job", "state")->set_name("status"); }).size(), 1u);
  EXPECT_EQ(broken([&](auto* f) {
              field(f, "Job", "devices")->set_label(pb::FieldDescriptorProto::LABEL_OPTIONAL);
            }).size(),
            1u);
  EXPECT_EQ(broken([&](auto* f) {
              field(f, "Job", "error_code")->set_type(pb::FieldDescriptorProto::TYPE_INT64);
            }).size(),
            1u);
  EXPECT_EQ(
      broken([&](auto* f) { f->mutable_enum_type(0)->mutable_value(1)->set_number(42); }).size(),
      1u);
  EXPECT_EQ(broken([&](auto* f) { f->mutable_service(0)->mutable_method()->RemoveLast(); }).size(),
            1u);
  // Additions are compatible.
  EXPECT_TRUE(broken([&](auto* f) {
                auto* added = message(f, "Job")->add_field();
                added->set_name("submitted_by");
                added->set_number(50);
                added->set_type(pb::FieldDescriptorProto::TYPE_STRING);
              }).empty());
}

}  // namespace
}  // namespace benchd

#include "common/sweep_spec.h"

#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/job_spec.h"
#include "common/limits.h"
#include "common/options.h"
#include "google/protobuf/descriptor.h"

namespace benchd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

absl::Status Invalid(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The kind's message type (BenchmarkSpec, ...), or null for none.
const FieldDescriptor* KindField(v1::JobSpec::KindCase kind) {
  if (kind == v1::JobSpec::KIND_NOT_SET) return nullptr;
  return v1::JobSpec::descriptor()->FindFieldByNumber(static_cast<int>(kind));
}

// Every scalar path of `d` ("precision", "model.preset"), for messages.
void ScalarPaths(const Descriptor* d, const std::string& prefix, int depth,
                 std::vector<std::string>* out) {
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (depth < 3) ScalarPaths(f->message_type(), prefix + f->name() + ".", depth + 1, out);
      continue;
    }
    out->push_back(prefix + f->name());
  }
}

// The enum's value names less their shared prefix, lower case:
// PRECISION_BF16 -> "bf16"; the attention and optimizer implementations as
// benchctl spells them ("flash", "fused").
std::string ShortName(const EnumValueDescriptor* v) {
  if (v->type() == v1::AttentionImpl_descriptor()) {
    return AttentionName(static_cast<v1::AttentionImpl>(v->number()));
  }
  if (v->type() == v1::OptimizerImpl_descriptor()) {
    return OptimizerImplName(static_cast<v1::OptimizerImpl>(v->number()));
  }
  const std::string unspecified = v->type()->value(0)->name();  // AIP-126: X_UNSPECIFIED = 0
  std::string prefix =
      unspecified.substr(0, unspecified.size() - std::string("UNSPECIFIED").size());
  std::string name = v->name();
  if (absl::StartsWith(name, prefix)) name = name.substr(prefix.size());
  return absl::AsciiStrToLower(name);
}

std::string EnumChoices(const EnumDescriptor* e) {
  std::vector<std::string> shorts, fulls;
  for (int i = 1; i < e->value_count(); ++i) {  // not UNSPECIFIED
    shorts.push_back(ShortName(e->value(i)));
    fulls.push_back(e->value(i)->name());
  }
  return absl::StrCat(absl::StrJoin(shorts, ", "), " (or the full names ",
                      absl::StrJoin(fulls, ", "), ")");
}

// The field path `field` walked from `root`: every segment but the last a
// singular message, the last a singular scalar.
absl::StatusOr<std::vector<const FieldDescriptor*>> WalkField(const Descriptor* root,
                                                              absl::string_view field,
                                                              absl::string_view where) {
  std::vector<std::string> scalars;
  ScalarPaths(root, "", 0, &scalars);
  const std::string accepted = absl::StrCat(
      "expected a scalar field of ", root->full_name(), " such as ",
      absl::StrJoin(scalars.begin(), scalars.begin() + std::min<size_t>(12, scalars.size()), ", "),
      scalars.size() > 12 ? ", ..." : "");
  if (field.empty()) return Invalid(where, absl::StrCat("no field given; ", accepted));
  std::vector<const FieldDescriptor*> path;
  const Descriptor* d = root;
  const std::vector<absl::string_view> parts = absl::StrSplit(field, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* f = d ? d->FindFieldByName(std::string(parts[i])) : nullptr;
    if (f == nullptr) {
      return Invalid(
          where, absl::StrCat(QuotedForError(field), " is not a field of ", root->full_name(), " (",
                              QuotedForError(parts[i]), " unknown); ", accepted));
    }
    const bool last = i + 1 == parts.size();
    if (f->is_repeated()) {
      return Invalid(where, absl::StrCat(QuotedForError(field), " is a list (", f->full_name(),
                                         "), not a scalar; ", accepted));
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (last) {
        return Invalid(where, absl::StrCat(QuotedForError(field), " is a message (",
                                           f->message_type()->full_name(),
                                           "), not a scalar; name one of its fields, e.g. ", field,
                                           ".", f->message_type()->field(0)->name()));
      }
      d = f->message_type();
    } else if (!last) {
      return Invalid(where, absl::StrCat(QuotedForError(field), ": ", parts[i],
                                         " is a scalar and has no fields; ", accepted));
    }
    path.push_back(f);
  }
  return path;
}

// Parses `text` for the field `f` and sets it on `m` (may be null: parse
// only). Returns the value's canonical text.
absl::StatusOr<std::string> ParseAndSet(const FieldDescriptor* f, absl::string_view text,
                                        absl::string_view where, Message* m) {
  const google::protobuf::Reflection* r = m ? m->GetReflection() : nullptr;
  const std::string got = QuotedForError(text);
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      const bool i32 = f->cpp_type() == FieldDescriptor::CPPTYPE_INT32;
      if (!absl::SimpleAtoi(text, &v) || (i32 && (v < INT32_MIN || v > INT32_MAX))) {
        return Invalid(where, absl::StrCat("expected an integer for ", f->name(), ", got ", got));
      }
      if (r) i32 ? r->SetInt32(m, f, static_cast<int32_t>(v)) : r->SetInt64(m, f, v);
      return absl::StrCat(v);
    }
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      const bool u32 = f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32;
      if (!absl::SimpleAtoi(text, &v) || (u32 && v > UINT32_MAX)) {
        return Invalid(
            where, absl::StrCat("expected a non-negative integer for ", f->name(), ", got ", got));
      }
      if (r) u32 ? r->SetUInt32(m, f, static_cast<uint32_t>(v)) : r->SetUInt64(m, f, v);
      return absl::StrCat(v);
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v;
      if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) {
        return Invalid(where,
                       absl::StrCat("expected a finite number for ", f->name(), ", got ", got));
      }
      if (r) {
        f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ? r->SetDouble(m, f, v)
                                                         : r->SetFloat(m, f, static_cast<float>(v));
      }
      return absl::StrCat(v);
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const std::string l = absl::AsciiStrToLower(text);
      if (l != "true" && l != "false") {
        return Invalid(where,
                       absl::StrCat("expected true or false for ", f->name(), ", got ", got));
      }
      if (r) r->SetBool(m, f, l == "true");
      return l;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      if (text.empty()) {
        return Invalid(where, absl::StrCat("expected a non-empty string for ", f->name()));
      }
      if (r) r->SetString(m, f, std::string(text));
      return std::string(text);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const EnumDescriptor* e = f->enum_type();
      const std::string upper = absl::AsciiStrToUpper(text);
      const EnumValueDescriptor* found = nullptr;
      for (int i = 1; i < e->value_count() && !found; ++i) {
        if (e->value(i)->name() == upper || ShortName(e->value(i)) == absl::AsciiStrToLower(text)) {
          found = e->value(i);
        }
      }
      if (!found && e == v1::AttentionImpl_descriptor()) {
        if (auto a = ParseAttention(std::string(text)); a.ok()) found = e->FindValueByNumber(*a);
      }
      if (!found) {
        return Invalid(where, absl::StrCat(got, " is not a value of ", f->name(), " (",
                                           e->full_name(), "); expected ", EnumChoices(e)));
      }
      if (r) r->SetEnumValue(m, f, found->number());
      return ShortName(found);
    }
    default:
      return Invalid(where, absl::StrCat(f->name(), " cannot be swept"));
  }
}

// The message holding the last field of `path` inside `kind_message`.
Message* Holder(Message* kind_message, const std::vector<const FieldDescriptor*>& path) {
  Message* m = kind_message;
  for (size_t i = 0; i + 1 < path.size(); ++i) m = m->GetReflection()->MutableMessage(m, path[i]);
  return m;
}

}  // namespace

std::string SweepCellLabel(const v1::SweepSpec& sweep, const std::vector<std::string>& values) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < values.size() && i < static_cast<size_t>(sweep.axes_size()); ++i) {
    parts.push_back(absl::StrCat(sweep.axes(static_cast<int>(i)).field(), "=", values[i]));
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::string> CanonicalSweepValue(v1::JobSpec::KindCase kind, absl::string_view field,
                                                absl::string_view text, absl::string_view where) {
  const FieldDescriptor* k = KindField(kind);
  if (k == nullptr) return Invalid(where, "the request has no kind");
  auto path = WalkField(k->message_type(), field, where);
  if (!path.ok()) return path.status();
  return ParseAndSet(path->back(), text, where, nullptr);
}

absl::StatusOr<std::vector<SweepCellSpec>> ExpandSweep(const v1::JobSpec& spec) {
  const v1::SweepSpec& sweep = spec.sweep();
  if (spec.has_collective()) {
    return Invalid("sweep",
                   "a collective request sweeps its own lists: collective.sizes_bytes (or "
                   "min_bytes/max_bytes/factor), collective.world_sizes and collective.backends; "
                   "leave sweep unset");
  }
  if (spec.has_ddp()) {
    return Invalid("sweep",
                   "a data-parallel request runs its own lists: ddp.variants, ddp.bucket_mb and "
                   "ddp.optimizers, one job; leave sweep unset");
  }
  const FieldDescriptor* kind = KindField(spec.kind_case());
  if (kind == nullptr) {
    return Invalid("sweep", "no request kind set; expected benchmark, profile or memory to sweep");
  }
  if (sweep.axes_size() == 0) {
    return Invalid("sweep.axes", "no axes; expected 1 to 6 axes, each a field and its values");
  }
  if (sweep.has_cell_timeout_seconds()) {
    const double t = sweep.cell_timeout_seconds();
    if (!(t >= 1 && t <= kMaxTimeoutSeconds)) {
      return Invalid("sweep.cell_timeout_seconds",
                     absl::StrCat("expected 1..", kMaxTimeoutSeconds, " (or unset: no limit), got ",
                                  std::isfinite(t) ? absl::StrCat(t) : std::string("not finite")));
    }
  }
  // Each axis: its field path and its values' canonical text.
  std::vector<std::vector<const FieldDescriptor*>> paths;
  std::vector<std::vector<std::string>> values;
  std::set<std::string> fields_seen;
  int64_t cells = 1;
  for (int i = 0; i < sweep.axes_size(); ++i) {
    const v1::SweepAxis& axis = sweep.axes(i);
    const std::string where = absl::StrCat("sweep.axes[", i, "]");
    auto path = WalkField(kind->message_type(), axis.field(), where + ".field");
    if (!path.ok()) return path.status();
    if (!fields_seen.insert(axis.field()).second) {
      return Invalid(where + ".field", absl::StrCat(axis.field(),
                                                    " is swept by an earlier axis too; give its "
                                                    "values in one axis"));
    }
    if (axis.values_size() == 0) {
      return Invalid(where + ".values", absl::StrCat("no values for ", axis.field(),
                                                     "; expected 1 to ", kMaxSweepValues));
    }
    std::vector<std::string> canon;
    std::set<std::string> seen;
    for (int j = 0; j < axis.values_size(); ++j) {
      const std::string vwhere = absl::StrCat(where, ".values[", j, "]");
      auto c = ParseAndSet(path->back(), axis.values(j), vwhere, nullptr);
      if (!c.ok()) return c.status();
      if (!seen.insert(*c).second) {
        return Invalid(
            vwhere, absl::StrCat(QuotedForError(axis.values(j)), " (", *c, ") is given twice for ",
                                 axis.field(), "; each value once"));
      }
      canon.push_back(*c);
    }
    cells *= axis.values_size();
    if (cells > kMaxSweepCells) {
      return Invalid("sweep.axes", absl::StrCat("the sweep has more than ", kMaxSweepCells,
                                                " cells (the product of the axes' values); at "
                                                "most ",
                                                kMaxSweepCells, " in one request"));
    }
    paths.push_back(*std::move(path));
    values.push_back(std::move(canon));
  }

  // The product, first axis outermost: an odometer over the axes' indices.
  v1::JobSpec base = spec;
  base.clear_sweep();
  std::vector<SweepCellSpec> out;
  std::vector<int> at(values.size(), 0);
  for (int64_t n = 0; n < cells; ++n) {
    SweepCellSpec cell;
    cell.spec = base;
    Message* kind_message = cell.spec.GetReflection()->MutableMessage(&cell.spec, kind);
    for (size_t a = 0; a < values.size(); ++a) {
      cell.values.push_back(values[a][at[a]]);
      auto set =
          ParseAndSet(paths[a].back(), values[a][at[a]], "sweep", Holder(kind_message, paths[a]));
      if (!set.ok()) return set.status();
    }
    auto resolved = ResolveJobSpec(cell.spec);
    if (!resolved.ok()) {
      return absl::Status(resolved.status().code(),
                          absl::StrCat("sweep cell ", n, " (", SweepCellLabel(sweep, cell.values),
                                       "): ", resolved.status().message()));
    }
    cell.spec = *std::move(resolved);
    out.push_back(std::move(cell));
    for (int a = static_cast<int>(at.size()) - 1; a >= 0; --a) {
      if (++at[a] < static_cast<int>(values[a].size())) break;
      at[a] = 0;
    }
  }
  return out;
}

}  // namespace benchd

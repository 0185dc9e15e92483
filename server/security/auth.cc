#include "server/security/auth.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/token_hash.h"
#include "grpc/grpc_security_constants.h"
#include "server/security/call_policy.h"

namespace benchd::server {
namespace {

constexpr size_t kMaxNameBytes = 64;
constexpr size_t kMaxSubjectBytes = 1024;
constexpr size_t kMaxTokenBytes = 4096;
constexpr absl::string_view kTokenPrefix = "sha256:";
constexpr absl::string_view kSubjectPrefix = "subject:";

bool IsName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '@') {
      return false;
    }
  }
  return true;
}

bool IsTokenHash(absl::string_view credential) {
  if (!absl::StartsWith(credential, kTokenPrefix)) return false;
  absl::string_view hex = credential.substr(kTokenPrefix.size());
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

std::optional<v1::Role> ParseRole(absl::string_view role) {
  if (role == "read") return v1::ROLE_READ;
  if (role == "submit") return v1::ROLE_SUBMIT;
  if (role == "admin") return v1::ROLE_ADMIN;
  return std::nullopt;
}

// What the caller presented as "authorization: Bearer <token>"; nullopt when
// there is no such metadata.
absl::StatusOr<std::optional<std::string>> BearerToken(const grpc::ServerContextBase& ctx) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::optional<std::string>();
  absl::string_view value(it->second.data(), it->second.size());
  if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ")) {
    return absl::UnauthenticatedError(
        "authorization metadata: expected 'Bearer <token>' (benchctl --token-file, or "
        "BENCHD_TOKEN)");
  }
  absl::string_view token = absl::StripAsciiWhitespace(value.substr(7));
  if (token.empty() || token.size() > kMaxTokenBytes) {
    return absl::UnauthenticatedError(
        absl::StrCat("authorization metadata: expected a token of 1..", kMaxTokenBytes,
                     " bytes, got ", token.size()));
  }
  return std::optional<std::string>(std::string(token));
}

// "ROLE NAME CREDENTIAL": two words, then the rest of the line (a subject may
// hold spaces).
std::vector<absl::string_view> SplitFields(absl::string_view line) {
  std::vector<absl::string_view> fields;
  while (!line.empty() && fields.size() < 2) {
    const size_t end = line.find_first_of(" \t");
    fields.push_back(line.substr(0, end));
    line =
        end == absl::string_view::npos ? "" : absl::StripLeadingAsciiWhitespace(line.substr(end));
  }
  if (!line.empty()) fields.push_back(line);
  return fields;
}

}  // namespace

std::string PeerCertificateSubject(const grpc::ServerContextBase& ctx) {
  auto auth = ctx.auth_context();
  if (auth == nullptr) return "";
  auto values = auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME);
  if (values.empty()) return "";
  return std::string(values.front().data(), values.front().size());
}

absl::StatusOr<AuthFile> AuthFile::Parse(absl::string_view text, absl::string_view origin) {
  AuthFile file;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ":", line_number, ": ", why,
                       "; expected 'ROLE NAME sha256:<64 hex>' or 'ROLE NAME subject:<subject>' "
                       "with ROLE read, submit or admin"));
    };
    std::vector<absl::string_view> fields = SplitFields(line);
    if (fields.size() != 3) return bad("expected three fields");
    auto role = ParseRole(fields[0]);
    if (!role) return bad(absl::StrCat("unknown role '", fields[0].substr(0, 16), "'"));
    if (!IsName(fields[1])) {
      return bad(absl::StrCat("name '", fields[1].substr(0, kMaxNameBytes),
                              "' is not 1..64 letters, digits or . _ - @"));
    }
    absl::string_view credential = absl::StripAsciiWhitespace(fields[2]);
    Entry entry{"", {std::string(fields[1]), *role}};
    if (absl::StartsWith(credential, kTokenPrefix)) {
      if (!IsTokenHash(credential)) {
        return bad("a token hash is 'sha256:' and 64 lowercase hex digits (benchctl token create)");
      }
      entry.credential = std::string(credential);
      for (const Entry& e : file.tokens_) {
        if (e.credential == entry.credential) {
          return bad(absl::StrCat("this token hash is already given to '", e.principal.name, "'"));
        }
      }
      file.tokens_.push_back(std::move(entry));
    } else if (absl::StartsWith(credential, kSubjectPrefix)) {
      absl::string_view subject =
          absl::StripAsciiWhitespace(credential.substr(kSubjectPrefix.size()));
      if (subject.empty() || subject.size() > kMaxSubjectBytes) {
        return bad(absl::StrCat("a subject is 1..", kMaxSubjectBytes, " bytes"));
      }
      entry.credential = std::string(subject);
      for (const Entry& e : file.subjects_) {
        if (e.credential == entry.credential) {
          return bad(absl::StrCat("this subject is already given to '", e.principal.name, "'"));
        }
      }
      file.subjects_.push_back(std::move(entry));
    } else {
      return bad("the credential starts with neither 'sha256:' nor 'subject:'");
    }
  }
  return file;
}

absl::StatusOr<AuthFile> AuthFile::Load(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("auth file ", path, ": cannot read it"));
  }
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("auth file ", path,
                     ": is a directory; expected a file of lines 'ROLE NAME sha256:<hash>' "
                     "(benchctl token create prints one)"));
  }
  if ((st.st_mode & 022) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "auth file ", path, ": group or others may write it (mode ",
        absl::StrFormat("%04o", st.st_mode & 07777), "); it says who is admin: chmod go-w"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("auth file ", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = Parse(text.str(), path);
  // An empty file would refuse every caller without a word: say so instead.
  if (parsed.ok() && parsed->tokens_.empty() && parsed->subjects_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auth file ", path,
        ": has no entries, so every caller would be refused; add a line "
        "'ROLE NAME sha256:<hash>' (benchctl token create prints one) or leave --auth-file out"));
  }
  return parsed;
}

std::optional<Principal> AuthFile::ForToken(absl::string_view token) const {
  const std::string hash = TokenHash(token);
  std::optional<Principal> found;
  for (const Entry& e : tokens_) {
    if (ConstantTimeEquals(e.credential, hash) && !found) found = e.principal;
  }
  return found;
}

std::optional<Principal> AuthFile::ForSubject(absl::string_view subject) const {
  for (const Entry& e : subjects_) {
    if (e.credential == subject) return e.principal;
  }
  return std::nullopt;
}

v1::Role RequiredRole(absl::string_view method) {
  const CallPolicy* policy = FindCallPolicy(method);
  return policy == nullptr ? v1::ROLE_UNSPECIFIED : policy->role;
}

absl::string_view RoleName(v1::Role role) {
  switch (role) {
    case v1::ROLE_READ:
      return "read";
    case v1::ROLE_SUBMIT:
      return "submit";
    case v1::ROLE_ADMIN:
      return "admin";
    default:
      return "none";
  }
}

Authorizer::Authorizer(Options options, std::unique_ptr<AuthFile> auth_file)
    : options_(options), auth_file_(std::move(auth_file)) {}

void Authorizer::Replace(std::unique_ptr<AuthFile> auth_file) {
  std::shared_ptr<const AuthFile> next = std::move(auth_file);
  std::lock_guard<std::mutex> lock(mu_);
  auth_file_.swap(next);
}

bool Authorizer::checks_callers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return auth_file_ != nullptr || options_.client_certificates;
}

absl::StatusOr<Principal> Authorizer::Authenticate(const grpc::ServerContextBase& ctx) const {
  std::shared_ptr<const AuthFile> file;
  {
    std::lock_guard<std::mutex> lock(mu_);
    file = auth_file_;
  }
  const std::string subject = options_.client_certificates ? PeerCertificateSubject(ctx) : "";
  if (file == nullptr) {
    // Nobody is checked beyond what TLS did: with mTLS the caller is its
    // certificate (gRPC verified it against the CA), else anonymous.
    return Principal{subject, v1::ROLE_ADMIN};
  }
  auto token = BearerToken(ctx);
  if (!token.ok()) return token.status();
  if (token->has_value()) {
    if (auto who = file->ForToken(**token)) return *who;
    return absl::UnauthenticatedError(
        "the token is not in the daemon's auth file (revoked, or for another daemon?)");
  }
  if (!subject.empty()) {
    if (auto who = file->ForSubject(subject)) return *who;
    return absl::PermissionDeniedError(
        absl::StrCat("certificate subject '", subject.substr(0, 256),
                     "' has no role in the daemon's auth file, and no token came with the call"));
  }
  return absl::UnauthenticatedError(
      "this daemon checks callers: send a token (benchctl --token-file, BENCHD_TOKEN or "
      "BENCHD_TOKEN_FILE) as 'authorization: Bearer <token>' metadata");
}

absl::StatusOr<Principal> Authorizer::Check(const grpc::ServerContextBase& ctx,
                                            absl::string_view method) const {
  auto who = Authenticate(ctx);
  if (!who.ok()) {
    LogRefusal(ctx, method, who.status());
    return who.status();
  }
  const v1::Role needed = RequiredRole(method);
  if (who->role < needed || needed == v1::ROLE_UNSPECIFIED) {
    return Deny(ctx, method, *who,
                absl::StrCat(method, " needs the ", RoleName(needed), " role; '", who->name,
                             "' has ", RoleName(who->role)));
  }
  return who;
}

absl::StatusOr<Principal> Authorizer::CheckUnlogged(const grpc::ServerContextBase& ctx,
                                                    absl::string_view method) const {
  auto who = Authenticate(ctx);
  if (!who.ok()) return who.status();
  const v1::Role needed = RequiredRole(method);
  if (who->role < needed || needed == v1::ROLE_UNSPECIFIED) {
    return absl::PermissionDeniedError(absl::StrCat(method, " needs the ", RoleName(needed),
                                                    " role; '", who->name, "' has ",
                                                    RoleName(who->role)));
  }
  return who;
}

absl::Status Authorizer::Deny(const grpc::ServerContextBase& ctx, absl::string_view method,
                              const Principal& who, std::string message) const {
  absl::Status denied = absl::PermissionDeniedError(std::move(message));
  LogRefusal(ctx, method,
             absl::Status(denied.code(), absl::StrCat("'", who.name, "': ", denied.message())));
  return denied;
}

void Authorizer::LogRefusal(const grpc::ServerContextBase& ctx, absl::string_view method,
                            const absl::Status& status) const {
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  int64_t unlogged = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (second != log_second_) {
      log_second_ = second;
      logged_this_second_ = 0;
    }
    if (logged_this_second_ >= kLogPerSecond) {
      ++unlogged_;
      return;
    }
    ++logged_this_second_;
    std::swap(unlogged, unlogged_);
  }
  if (unlogged > 0) {
    fprintf(stderr, "benchd: auth: %lld more refusals were not logged (more than %d a second)\n",
            static_cast<long long>(unlogged), kLogPerSecond);
  }
  fprintf(stderr, "benchd: auth: refused %.*s from %s: %s: %s\n", static_cast<int>(method.size()),
          method.data(), ctx.peer().c_str(), absl::StatusCodeToString(status.code()).c_str(),
          std::string(status.message()).c_str());
}

v1::Security Authorizer::Describe(const Principal& caller) const {
  v1::Security s;
  s.set_tls(options_.tls);
  s.set_client_certificates(options_.client_certificates);
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.set_tokens(auth_file_ != nullptr);
  }
  s.set_insecure(options_.insecure);
  s.set_caller(caller.name);
  s.set_caller_role(caller.role);
  return s;
}

}  // namespace benchd::server

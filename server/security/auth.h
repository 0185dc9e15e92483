// Who may call what. The daemon knows callers by a bearer token (its hash in
// the auth file) or by an mTLS client certificate's subject, and gives each a
// role: read < submit < admin. Every Bench handler asks Authorizer::Check
// first; gRPC 1.51 cannot run an AuthMetadataProcessor on a plaintext port
// (it aborts), and a check in the handlers works the same on both.
#ifndef BENCHD_SERVER_SECURITY_AUTH_H_
#define BENCHD_SERVER_SECURITY_AUTH_H_

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "benchd/v1/bench.pb.h"
#include "grpcpp/server_context.h"

namespace benchd::server {

// A caller the daemon recognises.
struct Principal {
  std::string name;  // "" when the daemon checks nobody
  v1::Role role = v1::ROLE_UNSPECIFIED;
};

// The auth file: one principal per line, "ROLE NAME CREDENTIAL", where
// CREDENTIAL is "sha256:<64 hex>" (a token's hash, common/token_hash.h) or
// "subject:<RFC 2253 subject>" (the rest of the line). A line starting with '#' is a
// comment.
class AuthFile {
 public:
  // INVALID_ARGUMENT naming `origin`, the line and what is wrong.
  static absl::StatusOr<AuthFile> Parse(absl::string_view text, absl::string_view origin);
  // Refuses a file that others may read or write (it says who is admin).
  static absl::StatusOr<AuthFile> Load(const std::string& path);

  // Compares against every token hash, in time that does not depend on
  // which one matches.
  std::optional<Principal> ForToken(absl::string_view token) const;
  std::optional<Principal> ForSubject(absl::string_view subject) const;
  size_t size() const { return tokens_.size() + subjects_.size(); }

 private:
  struct Entry {
    std::string credential;  // "sha256:..." or the subject
    Principal principal;
  };
  std::vector<Entry> tokens_;
  std::vector<Entry> subjects_;
};

// The role each Bench method needs ("Submit" -> ROLE_SUBMIT, ...). CancelJob
// needs ROLE_SUBMIT here; cancelling another's job needs ROLE_ADMIN
// (BenchService checks the job's submitter). ROLE_UNSPECIFIED for a name
// that is not a Bench method.
v1::Role RequiredRole(absl::string_view method);
absl::string_view RoleName(v1::Role role);  // "read", "submit", "admin"

// The subject of the certificate the caller showed ("" without mTLS, or
// when it showed none): gRPC has verified it against --tls-client-ca.
std::string PeerCertificateSubject(const grpc::ServerContextBase& ctx);

class Authorizer {
 public:
  struct Options {
    bool client_certificates = false;  // mTLS: gRPC has verified every peer's certificate
    bool tls = false;
    bool insecure = false;  // --insecure (only reported)
  };
  // `auth_file` null: no tokens; then every caller is admin (with mTLS, named
  // by its certificate's subject).
  Authorizer(Options options, std::unique_ptr<AuthFile> auth_file);

  // SIGHUP: the new file replaces the old one for calls that start after.
  void Replace(std::unique_ptr<AuthFile> auth_file);

  // Who is calling and whether they may call `method`: UNAUTHENTICATED
  // (no or unknown credentials), PERMISSION_DENIED (role too low). Refusals
  // are logged with the peer's address (at most kLogPerSecond lines a
  // second; the rest are counted).
  absl::StatusOr<Principal> Check(const grpc::ServerContextBase& ctx,
                                  absl::string_view method) const;
  // Check without the log line: for the node-to-node services, which log a
  // refusal once per cause (server/cluster/cluster_secret.h RefusalLog), not
  // once per call.
  absl::StatusOr<Principal> CheckUnlogged(const grpc::ServerContextBase& ctx,
                                          absl::string_view method) const;
  // The same refusal, logged, for a decision made after Check (CancelJob of
  // another's job).
  absl::Status Deny(const grpc::ServerContextBase& ctx, absl::string_view method,
                    const Principal& who, std::string message) const;

  // NodeInfo.security for a caller.
  v1::Security Describe(const Principal& caller) const;
  bool checks_callers() const;

  static constexpr int kLogPerSecond = 20;

 private:
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& ctx) const;
  void LogRefusal(const grpc::ServerContextBase& ctx, absl::string_view method,
                  const absl::Status& status) const;

  const Options options_;
  mutable std::mutex mu_;
  std::shared_ptr<const AuthFile> auth_file_;  // replaced whole on SIGHUP
  // Log rate limit.
  mutable int64_t log_second_ = 0;
  mutable int logged_this_second_ = 0;
  mutable int64_t unlogged_ = 0;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_SECURITY_AUTH_H_

// TLS for the public gRPC port, reloadable without a restart. gRPC's C core
// asks a certificate-config fetcher at each new handshake (the API it offers
// for exactly this); Reload() (on SIGHUP) checks the configured files and,
// when they are good, hands the new config to the next handshake. Existing
// connections keep the certificate they were made with. A bad new file set
// is refused and the old one stays.
#ifndef BENCHD_SERVER_SECURITY_TLS_H_
#define BENCHD_SERVER_SECURITY_TLS_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace benchd::server {

struct TlsFiles {
  std::string cert;       // PEM chain, the server's certificate first
  std::string key;        // PEM private key of that certificate
  std::string client_ca;  // PEM CA bundle; "" = no client certificates (no mTLS)
};

// The files' PEM, checked: the key matches the certificate, the certificate
// is within its validity period, the CA bundle holds at least one
// certificate. INVALID_ARGUMENT naming the file and what is wrong.
struct TlsMaterial {
  std::string cert_pem, key_pem, client_ca_pem;
  std::string subject;    // the server certificate's, RFC 2253
  std::string not_after;  // e.g. "Nov 24 12:00:00 2027 GMT"
};
absl::StatusOr<TlsMaterial> ReadTlsFiles(const TlsFiles& files);

class ReloadableTls {
 public:
  static absl::StatusOr<std::unique_ptr<ReloadableTls>> Load(TlsFiles files);
  ~ReloadableTls();

  // Credentials for ServerBuilder::AddListeningPort; they refer to this
  // object, which must outlive the server.
  std::shared_ptr<grpc::ServerCredentials> ServerCredentials();

  // Re-reads the files named at Load. On success the next handshake uses
  // them; on failure nothing changes and the error says why.
  absl::Status Reload();

  bool client_certificates() const { return !files_.client_ca.empty(); }
  std::string Describe() const;  // "subject ..., valid until ..."

  // For gRPC's fetcher: the material loaded since it last asked, once.
  std::optional<TlsMaterial> TakeUpdate();

 private:
  explicit ReloadableTls(TlsFiles files) : files_(std::move(files)) {}

  const TlsFiles files_;
  mutable std::mutex mu_;
  TlsMaterial current_;
  bool pending_ = false;  // current_ not yet handed to gRPC
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_SECURITY_TLS_H_

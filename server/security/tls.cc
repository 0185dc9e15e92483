#include "server/security/tls.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/pem.h"

namespace benchd::server {
namespace {

constexpr std::streamsize kMaxPemBytes = 1 << 20;

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": cannot read it"));
  }
  std::string text(kMaxPemBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxPemBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": larger than ", kMaxPemBytes, " bytes; expected PEM"));
  }
  return text;
}

// grpc::ServerCredentials over a C-core grpc_server_credentials: the C++ API
// of gRPC 1.51 has no wrapper for the certificate-config fetcher, and
// ServerBuilder only takes grpc::ServerCredentials.
class CoreServerCredentials final : public grpc::ServerCredentials {
 public:
  explicit CoreServerCredentials(grpc_server_credentials* core) : core_(core) {}
  ~CoreServerCredentials() override { grpc_server_credentials_release(core_); }
  // Tokens are checked in the handlers (server/security/auth.h), on TLS and plaintext
  // ports alike.
  void SetAuthMetadataProcessor(const std::shared_ptr<grpc::AuthMetadataProcessor>&) override {}

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), core_);
  }
  grpc_server_credentials* const core_;
};

grpc_ssl_certificate_config_reload_status FetchConfig(void* user_data,
                                                      grpc_ssl_server_certificate_config** config) {
  auto update = static_cast<ReloadableTls*>(user_data)->TakeUpdate();
  if (!update) return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  grpc_ssl_pem_key_cert_pair pair{update->key_pem.c_str(), update->cert_pem.c_str()};
  // Copies the strings. gRPC 1.51's fetcher path asserts that root
  // certificates are given even when no client certificate is requested
  // (ssl_security_connector.cc); they are unused then, so the server's own
  // chain stands in.
  *config = grpc_ssl_server_certificate_config_create(
      update->client_ca_pem.empty() ? update->cert_pem.c_str() : update->client_ca_pem.c_str(),
      &pair, 1);
  return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

}  // namespace

absl::StatusOr<TlsMaterial> ReadTlsFiles(const TlsFiles& files) {
  TlsMaterial m;
  auto cert_pem = ReadPem(files.cert, "TLS certificate");
  if (!cert_pem.ok()) return cert_pem.status();
  auto key_pem = ReadPem(files.key, "TLS key");
  if (!key_pem.ok()) return key_pem.status();
  m.cert_pem = *std::move(cert_pem);
  m.key_pem = *std::move(key_pem);

  pem::Cert cert = pem::FirstCertificate(m.cert_pem);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS certificate ", files.cert,
                     ": no PEM certificate in it (expected \"-----BEGIN CERTIFICATE-----\")"));
  }
  pem::Key key = pem::PrivateKey(m.key_pem);
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS key ", files.key,
        ": no unencrypted PEM private key in it (expected \"-----BEGIN PRIVATE KEY-----\" or "
        "\"-----BEGIN EC/RSA PRIVATE KEY-----\")"));
  }
  if (!pem::KeyMatches(cert.get(), key.get())) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS key ", files.key, " is not the key of the certificate ", files.cert));
  }
  m.subject = pem::Subject(cert.get());
  m.not_after = pem::TimeText(X509_get0_notAfter(cert.get()));
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("TLS certificate ", files.cert, " (", m.subject,
                                                   ") expired on ", m.not_after));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert.get())) > 0) {
    return absl::InvalidArgumentError(absl::StrCat("TLS certificate ", files.cert, " (", m.subject,
                                                   ") is not valid before ",
                                                   pem::TimeText(X509_get0_notBefore(cert.get()))));
  }
  if (!files.client_ca.empty()) {
    auto ca_pem = ReadPem(files.client_ca, "TLS client CA");
    if (!ca_pem.ok()) return ca_pem.status();
    m.client_ca_pem = *std::move(ca_pem);
    if (pem::FirstCertificate(m.client_ca_pem) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS client CA ", files.client_ca,
                       ": no PEM certificate in it (expected \"-----BEGIN CERTIFICATE-----\")"));
    }
  }
  return m;
}

absl::StatusOr<std::unique_ptr<ReloadableTls>> ReloadableTls::Load(TlsFiles files) {
  std::unique_ptr<ReloadableTls> tls(new ReloadableTls(std::move(files)));
  auto material = ReadTlsFiles(tls->files_);
  if (!material.ok()) return material.status();
  tls->current_ = *std::move(material);
  tls->pending_ = true;
  return tls;
}

ReloadableTls::~ReloadableTls() = default;

std::shared_ptr<grpc::ServerCredentials> ReloadableTls::ServerCredentials() {
  grpc_ssl_server_credentials_options* options =
      grpc_ssl_server_credentials_create_options_using_config_fetcher(
          client_certificates() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
          FetchConfig, this);
  return std::make_shared<CoreServerCredentials>(
      grpc_ssl_server_credentials_create_with_options(options));
}

absl::Status ReloadableTls::Reload() {
  auto material = ReadTlsFiles(files_);
  if (!material.ok()) return material.status();
  std::lock_guard<std::mutex> lock(mu_);
  current_ = *std::move(material);
  pending_ = true;
  return absl::OkStatus();
}

std::optional<TlsMaterial> ReloadableTls::TakeUpdate() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pending_) return std::nullopt;
  pending_ = false;
  return current_;
}

std::string ReloadableTls::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  return absl::StrCat("certificate '", current_.subject, "' valid until ", current_.not_after,
                      client_certificates() ? ", client certificates required (mTLS)" : "");
}

}  // namespace benchd::server

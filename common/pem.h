// PEM certificates and keys through OpenSSL, for the daemon's TLS files
// (server/security/tls.cc) and benchctl's (common/credentials.cc): the parsing and
// the OpenSSL objects' lifetimes in one place; each caller words its errors.
#ifndef BENCHD_COMMON_PEM_H_
#define BENCHD_COMMON_PEM_H_

#include <openssl/types.h>

#include <memory>
#include <string>

namespace benchd::pem {

struct CertFree {
  void operator()(X509* x) const;
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const;
};
using Cert = std::unique_ptr<X509, CertFree>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

// The first certificate in `pem`, or null when there is none.
Cert FirstCertificate(const std::string& pem);
// The unencrypted private key in `pem`, or null (an encrypted key is null:
// nothing here asks for a passphrase).
Key PrivateKey(const std::string& pem);
// Whether `key` is the private key of `cert`.
bool KeyMatches(X509* cert, EVP_PKEY* key);
// The subject in RFC 2253 form ("CN=alice,O=benchd test"), as gRPC reports a
// peer's and `openssl x509 -nameopt RFC2253` prints it.
std::string Subject(X509* cert);
// "Nov 24 12:00:00 2027 GMT".
std::string TimeText(const ASN1_TIME* time);

}  // namespace benchd::pem

#endif  // BENCHD_COMMON_PEM_H_

#include "common/pem.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

namespace benchd::pem {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

Bio MemoryBio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace

void CertFree::operator()(X509* x) const { X509_free(x); }
void KeyFree::operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }

Cert FirstCertificate(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();  // a failed parse leaves errors queued for the next caller
  return cert;
}

Key PrivateKey(const std::string& pem) {
  Bio bio = MemoryBio(pem);
  // An empty passphrase: an encrypted key fails instead of prompting.
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, const_cast<char*>("")));
  ERR_clear_error();
  return key;
}

bool KeyMatches(X509* cert, EVP_PKEY* key) {
  const bool match = X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  return match;
}

std::string Subject(X509* cert) {
  Bio out(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(out.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  return BioText(out.get());
}

std::string TimeText(const ASN1_TIME* time) {
  Bio out(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(out.get(), time);
  return BioText(out.get());
}

}  // namespace benchd::pem

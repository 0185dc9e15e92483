// Certificates for the client's unit tests, made in memory with OpenSSL (EC
// P-256, valid from a minute ago for a day): a CA, and leaves it signs.
#ifndef BENCHD_COMMON_TEST_CERTS_H_
#define BENCHD_COMMON_TEST_CERTS_H_

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace benchd::test_certs {

struct PemPair {
  std::string cert;
  std::string key;
};

class TestCa {
 public:
  explicit TestCa(const std::string& cn) : key_(NewKey()), cert_(X509_new()) {
    Fill(cert_.get(), cn, key_.get(), nullptr, 1);
    Add(cert_.get(), cert_.get(), NID_basic_constraints, "critical,CA:TRUE");
    Add(cert_.get(), cert_.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
    Sign(cert_.get());
  }

  std::string cert_pem() const { return CertPem(cert_.get()); }
  std::string key_pem() const { return KeyPem(key_.get()); }

  // A leaf signed by this CA; `san` like "DNS:localhost,IP:127.0.0.1" ("" = none).
  PemPair Issue(const std::string& cn, const std::string& san, bool server) {
    Key key = NewKey();
    Cert leaf(X509_new());
    Fill(leaf.get(), cn, key.get(), cert_.get(), ++serial_);
    Add(cert_.get(), leaf.get(), NID_basic_constraints, "critical,CA:FALSE");
    Add(cert_.get(), leaf.get(), NID_ext_key_usage, server ? "serverAuth" : "clientAuth");
    if (!san.empty()) Add(cert_.get(), leaf.get(), NID_subject_alt_name, san);
    Sign(leaf.get());
    return {CertPem(leaf.get()), KeyPem(key.get())};
  }

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  };
  struct CertFree {
    void operator()(X509* x) const { X509_free(x); }
  };
  struct BioFree {
    void operator()(BIO* b) const { BIO_free(b); }
  };
  using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
  using Cert = std::unique_ptr<X509, CertFree>;

  static Key NewKey() {
    Key k(EVP_EC_gen("P-256"));
    if (k == nullptr) throw std::runtime_error("EVP_EC_gen failed");
    return k;
  }

  static void Fill(X509* x, const std::string& cn, EVP_PKEY* key, X509* issuer, long serial) {
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 24 * 3600);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("benchd test"), -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(x, issuer != nullptr ? X509_get_subject_name(issuer) : name);
  }

  static void Add(X509* issuer, X509* x, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) throw std::runtime_error("bad extension " + value);
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }

  void Sign(X509* x) {
    if (X509_sign(x, key_.get(), EVP_sha256()) == 0) throw std::runtime_error("X509_sign failed");
  }

  static std::string Drain(BIO* bio) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    return std::string(data, static_cast<size_t>(n));
  }
  static std::string CertPem(X509* x) {
    std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
    PEM_write_bio_X509(bio.get(), x);
    return Drain(bio.get());
  }
  static std::string KeyPem(EVP_PKEY* k) {
    std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
    PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr, nullptr);
    return Drain(bio.get());
  }

  Key key_;
  Cert cert_;
  long serial_ = 1;
};

}  // namespace benchd::test_certs

#endif  // BENCHD_COMMON_TEST_CERTS_H_

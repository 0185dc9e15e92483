#include "server/security/tls.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

// A self-signed EC P-256 certificate for CN=`cn`, valid from now+`from_s`
// to now+`to_s`, written as PEM to <dir>/<name>.{crt,key}.
struct Pem {
  std::string cert, key;
};
Pem MakeCertificate(const std::string& name, const std::string& cn, long from_s, long to_s) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), from_s);
  X509_gmtime_adj(X509_getm_notAfter(cert), to_s);
  X509_set_pubkey(cert, key);
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("benchd test"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, subject);
  X509_sign(cert, key, EVP_sha256());
  Pem pem{::testing::TempDir() + "/" + name + ".crt", ::testing::TempDir() + "/" + name + ".key"};
  FILE* f = fopen(pem.cert.c_str(), "w");
  PEM_write_X509(f, cert);
  fclose(f);
  f = fopen(pem.key.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  fclose(f);
  X509_free(cert);
  EVP_PKEY_free(key);
  return pem;
}

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(ReadTlsFilesTest, AcceptsAMatchingPairAndNamesItsSubject) {
  Pem server = MakeCertificate("good", "localhost", -60, 86400);
  Pem ca = MakeCertificate("ca", "benchd test CA", -60, 86400);
  auto m = ReadTlsFiles({server.cert, server.key, ca.cert});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->subject, "CN=localhost,O=benchd test");
  EXPECT_THAT(m->cert_pem, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(m->key_pem, HasSubstr("PRIVATE KEY"));
  EXPECT_THAT(m->client_ca_pem, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_FALSE(m->not_after.empty());
}

TEST(ReadTlsFilesTest, RefusalsNameTheFileAndWhatIsWrong) {
  Pem a = MakeCertificate("a", "a", -60, 86400);
  Pem b = MakeCertificate("b", "b", -60, 86400);
  Pem expired = MakeCertificate("expired", "old", -2 * 86400, -86400);
  Pem future = MakeCertificate("future", "new", 86400, 2 * 86400);
  const std::string junk = ::testing::TempDir() + "/junk.pem";
  Write(junk, "not a certificate\n");
  struct Case {
    TlsFiles files;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {{a.cert, b.key, ""}, "is not the key of the certificate " + a.cert},
           {{expired.cert, expired.key, ""}, "(CN=old,O=benchd test) expired on"},
           {{future.cert, future.key, ""}, "is not valid before"},
           {{junk, a.key, ""}, "TLS certificate " + junk + ": no PEM certificate"},
           {{a.cert, junk, ""}, "TLS key " + junk + ": no unencrypted PEM private key"},
           {{a.cert, a.key, junk}, "TLS client CA " + junk + ": no PEM certificate"},
           {{a.cert + ".missing", a.key, ""}, "cannot read it"},
       }) {
    auto m = ReadTlsFiles(c.files);
    ASSERT_FALSE(m.ok()) << c.expected;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(m.status().message(), HasSubstr(c.expected));
  }
}

TEST(ReloadableTlsTest, HandsEachGoodLoadToGrpcOnceAndKeepsTheOldOnABadReload) {
  Pem first = MakeCertificate("reload", "first", -60, 86400);
  auto tls = ReloadableTls::Load({first.cert, first.key, ""});
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_FALSE((*tls)->client_certificates());
  auto update = (*tls)->TakeUpdate();
  ASSERT_TRUE(update.has_value());
  EXPECT_EQ(update->subject, "CN=first,O=benchd test");
  EXPECT_FALSE((*tls)->TakeUpdate().has_value());  // unchanged until a reload

  // A key that does not match: refused, nothing handed over, old one kept.
  Pem other = MakeCertificate("other", "other", -60, 86400);
  std::rename(other.key.c_str(), first.key.c_str());
  MakeCertificate("reload-next", "second", -60, 86400);
  EXPECT_THAT((*tls)->Reload().message(), HasSubstr("is not the key"));
  EXPECT_FALSE((*tls)->TakeUpdate().has_value());
  EXPECT_THAT((*tls)->Describe(), HasSubstr("CN=first"));

  // The renewed pair in place: the next handshake gets it.
  Pem second = MakeCertificate("reload-next", "second", -60, 86400);
  std::rename(second.cert.c_str(), first.cert.c_str());
  std::rename(second.key.c_str(), first.key.c_str());
  ASSERT_TRUE((*tls)->Reload().ok());
  update = (*tls)->TakeUpdate();
  ASSERT_TRUE(update.has_value());
  EXPECT_EQ(update->subject, "CN=second,O=benchd test");
  EXPECT_THAT((*tls)->Describe(), HasSubstr("CN=second"));
}

}  // namespace
}  // namespace benchd::server

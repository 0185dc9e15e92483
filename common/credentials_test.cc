#include "common/credentials.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/test_certs.h"

namespace benchd {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/benchctl-creds-XXXXXX";
    dir_ = mkdtemp(tmpl);
    // No config file unless a test writes one.
    env_["BENCHD_CLIENT_CONFIG"] = dir_ + "/client.json";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }

  Environment Env() const {
    return [env = env_](const std::string& name) -> std::optional<std::string> {
      auto it = env.find(name);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
  }

  absl::StatusOr<ClientSettings> Resolve() const { return ResolveClientSettings(flags_, Env()); }

  // The error message of a resolution that must fail.
  std::string Error() const {
    absl::StatusOr<ClientSettings> s = Resolve();
    EXPECT_FALSE(s.ok());
    if (s.ok()) return "";
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
    return std::string(s.status().message());
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
  CredentialFlags flags_;
};

// ------------------------------------------------------------ where settings come from

TEST_F(CredentialsTest, AddressIsFlagThenEnvThenConfigThenDefault) {
  ASSERT_TRUE(Resolve().ok());
  EXPECT_EQ(Resolve()->address, "127.0.0.1:7531");

  Write("client.json", R"({"address": "from-config:1"})");
  EXPECT_EQ(Resolve()->address, "from-config:1");

  env_["BENCHD_ADDRESS"] = "from-env:2";
  EXPECT_EQ(Resolve()->address, "from-env:2");

  flags_.address = "from-flag:3";
  EXPECT_EQ(Resolve()->address, "from-flag:3");
}

TEST_F(CredentialsTest, AnEmptyVariableCountsAsUnset) {
  Write("client.json", R"({"address": "from-config:1"})");
  env_["BENCHD_ADDRESS"] = "";
  EXPECT_EQ(Resolve()->address, "from-config:1");
}

TEST_F(CredentialsTest, ConfigPathIsExplicitThenXdgThenHome) {
  std::map<std::string, std::string> env;
  auto path = [&env] {
    return ClientConfigPath([&env](const std::string& n) -> std::optional<std::string> {
      auto it = env.find(n);
      return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
    });
  };
  EXPECT_EQ(path(), "");
  env["HOME"] = "/home/u";
  EXPECT_EQ(path(), "/home/u/.config/benchd/client.json");
  env["XDG_CONFIG_HOME"] = "/xdg";
  EXPECT_EQ(path(), "/xdg/benchd/client.json");
  env["BENCHD_CLIENT_CONFIG"] = "/etc/benchd-client.json";
  EXPECT_EQ(path(), "/etc/benchd-client.json");
}

TEST_F(CredentialsTest, AMissingConfigFileMeansNoSettings) {
  env_["BENCHD_CLIENT_CONFIG"] = dir_ + "/nowhere/client.json";
  absl::StatusOr<ClientSettings> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->address, "127.0.0.1:7531");
  EXPECT_FALSE(s->security.tls);
  EXPECT_EQ(s->security.token, "");
}

TEST_F(CredentialsTest, MalformedConfigNamesTheFile) {
  const std::string path = Write("client.json", "{\"address\": \"h:1\",\n}");
  const std::string e = Error();
  EXPECT_THAT(e, HasSubstr("client config " + path + " is not valid JSON"));
  EXPECT_THAT(e, HasSubstr("line 2"));
}

TEST_F(CredentialsTest, UnknownConfigKeyNamesFileKeyAndTheAcceptedOnes) {
  const std::string path = Write("client.json", R"({"adress": "h:1"})");
  const std::string e = Error();
  EXPECT_THAT(e, HasSubstr(path));
  EXPECT_THAT(e, HasSubstr("unknown key \"adress\""));
  EXPECT_THAT(e, HasSubstr("address, token_file, tls_ca, tls_cert, tls_key, tls_server_name, tls"));
}

TEST_F(CredentialsTest, ConfigValuesMustHaveTheirType) {
  Write("client.json", R"({"tls": "yes"})");
  EXPECT_THAT(Error(), HasSubstr("\"tls\" must be true or false, got \"yes\""));
  Write("client.json", R"({"tls_ca": 3})");
  EXPECT_THAT(Error(), HasSubstr("\"tls_ca\" must be a non-empty string, got 3"));
  Write("client.json", R"(["address"])");
  EXPECT_THAT(Error(), HasSubstr("expected a JSON object"));
}

TEST_F(CredentialsTest, AConfigFileThatCannotBeReadIsAnError) {
  env_["BENCHD_CLIENT_CONFIG"] = dir_;  // a directory
  EXPECT_THAT(Error(), HasSubstr("not a regular file"));
}

// ------------------------------------------------------------ the token

TEST_F(CredentialsTest, TokenFromTheEnvironment) {
  env_["BENCHD_TOKEN"] = " benchd_abc\n";
  absl::StatusOr<ClientSettings> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->security.token, "benchd_abc");
}

TEST_F(CredentialsTest, TokenFileFlagBeatsTheEnvironmentWhichBeatsTheConfig) {
  Write("config.token", "from-config\n");
  Write("env.token", "from-env-file\n");
  Write("flag.token", "from-flag\n");
  Write("client.json", R"({"token_file": "config.token"})");  // relative to the config's folder
  EXPECT_EQ(Resolve()->security.token, "from-config");
  env_["BENCHD_TOKEN_FILE"] = dir_ + "/env.token";
  EXPECT_EQ(Resolve()->security.token, "from-env-file");
  env_.erase("BENCHD_TOKEN_FILE");
  env_["BENCHD_TOKEN"] = "from-env";
  EXPECT_EQ(Resolve()->security.token, "from-env");
  flags_.token_file = dir_ + "/flag.token";
  EXPECT_EQ(Resolve()->security.token, "from-flag");
}

TEST_F(CredentialsTest, BothTokenVariablesAreAmbiguousUnlessTheFlagDecides) {
  Write("env.token", "from-env-file\n");
  env_["BENCHD_TOKEN_FILE"] = dir_ + "/env.token";
  env_["BENCHD_TOKEN"] = "from-env";
  EXPECT_THAT(Error(), HasSubstr("BENCHD_TOKEN and BENCHD_TOKEN_FILE are both set"));
  flags_.token_file = Write("flag.token", "from-flag\n");
  EXPECT_EQ(Resolve()->security.token, "from-flag");
}

TEST_F(CredentialsTest, PathsStartingWithTildeAreInHome) {
  env_["HOME"] = dir_;
  Write("home.token", "from-home\n");
  flags_.token_file = "~/home.token";
  EXPECT_EQ(Resolve()->security.token, "from-home");
  flags_.token_file.reset();
  Write("client.json", R"({"token_file": "~/home.token"})");
  EXPECT_EQ(Resolve()->security.token, "from-home");
}

TEST_F(CredentialsTest, TokenFileTakesTheFirstLineStripped) {
  flags_.token_file = Write("t", "  benchd_xyz \t\nsecond line\n");
  EXPECT_EQ(Resolve()->security.token, "benchd_xyz");
}

TEST_F(CredentialsTest, MissingOrEmptyTokenFileIsAnErrorNamingIt) {
  flags_.token_file = dir_ + "/missing.token";
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("--token-file " + dir_ + "/missing.token"));
  EXPECT_THAT(e, HasSubstr("No such file"));

  flags_.token_file = Write("empty.token", "\n\n");
  EXPECT_THAT(Error(), HasSubstr("the first line is empty"));

  flags_.token_file = Write("bad.token", "two words\n");
  EXPECT_THAT(Error(), HasSubstr("byte 0x20 at position 3"));
}

TEST_F(CredentialsTest, ATokenFileOthersCanReadGetsAWarning) {
  flags_.token_file = Write("open.token", "benchd_t\n", 0644);
  absl::StatusOr<ClientSettings> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_THAT(s->warnings[0], HasSubstr("open to group/others (mode 0644)"));
  EXPECT_THAT(s->warnings[0], HasSubstr("chmod 600"));

  flags_.token_file = Write("closed.token", "benchd_t\n", 0600);
  EXPECT_THAT(Resolve()->warnings, IsEmpty());
}

// ------------------------------------------------------------ TLS

class TlsCredentialsTest : public CredentialsTest {
 protected:
  void SetUp() override {
    CredentialsTest::SetUp();
    ca_ = Write("ca.pem", ca.cert_pem());
    client = ca.Issue("alice", "", /*server=*/false);
    cert_ = Write("alice.pem", client.cert);
    key_ = Write("alice.key", client.key);
  }
  test_certs::TestCa ca{"test CA"};
  test_certs::PemPair client;
  std::string ca_, cert_, key_;
};

TEST_F(TlsCredentialsTest, PlaintextUnlessAskedFor) {
  EXPECT_FALSE(Resolve()->security.tls);
  flags_.tls = true;
  absl::StatusOr<ClientSettings> s = Resolve();
  EXPECT_TRUE(s->security.tls);
  EXPECT_EQ(s->security.pem_root_certs, "");  // the system's roots
}

TEST_F(TlsCredentialsTest, TlsFromEnvAndConfig) {
  env_["BENCHD_TLS"] = "1";
  EXPECT_TRUE(Resolve()->security.tls);
  env_["BENCHD_TLS"] = "maybe";
  EXPECT_THAT(Error(), HasSubstr("BENCHD_TLS=maybe: expected 1 or 0"));
  env_.erase("BENCHD_TLS");
  Write("client.json", R"({"tls": true})");
  EXPECT_TRUE(Resolve()->security.tls);
  env_["BENCHD_TLS"] = "0";  // the environment beats the file
  EXPECT_FALSE(Resolve()->security.tls);
}

TEST_F(TlsCredentialsTest, ACaTurnsTlsOnAndIsRead) {
  flags_.tls_ca = ca_;
  absl::StatusOr<ClientSettings> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->security.tls);
  EXPECT_EQ(s->security.pem_root_certs, ca.cert_pem());
}

TEST_F(TlsCredentialsTest, RelativePathsInTheConfigAreRelativeToIt) {
  ASSERT_EQ(mkdir((dir_ + "/conf").c_str(), 0700), 0);
  Write("conf/ca.pem", ca.cert_pem());
  Write("conf/client.json", R"({"tls_ca": "ca.pem", "tls_server_name": "benchd.test"})");
  env_["BENCHD_CLIENT_CONFIG"] = dir_ + "/conf/client.json";
  absl::StatusOr<ClientSettings> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->security.pem_root_certs, ca.cert_pem());
  EXPECT_EQ(s->security.tls_server_name, "benchd.test");
}

TEST_F(TlsCredentialsTest, ACaThatIsMissingOrNotPemNamesItsSource) {
  env_["BENCHD_TLS_CA"] = dir_ + "/nope.pem";
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("BENCHD_TLS_CA " + dir_ + "/nope.pem"));
  EXPECT_THAT(e, HasSubstr("cannot read the CA certificate"));

  env_["BENCHD_TLS_CA"] = Write("junk.pem", "hello\n");
  EXPECT_THAT(Error(), HasSubstr("no PEM certificate in it"));
  env_["BENCHD_TLS_CA"] = key_;  // a key is not a certificate
  EXPECT_THAT(Error(), HasSubstr("no PEM certificate in it"));
}

TEST_F(TlsCredentialsTest, ClientCertificateNeedsItsKey) {
  flags_.tls_cert = cert_;
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("--tls-cert " + cert_ + " without a key"));
  EXPECT_THAT(e, HasSubstr("--tls-key"));

  flags_.tls_cert.reset();
  env_["BENCHD_TLS_KEY"] = key_;
  EXPECT_THAT(Error(), HasSubstr("BENCHD_TLS_KEY " + key_ + " without a certificate"));
}

TEST_F(TlsCredentialsTest, ClientCertificateAndKeyAreReadAndMustMatch) {
  flags_.tls_ca = ca_;
  flags_.tls_cert = cert_;
  flags_.tls_key = key_;
  absl::StatusOr<ClientSettings> s = Resolve();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->security.pem_cert_chain, client.cert);
  EXPECT_EQ(s->security.pem_private_key, client.key);

  flags_.tls_key = Write("other.key", ca.Issue("bob", "", false).key);
  std::string e = Error();
  EXPECT_THAT(e, HasSubstr("do not match"));
  EXPECT_THAT(e, HasSubstr("--tls-cert " + cert_));

  flags_.tls_key = cert_;  // a certificate is not a key
  EXPECT_THAT(Error(), HasSubstr("no unencrypted PEM private key"));
}

TEST_F(TlsCredentialsTest, AClientCertificateAloneTurnsTlsOn) {
  flags_.tls_cert = cert_;
  flags_.tls_key = key_;
  EXPECT_TRUE(Resolve()->security.tls);
}

TEST_F(TlsCredentialsTest, ServerNameNeedsTls) {
  flags_.tls_server_name = "benchd.test";
  EXPECT_THAT(Error(),
              HasSubstr("--tls-server-name benchd.test: a server name to verify needs TLS"));
  flags_.tls = true;
  EXPECT_EQ(Resolve()->security.tls_server_name, "benchd.test");
}

// ------------------------------------------------------------ the loopback rule

TEST_F(CredentialsTest, NoTokenInPlaintextToAnotherHost) {
  env_["BENCHD_TOKEN"] = "benchd_t";
  flags_.address = "10.1.2.3:7531";
  const std::string e = Error();
  EXPECT_THAT(e, HasSubstr("refusing to send the token (from BENCHD_TOKEN) without TLS to "
                           "10.1.2.3:7531"));
  EXPECT_THAT(e, HasSubstr("--tls-ca"));

  flags_.tls = true;  // over TLS it may go anywhere
  EXPECT_TRUE(Resolve().ok());
  flags_.tls = false;
  flags_.address = "localhost:7531";  // in plaintext only to this machine
  EXPECT_TRUE(Resolve().ok());
  env_.erase("BENCHD_TOKEN");  // and without a token plaintext goes anywhere
  flags_.address = "10.1.2.3:7531";
  EXPECT_TRUE(Resolve().ok());
}

TEST(Authorization, BearerScheme) {
  EXPECT_EQ(AuthorizationValue("benchd_x"), "Bearer benchd_x");
  EXPECT_STREQ(kAuthorizationKey, "authorization");
}

}  // namespace
}  // namespace benchd

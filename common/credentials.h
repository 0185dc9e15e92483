// Where benchctl connects and with which credentials (docs/architecture.md
// "Who gets in"). Each setting comes from the first of: a flag, the
// environment, the client config file, the default. The Python package
// resolves the same settings the same way.
//
//   address          --address          BENCHD_ADDRESS          "address"   127.0.0.1:7531
//   token            --token-file       BENCHD_TOKEN (the token itself) or
//                                       BENCHD_TOKEN_FILE       "token_file"
//                                       (both set: an error)
//   TLS, system CAs  --tls              BENCHD_TLS=1            "tls": true
//   TLS, this CA     --tls-ca           BENCHD_TLS_CA           "tls_ca"
//   client cert      --tls-cert/-key    BENCHD_TLS_CERT/_KEY    "tls_cert", "tls_key"
//   name to verify   --tls-server-name  BENCHD_TLS_SERVER_NAME  "tls_server_name"
//
// There is no --token flag: it would show in `ps`. The config file is JSON at
// $BENCHD_CLIENT_CONFIG, else ${XDG_CONFIG_HOME:-~/.config}/benchd/client.json;
// relative paths in it are relative to its folder. Paths may start with "~/".
#ifndef BENCHD_COMMON_CREDENTIALS_H_
#define BENCHD_COMMON_CREDENTIALS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/statusor.h"

namespace benchd {

inline constexpr const char* kDefaultAddress = "127.0.0.1:7531";

// The --help footer's lines about these variables (after kExitCodesHelp's).
inline constexpr const char* kCredentialsEnvHelp =
    "  BENCHD_TOKEN    the bearer token itself (BENCHD_TOKEN_FILE: a file holding it)\n"
    "  BENCHD_TLS=1, BENCHD_TLS_CA, BENCHD_TLS_CERT, BENCHD_TLS_KEY, BENCHD_TLS_SERVER_NAME\n"
    "                  defaults for --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name\n"
    "  BENCHD_CLIENT_CONFIG\n"
    "                  client config file (JSON; default "
    "${XDG_CONFIG_HOME:-~/.config}/benchd/client.json)\n"
    "                  with keys address, token_file, tls, tls_ca, tls_cert, tls_key,\n"
    "                  tls_server_name; flags beat the environment, which beats the file\n";

// What the command line said; unset = not given.
struct CredentialFlags {
  std::optional<std::string> address;
  std::optional<std::string> token_file;
  bool tls = false;
  std::optional<std::string> tls_ca;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> tls_server_name;
};

// How the channel is secured, with the files already read.
struct ChannelSecurity {
  bool tls = false;
  std::string pem_root_certs;   // "" with tls: the system's roots
  std::string pem_cert_chain;   // a client certificate (mTLS), or ""
  std::string pem_private_key;  // its key, or ""
  std::string tls_server_name;  // the name to verify instead of the address's host, or ""
  std::string token;            // sent as "authorization: Bearer <token>", or ""
};

struct ClientSettings {
  std::string address;
  ChannelSecurity security;
  // Things to tell the user on stderr that do not stop the command (a token
  // file others can read).
  std::vector<std::string> warnings;
};

// Looks up an environment variable; nullopt when unset.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
// The process's environment (std::getenv).
Environment ProcessEnvironment();

// The client config file's path ("" when neither BENCHD_CLIENT_CONFIG,
// XDG_CONFIG_HOME nor HOME is set).
std::string ClientConfigPath(const Environment& env);

// Resolves every setting, reads and checks the files named, and refuses a
// token over plaintext to a non-loopback address. INVALID_ARGUMENT naming
// the setting's source (flag, variable or config file and key), what came and
// what is accepted.
absl::StatusOr<ClientSettings> ResolveClientSettings(const CredentialFlags& flags,
                                                     const Environment& env);

// The token in a token file's text: its first line, whitespace stripped.
// INVALID_ARGUMENT naming `source` when that is empty or not printable ASCII
// (gRPC metadata cannot carry it).
absl::StatusOr<std::string> TokenFromText(const std::string& text, const std::string& source);

// Insecure, or TLS with the CA / client certificate of `security`.
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ChannelSecurity& security);
// The server-name override (grpc.ssl_target_name_override), when set.
void AddChannelArgs(const ChannelSecurity& security, grpc::ChannelArguments* args);

// The metadata every call carries when a token is set.
inline constexpr const char* kAuthorizationKey = "authorization";
std::string AuthorizationValue(const std::string& token);

}  // namespace benchd

#endif  // BENCHD_COMMON_CREDENTIALS_H_

#include "common/credentials.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/loopback.h"
#include "common/pem.h"

namespace benchd {
namespace {

// PEM files and token files are a few KiB; anything this big is a wrong path.
constexpr std::size_t kMaxFileBytes = 1 << 20;

constexpr const char* kStringKeys[] = {"address",  "token_file", "tls_ca",
                                       "tls_cert", "tls_key",    "tls_server_name"};
constexpr const char* kBoolKeys[] = {"tls"};

// A value and where it came from ("--tls-ca", "BENCHD_TLS_CA", "tls_ca in
// /home/u/.config/benchd/client.json"), for messages.
struct Setting {
  std::string value;
  std::string source;
};

struct ClientConfig {
  std::string path;
  std::string dir;  // relative paths in the file are relative to this
  nlohmann::json values;
};

std::optional<std::string> Env(const Environment& env, const std::string& name) {
  std::optional<std::string> v = env(name);
  // An empty variable counts as unset, as shells make unsetting awkward.
  if (v.has_value() && v->empty()) return std::nullopt;
  return v;
}

std::string Accepted(const char* const* begin, const char* const* end) {
  std::vector<std::string> names(begin, end);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<std::optional<ClientConfig>> LoadConfig(const std::string& path) {
  if (path.empty()) return std::nullopt;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::nullopt;  // no file = no settings
    return absl::InvalidArgumentError(
        fmt::format("client config {}: cannot read it: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        fmt::format("client config {}: not a regular file (expected a JSON file)", path));
  }
  if (static_cast<std::size_t>(st.st_size) > kMaxFileBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "client config {}: {} bytes, over the {} accepted", path, st.st_size, kMaxFileBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::InvalidArgumentError(
        fmt::format("client config {}: cannot read it: {}", path, std::strerror(errno)));
  }
  ClientConfig config{path, ".", {}};
  if (const auto slash = path.rfind('/'); slash != std::string::npos) {
    config.dir = slash == 0 ? "/" : path.substr(0, slash);
  }
  try {
    config.values = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() starts "[json.exception.parse_error.101] ": the rest says where.
    std::string why = e.what();
    if (const auto close = why.find("] "); close != std::string::npos) why = why.substr(close + 2);
    return absl::InvalidArgumentError(
        fmt::format("client config {} is not valid JSON: {}", path, why));
  }
  if (!config.values.is_object()) {
    return absl::InvalidArgumentError(fmt::format(
        "client config {}: expected a JSON object like {{\"address\": \"host:port\"}}, got {}",
        path, config.values.type_name()));
  }
  for (const auto& item : config.values.items()) {
    // Not a structured binding: clang 14 (the sanitizer build) cannot capture one.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const auto is = [&key](const char* k) { return key == k; };
    if (std::any_of(std::begin(kBoolKeys), std::end(kBoolKeys), is)) {
      if (!value.is_boolean()) {
        return absl::InvalidArgumentError(fmt::format(
            "client config {}: \"{}\" must be true or false, got {}", path, key, value.dump()));
      }
    } else if (std::any_of(std::begin(kStringKeys), std::end(kStringKeys), is)) {
      if (!value.is_string() || value.get<std::string>().empty()) {
        return absl::InvalidArgumentError(
            fmt::format("client config {}: \"{}\" must be a non-empty string, got {}", path, key,
                        value.dump()));
      }
    } else {
      return absl::InvalidArgumentError(
          fmt::format("client config {}: unknown key \"{}\" (accepted: {}, {})", path, key,
                      Accepted(std::begin(kStringKeys), std::end(kStringKeys)),
                      Accepted(std::begin(kBoolKeys), std::end(kBoolKeys))));
    }
  }
  return config;
}

// flag > environment > config file. `is_path`: a relative path in the config
// file is taken relative to the file's folder.
std::optional<Setting> Pick(const std::optional<std::string>& flag, const std::string& flag_name,
                            const Environment& env, const std::string& var,
                            const std::optional<ClientConfig>& config, const std::string& key,
                            bool is_path) {
  // "~/x" as the shell would (a JSON file or a quoted variable is not expanded).
  auto home = [&](std::string v) {
    std::optional<std::string> h = Env(env, "HOME");
    if (is_path && h.has_value() && (v == "~" || absl::StartsWith(v, "~/"))) {
      v = *h + v.substr(1);
    }
    return v;
  };
  if (flag.has_value()) return Setting{home(*flag), flag_name};
  if (std::optional<std::string> v = Env(env, var)) return Setting{home(*v), var};
  if (config.has_value() && config->values.contains(key)) {
    std::string v = home(config->values.at(key).get<std::string>());
    if (is_path && !v.empty() && v[0] != '/') v = config->dir + "/" + v;
    return Setting{v, fmt::format("\"{}\" in {}", key, config->path)};
  }
  return std::nullopt;
}

absl::StatusOr<bool> PickTls(bool flag, const Environment& env,
                             const std::optional<ClientConfig>& config) {
  if (flag) return true;
  if (std::optional<std::string> v = Env(env, "BENCHD_TLS")) {
    const std::string lower = absl::AsciiStrToLower(*v);
    if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
    if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
    return absl::InvalidArgumentError(
        fmt::format("BENCHD_TLS={}: expected 1 or 0 (also true/false, yes/no, on/off)", *v));
  }
  if (config.has_value() && config->values.contains("tls")) {
    return config->values.at("tls").get<bool>();
  }
  return false;
}

absl::StatusOr<std::string> ReadSmallFile(const Setting& file, const std::string& what) {
  std::ifstream in(file.value, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(fmt::format("{} {}: cannot read the {}: {}", file.source,
                                                  file.value, what, std::strerror(errno)));
  }
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (in.bad()) {
    return absl::InvalidArgumentError(
        fmt::format("{} {}: cannot read the {}", file.source, file.value, what));
  }
  if (text.size() > kMaxFileBytes) {
    return absl::InvalidArgumentError(fmt::format("{} {}: over {} bytes, too big for a {}",
                                                  file.source, file.value, kMaxFileBytes, what));
  }
  return text;
}

// The PEM's first certificate, or an error naming the file.
absl::StatusOr<pem::Cert> ReadCertificates(const Setting& file, const std::string& pem_text,
                                           const std::string& what) {
  pem::Cert first = pem::FirstCertificate(pem_text);
  if (first == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{} {}: no PEM certificate in it (expected a {} starting "
                    "\"-----BEGIN CERTIFICATE-----\")",
                    file.source, file.value, what));
  }
  return first;
}

absl::StatusOr<pem::Key> ReadPrivateKey(const Setting& file, const std::string& pem_text) {
  pem::Key key = pem::PrivateKey(pem_text);
  if (key == nullptr) {
    return absl::InvalidArgumentError(fmt::format(
        "{} {}: no unencrypted PEM private key in it (expected \"-----BEGIN PRIVATE KEY-----\" "
        "or \"-----BEGIN EC/RSA PRIVATE KEY-----\")",
        file.source, file.value));
  }
  return key;
}

// The token file's first line without surrounding whitespace.
absl::StatusOr<std::string> ReadTokenFile(const Setting& file, std::vector<std::string>* warnings) {
  absl::StatusOr<std::string> text = ReadSmallFile(file, "token file");
  if (!text.ok()) return text.status();
  struct stat st {};
  // Like ssh with a private key: a token others can read is a leaked token.
  if (stat(file.value.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    warnings->push_back(fmt::format(
        "warning: token file {} ({}) is open to group/others (mode {:04o}); chmod 600 {}",
        file.value, file.source, st.st_mode & 07777, file.value));
  }
  return TokenFromText(*text, fmt::format("{} {}", file.source, file.value));
}

// The token: --token-file, then BENCHD_TOKEN (the token itself) or
// BENCHD_TOKEN_FILE (not both), then the config file's token_file. `source`
// says where it came from.
absl::Status ResolveToken(const CredentialFlags& flags, const Environment& env,
                          const std::optional<ClientConfig>& file, ClientSettings* out,
                          std::string* source) {
  std::optional<std::string> env_token = Env(env, "BENCHD_TOKEN");
  if (env_token.has_value() && Env(env, "BENCHD_TOKEN_FILE").has_value() &&
      !flags.token_file.has_value()) {
    // Which one was meant is anyone's guess; the Python package refuses too.
    return absl::InvalidArgumentError(
        "BENCHD_TOKEN and BENCHD_TOKEN_FILE are both set; unset one (or give --token-file)");
  }
  absl::StatusOr<std::string> token;
  if (env_token.has_value() && !flags.token_file.has_value()) {
    token = TokenFromText(*env_token, "BENCHD_TOKEN");
    *source = "BENCHD_TOKEN";
  } else if (std::optional<Setting> tf = Pick(flags.token_file, "--token-file", env,
                                              "BENCHD_TOKEN_FILE", file, "token_file", true)) {
    token = ReadTokenFile(*tf, &out->warnings);
    *source = fmt::format("{} {}", tf->source, tf->value);
  } else {
    return absl::OkStatus();  // no token
  }
  if (!token.ok()) return token.status();
  out->security.token = *std::move(token);
  return absl::OkStatus();
}

// Both or neither; read, parsed and checked to belong together.
absl::Status ReadClientCertificate(const std::optional<Setting>& cert,
                                   const std::optional<Setting>& key, ChannelSecurity* sec) {
  if (cert.has_value() != key.has_value()) {
    const Setting& given = cert.has_value() ? *cert : *key;
    return absl::InvalidArgumentError(fmt::format(
        "{} {} without {}: a client certificate needs both --tls-cert and --tls-key (or "
        "BENCHD_TLS_CERT and BENCHD_TLS_KEY, or \"tls_cert\" and \"tls_key\" in the config "
        "file)",
        given.source, given.value, cert.has_value() ? "a key" : "a certificate"));
  }
  if (!cert.has_value()) return absl::OkStatus();
  absl::StatusOr<std::string> cert_pem = ReadSmallFile(*cert, "client certificate");
  if (!cert_pem.ok()) return cert_pem.status();
  absl::StatusOr<std::string> key_pem = ReadSmallFile(*key, "private key");
  if (!key_pem.ok()) return key_pem.status();
  absl::StatusOr<pem::Cert> c = ReadCertificates(*cert, *cert_pem, "client certificate");
  if (!c.ok()) return c.status();
  absl::StatusOr<pem::Key> k = ReadPrivateKey(*key, *key_pem);
  if (!k.ok()) return k.status();
  // Caught here, a mismatch names both files; in the handshake it would be
  // an opaque failure.
  if (!pem::KeyMatches(c->get(), k->get())) {
    return absl::InvalidArgumentError(
        fmt::format("{} {} and {} {} do not match: the key is not the certificate's", cert->source,
                    cert->value, key->source, key->value));
  }
  sec->pem_cert_chain = *std::move(cert_pem);
  sec->pem_private_key = *std::move(key_pem);
  return absl::OkStatus();
}

}  // namespace

Environment ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<std::string> TokenFromText(const std::string& text, const std::string& source) {
  absl::string_view line = text;
  if (const auto nl = line.find('\n'); nl != absl::string_view::npos) line = line.substr(0, nl);
  line = absl::StripAsciiWhitespace(line);
  if (line.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: the first line is empty (expected the token, e.g. from `benchctl token create`)",
        source));
  }
  // gRPC metadata values are printable ASCII.
  for (std::size_t i = 0; i < line.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: the token has byte 0x{:02x} at position {}; a token is printable ASCII without "
          "spaces (as `benchctl token create` makes them)",
          source, c, i));
    }
  }
  return std::string(line.data(), line.size());
}

std::string ClientConfigPath(const Environment& env) {
  if (std::optional<std::string> p = Env(env, "BENCHD_CLIENT_CONFIG")) return *p;
  if (std::optional<std::string> xdg = Env(env, "XDG_CONFIG_HOME")) {
    return *xdg + "/benchd/client.json";
  }
  if (std::optional<std::string> home = Env(env, "HOME")) {
    return *home + "/.config/benchd/client.json";
  }
  return "";
}

absl::StatusOr<ClientSettings> ResolveClientSettings(const CredentialFlags& flags,
                                                     const Environment& env) {
  absl::StatusOr<std::optional<ClientConfig>> config = LoadConfig(ClientConfigPath(env));
  if (!config.ok()) return config.status();
  const std::optional<ClientConfig>& file = *config;

  ClientSettings out;
  std::optional<Setting> address =
      Pick(flags.address, "--address", env, "BENCHD_ADDRESS", file, "address", false);
  out.address = address.has_value() ? address->value : kDefaultAddress;
  if (out.address.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: the address is empty (expected host:port, e.g. {})", address->source,
                    kDefaultAddress));
  }

  std::string token_source;
  if (absl::Status st = ResolveToken(flags, env, file, &out, &token_source); !st.ok()) return st;

  ChannelSecurity& sec = out.security;
  absl::StatusOr<bool> tls = PickTls(flags.tls, env, file);
  if (!tls.ok()) return tls.status();
  std::optional<Setting> ca =
      Pick(flags.tls_ca, "--tls-ca", env, "BENCHD_TLS_CA", file, "tls_ca", true);
  std::optional<Setting> cert =
      Pick(flags.tls_cert, "--tls-cert", env, "BENCHD_TLS_CERT", file, "tls_cert", true);
  std::optional<Setting> key =
      Pick(flags.tls_key, "--tls-key", env, "BENCHD_TLS_KEY", file, "tls_key", true);
  std::optional<Setting> server_name =
      Pick(flags.tls_server_name, "--tls-server-name", env, "BENCHD_TLS_SERVER_NAME", file,
           "tls_server_name", false);
  // A CA or a client certificate only makes sense over TLS: either turns it on.
  sec.tls = *tls || ca.has_value() || cert.has_value() || key.has_value();

  if (ca.has_value()) {
    absl::StatusOr<std::string> pem = ReadSmallFile(*ca, "CA certificate");
    if (!pem.ok()) return pem.status();
    if (absl::StatusOr<pem::Cert> c = ReadCertificates(*ca, *pem, "CA certificate"); !c.ok()) {
      return c.status();
    }
    sec.pem_root_certs = *std::move(pem);
  }
  if (absl::Status st = ReadClientCertificate(cert, key, &sec); !st.ok()) return st;
  if (server_name.has_value()) {
    if (!sec.tls) {
      return absl::InvalidArgumentError(
          fmt::format("{} {}: a server name to verify needs TLS (add --tls or --tls-ca)",
                      server_name->source, server_name->value));
    }
    sec.tls_server_name = server_name->value;
  }

  // Plaintext to another host: anyone on the path could read the token.
  if (!sec.token.empty() && !sec.tls && !benchd::IsLoopbackAddress(out.address)) {
    return absl::InvalidArgumentError(fmt::format(
        "refusing to send the token (from {}) without TLS to {}, which is not a loopback "
        "address; speak TLS to the daemon (--tls-ca CA.pem, or --tls for the system's CAs)",
        token_source, out.address));
  }
  return out;
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const ChannelSecurity& security) {
  if (!security.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.pem_root_certs;
  options.pem_private_key = security.pem_private_key;
  options.pem_cert_chain = security.pem_cert_chain;
  return grpc::SslCredentials(options);
}

void AddChannelArgs(const ChannelSecurity& security, grpc::ChannelArguments* args) {
  if (security.tls && !security.tls_server_name.empty()) {
    args->SetSslTargetNameOverride(security.tls_server_name);
  }
}

std::string AuthorizationValue(const std::string& token) { return fmt::format("Bearer {}", token); }

}  // namespace benchd

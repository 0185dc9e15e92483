#include "client/token_command.h"

#include <cctype>

#include <fmt/format.h>

#include "client/commands.h"
#include "client/exit_codes.h"
#include "common/credentials.h"
#include "common/token_hash.h"

namespace benchd::client {
namespace {

constexpr std::size_t kMaxNameLength = 64;
// A token is 50 characters; a line this long is not one.
constexpr std::size_t kMaxTokenInput = 4096;

}  // namespace

absl::Status CheckTokenRole(const std::string& role) {
  if (role == "read" || role == "submit" || role == "admin") return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "--role \"{}\" is not a role; accepted: read (look at jobs, results, artifacts, models, "
      "the node, groups), submit (read + submit jobs, cancel one's own), admin (everything)",
      role));
}

absl::Status CheckTokenName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(
        fmt::format("--name is {} characters; accepted: 1 to {} letters, digits, '.', '_', "
                    "'-' or '@'",
                    name.size(), kMaxNameLength));
  }
  for (std::size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (std::isalnum(c) == 0 && c != '.' && c != '_' && c != '-' && c != '@') {
      return absl::InvalidArgumentError(
          fmt::format("--name \"{}\" has {} at position {}; accepted: letters, digits, '.', '_', "
                      "'-' and '@' (the auth file separates fields by spaces)",
                      name,
                      std::isprint(c) != 0 ? fmt::format("'{}'", static_cast<char>(c))
                                           : fmt::format("byte 0x{:02x}", c),
                      i));
    }
  }
  return absl::OkStatus();
}

std::string AuthFileLine(const std::string& role, const std::string& name,
                         const std::string& token) {
  return fmt::format("{} {} {}", role, name, TokenHash(token));
}

int RunTokenCreate(const std::string& role, const std::string& name) {
  if (absl::Status s = CheckTokenRole(role); !s.ok()) return ReportError(s);
  if (absl::Status s = CheckTokenName(name); !s.ok()) return ReportError(s);
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return ReportError(token.status());
  // The token alone on stdout, so `> name.token` captures exactly it.
  std::fprintf(stdout, "%s\n", token->c_str());
  std::fflush(stdout);
  std::fprintf(stderr,
               "benchctl: add this line to the daemon's --auth-file, then send the daemon SIGHUP "
               "(or restart it); the token itself stays with %s:\n%s\n",
               name.c_str(), AuthFileLine(role, name, *token).c_str());
  return kExitOk;
}

int RunTokenHash(FILE* in) {
  std::string text;
  for (int c = std::fgetc(in); c != EOF && c != '\n'; c = std::fgetc(in)) {
    if (text.size() == kMaxTokenInput) {
      return ReportError(absl::InvalidArgumentError(fmt::format(
          "stdin: the first line is over {} bytes, not a token (expected one line, e.g. from "
          "`benchctl token create`)",
          kMaxTokenInput)));
    }
    text.push_back(static_cast<char>(c));
  }
  absl::StatusOr<std::string> token = TokenFromText(text, "stdin");
  if (!token.ok()) return ReportError(token.status());
  std::fprintf(stdout, "%s\n", TokenHash(*token).c_str());
  return kExitOk;
}

}  // namespace benchd::client

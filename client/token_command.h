// `benchctl token create|hash`: bearer tokens for the daemon's --auth-file,
// made here with no daemon involved. The token goes to stdout alone (so
// `benchctl token create ... > alice.token` works), the auth-file line to
// stderr; the daemon only ever sees the token's hash.
#ifndef BENCHD_CLIENT_TOKEN_COMMAND_H_
#define BENCHD_CLIENT_TOKEN_COMMAND_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"

namespace benchd::client {

// read, submit or admin; INVALID_ARGUMENT naming --role otherwise.
absl::Status CheckTokenRole(const std::string& role);
// 1..64 of letters, digits, '.', '_', '-', '@'; INVALID_ARGUMENT naming --name.
absl::Status CheckTokenName(const std::string& name);
// "ROLE NAME sha256:<hex>", the auth file's line for `token`.
std::string AuthFileLine(const std::string& role, const std::string& name,
                         const std::string& token);

// `benchctl token create --role ROLE --name NAME`.
int RunTokenCreate(const std::string& role, const std::string& name);
// `benchctl token hash`: a token on `in`, its "sha256:..." on stdout.
int RunTokenHash(FILE* in);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_TOKEN_COMMAND_H_

// Bearer tokens are stored as hashes, never in the clear: the daemon's auth
// file holds "sha256:<hex>" of each token, and benchctl prints that line when
// it makes a token. Tokens are random (32 bytes), so a plain SHA-256 is
// enough; a slow password hash would buy nothing.
#ifndef BENCHD_COMMON_TOKEN_HASH_H_
#define BENCHD_COMMON_TOKEN_HASH_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace benchd {

// "sha256:" + 64 lowercase hex digits of SHA-256(token).
std::string TokenHash(absl::string_view token);

// A new token: 32 bytes from the system's CSPRNG, base64url without padding
// (43 characters), prefixed "benchd_" so it is recognisable in a leak scan.
absl::StatusOr<std::string> NewToken();

// Equal strings in time that depends only on their lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace benchd

#endif  // BENCHD_COMMON_TOKEN_HASH_H_

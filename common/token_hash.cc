#include "common/token_hash.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace benchd {

std::string TokenHash(absl::string_view token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(token.data(), token.size(), digest, &size, EVP_sha256(), nullptr);
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(
                                     reinterpret_cast<const char*>(digest), size)));
}

absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("the system's random source failed; no token made");
  }
  std::string encoded;
  absl::WebSafeBase64Escape(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)),
                            &encoded);
  return absl::StrCat("benchd_", encoded);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace benchd

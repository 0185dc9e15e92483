#ifndef BENCHD_COMMON_VERSION_H_
#define BENCHD_COMMON_VERSION_H_

namespace benchd {
inline constexpr const char* kVersion = "0.1.0";
}

#endif  // BENCHD_COMMON_VERSION_H_

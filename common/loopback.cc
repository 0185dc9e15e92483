#include "common/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace benchd {
namespace {

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost") || absl::EqualsIgnoreCase(host, "localhost.")) {
    return true;
  }
  const std::string h(host.data(), host.size());
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

// "host:port", "[v6]:port", "host" or a bare IPv6 address -> the host.
absl::string_view HostOf(absl::string_view hostport) {
  if (absl::ConsumePrefix(&hostport, "[")) {
    const auto close = hostport.find(']');
    return close == absl::string_view::npos ? hostport : hostport.substr(0, close);
  }
  const auto colon = hostport.rfind(':');
  if (colon == absl::string_view::npos) return hostport;
  // Two colons or more without brackets: an IPv6 address with no port.
  if (hostport.find(':') != colon) return hostport;
  return hostport.substr(0, colon);
}

}  // namespace

bool IsLoopbackAddress(const std::string& target) {
  absl::string_view address = target;
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  // ipv4:a:p,b:p / ipv6:[a]:p,[b]:p: every address listed must be loopback.
  if (absl::ConsumePrefix(&address, "ipv4:") || absl::ConsumePrefix(&address, "ipv6:")) {
    if (address.empty()) return false;
    for (absl::string_view one : absl::StrSplit(address, ',')) {
      if (!IsLoopbackHost(HostOf(one))) return false;
    }
    return true;
  }
  // dns:host:port, dns:///host:port, dns://resolver/host:port.
  if (absl::ConsumePrefix(&address, "dns:")) {
    if (absl::ConsumePrefix(&address, "//")) {
      const auto slash = address.find('/');
      if (slash == absl::string_view::npos) return false;
      address = address.substr(slash + 1);
    }
  }
  return IsLoopbackHost(HostOf(address));
}

}  // namespace benchd

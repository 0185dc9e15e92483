// Whether an address reaches only this host. The daemon refuses to serve a
// non-loopback address without TLS and caller checks (server/daemon/daemon_config.cc);
// benchctl and the Python package refuse to send a token in the clear to one
// (common/credentials.cc, client/python/benchd/_credentials.py).
#ifndef BENCHD_COMMON_LOOPBACK_H_
#define BENCHD_COMMON_LOOPBACK_H_

#include <string>

namespace benchd {

// 127.0.0.0/8, ::1 (and ::ffff:127.x), localhost and unix: targets, in
// gRPC's target syntax: host:port, [v6]:port, dns:, ipv4:, ipv6: (every
// address listed must be loopback), unix:, unix-abstract:. 0.0.0.0, [::] and
// any other name are not.
bool IsLoopbackAddress(const std::string& address);

}  // namespace benchd

#endif  // BENCHD_COMMON_LOOPBACK_H_

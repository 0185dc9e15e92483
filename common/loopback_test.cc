#include "common/loopback.h"

#include "gtest/gtest.h"

namespace benchd {
namespace {

TEST(LoopbackAddress, WhatCountsAsLoopback) {
  for (const char* a :
       {"127.0.0.1:7531", "127.3.2.1:1", "localhost:7531", "LOCALHOST:1", "[::1]:7531", "::1",
        "localhost", "localhost.:1", "unix:/run/benchd.sock", "unix-abstract:benchd",
        "dns:///localhost:7531", "dns:localhost:1", "ipv4:127.0.0.1:1,127.0.0.2:1",
        "ipv6:[::1]:7531", "[::ffff:127.0.0.1]:1"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a :
       {"10.0.0.5:7531", "0.0.0.0:7531", "node7:7531", "128.0.0.1:1", "[::2]:1",
        "localhost.example.org:1", "dns://8.8.8.8/node7:1", "ipv4:127.0.0.1:1,10.0.0.1:1",
        "ipv4:", "127.0.0.1.evil.com:1", "", "[::]:7531", "127.0.0.256:1", "127.0.0:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

}  // namespace
}  // namespace benchd

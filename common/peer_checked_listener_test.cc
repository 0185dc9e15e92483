#include "common/peer_checked_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "benchd/v1/bench.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

// Every method UNIMPLEMENTED: enough to tell that a call went through gRPC.
class EmptyBench final : public v1::Bench::CallbackService {};

struct Served {
  std::string path;
  std::unique_ptr<PeerCheckedListener> listener;
  EmptyBench service;
  std::unique_ptr<grpc::Server> server;
  std::mutex mu;
  std::vector<std::string> lines;
};

std::unique_ptr<Served> Serve(const std::string& name) {
  auto s = std::make_unique<Served>();
  s->path = ::testing::TempDir() + "/" + name + "-" + std::to_string(getpid()) + ".sock";
  unlink(s->path.c_str());
  auto listener = PeerCheckedListener::Listen(s->path, [raw = s.get()](const std::string& line) {
    std::lock_guard<std::mutex> lock(raw->mu);
    raw->lines.push_back(line);
  });
  EXPECT_TRUE(listener.ok()) << listener.status();
  s->listener = *std::move(listener);
  grpc::ServerBuilder builder;
  builder.RegisterService(&s->service);
  s->server = builder.BuildAndStart();
  s->listener->Serve(s->server.get());
  return s;
}

grpc::StatusCode CallThrough(const std::string& path) {
  auto stub =
      v1::Bench::NewStub(grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::NodeInfo info;
  return stub->GetNodeInfo(&ctx, v1::GetNodeInfoRequest(), &info).error_code();
}

TEST(PeerCheckedListenerTest, ItsOwnUserGetsThroughToGrpc) {
  auto s = Serve("own");
  struct stat st {};
  ASSERT_EQ(stat(s->path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(CallThrough(s->path), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(CallThrough(s->path), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(s->listener->refused(), 0);
  s->listener->Stop();
  s->server->Shutdown();
}

TEST(PeerCheckedListenerTest, AnotherUserIsClosedAndLoggedEvenWhenTheModeLetsItConnect) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  auto s = Serve("other");
  // The mode is the first wall; open it, as a mistake would, to reach the second.
  ASSERT_EQ(chmod(s->path.c_str(), 0666), 0);
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, s->path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(11);
    // gRPC's client preface; a server that took the connection would answer
    // with its SETTINGS frame. Closed: read() sees end of file.
    const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    // MSG_NOSIGNAL: the listener may have closed the connection already, and
    // a plain write() would then kill the child with SIGPIPE (seen when the
    // tests ran side by side).
    (void)!send(fd, preface, sizeof(preface) - 1, MSG_NOSIGNAL);
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    _exit(n <= 0 ? 0 : 12);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setuid failed, 11: connect failed, 12: got an answer";
  EXPECT_EQ(s->listener->refused(), 1);
  {
    std::lock_guard<std::mutex> lock(s->mu);
    ASSERT_EQ(s->lines.size(), 1u);
    EXPECT_NE(s->lines[0].find("from uid 65534"), std::string::npos) << s->lines[0];
    EXPECT_NE(s->lines[0].find("only uid 0 may connect"), std::string::npos) << s->lines[0];
  }
  // Its own user still gets in afterwards.
  EXPECT_EQ(CallThrough(s->path), grpc::StatusCode::UNIMPLEMENTED);
  s->listener->Stop();
  s->server->Shutdown();
}

TEST(PeerCheckedListenerTest, APathTooLongForASocketIsRefused) {
  auto listener = PeerCheckedListener::Listen("/tmp/" + std::string(120, 'x'), nullptr);
  ASSERT_FALSE(listener.ok());
  EXPECT_NE(std::string(listener.status().message()).find("longer than 107 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace benchd

// BenchClient over TLS, mTLS and plaintext against an in-process gRPC server:
// the token reaches the server on every kind of call, and each way a
// handshake can fail comes back as UNAVAILABLE saying TLS failed at the address.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include "client/commands.h"
#include "client/rpc.h"
#include "common/test_certs.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// Records the authorization metadata of each call; refuses calls without
// one when `require_token`, as the daemon does.
class RecordingBench final : public v1::Bench::Service {
 public:
  grpc::Status GetNodeInfo(grpc::ServerContext* ctx, const v1::GetNodeInfoRequest*,
                           v1::NodeInfo* out) override {
    if (grpc::Status s = Record(ctx); !s.ok()) return s;
    out->set_data_dir("/data");
    return grpc::Status::OK;
  }
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::JobEvent>* writer) override {
    if (grpc::Status s = Record(ctx); !s.ok()) return s;
    v1::JobEvent e;
    e.set_job_id(request->job_id());
    e.mutable_result()->set_id(request->job_id());
    e.mutable_result()->set_state(v1::JOB_STATE_SUCCEEDED);
    writer->Write(e);
    return grpc::Status::OK;
  }
  grpc::Status FetchArtifact(grpc::ServerContext* ctx, const v1::FetchArtifactRequest*,
                             grpc::ServerWriter<v1::ArtifactChunk>* writer) override {
    if (grpc::Status s = Record(ctx); !s.ok()) return s;
    v1::ArtifactChunk chunk;
    chunk.set_data("abc");
    chunk.set_total_bytes(3);
    writer->Write(chunk);
    return grpc::Status::OK;
  }
  grpc::Status Submit(grpc::ServerContext* ctx, const v1::SubmitRequest*, v1::Job*) override {
    if (grpc::Status s = Record(ctx); !s.ok()) return s;
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "role read of \"grafana\" may not call Submit (it needs submit)");
  }

  std::vector<std::string> Seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  bool require_token = false;

 private:
  grpc::Status Record(grpc::ServerContext* ctx) {
    std::string value = "<none>";
    auto it = ctx->client_metadata().find("authorization");
    if (it != ctx->client_metadata().end())
      value = std::string(it->second.data(), it->second.size());
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(value);
    if (require_token && value == "<none>") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "this daemon checks callers: send a token or a client certificate");
    }
    return grpc::Status::OK;
  }
  std::mutex mu_;
  std::vector<std::string> seen_;
};

class RpcTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_pair_ = ca_.Issue("localhost", "DNS:localhost,DNS:benchd.test,IP:127.0.0.1", true);
    client_pair_ = ca_.Issue("alice", "", false);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // Starts the server: plaintext, TLS, or TLS requiring a client
  // certificate signed by ca_.
  enum class Mode { kPlaintext, kTls, kMutualTls };
  void Start(Mode mode) {
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (mode != Mode::kPlaintext) {
      grpc::SslServerCredentialsOptions options(
          mode == Mode::kMutualTls ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      options.pem_key_cert_pairs.push_back({server_pair_.key, server_pair_.cert});
      if (mode == Mode::kMutualTls) options.pem_root_certs = ca_.cert_pem();
      creds = grpc::SslServerCredentials(options);
    }
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", creds, &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }

  ChannelSecurity Tls() const {
    ChannelSecurity s;
    s.tls = true;
    s.pem_root_certs = ca_.cert_pem();
    return s;
  }

  BenchClient Client(ChannelSecurity security, const std::string& address = "") {
    return BenchClient(address.empty() ? address_ : address, std::chrono::seconds(5),
                       std::move(security));
  }

  test_certs::TestCa ca_{"test CA"};
  test_certs::PemPair server_pair_, client_pair_;
  RecordingBench service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(RpcTlsTest, TlsWithTheRightCaCarriesTheTokenOnEveryKindOfCall) {
  Start(Mode::kTls);
  ChannelSecurity sec = Tls();
  sec.token = "benchd_secret";
  BenchClient client = Client(sec);
  absl::StatusOr<v1::NodeInfo> info = client.GetNodeInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->data_dir(), "/data");
  ASSERT_TRUE(client.Watch("j1", [](const v1::JobEvent&) {}).ok());
  ASSERT_TRUE(client.FetchArtifact("j1", "a", [](const std::string&) {}).ok());
  EXPECT_THAT(service_.Seen(),
              ::testing::ElementsAre("Bearer benchd_secret", "Bearer benchd_secret",
                                     "Bearer benchd_secret"));
}

TEST_F(RpcTlsTest, NoTokenNoAuthorizationHeader) {
  Start(Mode::kPlaintext);
  BenchClient client = Client({});
  ASSERT_TRUE(client.GetNodeInfo().ok());
  EXPECT_THAT(service_.Seen(), ::testing::ElementsAre("<none>"));
}

TEST_F(RpcTlsTest, UnauthenticatedKeepsTheDaemonsMessageAndSaysNoTokenWasSent) {
  Start(Mode::kPlaintext);
  service_.require_token = true;
  absl::StatusOr<v1::NodeInfo> info = Client({}).GetNodeInfo();
  ASSERT_EQ(info.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Msg(info.status()), HasSubstr("this daemon checks callers"));
  EXPECT_THAT(Msg(info.status()), HasSubstr("benchctl sent no token"));
  EXPECT_THAT(ErrorMessage(info.status()), HasSubstr("UNAUTHENTICATED: this daemon checks"));
}

TEST_F(RpcTlsTest, PermissionDeniedKeepsTheDaemonsMessage) {
  Start(Mode::kPlaintext);
  ChannelSecurity sec;
  sec.token = "benchd_read";
  absl::StatusOr<v1::Job> job = Client(sec).Submit(v1::JobSpec());
  ASSERT_EQ(job.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Msg(job.status()), "role read of \"grafana\" may not call Submit (it needs submit)");
}

TEST_F(RpcTlsTest, ServerNameOverrideVerifiesAnotherName) {
  Start(Mode::kTls);
  // The certificate names localhost, benchd.test and 127.0.0.1, not "127.0.0.2".
  ChannelSecurity sec = Tls();
  sec.tls_server_name = "benchd.test";
  EXPECT_TRUE(Client(sec).GetNodeInfo().ok());
  sec.tls_server_name = "elsewhere.test";
  absl::StatusOr<v1::NodeInfo> info = Client(sec).GetNodeInfo();
  ASSERT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(info.status()), HasSubstr("TLS failed at " + address_));
}

TEST_F(RpcTlsTest, AnotherCaIsATlsFailureNamingTheAddress) {
  Start(Mode::kTls);
  test_certs::TestCa other("other CA");
  ChannelSecurity sec;
  sec.tls = true;
  sec.pem_root_certs = other.cert_pem();
  absl::StatusOr<v1::NodeInfo> info = Client(sec).GetNodeInfo();
  ASSERT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(info.status()), HasSubstr("TLS failed at " + address_));
  EXPECT_THAT(Msg(info.status()), HasSubstr("--tls-ca"));
  EXPECT_TRUE(service_.Seen().empty());
}

TEST_F(RpcTlsTest, PlaintextAgainstTlsSaysTls) {
  Start(Mode::kTls);
  absl::StatusOr<v1::NodeInfo> info = Client({}).GetNodeInfo();
  ASSERT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(info.status()), HasSubstr(address_));
  EXPECT_THAT(Msg(info.status()), HasSubstr("TLS"));
  EXPECT_THAT(Msg(info.status()), HasSubstr("--tls-ca"));
}

TEST_F(RpcTlsTest, TlsAgainstPlaintextSaysTls) {
  Start(Mode::kPlaintext);
  absl::StatusOr<v1::NodeInfo> info = Client(Tls()).GetNodeInfo();
  ASSERT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(info.status()), HasSubstr("TLS failed at " + address_));
}

TEST_F(RpcTlsTest, MutualTlsNeedsTheClientCertificate) {
  Start(Mode::kMutualTls);
  absl::StatusOr<v1::NodeInfo> without = Client(Tls()).GetNodeInfo();
  ASSERT_EQ(without.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(without.status()), HasSubstr("TLS failed at " + address_));
  EXPECT_THAT(Msg(without.status()), HasSubstr("--tls-cert"));

  ChannelSecurity sec = Tls();
  sec.pem_cert_chain = client_pair_.cert;
  sec.pem_private_key = client_pair_.key;
  absl::StatusOr<v1::NodeInfo> with = Client(sec).GetNodeInfo();
  EXPECT_TRUE(with.ok()) << with.status();
}

TEST_F(RpcTlsTest, NothingListeningIsNotCalledATlsFailure) {
  Start(Mode::kPlaintext);
  const std::string address = address_;
  server_->Shutdown();
  server_.reset();
  absl::StatusOr<v1::NodeInfo> info = Client(Tls(), address).GetNodeInfo();
  ASSERT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(info.status()), HasSubstr("cannot reach benchd at " + address));
  EXPECT_THAT(Msg(info.status()), Not(HasSubstr("TLS failed")));
}

}  // namespace
}  // namespace benchd::client

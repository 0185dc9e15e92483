#include "client/commands.h"

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "benchd/v1/bench.grpc.pb.h"
#include "client/ddp_view.h"
#include "client/exit_codes.h"
#include "client/format.h"
#include "client/job_view.h"
#include "client/json.h"
#include "client/list_views.h"
#include "client/test_job.h"
#include "common/job_spec.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseJobState, NamesInAnyCase) {
  EXPECT_EQ(*ParseJobState("queued"), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(*ParseJobState("Succeeded"), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(*ParseJobState("INTERRUPTED"), v1::JOB_STATE_INTERRUPTED);
  EXPECT_EQ(ParseJobState("done").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseJobState("job_state_unspecified").ok());
  EXPECT_FALSE(ParseJobState("unspecified").ok());
  EXPECT_FALSE(ParseJobState("").ok());
}

TEST(ParseJobKind, NamesInAnyCase) {
  EXPECT_EQ(*ParseJobKind("benchmark"), v1::JOB_KIND_BENCHMARK);
  EXPECT_EQ(*ParseJobKind("Profile"), v1::JOB_KIND_PROFILE);
  EXPECT_EQ(*ParseJobKind("MEMORY"), v1::JOB_KIND_MEMORY);
  EXPECT_EQ(*ParseJobKind("collective"), v1::JOB_KIND_COLLECTIVE);
  EXPECT_EQ(*ParseJobKind("Attention"), v1::JOB_KIND_ATTENTION);
  EXPECT_EQ(*ParseJobKind("precision"), v1::JOB_KIND_PRECISION);
  EXPECT_EQ(*ParseJobKind("DDP"), v1::JOB_KIND_DDP);
  const absl::Status bad = ParseJobKind("train").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "--kind: unknown kind 'train'; expected benchmark, profile, memory, collective, "
            "attention, precision or ddp");
  EXPECT_FALSE(ParseJobKind("unspecified").ok());
}

TEST(ErrorMessage, CodeNameUnlessTheMessageSpeaksForItself) {
  EXPECT_EQ(
      ErrorMessage(absl::InvalidArgumentError("benchmark.batch_size: expected 1..65536, got 0")),
      "benchmark.batch_size: expected 1..65536, got 0");
  EXPECT_EQ(ErrorMessage(absl::UnavailableError("cannot reach benchd at x")),
            "cannot reach benchd at x");
  EXPECT_EQ(ErrorMessage(absl::NotFoundError("no job j9")), "NOT_FOUND: no job j9");
  EXPECT_EQ(ErrorMessage(absl::UnimplementedError("profile")), "UNIMPLEMENTED: profile");
}

TEST(CheckWatchOnlyFlags, NamesTheFirstFlagGivenWithoutWatch) {
  EXPECT_TRUE(CheckWatchOnlyFlags(false, {{"--trace", false}, {"--top", false}}).ok());
  EXPECT_TRUE(CheckWatchOnlyFlags(true, {{"--trace", true}}).ok());
  const absl::Status s = CheckWatchOnlyFlags(false, {{"--trace", false}, {"--top", true}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--top needs --watch"));
}

// ------------------------------------------------------------ a fake daemon

// A Bench service that queues every submission as `finished`'s id, streams
// queued, started, (a collective's or a data-parallel job's rows,) then
// `finished` as the terminal event, and pages through `jobs` with the offset as the page token.
class FakeBench final : public v1::Bench::Service {
 public:
  grpc::Status Submit(grpc::ServerContext*, const v1::SubmitRequest* request,
                      v1::Job* out) override {
    std::lock_guard<std::mutex> lock(mu);
    submitted.push_back(request->spec());
    out->set_id(finished.id());
    out->set_state(v1::JOB_STATE_QUEUED);
    out->set_kind(JobKindOf(request->spec()));
    *out->mutable_spec() = request->spec();
    return grpc::Status::OK;
  }

  grpc::Status Watch(grpc::ServerContext*, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::JobEvent>* writer) override {
    v1::JobEvent e;
    e.set_job_id(request->job_id());
    e.mutable_queued()->set_id(request->job_id());
    writer->Write(e);
    e.mutable_started()->set_id(request->job_id());
    *e.mutable_started()->mutable_devices() = finished.devices();
    writer->Write(e);
    if (finished.result().has_collective()) {
      for (const v1::CollectiveRow& row : finished.result().collective().rows()) {
        *e.mutable_collective_row() = row;
        writer->Write(e);
      }
    }
    if (finished.result().has_ddp()) {
      *e.mutable_ddp_row() = finished.result().ddp().compute_only();
      writer->Write(e);
      for (const v1::DdpRow& row : finished.result().ddp().rows()) {
        *e.mutable_ddp_row() = row;
        writer->Write(e);
      }
    }
    switch (finished.state()) {
      case v1::JOB_STATE_SUCCEEDED:
        *e.mutable_result() = finished;
        break;
      case v1::JOB_STATE_CANCELLED:
        *e.mutable_cancelled() = finished;
        break;
      default:
        *e.mutable_failed() = finished;
        break;
    }
    writer->Write(e);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* out) override {
    if (request->job_id() != finished.id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job " + request->job_id());
    }
    *out = finished;
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* out) override {
    std::lock_guard<std::mutex> lock(mu);
    list_requests.push_back(*request);
    if (request->page_size() < 0 || request->page_size() > kMaxListPageSize) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "page_size: expected 0..1000");
    }
    const size_t offset = request->page_token().empty() ? 0 : std::stoul(request->page_token());
    const size_t size =
        std::min<size_t>(request->page_size() == 0 ? 50 : request->page_size(), max_page_size);
    for (size_t i = offset; i < jobs.size() && i < offset + size; ++i) *out->add_jobs() = jobs[i];
    if (offset + size < jobs.size()) out->set_next_page_token(std::to_string(offset + size));
    return grpc::Status::OK;
  }

  grpc::Status FetchArtifact(grpc::ServerContext*, const v1::FetchArtifactRequest* request,
                             grpc::ServerWriter<v1::ArtifactChunk>* writer) override {
    std::lock_guard<std::mutex> lock(mu);
    fetched.push_back(request->job_id() + "/" + request->name());
    v1::ArtifactChunk chunk;
    chunk.set_data(artifact);
    chunk.set_total_bytes(static_cast<int64_t>(artifact.size()));
    writer->Write(chunk);
    return grpc::Status::OK;
  }

  std::mutex mu;
  v1::Job finished = testing::MakeSucceededJob();
  std::vector<v1::Job> jobs;  // newest first
  size_t max_page_size = kMaxListPageSize;
  std::string artifact = "{\"traceEvents\": []}";
  std::vector<v1::JobSpec> submitted;
  std::vector<v1::ListJobsRequest> list_requests;
  std::vector<std::string> fetched;
};

struct Output {
  int code;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    g_.address = "127.0.0.1:" + std::to_string(port);
    g_.timeout_seconds = 10;
  }
  void TearDown() override { server_->Shutdown(); }

  // Runs a command with stdout and stderr captured.
  static Output Run(const std::function<int()>& command) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int code = command();
    Output o{code, "", ""};
    o.out = ::testing::internal::GetCapturedStdout();
    o.err = ::testing::internal::GetCapturedStderr();
    return o;
  }

  static std::string TempDir() {
    char tmpl[] = "/tmp/benchctl-commands-XXXXXX";
    return mkdtemp(tmpl);
  }

  FakeBench fake_;
  std::unique_ptr<grpc::Server> server_;
  GlobalOptions g_;
};

// ------------------------------------------------------------ submit KIND

TEST_F(CommandsTest, SubmitPrintsTheJobIdAndReturns) {
  const Output o = Run([&] { return RunSubmitBenchmark(g_, {.preset = "tiny"}, {}); });
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, "j42\n");
  EXPECT_EQ(o.err, "");
  ASSERT_EQ(fake_.submitted.size(), 1u);
  EXPECT_EQ(fake_.submitted[0].benchmark().model().preset(), "tiny");

  // Every kind alike.
  EXPECT_EQ(Run([&] { return RunSubmitProfile(g_, {}, {}, {}); }).out, "j42\n");
  EXPECT_EQ(Run([&] { return RunSubmitMemory(g_, {}, {}, std::nullopt); }).out, "j42\n");
  CollectiveOptions coll;
  coll.devices = "cpu:0,cpu:1";
  EXPECT_EQ(Run([&] { return RunSubmitCollective(g_, coll, {}, std::nullopt); }).out, "j42\n");
  ASSERT_EQ(fake_.submitted.size(), 4u);
  EXPECT_TRUE(fake_.submitted[1].has_profile());
  EXPECT_TRUE(fake_.submitted[2].has_memory());
  EXPECT_TRUE(fake_.submitted[3].has_collective());
}

TEST_F(CommandsTest, SubmitJsonPrintsTheQueuedJob) {
  const Output o = Run([&] { return RunSubmitMemory(g_, {}, {.json = true}, std::nullopt); });
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_THAT(o.out, HasSubstr("\"id\": \"j42\""));
  EXPECT_THAT(o.out, HasSubstr("\"state\": \"JOB_STATE_QUEUED\""));
  EXPECT_THAT(o.out, HasSubstr("\"kind\": \"JOB_KIND_MEMORY\""));
}

TEST_F(CommandsTest, WatchOnlyFlagsWithoutWatchAreUsageErrors) {
  struct Case {
    std::function<int()> command;
    std::string flag;
  };
  const std::string dir = TempDir();
  CollectiveOptions coll;
  coll.devices = "cpu:0,cpu:1";
  const std::vector<Case> cases = {
      {[&] { return RunSubmitProfile(g_, {}, {}, {.trace_path = dir + "/t.json"}); }, "--trace"},
      {[&] { return RunSubmitProfile(g_, {}, {.json = true}, {.top = 3}); }, "--top"},
      {[&] { return RunSubmitProfile(g_, {}, {}, {.all = true}); }, "--all"},
      {[&] { return RunSubmitMemory(g_, {}, {}, dir); }, "--svg-dir"},
      {[&] { return RunSubmitCollective(g_, coll, {}, dir); }, "--svg-dir"},
  };
  for (const Case& c : cases) {
    const Output o = Run(c.command);
    EXPECT_EQ(o.code, kExitUsage) << c.flag;
    EXPECT_EQ(o.out, "") << c.flag;
    EXPECT_THAT(o.err, HasSubstr("benchctl: " + c.flag + " needs --watch")) << c.flag;
  }
  EXPECT_TRUE(fake_.submitted.empty()) << "refused before anything was sent";
  EXPECT_EQ(Slurp(dir + "/t.json"), "");
}

TEST_F(CommandsTest, WatchShowsProgressOnStderrThenTheViewOnStdout) {
  const Output o = Run([&] { return RunSubmitBenchmark(g_, {}, {.watch = true}); });
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, JobView(fake_.finished));
  EXPECT_THAT(o.err, HasSubstr("submitted benchmark job j42\n"));
  EXPECT_THAT(o.err, HasSubstr("job j42 queued\n"));
  EXPECT_THAT(o.err, HasSubstr("job j42 started on cuda:0\n"));
  EXPECT_THAT(o.err, HasSubstr(FinalStateLine(fake_.finished) + "\n"));
}

TEST_F(CommandsTest, WatchJsonPrintsTheFinishedJob) {
  const Output o = Run([&] { return RunSubmitBenchmark(g_, {}, {.watch = true, .json = true}); });
  EXPECT_EQ(o.code, kExitOk);
  EXPECT_EQ(o.out, ToJson(fake_.finished));
  EXPECT_THAT(o.err, HasSubstr("job j42 queued\n"));
}

TEST_F(CommandsTest, WatchExitCodeIsTheJobs) {
  fake_.finished.set_state(v1::JOB_STATE_FAILED);
  fake_.finished.set_error_code(8);
  fake_.finished.set_error_message("CUDA out of memory");
  fake_.finished.clear_result();
  const Output o = Run([&] { return RunSubmitMemory(g_, {}, {.watch = true}, TempDir()); });
  EXPECT_EQ(o.code, kExitJobFailed);
  EXPECT_THAT(o.err, HasSubstr("benchctl: job j42 failed: RESOURCE_EXHAUSTED"));
  EXPECT_EQ(o.out, JobView(fake_.finished)) << "the failed job's view, as `get` shows it";

  fake_.finished.set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(Run([&] { return RunSubmitBenchmark(g_, {}, {.watch = true}); }).code, kExitJobFailed);
}

TEST_F(CommandsTest, ProfileWatchPrintsTheTablesAndFetchesTheTrace) {
  v1::Job& job = fake_.finished;
  job.set_kind(v1::JOB_KIND_PROFILE);
  job.mutable_spec()->mutable_profile()->mutable_step()->mutable_model()->set_preset("tiny");
  v1::ProfileResult* r = job.mutable_result()->mutable_profile();
  r->mutable_spec()->set_profile_steps(1);
  r->set_kernel_source("cpu_operator_self_time");
  r->set_trace_artifact("trace.json");
  v1::ProfileRange* step = r->add_ranges();
  step->set_name("step");
  for (int i = 0; i < 5; ++i) {
    v1::KernelRow* k = step->add_kernels();
    k->set_name("aten::op" + std::to_string(i));
    k->set_instances(1);
  }
  const std::string path = TempDir() + "/t.json";
  const Output o = Run(
      [&] { return RunSubmitProfile(g_, {}, {.watch = true}, {.top = 2, .trace_path = path}); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(o.out, JobView(job, {.top = 2}) + "trace saved to " + path + " (" +
                       FormatBytes(static_cast<int64_t>(fake_.artifact.size())) + ")\n");
  EXPECT_THAT(o.out, HasSubstr("aten::op1"));
  EXPECT_THAT(o.out, Not(HasSubstr("aten::op2"))) << "--top 2";
  EXPECT_EQ(Slurp(path), fake_.artifact);
  EXPECT_EQ(fake_.fetched, std::vector<std::string>{"j42/trace.json"});
  EXPECT_THAT(o.err, HasSubstr("submitted profile job j42\n"));

  // With --json the Job alone is on stdout; the line about the trace goes to stderr.
  const Output j = Run([&] {
    return RunSubmitProfile(g_, {}, {.watch = true, .json = true}, {.trace_path = path});
  });
  EXPECT_EQ(j.code, kExitOk);
  EXPECT_EQ(j.out, ToJson(job));
  EXPECT_THAT(j.err, HasSubstr("benchctl: trace saved to " + path));
}

TEST_F(CommandsTest, MemoryWatchSavesTheTimelines) {
  v1::Job& job = fake_.finished;
  job.set_kind(v1::JOB_KIND_MEMORY);
  job.mutable_spec()->mutable_memory()->mutable_step()->mutable_model()->set_preset("tiny");
  v1::MemoryRun* run = job.mutable_result()->mutable_memory()->add_runs();
  run->set_name("ctx128-forward-fp32");
  run->set_timeline_artifact("timeline.svg");
  run->set_timeline_svg("<svg/>");
  const std::string dir = TempDir();
  const Output o = Run([&] { return RunSubmitMemory(g_, {}, {.watch = true}, dir); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(o.out, JobView(job) + "timeline of ctx128-forward-fp32 saved to " + dir +
                       "/j42-timeline.svg\n");
  EXPECT_EQ(Slurp(dir + "/j42-timeline.svg"), "<svg/>");
}

TEST_F(CommandsTest, CollectiveWatchShowsRowsAsTheyCompleteThenTheTable) {
  v1::Job& job = fake_.finished;
  job.set_kind(v1::JOB_KIND_COLLECTIVE);
  job.clear_devices();
  job.add_devices("cpu:0");
  job.add_devices("cpu:1");
  v1::CollectiveResult* r = job.mutable_result()->mutable_collective();
  v1::CollectiveRow* row = r->add_rows();
  row->set_size_bytes(4096);
  row->set_world_size(2);
  row->set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  row->mutable_duration()->set_median(50e-6);
  CollectiveOptions coll;
  coll.devices = "cpu:0,cpu:1";
  const Output o =
      Run([&] { return RunSubmitCollective(g_, coll, {.watch = true}, std::nullopt); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(o.out, CollectiveResultView(*r));
  EXPECT_THAT(o.err, HasSubstr("job j42 started on cpu:0,cpu:1\n"));
  EXPECT_THAT(o.err, HasSubstr(CollectiveRowLine(*row) + "\n"));
}

// A data-parallel job on cpu:0,cpu:1: compute only, then naive.
v1::Job MakeDdpJob() {
  v1::Job job = testing::MakeSucceededJob();
  job.set_kind(v1::JOB_KIND_DDP);
  job.clear_devices();
  job.add_devices("cpu:0");
  job.add_devices("cpu:1");
  job.clear_spec();
  job.mutable_spec()->mutable_ddp()->mutable_target()->add_devices("cpu:0");
  job.mutable_spec()->mutable_ddp()->mutable_target()->add_devices("cpu:1");
  v1::DdpResult* r = job.mutable_result()->mutable_ddp();
  r->set_world_size(2);
  r->mutable_compute_only()->mutable_step()->set_median(0.010);
  v1::DdpRow* naive = r->add_rows();
  naive->set_variant(v1::DDP_VARIANT_NAIVE);
  naive->set_optimizer(v1::DDP_OPTIMIZER_ADAMW);
  naive->mutable_step()->set_median(0.012);
  naive->set_exposed_comm_seconds(0.002);
  naive->set_ranks_agree(true);
  return job;
}

TEST_F(CommandsTest, DdpWatchShowsEachRunAsItEndsThenTheView) {
  fake_.finished = MakeDdpJob();
  DdpOptions ddp;
  ddp.devices = "cpu:0,cpu:1";
  ddp.variants = "naive";
  const Output o = Run([&] { return RunSubmitDdp(g_, ddp, {.watch = true}); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(o.out, JobView(fake_.finished));
  EXPECT_THAT(o.out, HasSubstr("naive"));
  const v1::DdpResult& r = fake_.finished.result().ddp();
  EXPECT_THAT(o.err, HasSubstr(DdpRowLine(r.compute_only()) + "\n"));
  EXPECT_THAT(o.err, HasSubstr(DdpRowLine(r.rows(0)) + "\n"));
  EXPECT_THAT(o.err, HasSubstr(FinalStateLine(fake_.finished) + "\n"));
  ASSERT_EQ(fake_.submitted.size(), 1u);
  ASSERT_TRUE(fake_.submitted[0].has_ddp());
  EXPECT_EQ(fake_.submitted[0].ddp().variants_size(), 1);
}

TEST_F(CommandsTest, DdpRunsShowInWatchAndGetCsvIsOneRowPerRun) {
  fake_.finished = MakeDdpJob();
  const Output watched = Run([&] { return RunWatch(g_, "j42", false); });
  EXPECT_EQ(watched.code, kExitOk);
  EXPECT_THAT(watched.out, HasSubstr(DdpRowLine(fake_.finished.result().ddp().rows(0)) + "\n"));
  const Output csv = Run([&] { return RunGet(g_, "j42", false, true); });
  EXPECT_EQ(csv.code, kExitOk);
  EXPECT_EQ(csv.out, DdpCsv(fake_.finished));
}

TEST_F(CommandsTest, DdpBadFlagsAreUsageErrorsBeforeAnythingIsSent) {
  DdpOptions ddp;
  ddp.devices = "cpu:0,cpu:1";
  ddp.variants = "ring";
  const Output o = Run([&] { return RunSubmitDdp(g_, ddp, {}); });
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("benchctl: --variants: unknown variant 'ring'"));
  EXPECT_TRUE(fake_.submitted.empty());
}

// ------------------------------------------------------------ list

// `n` jobs, newest (highest id) first.
std::vector<v1::Job> MakeJobs(int n) {
  std::vector<v1::Job> jobs;
  for (int i = n; i >= 1; --i) {
    v1::Job job;
    job.set_id("j" + std::to_string(i));
    job.set_kind(v1::JOB_KIND_BENCHMARK);
    job.set_state(v1::JOB_STATE_SUCCEEDED);
    jobs.push_back(job);
  }
  return jobs;
}

// The ids in `list --json`'s output, which must be exactly {"jobs": [...]}.
std::vector<std::string> ListedIds(const std::string& json) {
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  EXPECT_EQ(parsed.fields().size(), 1u) << json;
  std::vector<std::string> ids;
  if (!parsed.fields().contains("jobs")) return ids;
  for (const auto& v : parsed.fields().at("jobs").list_value().values()) {
    ids.push_back(v.struct_value().fields().at("id").string_value());
  }
  return ids;
}

TEST_F(CommandsTest, ListFollowsNextPageTokenAndStopsAtTheLimit) {
  fake_.jobs = MakeJobs(2000);
  Output o = Run([&] { return RunList(g_, {.limit = 1500}, true); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  std::vector<std::string> ids = ListedIds(o.out);
  ASSERT_EQ(ids.size(), 1500u);
  EXPECT_EQ(ids.front(), "j2000");
  EXPECT_EQ(ids.back(), "j501");
  ASSERT_EQ(fake_.list_requests.size(), 2u);
  EXPECT_EQ(fake_.list_requests[0].page_size(), 1000);
  EXPECT_EQ(fake_.list_requests[0].page_token(), "");
  EXPECT_EQ(fake_.list_requests[1].page_size(), 1000);
  EXPECT_EQ(fake_.list_requests[1].page_token(), "1000");

  // A daemon that gives shorter pages than asked: followed until the limit.
  fake_.list_requests.clear();
  fake_.max_page_size = 30;
  o = Run([&] { return RunList(g_, {.limit = 70}, true); });
  ids = ListedIds(o.out);
  ASSERT_EQ(ids.size(), 70u);
  EXPECT_EQ(ids.back(), "j1931");
  ASSERT_EQ(fake_.list_requests.size(), 3u);
  EXPECT_EQ(fake_.list_requests[0].page_size(), 70);
  EXPECT_EQ(fake_.list_requests[2].page_token(), "60");
}

TEST_F(CommandsTest, ListStopsAtTheLastPageAndPagesAtMost1000) {
  fake_.jobs = MakeJobs(1200);
  const Output o = Run([&] { return RunList(g_, {.limit = 5000}, true); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  EXPECT_EQ(ListedIds(o.out).size(), 1200u);
  ASSERT_EQ(fake_.list_requests.size(), 2u);
  EXPECT_EQ(fake_.list_requests[0].page_size(), 1000);
  EXPECT_EQ(fake_.list_requests[1].page_size(), 1000);
  EXPECT_EQ(fake_.list_requests[1].page_token(), "1000");
}

TEST_F(CommandsTest, ListDefaultsTo50AndPrintsTheTable) {
  fake_.jobs = MakeJobs(60);
  const Output o = Run([&] { return RunList(g_, {}, false); });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  ASSERT_EQ(fake_.list_requests.size(), 1u);
  EXPECT_EQ(fake_.list_requests[0].page_size(), 50);
  v1::ListJobsResponse shown;
  for (int i = 0; i < 50; ++i) *shown.add_jobs() = fake_.jobs[i];
  EXPECT_EQ(o.out, JobListView(shown));

  fake_.jobs.clear();
  EXPECT_EQ(Run([&] { return RunList(g_, {}, true); }).out, "{\n \"jobs\": []\n}\n");
}

TEST_F(CommandsTest, ListPassesTheFiltersOnEveryPage) {
  fake_.jobs = MakeJobs(3);
  const Output o = Run([&] {
    return RunList(g_, {.limit = 2, .state = "Failed", .kind = "collective", .device = "cuda:1"},
                   false);
  });
  EXPECT_EQ(o.code, kExitOk) << o.err;
  ASSERT_EQ(fake_.list_requests.size(), 1u);
  for (const v1::ListJobsRequest& r : fake_.list_requests) {
    EXPECT_EQ(r.state(), v1::JOB_STATE_FAILED);
    EXPECT_EQ(r.kind(), v1::JOB_KIND_COLLECTIVE);
    EXPECT_EQ(r.device(), "cuda:1");
  }
}

TEST_F(CommandsTest, ListBadValuesAreUsageErrorsNamingTheFlag) {
  struct Case {
    ListOptions options;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{.limit = 0}, "--limit: expected a number of jobs, 1 or more; got 0"},
      {{.state = "done"},
       "--state: unknown state 'done'; expected queued, running, succeeded, failed, cancelled or "
       "interrupted"},
      {{.kind = "train"},
       "--kind: unknown kind 'train'; expected benchmark, profile, memory, collective, attention, "
       "precision or ddp"},
  };
  for (const Case& c : cases) {
    const Output o = Run([&] { return RunList(g_, c.options, false); });
    EXPECT_EQ(o.code, kExitUsage) << c.message;
    EXPECT_EQ(o.err, "benchctl: " + c.message + "\n");
  }
  EXPECT_TRUE(fake_.list_requests.empty());
}

TEST(ListJobsUpTo, StopsWhenTheTokenDoesNotMoveOn) {
  int calls = 0;
  const ListJobsCall stuck =
      [&](const v1::ListJobsRequest&) -> absl::StatusOr<v1::ListJobsResponse> {
    ++calls;
    v1::ListJobsResponse r;
    r.add_jobs()->set_id("j" + std::to_string(calls));
    r.set_next_page_token("same");
    return r;
  };
  absl::StatusOr<v1::ListJobsResponse> all = ListJobsUpTo(stuck, {}, 10);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(all->jobs_size(), 2);
  EXPECT_EQ(all->next_page_token(), "");

  const ListJobsCall failing =
      [](const v1::ListJobsRequest&) -> absl::StatusOr<v1::ListJobsResponse> {
    return absl::UnavailableError("gone");
  };
  EXPECT_EQ(ListJobsUpTo(failing, {}, 10).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace benchd::client

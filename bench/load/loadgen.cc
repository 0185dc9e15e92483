// benchd_loadgen: one unary client process of bench/load (load.py --api cpp).
// The Python clients spend more CPU per call than the daemon does; on a
// 2-core machine that caps what the benchmark can show. This client keeps
// `--concurrency` calls in flight over one channel from one thread polling a
// CompletionQueue, so it costs a fraction of that per call.
//
// It sends exactly what clients.py sends: the mix's kinds interleaved
// (kind_cycle), GetJob over every queued job id, ListJobs over every page
// token, GetNodeInfo; slot s of client i starts at i * 7919 + s and strides
// by the concurrency.
//
// Protocol with load.py: after one GetNodeInfo answers it prints "ready";
// load.py writes "START_AT END_AT" (CLOCK_MONOTONIC seconds, Python's
// time.monotonic) on stdin; it records every call that ends inside that
// window, stops starting calls at END_AT, then writes to --out:
// <Kind>.f64 (latencies in ms, native float64) and failures.txt (one line per
// failed call: "Kind: CODE: message"), and prints "done CALLS".
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/load/loadgen_plan.h"
#include "benchd/v1/bench.grpc.pb.h"

namespace benchd::loadgen {
namespace {

struct Plan {
  std::string address;
  int index = 0;
  int concurrency = 16;
  std::vector<std::pair<Kind, int>> mix;
  std::vector<std::string> job_ids;
  std::vector<std::string> page_tokens;
  int page_size = 50;
  std::string out_dir;
};

constexpr auto kCallTimeout = std::chrono::seconds(30);

double Monotonic() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN_CODE";
}

// One call in flight; reused for the slot's next call.
struct Slot {
  int64_t next = 0;  // index into the cycle (kind, request) of the next call
  Kind kind = Kind::kGetJob;
  double started = 0;
  std::optional<grpc::ClientContext> ctx;
  grpc::Status status;
  v1::Job job;
  v1::ListJobsResponse page;
  v1::NodeInfo node;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::Job>> job_reader;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ListJobsResponse>> page_reader;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::NodeInfo>> node_reader;
};

class Client {
 public:
  Client(const Plan& plan, v1::Bench::Stub* stub, grpc::CompletionQueue* cq)
      : plan_(plan), stub_(stub), cq_(cq), cycle_(KindCycle(plan.mix)) {
    for (const std::string& id : plan.job_ids) {
      v1::GetJobRequest r;
      r.set_job_id(id);
      get_.push_back(std::move(r));
    }
    for (const std::string& token : plan.page_tokens) {
      v1::ListJobsRequest r;
      r.set_page_size(plan.page_size);
      r.set_page_token(token);
      list_.push_back(std::move(r));
    }
  }

  // Runs the closed loop until end_at; latencies of calls ending in [start_at, end_at].
  void Run(double start_at, double end_at) {
    start_at_ = start_at;
    end_at_ = end_at;
    slots_ = std::make_unique<Slot[]>(plan_.concurrency);
    const int64_t offset = static_cast<int64_t>(plan_.index) * 7919;
    int in_flight = 0;
    for (int s = 0; s < plan_.concurrency; ++s) {
      slots_[s].next = offset + s;
      Start(&slots_[s]);
      ++in_flight;
    }
    void* tag;
    bool ok;
    while (in_flight > 0 && cq_->Next(&tag, &ok)) {
      Slot* slot = static_cast<Slot*>(tag);
      const double ended = Monotonic();
      Record(*slot, ended);
      if (ended < end_at_) {
        slot->next += plan_.concurrency;
        Start(slot);
      } else {
        --in_flight;
      }
    }
  }

  std::vector<double>& latencies(Kind k) { return latencies_[static_cast<int>(k)]; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  void Start(Slot* slot) {
    const size_t n = cycle_.size();
    const size_t i = static_cast<size_t>(slot->next);
    slot->kind = cycle_[i % n];
    const size_t round = i / n;
    slot->ctx.emplace();
    slot->ctx->set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    slot->started = Monotonic();
    switch (slot->kind) {
      case Kind::kGetJob:
        slot->job.Clear();
        slot->job_reader = stub_->AsyncGetJob(&*slot->ctx, get_[round % get_.size()], cq_);
        slot->job_reader->Finish(&slot->job, &slot->status, slot);
        break;
      case Kind::kListJobs:
        slot->page.Clear();
        slot->page_reader = stub_->AsyncListJobs(&*slot->ctx, list_[round % list_.size()], cq_);
        slot->page_reader->Finish(&slot->page, &slot->status, slot);
        break;
      case Kind::kGetNodeInfo:
        slot->node.Clear();
        slot->node_reader = stub_->AsyncGetNodeInfo(&*slot->ctx, node_request_, cq_);
        slot->node_reader->Finish(&slot->node, &slot->status, slot);
        break;
    }
  }

  void Record(const Slot& slot, double ended) {
    if (!slot.status.ok()) {
      failures_.push_back(absl::StrCat(KindName(slot.kind), ": ",
                                       StatusCodeName(slot.status.error_code()), ": ",
                                       slot.status.error_message()));
      return;
    }
    if (ended >= start_at_ && ended <= end_at_) {
      latencies_[static_cast<int>(slot.kind)].push_back((ended - slot.started) * 1e3);
    }
  }

  const Plan& plan_;
  v1::Bench::Stub* stub_;
  grpc::CompletionQueue* cq_;
  const std::vector<Kind> cycle_;
  std::vector<v1::GetJobRequest> get_;
  std::vector<v1::ListJobsRequest> list_;
  v1::GetNodeInfoRequest node_request_;
  std::unique_ptr<Slot[]> slots_;  // Slot holds a ClientContext: not movable
  double start_at_ = 0;
  double end_at_ = 0;
  std::vector<double> latencies_[kKindCount];
  std::vector<std::string> failures_;
};

absl::Status WriteResults(const std::string& dir, Client& client) {
  for (int k = 0; k < kKindCount; ++k) {
    const std::vector<double>& v = client.latencies(static_cast<Kind>(k));
    const std::string path = absl::StrCat(dir, "/", KindName(static_cast<Kind>(k)), ".f64");
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(v.data()),
              static_cast<std::streamsize>(v.size() * sizeof(double)));
    if (!out) return absl::InternalError(absl::StrCat("--out: cannot write '", path, "'"));
  }
  const std::string path = dir + "/failures.txt";
  std::ofstream out(path);
  for (const std::string& f : client.failures()) out << f << '\n';
  if (!out) return absl::InternalError(absl::StrCat("--out: cannot write '", path, "'"));
  return absl::OkStatus();
}

// "START_AT END_AT" from load.py.
absl::StatusOr<std::pair<double, double>> ReadWindow() {
  std::string line;
  if (!std::getline(std::cin, line)) {
    return absl::InvalidArgumentError("stdin: expected 'START_AT END_AT', got end of input");
  }
  std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  double start_at = 0, end_at = 0;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &start_at) ||
      !absl::SimpleAtod(parts[1], &end_at) || end_at <= start_at) {
    return absl::InvalidArgumentError(
        absl::StrCat("stdin: expected 'START_AT END_AT' (monotonic seconds, START_AT < END_AT), "
                     "got '",
                     line, "'"));
  }
  return std::make_pair(start_at, end_at);
}

// The command line, checked: every file read, every figure in range.
absl::StatusOr<Plan> ParseArgs(int argc, char** argv, int* exit_code) {
  CLI::App app{"benchd_loadgen: one unary client process of bench/load (see load.py --api cpp)"};
  Plan plan;
  std::string mix = "GetJob=6,ListJobs=3,GetNodeInfo=1", job_ids, page_tokens;
  app.add_option("--address", plan.address, "the daemon's HOST:PORT")->required();
  app.add_option("--index", plan.index, "this client's number (spreads clients over the jobs)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--concurrency", plan.concurrency, "calls in flight")
      ->check(CLI::Range(1, 100000));
  app.add_option("--mix", mix, "call kinds and their weights");
  app.add_option("--job-ids", job_ids, "file: GetJob's job ids, one a line")->required();
  app.add_option("--page-tokens", page_tokens,
                 "file: ListJobs' page tokens, one a line (the first page's is an empty line)")
      ->required();
  app.add_option("--page-size", plan.page_size, "ListJobs page size")->check(CLI::Range(0, 1000));
  app.add_option("--out", plan.out_dir, "folder for the latencies and failures")
      ->required()
      ->check(CLI::ExistingDirectory);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return absl::InvalidArgumentError("");
  }
  *exit_code = 2;
  absl::StatusOr<std::vector<std::pair<Kind, int>>> parsed_mix = ParseMix(mix);
  if (!parsed_mix.ok()) return parsed_mix.status();
  plan.mix = *std::move(parsed_mix);
  absl::StatusOr<std::vector<std::string>> ids = ReadLines("--job-ids", job_ids);
  if (!ids.ok()) return ids.status();
  ids->erase(std::remove(ids->begin(), ids->end(), ""), ids->end());
  absl::StatusOr<std::vector<std::string>> tokens = ReadLines("--page-tokens", page_tokens);
  if (!tokens.ok()) return tokens.status();
  plan.job_ids = *std::move(ids);
  plan.page_tokens = *std::move(tokens);
  for (const auto& [kind, weight] : plan.mix) {
    if (kind == Kind::kGetJob && plan.job_ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--job-ids: '", job_ids, "' has no job id; GetJob in --mix needs one"));
    }
    if (kind == Kind::kListJobs && plan.page_tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--page-tokens: '", page_tokens,
                                                     "' has no line; ListJobs in --mix needs one"));
    }
  }
  return plan;
}

int Main(int argc, char** argv) {
  int exit_code = 0;
  absl::StatusOr<Plan> plan = ParseArgs(argc, argv, &exit_code);
  if (!plan.ok()) {
    if (!plan.status().message().empty()) {
      fprintf(stderr, "benchd_loadgen: %s\n", std::string(plan.status().message()).c_str());
    }
    return exit_code;
  }
  auto channel = grpc::CreateChannel(plan->address, grpc::InsecureChannelCredentials());
  auto stub = v1::Bench::NewStub(channel);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    v1::NodeInfo node;
    const grpc::Status s = stub->GetNodeInfo(&ctx, v1::GetNodeInfoRequest(), &node);
    if (!s.ok()) {
      fprintf(stderr, "benchd_loadgen: GetNodeInfo at %s: %s: %s\n", plan->address.c_str(),
              StatusCodeName(s.error_code()), s.error_message().c_str());
      return 1;
    }
  }
  printf("ready\n");
  fflush(stdout);
  absl::StatusOr<std::pair<double, double>> window = ReadWindow();
  if (!window.ok()) {
    fprintf(stderr, "benchd_loadgen: %s\n", std::string(window.status().message()).c_str());
    return 2;
  }
  grpc::CompletionQueue cq;
  Client client(*plan, stub.get(), &cq);
  client.Run(window->first, window->second);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (absl::Status s = WriteResults(plan->out_dir, client); !s.ok()) {
    fprintf(stderr, "benchd_loadgen: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  size_t calls = 0;
  for (int k = 0; k < kKindCount; ++k) calls += client.latencies(static_cast<Kind>(k)).size();
  printf("done %zu\n", calls);
  return 0;
}

}  // namespace
}  // namespace benchd::loadgen

int main(int argc, char** argv) { return benchd::loadgen::Main(argc, argv); }

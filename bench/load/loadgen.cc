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
//
// With --watchers N it is the watcher process instead (load.py
// --watchers-from cpp): N Watch streams on the --watch-ids jobs (stream i on
// line i mod the count), spread round-robin over --watch-channels TCP
// connections, all driven from this one thread through one CompletionQueue.
// Each channel is connected first (one GetNodeInfo each), then it prints
// "connected"; a stdin line "open AT" (CLOCK_MONOTONIC seconds; 0 = now)
// starts every stream at once at AT, and it prints "opened K" when all N have
// delivered a first event (or K < N after --open-timeout). Each stream's
// first-event latency runs from its own StartCall to its first event's
// arrival. The streams stay open until a stdin line "stop" (or end of input),
// when it counts the streams still open, cancels them and writes to --out:
// first_event.f64 (ms, one per stream that had a first event, in stream
// order), failures.txt ("Watch JOB: CODE: message" for every stream that
// ended other than by our cancel) and watch.json (the counts and
// p50/p90/p99/max), and prints "done OPEN_AT_END". With --hold S it needs no
// stdin: it opens at once, holds S seconds and stops, printing a summary.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  // Watcher mode (--watchers > 0).
  int watchers = 0;
  int watch_channels = 10;
  std::vector<std::string> watch_ids;
  double open_timeout_s = 60;
  std::optional<double> hold_s;
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

// ------------------------------------------------------------ watcher mode

// One Watch stream. One operation is in flight at a time (StartCall, then
// Reads, then Finish), so the stream itself is the tag.
struct Stream {
  enum class Op { kStart, kRead, kFinish };
  int index = 0;
  const std::string* job_id = nullptr;
  grpc::ClientContext ctx;
  v1::WatchRequest request;
  std::unique_ptr<grpc::ClientAsyncReader<v1::JobEvent>> reader;
  v1::JobEvent event;
  grpc::Status status;
  Op op = Op::kStart;
  double started = 0;
  double first_event = -1;  // monotonic seconds; < 0: none yet
  int64_t events = 0;
  bool cancelled = false;  // by us, at stop
  bool done = false;
};

class Watchers {
 public:
  Watchers(const Plan& plan, std::vector<std::unique_ptr<v1::Bench::Stub>>* stubs)
      : plan_(plan), stubs_(stubs), streams_(std::make_unique<Stream[]>(plan.watchers)) {}

  // Starts every stream (after sleeping until open_at), handling completions
  // between starts so that an early stream's first event is stamped when it
  // arrives, not after the last start.
  void Open(double open_at) {
    const double wait = open_at - Monotonic();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    open_started_ = Monotonic();
    for (int i = 0; i < plan_.watchers; ++i) {
      Stream& s = streams_[i];
      s.index = i;
      s.job_id = &plan_.watch_ids[i % plan_.watch_ids.size()];
      s.request.set_job_id(*s.job_id);
      v1::Bench::Stub* stub = (*stubs_)[i % stubs_->size()].get();
      s.reader = stub->PrepareAsyncWatch(&s.ctx, s.request, &cq_);
      s.started = Monotonic();
      s.reader->StartCall(&s);
      ++active_;
      Poll(gpr_time_0(GPR_CLOCK_MONOTONIC));
    }
    issued_ = Monotonic();
  }

  // Handles completions until every stream had a first event (true) or the
  // deadline passed (false).
  bool WaitFirstEvents(double deadline) {
    while (opened_ < plan_.watchers && Monotonic() < deadline) {
      Poll(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(100, GPR_TIMESPAN)));
      if (active_ == 0) break;
    }
    return opened_ == plan_.watchers;
  }

  // Handles completions until `stop` is set.
  void Hold(const std::atomic<bool>& stop) {
    while (!stop.load()) {
      Poll(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(100, GPR_TIMESPAN)));
    }
  }

  // Counts the streams still open, cancels them and waits (up to 30 s) for
  // every stream to finish. Returns the count.
  int Stop() {
    open_at_end_ = active_;
    for (int i = 0; i < plan_.watchers; ++i) {
      if (streams_[i].reader && !streams_[i].done) {
        streams_[i].cancelled = true;
        streams_[i].ctx.TryCancel();
      }
    }
    const double deadline = Monotonic() + 30;
    while (active_ > 0 && Monotonic() < deadline) {
      Poll(gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(100, GPR_TIMESPAN)));
    }
    if (active_ > 0) {
      failures_.push_back(absl::StrCat(active_,
                                       " Watch streams did not finish within 30 s of "
                                       "their cancel"));
    }
    return open_at_end_;
  }

  // Shuts the queue down; only once no operation is pending (after Stop).
  void Shutdown() {
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  // First-event latencies (ms) in stream order, of the streams that had one.
  std::vector<double> FirstEventsMs() const {
    std::vector<double> ms;
    for (int i = 0; i < plan_.watchers; ++i) {
      const Stream& s = streams_[i];
      if (s.first_event >= 0) ms.push_back((s.first_event - s.started) * 1e3);
    }
    return ms;
  }

  int opened() const { return opened_; }
  int open_at_end() const { return open_at_end_; }
  int64_t events() const { return events_; }
  double issue_seconds() const { return issued_ - open_started_; }
  double all_opened_seconds() const {
    return last_first_event_ > 0 ? last_first_event_ - open_started_ : NAN;
  }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  // Handles completions until the queue has none ready by `deadline`.
  void Poll(gpr_timespec deadline) {
    void* tag;
    bool ok;
    while (cq_.AsyncNext(&tag, &ok, deadline) == grpc::CompletionQueue::GOT_EVENT) {
      Handle(static_cast<Stream*>(tag), ok);
      deadline = gpr_time_0(GPR_CLOCK_MONOTONIC);  // then drain what is ready
    }
  }

  void Handle(Stream* s, bool ok) {
    switch (s->op) {
      case Stream::Op::kStart:
      case Stream::Op::kRead:
        if (ok && s->op == Stream::Op::kRead) {
          ++s->events;
          ++events_;
          if (s->first_event < 0) {
            s->first_event = Monotonic();
            last_first_event_ = s->first_event;
            ++opened_;
          }
        }
        if (ok) {
          s->op = Stream::Op::kRead;
          s->event.Clear();
          s->reader->Read(&s->event, s);
        } else {
          s->op = Stream::Op::kFinish;
          s->reader->Finish(&s->status, s);
        }
        return;
      case Stream::Op::kFinish:
        s->done = true;
        --active_;
        if (s->cancelled && s->status.error_code() == grpc::StatusCode::CANCELLED) return;
        if (s->status.ok()) {
          failures_.push_back(
              absl::StrCat("Watch ", *s->job_id, ": ended (OK) while the job was queued"));
        } else {
          failures_.push_back(absl::StrCat("Watch ", *s->job_id, ": ",
                                           StatusCodeName(s->status.error_code()), ": ",
                                           s->status.error_message()));
        }
        return;
    }
  }

  const Plan& plan_;
  std::vector<std::unique_ptr<v1::Bench::Stub>>* stubs_;
  grpc::CompletionQueue cq_;
  std::unique_ptr<Stream[]> streams_;  // Stream holds a ClientContext: not movable
  int active_ = 0;                     // started and not finished
  int opened_ = 0;                     // had a first event
  int open_at_end_ = 0;
  int64_t events_ = 0;
  double open_started_ = 0;
  double issued_ = 0;
  double last_first_event_ = 0;
  std::vector<std::string> failures_;
};

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrCat(v) : "null"; }

// "first event p50 1.2, p90 3.4, p99 5.6, max 7.8 ms" and watch.json's fields.
struct FirstEventFigures {
  double p50, p90, p99, max, mean;
};

FirstEventFigures Figures(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  return {Percentile(ms, 50), Percentile(ms, 90), Percentile(ms, 99), ms.empty() ? NAN : ms.back(),
          ms.empty() ? NAN : sum / ms.size()};
}

absl::Status WriteWatchResults(const Plan& plan, const Watchers& w) {
  const std::vector<double> ms = w.FirstEventsMs();
  const std::string f64 = plan.out_dir + "/first_event.f64";
  {
    std::ofstream out(f64, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ms.data()),
              static_cast<std::streamsize>(ms.size() * sizeof(double)));
    if (!out) return absl::InternalError(absl::StrCat("--out: cannot write '", f64, "'"));
  }
  const std::string failures = plan.out_dir + "/failures.txt";
  {
    std::ofstream out(failures);
    for (const std::string& f : w.failures()) out << f << '\n';
    if (!out) return absl::InternalError(absl::StrCat("--out: cannot write '", failures, "'"));
  }
  const FirstEventFigures f = Figures(ms);
  const std::string json = plan.out_dir + "/watch.json";
  std::ofstream out(json);
  out << "{\"watchers\": " << plan.watchers << ", \"channels\": " << plan.watch_channels
      << ", \"opened\": " << w.opened() << ", \"open_at_end\": " << w.open_at_end()
      << ", \"events\": " << w.events() << ", \"failures\": " << w.failures().size()
      << ", \"issue_s\": " << JsonNumber(w.issue_seconds())
      << ", \"all_opened_s\": " << JsonNumber(w.all_opened_seconds())
      << ", \"first_event_ms\": {\"p50\": " << JsonNumber(f.p50)
      << ", \"p90\": " << JsonNumber(f.p90) << ", \"p99\": " << JsonNumber(f.p99)
      << ", \"max\": " << JsonNumber(f.max) << ", \"mean\": " << JsonNumber(f.mean) << "}}\n";
  if (!out) return absl::InternalError(absl::StrCat("--out: cannot write '", json, "'"));
  return absl::OkStatus();
}

// "open AT" from load.py (AT in CLOCK_MONOTONIC seconds; 0 or past = now).
absl::StatusOr<double> ReadOpenAt() {
  std::string line;
  if (!std::getline(std::cin, line)) {
    return absl::InvalidArgumentError("stdin: expected 'open AT', got end of input");
  }
  std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
  double at = 0;
  if (parts.size() != 2 || parts[0] != "open" || !absl::SimpleAtod(parts[1], &at) ||
      !std::isfinite(at)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stdin: expected 'open AT' (monotonic seconds, 0 = now), got '", line, "'"));
  }
  return at;
}

int WatchMain(const Plan& plan) {
  // One TCP connection per channel: a local subchannel pool each, as load.py's
  // Python watchers do (grpc.use_local_subchannel_pool).
  std::vector<std::unique_ptr<v1::Bench::Stub>> stubs;
  for (int c = 0; c < plan.watch_channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel =
        grpc::CreateCustomChannel(plan.address, grpc::InsecureChannelCredentials(), args);
    stubs.push_back(v1::Bench::NewStub(channel));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    v1::NodeInfo node;
    const grpc::Status s = stubs.back()->GetNodeInfo(&ctx, v1::GetNodeInfoRequest(), &node);
    if (!s.ok()) {
      fprintf(stderr, "benchd_loadgen: GetNodeInfo at %s (watch channel %d): %s: %s\n",
              plan.address.c_str(), c, StatusCodeName(s.error_code()), s.error_message().c_str());
      return 1;
    }
  }
  double open_at = 0;
  if (!plan.hold_s) {
    printf("connected\n");
    fflush(stdout);
    absl::StatusOr<double> at = ReadOpenAt();
    if (!at.ok()) {
      fprintf(stderr, "benchd_loadgen: %s\n", std::string(at.status().message()).c_str());
      return 2;
    }
    open_at = *at;
  }
  Watchers w(plan, &stubs);
  w.Open(open_at);
  w.WaitFirstEvents(Monotonic() + plan.open_timeout_s);
  printf("opened %d\n", w.opened());
  fflush(stdout);

  std::atomic<bool> stop{false};
  std::thread stopper;
  if (plan.hold_s) {
    stopper = std::thread([&stop, hold = *plan.hold_s] {
      std::this_thread::sleep_for(std::chrono::duration<double>(hold));
      stop = true;
    });
  } else {
    // "stop" or the end of stdin; any other line is ignored with a word.
    stopper = std::thread([&stop] {
      for (std::string line; std::getline(std::cin, line);) {
        if (line == "stop") break;
        fprintf(stderr, "benchd_loadgen: stdin: expected 'stop', got '%s' (ignored)\n",
                line.c_str());
      }
      stop = true;
    });
  }
  w.Hold(stop);
  stopper.join();
  const int open_at_end = w.Stop();
  w.Shutdown();
  if (absl::Status s = WriteWatchResults(plan, w); !s.ok()) {
    fprintf(stderr, "benchd_loadgen: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (plan.hold_s) {
    const FirstEventFigures f = Figures(w.FirstEventsMs());
    printf(
        "%d of %d Watch streams had a first event (%d channels; started in %.3f s, all "
        "first events in %.3f s): first event p50 %.2f, p90 %.2f, p99 %.2f, max %.2f ms; "
        "%d open at the end, %zu failures\n",
        w.opened(), plan.watchers, plan.watch_channels, w.issue_seconds(), w.all_opened_seconds(),
        f.p50, f.p90, f.p99, f.max, open_at_end, w.failures().size());
    for (const std::string& failure : w.failures()) printf("  FAILED %s\n", failure.c_str());
  }
  printf("done %d\n", open_at_end);
  // Driven by load.py, the files say what failed; alone, so does the exit status.
  const bool all_well = w.opened() == plan.watchers && w.failures().empty();
  return plan.hold_s && !all_well ? 3 : 0;
}

// ------------------------------------------------------------ unary mode

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

// The command line, checked: every file read, every figure in range, and
// only the options of the mode chosen (unary, or watchers with --watchers).
absl::StatusOr<Plan> ParseArgs(int argc, char** argv, int* exit_code) {
  CLI::App app{
      "benchd_loadgen: one unary client process of bench/load (see load.py --api cpp), or with "
      "--watchers the process that holds the Watch streams (load.py --watchers-from cpp)"};
  Plan plan;
  std::string mix = "GetJob=6,ListJobs=3,GetNodeInfo=1", job_ids, page_tokens, watch_ids;
  double hold_s = 0;
  app.add_option("--address", plan.address, "the daemon's HOST:PORT")->required();
  app.add_option("--out", plan.out_dir, "folder for the latencies and failures")
      ->required()
      ->check(CLI::ExistingDirectory);
  // Unary mode.
  CLI::Option* index =
      app.add_option("--index", plan.index, "this client's number (spreads clients over the jobs)")
          ->check(CLI::NonNegativeNumber);
  CLI::Option* concurrency = app.add_option("--concurrency", plan.concurrency, "calls in flight")
                                 ->check(CLI::Range(1, 100000));
  CLI::Option* mix_opt = app.add_option("--mix", mix, "call kinds and their weights");
  CLI::Option* job_ids_opt =
      app.add_option("--job-ids", job_ids, "file: GetJob's job ids, one a line (unary mode)");
  CLI::Option* tokens_opt = app.add_option(
      "--page-tokens", page_tokens,
      "file: ListJobs' page tokens, one a line (the first page's is an empty line; unary mode)");
  CLI::Option* page_size = app.add_option("--page-size", plan.page_size, "ListJobs page size")
                               ->check(CLI::Range(0, 1000));
  // Watcher mode.
  CLI::Option* watchers =
      app.add_option("--watchers", plan.watchers,
                     "hold this many Watch streams instead of sending the unary mix")
          ->check(CLI::Range(1, 1000000));
  CLI::Option* watch_ids_opt =
      app.add_option("--watch-ids", watch_ids,
                     "file: the jobs to watch, one id a line; stream i watches line "
                     "i mod their count (watcher mode)");
  CLI::Option* channels =
      app.add_option("--watch-channels", plan.watch_channels,
                     "TCP connections the streams are spread over, round-robin (watcher mode)")
          ->check(CLI::Range(1, 10000));
  CLI::Option* open_timeout =
      app.add_option("--open-timeout", plan.open_timeout_s,
                     "seconds to wait for every stream's first event (watcher mode)")
          ->check(CLI::Range(0.001, 3600.0));
  CLI::Option* hold = app.add_option("--hold", hold_s,
                                     "open at once, hold this many seconds, stop and print a "
                                     "summary: no stdin protocol (watcher mode)")
                          ->check(CLI::Range(0.0, 86400.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return absl::InvalidArgumentError("");
  }
  *exit_code = 2;
  // Options that belong to the other mode are refused, naming them.
  auto given = [](std::initializer_list<CLI::Option*> opts) {
    std::vector<std::string> names;
    for (CLI::Option* o : opts) {
      if (o->count() > 0) names.push_back(o->get_name());
    }
    return absl::StrJoin(names, ", ");
  };
  if (watchers->count() > 0) {
    if (std::string other =
            given({index, concurrency, mix_opt, job_ids_opt, tokens_opt, page_size});
        !other.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          other,
          ": unary-mode options; --watchers runs the watcher mode, which sends no unary "
          "calls (run a second benchd_loadgen for those)"));
    }
    if (watch_ids_opt->count() == 0) {
      return absl::InvalidArgumentError("--watchers: needs --watch-ids FILE (the jobs to watch)");
    }
    if (plan.watch_channels > plan.watchers) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--watch-channels: ", plan.watch_channels, " channels for ", plan.watchers,
          " watchers would leave channels without a stream; give at most ", plan.watchers));
    }
    absl::StatusOr<std::vector<std::string>> ids = ReadLines("--watch-ids", watch_ids);
    if (!ids.ok()) return ids.status();
    ids->erase(std::remove(ids->begin(), ids->end(), ""), ids->end());
    if (ids->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--watch-ids: '", watch_ids, "' has no job id"));
    }
    plan.watch_ids = *std::move(ids);
    if (hold->count() > 0) plan.hold_s = hold_s;
    return plan;
  }
  if (std::string other = given({watch_ids_opt, channels, open_timeout, hold}); !other.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(other, ": watcher-mode options; give --watchers N to hold Watch streams"));
  }
  if (job_ids_opt->count() == 0 || tokens_opt->count() == 0) {
    return absl::InvalidArgumentError(
        "unary mode needs --job-ids FILE and --page-tokens FILE (or --watchers N for the "
        "watcher mode)");
  }
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
  if (plan->watchers > 0) return WatchMain(*plan);
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

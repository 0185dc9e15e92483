#include "server/cluster/cluster_config.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include <sys/stat.h>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace benchd::server {
namespace {

absl::Status Bad(absl::string_view origin, absl::string_view what, absl::string_view got,
                 absl::string_view accepted) {
  return absl::InvalidArgumentError(
      absl::StrCat(origin, ": ", what, ": got '", got, "'; expected ", accepted));
}

// "host:port" with a port 1..65535; [v6]:port too.
absl::Status CheckHostPort(absl::string_view origin, const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(absl::string_view(address).substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return Bad(origin, "not an address", address, "HOST:PORT with a port 1..65535");
  }
  return absl::OkStatus();
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }
std::string PortOf(const std::string& address) { return address.substr(address.rfind(':') + 1); }

bool IsWildcardHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::" || host == "*";
}

// An integer variable or flag value in [lo, hi].
absl::StatusOr<int> ParseInt(absl::string_view origin, absl::string_view text, int lo, int hi) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return Bad(origin, "not an integer in range", text, absl::StrCat(lo, "..", hi));
  }
  return value;
}

// A variable the launcher must have set.
absl::StatusOr<std::string> Require(const ClusterEnvironment& env, const std::string& name,
                                    absl::string_view launcher) {
  std::optional<std::string> value = env(name);
  if (!value || value->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cluster-from ", launcher, ": ", name, " is not set; is this daemon started by ",
        launcher, "? (or give --cluster-coordinator, --node-rank and --nodes)"));
  }
  return *value;
}

}  // namespace

ClusterEnvironment ProcessClusterEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist,
                                                        absl::string_view origin) {
  std::vector<std::string> hosts;
  auto add = [&](std::string host) -> absl::Status {
    if (hosts.size() >= static_cast<size_t>(kMaxClusterNodes)) {
      return Bad(origin, "more hosts than a cluster may have", hostlist,
                 absl::StrCat("at most ", kMaxClusterNodes));
    }
    hosts.push_back(std::move(host));
    return absl::OkStatus();
  };
  size_t i = 0;
  while (i < hostlist.size()) {
    // One item: a prefix, then optionally "[ranges]" and a suffix, up to a
    // comma outside brackets.
    size_t end = i;
    int depth = 0;
    while (end < hostlist.size() && (hostlist[end] != ',' || depth > 0)) {
      if (hostlist[end] == '[') ++depth;
      if (hostlist[end] == ']' && --depth < 0) break;
      ++end;
    }
    if (depth != 0) return Bad(origin, "unbalanced brackets", hostlist, "a Slurm hostlist");
    const absl::string_view item = hostlist.substr(i, end - i);
    i = end + 1;
    if (item.empty()) continue;
    const size_t open = item.find('[');
    if (open == absl::string_view::npos) {
      if (auto s = add(std::string(item)); !s.ok()) return s;
      continue;
    }
    const size_t close = item.find(']', open);
    if (close == absl::string_view::npos || item.find('[', open + 1) != absl::string_view::npos) {
      return Bad(origin, "one bracket group per host expected", item, "e.g. gpu[01-03,7]");
    }
    const absl::string_view prefix = item.substr(0, open);
    const absl::string_view suffix = item.substr(close + 1);
    for (absl::string_view range : absl::StrSplit(item.substr(open + 1, close - open - 1), ',')) {
      const std::vector<absl::string_view> ends = absl::StrSplit(range, absl::MaxSplits('-', 1));
      int64_t lo = 0, hi = 0;
      const bool digits =
          !ends[0].empty() && absl::c_all_of(ends[0], absl::ascii_isdigit) &&
          (ends.size() == 1 || (!ends[1].empty() && absl::c_all_of(ends[1], absl::ascii_isdigit)));
      if (!digits || !absl::SimpleAtoi(ends[0], &lo) ||
          !absl::SimpleAtoi(ends.size() == 2 ? ends[1] : ends[0], &hi) || hi < lo) {
        return Bad(origin, "bad range", range, "N or N-M with N <= M, e.g. 01-03");
      }
      if (hi - lo >= kMaxClusterNodes) {
        return Bad(origin, "more hosts than a cluster may have", range,
                   absl::StrCat("at most ", kMaxClusterNodes));
      }
      const size_t width = ends[0].size();  // zero padding, as Slurm keeps it
      for (int64_t n = lo; n <= hi; ++n) {
        std::string number = absl::StrCat(n);
        if (number.size() < width) number.insert(0, width - number.size(), '0');
        if (auto s = add(absl::StrCat(prefix, number, suffix)); !s.ok()) return s;
      }
    }
  }
  if (hosts.empty()) return Bad(origin, "no hosts", hostlist, "a Slurm hostlist");
  return hosts;
}

absl::StatusOr<std::string> LoadClusterSecret(const std::string& path,
                                              const ClusterEnvironment& env) {
  const std::string how =
      "the same secret on every member: a file of one line (mode 0600 or 0640) or the "
      "variable BENCHD_CLUSTER_SECRET; the launchers make one (deploy/slurm/benchd.sbatch, "
      "deploy/kubernetes/cluster), or: head -c 32 /dev/urandom | base64 > FILE";
  std::string secret;
  std::string origin;
  if (!path.empty()) {
    origin = absl::StrCat("--cluster-secret-file ", path);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": not a readable file; expected ", how));
    }
    // Group-readable stays allowed: a Kubernetes Secret volume is 0440.
    if ((st.st_mode & 0026) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": others may read it or group or others may write it (mode ",
                       absl::StrFormat("%04o", st.st_mode & 07777),
                       "); whoever has it can join the cluster: chmod 600"));
    }
    std::ifstream in(path);
    std::getline(in, secret);
    if (!in && !in.eof()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": cannot read it"));
    }
  } else if (auto value = env("BENCHD_CLUSTER_SECRET"); value && !value->empty()) {
    origin = "BENCHD_CLUSTER_SECRET";
    secret = *value;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("a cluster member needs the cluster's secret (--cluster-secret-file FILE or "
                     "BENCHD_CLUSTER_SECRET), which it proves on every call to another member: ",
                     how));
  }
  secret = std::string(absl::StripAsciiWhitespace(secret));
  if (secret.size() < kMinClusterSecretBytes || secret.size() > kMaxClusterSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": a secret of ", secret.size(),
                                                   " bytes; expected ", kMinClusterSecretBytes,
                                                   "..", kMaxClusterSecretBytes, " (", how, ")"));
  }
  return secret;
}

std::string HostOfAddress(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

absl::StatusOr<ClusterOptions> ResolveClusterOptions(const ClusterFlags& flags,
                                                     const std::string& listen_address,
                                                     const std::string& hostname,
                                                     const ClusterEnvironment& env) {
  ClusterOptions options;
  const bool any_flag = !flags.coordinator.empty() || flags.rank || flags.nodes ||
                        !flags.name.empty() || !flags.advertise.empty() || flags.lost_after_s ||
                        !flags.secret_file.empty();
  if (flags.from.empty() && !any_flag) return options;  // a lone daemon
  options.enabled = true;
  const std::string port = PortOf(listen_address);
  if (PortOf(listen_address) == "0") {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", listen_address,
                     ": a cluster member needs a fixed port (its peers dial it), not 0"));
  }
  std::string self_host;  // from the launcher, when it names one
  if (flags.from == "slurm") {
    // The job's variables, not the step's: a daemon restarted alone (srun
    // -N1 -w node1 inside the job) sees SLURM_NODEID=0 and SLURM_NNODES=1 for
    // its one-node step. Its rank is its host's place in the job's node list.
    options.launcher = "slurm";
    auto nodelist = Require(env, "SLURM_JOB_NODELIST", "slurm");
    if (!nodelist.ok()) return nodelist.status();
    auto hosts = ExpandHostlist(*nodelist, "SLURM_JOB_NODELIST");
    if (!hosts.ok()) return hosts.status();
    options.nodes = static_cast<int>(hosts->size());
    if (auto n = env("SLURM_JOB_NUM_NODES"); n && !n->empty()) {
      auto parsed = ParseInt("SLURM_JOB_NUM_NODES", *n, 1, kMaxClusterNodes);
      if (!parsed.ok()) return parsed.status();
      if (*parsed != options.nodes) {
        return absl::InvalidArgumentError(absl::StrCat("SLURM_JOB_NUM_NODES is ", *parsed,
                                                       " but SLURM_JOB_NODELIST '", *nodelist,
                                                       "' names ", options.nodes, " hosts"));
      }
    }
    options.coordinator = absl::StrCat(hosts->front(), ":", port);
    if (auto host = env("SLURMD_NODENAME"); host && !host->empty()) {
      self_host = *host;
      auto at = std::find(hosts->begin(), hosts->end(), *host);
      if (at == hosts->end()) {
        return absl::InvalidArgumentError(absl::StrCat("SLURMD_NODENAME ", *host,
                                                       " is not in SLURM_JOB_NODELIST '", *nodelist,
                                                       "': is this daemon a step of that job?"));
      }
      options.rank = static_cast<int>(at - hosts->begin());
    } else {
      auto rank = Require(env, "SLURM_NODEID", "slurm");
      if (!rank.ok()) return rank.status();
      auto parsed_rank = ParseInt("SLURM_NODEID", *rank, 0, kMaxClusterNodes - 1);
      if (!parsed_rank.ok()) return parsed_rank.status();
      options.rank = *parsed_rank;
      if (options.rank < options.nodes) self_host = (*hosts)[options.rank];
    }
  } else if (flags.from == "kubernetes") {
    options.launcher = "kubernetes";
    auto index = Require(env, "JOB_COMPLETION_INDEX", "kubernetes");
    if (!index.ok()) return index.status();
    auto parsed_rank = ParseInt("JOB_COMPLETION_INDEX", *index, 0, kMaxClusterNodes - 1);
    if (!parsed_rank.ok()) return parsed_rank.status();
    options.rank = *parsed_rank;
    if (!flags.nodes) {
      auto n = Require(env, "BENCHD_NODES", "kubernetes");
      if (!n.ok()) return n.status();
      auto parsed = ParseInt("BENCHD_NODES", *n, 1, kMaxClusterNodes);
      if (!parsed.ok()) return parsed.status();
      options.nodes = *parsed;
    }
    auto service = Require(env, "BENCHD_CLUSTER_SERVICE", "kubernetes");
    if (!service.ok()) return service.status();
    auto job = Require(env, "BENCHD_CLUSTER_JOB", "kubernetes");
    if (!job.ok()) return job.status();
    options.coordinator = absl::StrCat(*job, "-0.", *service, ":", port);
    std::string pod = hostname;
    if (auto h = env("HOSTNAME"); h && !h->empty()) pod = *h;
    self_host = absl::StrCat(pod, ".", *service);
  } else if (flags.from.empty()) {
    options.launcher = "flags";
    if (flags.coordinator.empty() || !flags.rank || !flags.nodes) {
      return absl::InvalidArgumentError(
          "a cluster member needs --cluster-coordinator HOST:PORT, --node-rank N and --nodes M "
          "together (or --cluster-from slurm|kubernetes)");
    }
  } else {
    return Bad("--cluster-from", "unknown launcher", flags.from, "slurm or kubernetes");
  }
  if (!flags.coordinator.empty()) options.coordinator = flags.coordinator;
  if (auto s = CheckHostPort("--cluster-coordinator", options.coordinator); !s.ok()) return s;
  if (flags.nodes) {
    auto n = ParseInt("--nodes", absl::StrCat(*flags.nodes), 1, kMaxClusterNodes);
    if (!n.ok()) return n.status();
    options.nodes = *n;
  }
  if (flags.rank) options.rank = *flags.rank;
  if (options.rank < 0 || options.rank >= options.nodes) {
    return Bad("--node-rank", "not a rank of the cluster", absl::StrCat(options.rank),
               absl::StrCat("0..", options.nodes - 1, " (--nodes ", options.nodes, ")"));
  }
  options.name = flags.name.empty() ? absl::StrCat("node", options.rank) : flags.name;
  if (auto s = CheckNodeName("--node-name", options.name); !s.ok()) return s;
  if (!flags.advertise.empty()) {
    options.advertise = flags.advertise;
  } else if (!self_host.empty()) {
    options.advertise = absl::StrCat(self_host, ":", port);
  } else {
    const std::string host = HostOf(listen_address);
    options.advertise = absl::StrCat(IsWildcardHost(host) ? hostname : host, ":", port);
  }
  if (auto s = CheckHostPort("--advertise", options.advertise); !s.ok()) return s;
  auto secret = LoadClusterSecret(flags.secret_file, env);
  if (!secret.ok()) return secret.status();
  options.secret = *std::move(secret);
  if (flags.lost_after_s) {
    if (!(*flags.lost_after_s >= 2 && *flags.lost_after_s <= 3600)) {
      return Bad("--cluster-lost-after", "seconds out of range", absl::StrCat(*flags.lost_after_s),
                 "2..3600");
    }
    options.lost_after =
        std::chrono::milliseconds(static_cast<int64_t>(*flags.lost_after_s * 1000));
  }
  return options;
}

}  // namespace benchd::server

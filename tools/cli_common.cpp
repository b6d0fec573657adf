#include "tools/cli_common.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <stdexcept>

#include "sim/executors/hccl_algo.h"
#include "sim/perf/perf.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/rank_table.h"

namespace hcclsim {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string data_dir() {
  // HCCLSIM_DATA names it; an installed binary finds it beside itself
  // (PREFIX/bin/hcclsim -> PREFIX/share/hcclsim); a build tree's binary
  // falls back on the source it was built from.
  if (const char* env = std::getenv("HCCLSIM_DATA"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "hcclsim";
    if (std::filesystem::is_directory(installed / "configs", ec)) return installed.string();
  }
  return HCCLSIM_SOURCE_DIR;
}

std::string default_topology() { return data_dir() + "/configs/topologies/a2-server.json"; }

void TopologyOptions::declare(CommandOptions& app) {
  app.add_option("--topology", topology,
                 "topology JSON (default configs/topologies/a2-server.json); clusters: a2-cluster.json, "
                 "a2-cluster-oversubscribed.json, cloudmatrix384.json, cloudmatrix384x4.json")
      ->type_name("FILE");
  app.add_option("--profile", profile, "hardware profile JSON, replacing the one the topology names")
      ->type_name("FILE");
  app.add_option("--rank-table", rank_table,
                 "an HCCL rank table (1.0 A2, 1.2 A3) instead of --topology; needs --profile")
      ->type_name("FILE");
  servers_option = app.add_option("--servers", servers, "servers of a cluster topology (A3: in whole supernodes)")
                       ->type_name("N");
  app.add_option("--network", network,
                 "flow (default): a transfer's rate is its max-min fair share of the channels it crosses, "
                 "recomputed when a flow starts or ends; segment: transfers cross every channel as 64-256 KiB "
                 "segments (the reference model: finer sharing, far more events)")
      ->type_name("M");
  app.add_option("--segment", segment,
                 "segment model: cut transfers on every channel (links and on-chip memory) into segments of SIZE "
                 "instead of each channel's own (profile links.<kind>.segment). Where short flows share a port the "
                 "default segments are up to 20% off the model's converged times; 1KiB converges (docs/user-guide.md: segment "
                 "size) at many more events")
      ->type_name("SIZE");
  flow_quantum_option = app.add_option("--flow-quantum", flow_quantum,
                 "flow model: a group of at least 1024 flows coupled through full channels (the AIV flows of a "
                 "large MoE kernel) is re-solved at multiples of this time instead of at every start and drain; "
                 "a transfer may start up to one quantum late (default 1us, 0.1us for hcclsim moe low latency; 0 = solve "
                 "every change at once, exact)")
      ->type_name("TIME");
}

TopologySpec TopologyOptions::load(std::string* described) const {
  const std::optional<NetworkModel> model = parse_network_model(network);
  if (!model) throw InputError("option --network", "unknown network model '" + network + "'; expected flow or segment");
  TopologySpec spec = load_spec(described);
  spec.network = *model;
  if (!segment.empty()) {
    if (spec.network != NetworkModel::Segment) {
      throw InputError("option --segment", "sets the segment model's granularity; add --network segment");
    }
    const std::uint64_t bytes = checked_size("--segment", segment);
    if (bytes < kMinSegmentBytes) {
      throw InputError("option --segment", "a segment of " + std::to_string(bytes) + " bytes is too fine; expected at least " +
                                               std::to_string(kMinSegmentBytes) + " bytes");
    }
    set_segment_bytes(spec, bytes);
  }
  try {
    spec.flow_batching.quantum_ps = flow_quantum == "0" ? 0 : parse_time(flow_quantum).ps;
  } catch (const std::exception& e) {
    throw InputError("option --flow-quantum", std::string("expected a time such as 1us or 0: ") + e.what());
  }
  // A quantum is a delay a transfer may start late by: beyond a second it
  // would hold whole collectives back (a bound, not a tuning).
  if (spec.flow_batching.quantum_ps > Time::from_ns(1'000'000'000).ps) {
    throw InputError("option --flow-quantum", "at most 1s (a transfer may start up to one quantum late); got " + flow_quantum);
  }
  if (spec.flow_batching.quantum_ps == 0) spec.flow_batching.large_component = 0;
  return spec;
}

TopologySpec TopologyOptions::load_spec(std::string* described) const {
  const bool has_servers = servers_option && servers_option->count() > 0;
  if (has_servers) checked_int("--servers", servers, 1, 1 << 16);
  if (!rank_table.empty()) {
    if (!topology.empty()) throw InputError("option --rank-table", "give either --rank-table or --topology, not both");
    if (profile.empty()) throw InputError("option --rank-table", "a rank table needs --profile FILE (the hardware of its NPUs)");
    if (has_servers) throw InputError("option --servers", "the rank table already says how many servers there are");
    const HardwareProfile hw = load_profile(profile);
    const RankTable table = load_rank_table(rank_table, hw.npu.traits);
    if (described) *described = rank_table;
    try {
      return make_cluster(table.layout, hw);
    } catch (const std::invalid_argument& e) {
      throw InputError(rank_table, e.what());
    }
  }
  const std::string file = topology.empty() ? default_topology() : topology;
  if (described) *described = file;
  return load_topology(file, profile.empty() ? std::nullopt : std::optional<std::string>(profile),
                       has_servers ? servers : -1);
}

void MemoryLimit::declare(CommandOptions& app) {
  app.add_option("--max-memory", text,
                 "refuse, before it starts, a run estimated to need more memory than SIZE (default 16GiB)")
      ->type_name("SIZE");
}

std::uint64_t MemoryLimit::bytes() const {
  return text.empty() ? kMaxRunBytes : checked_size("--max-memory", text);
}

Platform& platform_kept_until_exit(const TopologySpec& spec) {
  static std::vector<Platform*> kept;  // deliberately leaked: see the header
  kept.push_back(new Platform(spec));
  return *kept.back();
}

int checked_int(const std::string& option, int value, int min, int max, const std::string& why) {
  if (value < min || value > max) {
    throw InputError("option " + option, "value " + std::to_string(value) +
                                             " is out of range; expected an integer in [" + std::to_string(min) +
                                             ", " + std::to_string(max) + "]" + (why.empty() ? "" : " (" + why + ")"));
  }
  return value;
}

int hccl_test_ranks(const TopologySpec& spec, const std::string& topology_file, std::optional<int> ranks,
                    std::optional<int> npus, int fallback) {
  if (ranks) {
    checked_int("--ranks", *ranks, 2, spec.npus,
                "topology " + topology_file + " has " + std::to_string(spec.npus) + " NPUs");
  }
  if (!npus) return ranks.value_or(fallback);
  const int servers = spec.npus_per_server > 0 ? (spec.npus + spec.npus_per_server - 1) / spec.npus_per_server : 1;
  if (servers > 1) {
    if (*npus != spec.npus_per_server) {
      throw InputError("option -p", "-p " + std::to_string(*npus) + " NPUs per server, but the servers of " +
                                        topology_file + " have " + std::to_string(spec.npus_per_server) +
                                        " NPUs; on a cluster -p must agree with the topology (--servers and "
                                        "--ranks choose how many take part)");
    }
    return ranks.value_or(fallback);
  }
  checked_int("-p", *npus, 2, spec.npus,
              "the NPUs of one server; topology " + topology_file + " has " + std::to_string(spec.npus));
  if (ranks && *ranks != *npus) {
    throw InputError("option -p", "-p " + std::to_string(*npus) + " and --ranks " + std::to_string(*ranks) +
                                      " disagree (on one server -p is the number of ranks)");
  }
  return *npus;
}

std::uint64_t checked_size(const std::string& option, const std::string& text) {
  try {
    return parse_size(text, /*allow_bare_bytes=*/true);
  } catch (const UnitError& e) {
    throw InputError("option " + option, e.what());
  }
}

void SizeSweepOptions::declare(CommandOptions& app) {
  app.add_option("-b,--minbytes", first, "smallest data_size (default 8K); K/M/G are binary as in hccl_test")
      ->type_name("SIZE");
  app.add_option("-e,--maxbytes", last, "largest data_size (default 64M)")->type_name("SIZE");
  app.add_option("-f,--stepfactor", factor, "multiply the size by FACTOR each step (default 2)")->type_name("FACTOR");
}

std::vector<std::uint64_t> SizeSweepOptions::sizes() const {
  const std::uint64_t from = checked_size("-b", first);
  const std::uint64_t to = checked_size("-e", last);
  checked_int("-f", factor, 1, 1 << 20);
  try {
    return perf_sizes(from, to, static_cast<std::uint64_t>(factor));
  } catch (const std::invalid_argument& e) {
    throw InputError("option -b/-e", e.what());
  }
}

DataType checked_data_type(const std::string& text) {
  const std::optional<DataType> dtype = parse_hccl_test_data_type(text);
  if (!dtype) throw InputError("option -d", "unknown value '" + text + "'; expected one of: " + join(data_type_names()));
  return *dtype;
}

AlgoRequest parse_algo(const std::string& text, CollOp op) {
  if (text.empty()) return {};
  try {
    return parse_hccl_algo(text, op);
  } catch (const std::invalid_argument& e) {
    throw InputError("option --algo", e.what());
  }
}


namespace {

namespace fs = std::filesystem;

// Where a replaceable output goes: `path`, or the regular file a link at it
// names; std::nullopt mode when it does not exist yet.
struct OutputTarget {
  std::string path;
  std::optional<mode_t> mode;
};

OutputTarget replaceable_target(const std::string& option, const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    struct stat link{};
    if (::lstat(path.c_str(), &link) == 0) throw InputError("option " + option, path + " is a link to nothing");
    const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
    if (::access(dir.c_str(), W_OK) != 0) {
      throw InputError("option " + option, "cannot write " + path + ": " + dir.string() + ": " + std::strerror(errno));
    }
    return {path, std::nullopt};
  }
  if (!S_ISREG(st.st_mode)) {
    throw InputError("option " + option, path + " exists and is not a regular file; give a new file, or a regular "
                                                 "file to replace");
  }
  std::error_code ec;
  const fs::path target = fs::canonical(path, ec);
  return {ec ? path : target.string(), st.st_mode & 07777};
}

// A new file beside `target` for its replacement, created (exclusively) with
// `mode`: its path.
std::string create_temporary_beside(const std::string& option, const std::string& path, const std::string& target,
                                    std::optional<mode_t> mode) {
  const fs::path final_path(target);
  const fs::path dir = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  for (int attempt = 0;; ++attempt) {
    const std::string temporary = (dir / ("." + final_path.filename().string() + ".tmp-" + std::to_string(::getpid()) +
                                          "-" + std::to_string(attempt)))
                                      .string();
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      if (mode) ::fchmod(fd, *mode);
      ::close(fd);
      return temporary;
    }
    if (errno != EEXIST || attempt == 100) {
      throw InputError("option " + option, "cannot write " + path + ": " + std::strerror(errno));
    }
  }
}

}  // namespace

void check_replaceable(const std::string& option, const std::string& path) { replaceable_target(option, path); }

void write_file_atomically(const std::string& option, const std::string& path, const std::string& text) {
  const OutputTarget target = replaceable_target(option, path);
  const auto failed = [&](const std::string& what) {
    return InputError("option " + option, "cannot write " + path + ": " + what);
  };
  const std::string temporary = create_temporary_beside(option, path, target.path, target.mode);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    throw failed(why);
  }
  std::string error;
  for (std::size_t done = 0; error.empty() && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) error = std::strerror(errno);
    else done += static_cast<std::size_t>(n);
  }
  if (error.empty() && ::fsync(fd) != 0) error = std::strerror(errno);
  if (::close(fd) != 0 && error.empty()) error = std::strerror(errno);
  if (error.empty() && ::rename(temporary.c_str(), target.path.c_str()) != 0) error = std::strerror(errno);
  if (!error.empty()) {
    ::unlink(temporary.c_str());
    throw failed(error);
  }
}

const char* const kScenarioHelp =
    "what-if scenario JSON (docs/user-guide.md, Scenarios; configs/scenarios/): links down or degraded (by kind, "
    "ranks, server, A3 UB plane), NICs down, A3 planes lost, slow ranks, per-task jitter. Runs healthy, then under "
    "the scenario, and reports both, the slowdown and the busiest links. Simplified: a link down is down from the "
    "start (no detection, no HCCL operator retry); through a leaf/spine fabric (A3 UB planes, RoCE spines) traffic "
    "takes the remaining spines; elsewhere (an A2 HCCS mesh link, a NIC) HCCL fails the operation: exit 1 with the "
    "reason. Jitter scales each task's own duration (a transfer's set-up, compute, delays), not the links' time";

void ScenarioOptions::declare(CommandOptions& app, bool with_seed) {
  app.add_option("--scenario", file, kScenarioHelp)->type_name("FILE");
  samples_option = app.add_option("--samples", samples,
                                  "with --scenario: draws of its random parts (jitter), reported as p50 / p90 / p99 / "
                                  "max beside the healthy time (default 1; at most 10000)")
                       ->type_name("N");
  if (with_seed) {
    seed_option = app.add_option("--seed", seed, "with --scenario: seed of its draws (default 1); same seed, same output")
                      ->type_name("S");
  }
}

std::optional<ScenarioSetup> ScenarioOptions::load(const TopologySpec& healthy, std::optional<std::uint64_t> seed_override) const {
  if (!given()) {
    for (const CommandOption* o : {samples_option, seed_option}) {
      if (o != nullptr && o->count() > 0) throw InputError("option " + o->get_name(), "needs --scenario FILE");
    }
    return std::nullopt;
  }
  if (samples < 1 || samples > 10000) {
    throw InputError("option --samples", "expected a number of draws in [1, 10000], got " + std::to_string(samples));
  }
  ScenarioSetup setup;
  setup.file = file;
  setup.healthy = healthy;
  const Scenario scenario = load_scenario(file);
  setup.applied = apply_scenario(scenario, healthy);
  setup.random = scenario.random();
  setup.samples = samples;
  setup.seed = seed_override ? *seed_override : parse_seed(seed);
  return setup;
}

std::uint64_t parse_seed(const std::string& text) {
  const bool digits = !text.empty() && text.size() <= 20 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE) {
    throw InputError("option --seed", "expected a non-negative integer below 2^64, got '" + text + "'");
  }
  return v;
}

void claim_output_path(const std::string& option, const std::string& path) {
  static std::map<std::string, std::string> claimed;  // resolved path -> option
  std::error_code ec;
  std::string key = fs::weakly_canonical(fs::path(path), ec).string();
  if (ec) key = path;
  const auto [at, added] = claimed.emplace(key, option);
  if (!added) {
    throw InputError("option " + option, path + " is also the file of " + at->second +
                                             "; give each output a file of its own");
  }
}


OutputFile::OutputFile(const std::string& option, const std::string& path) : option_(option), path_(path) {
  claim_output_path(option, path);
  const OutputTarget target = replaceable_target(option, path);
  target_ = target.path;
  temporary_ = create_temporary_beside(option, path, target_, target.mode);
  out_.open(temporary_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    ::unlink(temporary_.c_str());
    throw InputError("option " + option, "cannot write " + path);
  }
}

OutputFile::~OutputFile() {
  if (temporary_.empty()) return;
  out_.close();
  ::unlink(temporary_.c_str());
}

void OutputFile::close() {
  if (temporary_.empty()) return;
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok || out_.fail()) throw InputError("option " + option_, "writing " + path_ + " failed");
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    throw InputError("option " + option_, "cannot write " + path_ + ": " + std::strerror(errno));
  }
  temporary_.clear();
}

double WallClock::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void print_stats(const WallClock& clock, std::uint64_t tasks, std::uint64_t events) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double wall = clock.seconds();
  std::fprintf(stderr, "stats: wall %.3f s, %llu tasks, %llu events (%.3g events/s), peak RSS %.1f MiB\n", wall,
               static_cast<unsigned long long>(tasks), static_cast<unsigned long long>(events),
               wall > 0 ? static_cast<double>(events) / wall : 0.0, static_cast<double>(usage.ru_maxrss) / 1024.0);
}

void print_row_times(const std::vector<double>& seconds) {
  if (seconds.empty()) return;
  std::fprintf(stderr, "stats: per row: first %.3f ms", seconds.front() * 1e3);
  if (seconds.size() > 1) {
    std::vector<double> rest(seconds.begin() + 1, seconds.end());
    std::sort(rest.begin(), rest.end());
    const double median = rest.size() % 2 == 1 ? rest[rest.size() / 2]
                                                : (rest[rest.size() / 2 - 1] + rest[rest.size() / 2]) / 2;
    std::fprintf(stderr, "; the other %zu: median %.3f ms, max %.3f ms", rest.size(), median * 1e3, rest.back() * 1e3);
  }
  std::fprintf(stderr, "\n");
}

Progress::Progress(std::string what, std::size_t total, bool allowed)
    : what_(std::move(what)), total_(total), enabled_(allowed && ::isatty(STDERR_FILENO) == 1) {}

void Progress::step(const std::string& label) {
  ++count_;
  if (!enabled_ || clock_.seconds() < 2.0) return;
  std::fprintf(stderr, "\r\033[K%s: %zu/%zu done (%s), %.1f s", what_.c_str(), count_, total_, label.c_str(),
               clock_.seconds());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::done() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace hcclsim

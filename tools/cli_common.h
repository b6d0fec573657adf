// Helpers shared by the subcommands: the topology options every simulating
// command takes, option checks whose errors name the option, output files
// opened before a run, timing and peak-memory figures.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/executors/hierarchy.h"
#include "sim/scenario/scenario_run.h"
#include "base/error.h"
#include "sim/trace.h"
#include "tools/command_options.h"
#include "topologies/platform.h"

namespace hcclsim {

std::string join(const std::vector<std::string>& items);
// Where the configs are: $HCCLSIM_DATA, else PREFIX/share/hcclsim beside an
// installed binary, else the source tree the binary was built from.
std::string data_dir();
std::string default_topology();

// --topology FILE (default the A2 server) with --profile and --servers, or
// --rank-table FILE with --profile (the profile's NPU model says A2 or A3).
struct TopologyOptions {
  std::string topology;
  std::string profile;
  std::string rank_table;
  int servers = -1;
  std::string network = "flow";
  std::string flow_quantum = "1us";
  std::string segment;  // empty: each channel's own segment size
  CommandOption* servers_option = nullptr;
  CommandOption* flow_quantum_option = nullptr;
  bool flow_quantum_given() const { return flow_quantum_option != nullptr && flow_quantum_option->count() > 0; }

  void declare(CommandOptions& app);
  // `described` names the topology for headings and messages.
  TopologySpec load(std::string* described) const;

 private:
  TopologySpec load_spec(std::string* described) const;
};

// --scenario FILE with --samples N and --seed S (perf, moe, run; a `step`
// command declares and loads it the same way and runs its workload through
// run_scenario): what-if studies (topologies/scenario.h, docs/user-guide.md
// "Scenarios"). moe has a --seed of its own (routing), which then seeds the
// draws too: declare(app, false).
struct ScenarioOptions {
  std::string file;
  int samples = 1;
  std::string seed = "1";
  CommandOption* samples_option = nullptr;
  CommandOption* seed_option = nullptr;
  void declare(CommandOptions& app, bool with_seed = true);
  bool given() const { return !file.empty(); }
  // The setup on `healthy` (the scenario read and applied), or none without
  // --scenario; `seed` replaces --seed when the command has its own. Errors
  // name the scenario file and JSON path, or the option (InputError).
  std::optional<ScenarioSetup> load(const TopologySpec& healthy, std::optional<std::uint64_t> seed = {}) const;
};
// The words a --help gives about scenarios (what is modelled, what is not).
extern const char* const kScenarioHelp;

// hccl_test's sweep options -b/--minbytes, -e/--maxbytes, -f/--stepfactor
// (perf, recommend): sizes() is the sweep, its errors naming the option.
struct SizeSweepOptions {
  std::string first = "8K";
  std::string last = "64M";
  int factor = 2;
  void declare(CommandOptions& app);
  std::vector<std::uint64_t> sizes() const;
};

// -d/--datatype: hccl_test's names (fp16, bfp16, ...); InputError naming -d.
DataType checked_data_type(const std::string& text);

// --max-memory SIZE: the estimate above which a run is refused before it
// allocates anything (default 16 GiB, sim/perf/perf.h kMaxRunBytes).
struct MemoryLimit {
  std::string text;
  void declare(CommandOptions& app);
  std::uint64_t bytes() const;
};

// The platform of a command, built on the heap and never destroyed: SystemC
// removes each module from a flat list as it is destroyed, which takes
// quadratic time (minutes for a million channels), so hcclsim ends with
// std::_Exit after flushing its outputs (tools/hcclsim_main.cpp) instead of
// tearing the platform down.
Platform& platform_kept_until_exit(const TopologySpec& spec);

// `value` when the option was given.
inline std::optional<int> given(const CommandOption* option, int value) {
  return option->count() > 0 ? std::optional<int>(value) : std::nullopt;
}

// The ranks of an hccl_test-style run on `spec` (read from `topology_file`):
// --ranks N (2..NPUs), and hccl_test's -p N, its NPUs per server: on one
// server the ranks (--ranks must agree), on a cluster it must equal the
// topology's NPUs per server and leaves the ranks to --ranks. `fallback`
// when neither sets them. Errors name the option.
int hccl_test_ranks(const TopologySpec& spec, const std::string& topology_file, std::optional<int> ranks,
                    std::optional<int> npus, int fallback);

// An integer option within [min, max]; the error names the option and why.
int checked_int(const std::string& option, int value, int min, int max, const std::string& why = "");
// A size option ("8K", "64MiB", bytes); the error names the option.
std::uint64_t checked_size(const std::string& option, const std::string& text);
// --seed: decimal digits within 64 bits, else InputError naming the option.
std::uint64_t parse_seed(const std::string& text);
AlgoRequest parse_algo(const std::string& text, CollOp op);

// An output file opened (and so created or truncated) before the run starts,
// so that a bad path fails at once with exit code 2, not after an hour of
// simulation. close() reports a failed write as InputError too.
// An output file given by an option (--out, --trace, --links, ...), written
// whole or not at all: it is checked at once (a bad path fails before the
// run; a path that exists and is not a regular file is refused), written to
// a temporary file beside it, and renamed over it by close(). Destroyed
// without close() (a failed run), it removes its temporary file and leaves
// the path as it was.
// Claims `path` for the output of `option`: a second output to the same file
// (`--out x --trace x`, or through a link) is refused, naming both options.
void claim_output_path(const std::string& option, const std::string& path);

class OutputFile {
 public:
  OutputFile(const std::string& option, const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  std::ostream& stream() { return out_; }
  void close();
  const std::string& path() const { return path_; }

 private:
  std::string option_;
  std::string path_;
  std::string target_;     // path_, or the regular file a link at it names
  std::string temporary_;  // beside it; empty once renamed
  std::ofstream out_;
};

// A file written whole or not at all: `text` goes to a temporary file beside
// `path` that is renamed over it once written, so a failure leaves `path` as
// it was (a link is followed: its target is replaced). A `path` that exists
// and is not a regular file (a directory, a FIFO, /dev/null) is refused, as
// is one that cannot be written; errors name `option` (`--out`).
// check_replaceable() refuses the same before any work is done.
void check_replaceable(const std::string& option, const std::string& path);
void write_file_atomically(const std::string& option, const std::string& path, const std::string& text);

struct WallClock {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double seconds() const;
};
// "wall 0.84 s, 12345 tasks, 2.1e6 events (2.5e6 events/s), peak RSS 45.2 MiB" to stderr.
void print_stats(const WallClock& clock, std::uint64_t tasks, std::uint64_t events);
// "stats: per row: first X ms; the other N: median Y ms, max Z ms": wall time
// spent producing each row of this process, in row order. The first row
// carries what is built once (a topology's tables, an estimate's caches).
void print_row_times(const std::vector<double>& seconds);

// A live "what: 3/14 ..." line on stderr, shown only when stderr is a
// terminal and the work has taken more than two seconds; cleared at the end.
class Progress {
 public:
  Progress(std::string what, std::size_t total, bool allowed);
  void step(const std::string& label);
  void done();
  ~Progress() { done(); }
  double seconds() const { return clock_.seconds(); }

 private:
  std::string what_;
  std::size_t total_;
  std::size_t count_ = 0;
  bool enabled_;
  bool shown_ = false;
  WallClock clock_;
};

}  // namespace hcclsim

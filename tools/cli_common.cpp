#include "tools/cli_common.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "sim/collectives/hccl_algo.h"
#include "sim/error.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/rank_table.h"

namespace hcclsim {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string default_topology() {
  // Next to the build tree's source, so `build/hcclsim perf all_reduce` works from anywhere.
  return std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-server.json";
}

Args::Args(std::vector<std::string> words, std::vector<std::string> flags)
    : words_(std::move(words)), flags_(std::move(flags)), used_(words_.size(), false) {}

std::string Args::positional(const std::string& what, const std::string& command) {
  for (std::size_t i = 0; i < words_.size(); ++i) {
    if (used_[i]) continue;
    if (!words_[i].empty() && words_[i][0] == '-') {
      if (std::find(flags_.begin(), flags_.end(), words_[i]) == flags_.end()) ++i;  // skip the option's value
      continue;
    }
    used_[i] = true;
    return words_[i];
  }
  throw InputError(what, "missing " + what + " after '" + command + "'");
}

std::optional<std::string> Args::optional(const std::string& name) {
  std::optional<std::string> found;
  for (std::size_t i = 0; i < words_.size(); ++i) {
    if (words_[i] != name || used_[i]) continue;
    if (i + 1 >= words_.size()) throw InputError("option " + name, "expects a value");
    used_[i] = used_[i + 1] = true;
    found = words_[i + 1];
  }
  return found;
}

std::string Args::value(const std::string& name, const std::string& fallback) {
  return optional(name).value_or(fallback);
}

bool Args::flag(const std::string& name) {
  bool found = false;
  for (std::size_t i = 0; i < words_.size(); ++i) {
    if (words_[i] == name && !used_[i]) {
      used_[i] = true;
      found = true;
    }
  }
  return found;
}

int Args::int_in(const std::string& name, int min, int max, int fallback, const std::string& why) {
  const std::optional<std::string> text = optional(name);
  if (!text) return fallback;
  std::size_t used = 0;
  long v = 0;
  try {
    v = std::stol(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text->size() || text->empty()) throw InputError("option " + name, "expected an integer, got '" + *text + "'");
  if (v < min || v > max) {
    throw InputError("option " + name, "value " + *text + " is out of range; expected an integer in [" +
                                           std::to_string(min) + ", " + std::to_string(max) + "]" +
                                           (why.empty() ? "" : " (" + why + ")"));
  }
  return static_cast<int>(v);
}

std::uint64_t Args::size(const std::string& name, std::uint64_t fallback) {
  const std::optional<std::string> text = optional(name);
  if (!text) return fallback;
  try {
    return parse_size(*text, /*allow_bare_bytes=*/true);
  } catch (const UnitError& e) {
    throw InputError("option " + name, e.what());
  }
}

void Args::finish() const {
  for (std::size_t i = 0; i < words_.size(); ++i) {
    if (!used_[i]) throw InputError("command line", "unexpected argument '" + words_[i] + "' (see hcclsim help)");
  }
}

AlgoRequest parse_algo(const std::optional<std::string>& text, CollOp op) {
  if (!text) return {};
  try {
    return parse_hccl_algo(*text, op);
  } catch (const std::invalid_argument& e) {
    throw InputError("option --algo", e.what());
  }
}

TopologySpec topology_from_args(Args& args, std::string* described) {
  const std::optional<std::string> rank_table = args.optional("--rank-table");
  const std::optional<std::string> profile = args.optional("--profile");
  const std::optional<std::string> topology = args.optional("--topology");
  const int servers = args.int_in("--servers", 1, 1 << 16, -1, "");
  const auto network = args.choice("--network", {"segment", "flow"}, "flow", parse_network_model);
  if (rank_table) {
    if (topology) throw InputError("option --rank-table", "give either --rank-table or --topology, not both");
    if (!profile) throw InputError("option --rank-table", "a rank table needs --profile FILE (the hardware of its NPUs)");
    if (servers > 0) throw InputError("option --servers", "the rank table already says how many servers there are");
    const HardwareProfile hw = load_profile(*profile);
    const std::string kind = hw.npu.model == "910C" ? "a3" : "a2";
    const RankTable table = load_rank_table(*rank_table, kind);
    if (described) *described = *rank_table;
    try {
      TopologySpec spec = make_cluster(table.layout, hw);
      spec.network = network;
      return spec;
    } catch (const std::invalid_argument& e) {
      throw InputError(*rank_table, e.what());
    }
  }
  const std::string file = topology.value_or(default_topology());
  if (described) *described = file;
  TopologySpec spec = load_topology(file, profile, servers);
  spec.network = network;
  return spec;
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

void write_trace(const TraceWriter& trace, const std::string& file) {
  std::ofstream out(file);
  if (!out) throw InputError("option --trace", "cannot write " + file);
  trace.write(out);
}

int run_command(const std::vector<std::string>& words, const std::function<int(const std::string&, Args&)>& body) {
  try {
    Args args(std::vector<std::string>(words.begin() + 1, words.end()), {"--no-check", "--stats"});
    return body(words[0], args);
  } catch (const InputError& e) {
    std::cerr << "hcclsim: error: " << e.what() << "\n";
    return 2;
  } catch (const GraphError& e) {
    std::cerr << "hcclsim: " << e.what() << "\n";
    return 1;
  } catch (const std::invalid_argument& e) {
    std::cerr << "hcclsim: error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace hcclsim

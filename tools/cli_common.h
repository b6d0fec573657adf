// Small helpers shared by the command-line entry points: option parsing
// with errors that name the option, timing and peak-memory figures, and the
// one place that maps exceptions to exit codes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/collectives/hierarchy.h"
#include "sim/error.h"
#include "sim/trace.h"
#include "topologies/platform.h"

namespace hcclsim {

std::string join(const std::vector<std::string>& items);
std::string default_topology();

// Options are "--name value" or "-x value"; the flags named at construction
// take no value. Every word must be consumed; finish() refuses the rest.
class Args {
 public:
  Args(std::vector<std::string> words, std::vector<std::string> flags);
  std::string positional(const std::string& what, const std::string& command);
  std::optional<std::string> optional(const std::string& name);
  std::string value(const std::string& name, const std::string& fallback);
  bool flag(const std::string& name);
  int int_in(const std::string& name, int min, int max, int fallback, const std::string& why);
  std::uint64_t size(const std::string& name, std::uint64_t fallback);
  template <typename E>
  E choice(const std::string& name, const std::vector<std::string>& names, const std::string& fallback,
           std::optional<E> (*parse)(const std::string&));
  void finish() const;

 private:
  std::vector<std::string> words_;
  std::vector<std::string> flags_;
  std::vector<bool> used_;
};

AlgoRequest parse_algo(const std::optional<std::string>& text, CollOp op);

// The topology the options describe: --topology FILE (default the A2 server)
// with --profile and --servers, or --rank-table FILE with --profile (the
// profile's NPU model says A2 or A3), and --network segment|flow.
// `described` names it for headings.
TopologySpec topology_from_args(Args& args, std::string* described);

struct WallClock {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double seconds() const;
};
// "wall 0.84 s, 12345 tasks, 2.1e6 events (2.5e6 events/s), peak RSS 45.2 MiB" to stderr.
void print_stats(const WallClock& clock, std::uint64_t tasks, std::uint64_t events);
void write_trace(const TraceWriter& trace, const std::string& file);

// Runs `body(words[0], args)`; maps InputError to exit 2 and GraphError to 1,
// with the message on stderr.
int run_command(const std::vector<std::string>& words, const std::function<int(const std::string&, Args&)>& body);

template <typename E>
E Args::choice(const std::string& name, const std::vector<std::string>& names, const std::string& fallback,
               std::optional<E> (*parse)(const std::string&)) {
  const std::string text = value(name, fallback);
  const std::optional<E> parsed = parse(text);
  if (!parsed) throw InputError("option " + name, "unknown value '" + text + "'; expected one of: " + join(names));
  return *parsed;
}

}  // namespace hcclsim

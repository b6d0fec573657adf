// Scenarios: what-if studies of a topology (docs/user-guide.md,
// "Scenarios"). A scenario file says which links are down or degraded,
// which NICs are down, which A3 UB planes are lost, which ranks are slow and
// how much every task's duration jitters. Read here (the reader layer: the
// only place that sees its JSON) into a typed Scenario, then applied to a
// topology's typed parameters (apply_scenario): link bandwidths, latencies
// and states, per-NPU parameters and the jitter, which the platform and the
// scheduler take as they take any topology (LinkSpec::down,
// TopologySpec::npu_overrides, TopologySpec::jitter). Nothing downstream
// branches on "a scenario is given".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/units.h"
#include "models/npu/task_timing.h"
#include "topologies/platform_spec.h"

namespace hcclsim {

// Which links an entry of "links" changes: every given key must hold.
struct LinkSelector {
  std::optional<std::string> kind;              // "hccs", "sio", "ub", "roce"
  std::optional<std::pair<int, int>> between;   // the link joining these two ranks
  std::optional<int> rank;                      // links with this rank at one end
  std::optional<int> server;                    // links of this server (both ends inside it, or one end a switch)
  std::optional<int> plane;                     // A3: the server switches' links to UB L2 switch k (plane k)
};

struct LinkChange {
  LinkSelector select;
  bool down = false;
  double bandwidth_factor = 1.0;   // every rate of the link (bandwidth, write and SDMA caps) times this
  Time extra_latency;
  std::string path;                // "$.links[2]", for messages
};

struct SlowRank {
  int rank = 0;
  double compute_factor = 1.0;     // Compute tasks take this many times as long
  Time extra_delay;                // before every task of the rank's streams
  std::string path;
};

struct Scenario {
  std::string file;
  std::string description;
  std::vector<LinkChange> links;
  std::vector<std::pair<int, std::string>> nics_down;     // (rank, JSON path)
  std::vector<std::pair<int, std::string>> planes_lost;   // (plane, JSON path)
  std::vector<SlowRank> slow_ranks;
  TaskJitter jitter;               // seed and draw are the run's (--seed)
  bool random() const { return jitter.active(); }
};

// Bounds of the reader (exit 2 beyond them).
constexpr double kMaxBandwidthFactor = 64.0;
constexpr double kMaxComputeFactor = 1000.0;
constexpr std::uint64_t kMaxExtraLatencyPs = 1000ULL * 1000 * 1000 * 1000;  // 1 s
constexpr std::size_t kMaxScenarioEntries = 100000;

// Reads a scenario file; errors name the file and the JSON path (InputError).
Scenario load_scenario(const std::string& file);
Scenario read_scenario(const nlohmann::json& doc, const std::string& file);

// A topology with a scenario applied, and what changed, one line each
// ("hccs npu0<->npu1 down", "plane 3 lost: 2 ub links down", ...).
struct AppliedScenario {
  TopologySpec spec;
  std::vector<std::string> changes;
};
// Applies `scenario` to `healthy`. A selector that matches no link, a rank
// or plane the topology does not have, is bad input (InputError naming the
// scenario file and the JSON path).
AppliedScenario apply_scenario(const Scenario& scenario, const TopologySpec& healthy);

}  // namespace hcclsim

// Running a workload under a scenario (topologies/scenario.h): once on the
// healthy parameters, then on the scenario's, `samples` times when the
// scenario has random parts (each draw its own jitter), and the figures
// beside each other: the healthy time, p50 / p90 / p99 / max of the
// draws, the slowdown and the busiest link of each. The commands (perf,
// moe, run; a `step` command the same way) give the workload as a function
// that runs it once on the platform as it is set and tells its time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/units.h"
#include "topologies/platform.h"
#include "topologies/scenario.h"

namespace hcclsim {

struct ScenarioSetup {
  std::string file;                 // the scenario file, for reports
  TopologySpec healthy;
  AppliedScenario applied;
  bool random = false;              // the scenario draws (jitter)
  int samples = 1;                  // --samples (draws of the random parts)
  std::uint64_t seed = 0;           // --seed
};

// One run of the workload: its time and the busiest link during it.
struct ScenarioPoint {
  Time time;
  std::string bottleneck;           // "hccs npu0->npu1 (62.5% busy)"; "" when no link carried bytes
};

struct ScenarioOutcome {
  std::string file;
  std::vector<std::string> changes;
  int samples = 1;                  // draws actually run (1 when nothing is random)
  std::uint64_t seed = 0;
  bool random = false;
  Time healthy;
  std::vector<Time> times;          // each draw's
  // Nearest-rank percentiles of the draws: the ceil(q * n)-th smallest.
  Time p50, p90, p99, max;
  double slowdown = 1.0;            // p50 / healthy
  std::string healthy_bottleneck;
  std::string bottleneck;           // of the draw whose time is p50
  int p50_draw = 0;                 // the first draw whose time is p50
};

// Sets the platform to draw `draw` of the scenario (run_scenario's own
// setting for that draw), e.g. to run the p50 draw again with a trace.
void set_scenario_draw(Platform& platform, const ScenarioSetup& setup, int draw);

// The q-th nearest-rank percentile (0 < q <= 1) of `times` (not empty).
Time nearest_rank(std::vector<Time> times, double q);

// Runs `once` on the healthy parameters, then on the scenario's, and puts
// the platform back to the healthy ones. An OperationFailed from a run on
// the scenario (a link down with no other path) is thrown on, its message
// prefixed with the scenario file.
ScenarioOutcome run_scenario(Platform& platform, const ScenarioSetup& setup,
                             const std::function<ScenarioPoint()>& once);

// "hccs npu0->npu1 (62.5% busy)", or "" for an empty label.
std::string bottleneck_label(const std::string& busiest, double utilization);

}  // namespace hcclsim

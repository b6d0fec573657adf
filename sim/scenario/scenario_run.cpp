#include "sim/scenario/scenario_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace hcclsim {

Time nearest_rank(std::vector<Time> times, double q) {
  std::sort(times.begin(), times.end());
  const auto n = static_cast<double>(times.size());
  auto k = static_cast<std::size_t>(std::ceil(q * n));
  k = std::min(std::max<std::size_t>(k, 1), times.size());
  return times[k - 1];
}

std::string bottleneck_label(const std::string& busiest, double utilization) {
  if (busiest.empty()) return "";
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f", utilization * 100.0);
  return busiest + " (" + pct + "% busy)";
}

ScenarioOutcome run_scenario(Platform& platform, const ScenarioSetup& setup,
                             const std::function<ScenarioPoint()>& once) {
  ScenarioOutcome out;
  out.file = setup.file;
  out.changes = setup.applied.changes;
  out.random = setup.random;
  out.seed = setup.seed;
  out.samples = setup.random ? setup.samples : 1;  // without random parts every draw is the same run
  platform.set_parameters(setup.healthy);
  const ScenarioPoint healthy = once();
  out.healthy = healthy.time;
  out.healthy_bottleneck = healthy.bottleneck;
  std::vector<ScenarioPoint> points;
  try {
    for (int draw = 0; draw < out.samples; ++draw) {
      set_scenario_draw(platform, setup, draw);
      points.push_back(once());
    }
  } catch (const OperationFailed& e) {
    platform.set_parameters(setup.healthy);
    throw OperationFailed("scenario " + setup.file + ": " + e.what());
  }
  platform.set_parameters(setup.healthy);
  for (const ScenarioPoint& p : points) out.times.push_back(p.time);
  out.p50 = nearest_rank(out.times, 0.50);
  out.p90 = nearest_rank(out.times, 0.90);
  out.p99 = nearest_rank(out.times, 0.99);
  out.max = nearest_rank(out.times, 1.0);
  out.slowdown = out.healthy.ps == 0 ? 1.0 : static_cast<double>(out.p50.ps) / static_cast<double>(out.healthy.ps);
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (points[i].time == out.p50) {
      out.bottleneck = points[i].bottleneck;
      out.p50_draw = static_cast<int>(i);
      break;
    }
  }
  return out;
}

void set_scenario_draw(Platform& platform, const ScenarioSetup& setup, int draw) {
  TopologySpec spec = setup.applied.spec;
  spec.jitter.seed = setup.seed;
  spec.jitter.draw = static_cast<std::uint64_t>(draw);
  platform.set_parameters(spec);
}

}  // namespace hcclsim

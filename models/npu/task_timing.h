// Per-task jitter, a what-if of a scenario (docs/user-guide.md,
// "Scenarios"): each task's own duration scaled by a factor drawn from a
// distribution. Typed here, read from a scenario file by
// topologies/scenario, applied where a task's duration is fixed (the
// scheduler's compile, sim/scheduler.cpp) through jittered_span().
//
// The draws are a fixed function of (seed, draw, task id): a counter-based
// generator (splitmix64's finalizer over the three words) gives two
// uniforms of 53 bits each, and the distribution is made from them here
// (Box-Muller for the normal), never by std:: distributions, whose results
// differ between standard libraries. So a seed gives the same factors in
// any order of evaluation and on any library.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace hcclsim {

enum class JitterDistribution : std::uint8_t { None, Uniform, Normal, LogNormal };
const char* jitter_distribution_name(JitterDistribution d);  // "none", "uniform", "normal", "lognormal"

struct TaskJitter {
  JitterDistribution distribution = JitterDistribution::None;
  // uniform: the factor is uniform in [a, b); normal: mean a, standard
  // deviation b (a factor below 0 counts as 0); lognormal: exp(a + b N),
  // N standard normal (median factor exp(a)).
  double a = 0;
  double b = 0;
  std::uint64_t seed = 0;   // --seed
  std::uint64_t draw = 0;   // which of --samples runs this is
  bool active() const { return distribution != JitterDistribution::None; }
};

// A drawn factor is clamped to [0, kMaxJitterFactor] (a normal's negative
// tail gives 0: the task takes no time of its own).
constexpr double kMaxJitterFactor = 1000.0;
// The factor of task `task` (its id in the graph) in this draw.
double jitter_factor(const TaskJitter& jitter, std::uint64_t task);
// `span` times the factor, rounded to the nearest picosecond; `span` itself
// when the jitter is not active.
Time jittered_span(const TaskJitter& jitter, std::uint64_t task, Time span);

}  // namespace hcclsim

#include "models/npu/task_timing.h"

#include <cmath>
#include <limits>

namespace hcclsim {

namespace {
std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// In [0, 1), 53 bits.
double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }
}  // namespace

const char* jitter_distribution_name(JitterDistribution d) {
  switch (d) {
    case JitterDistribution::None: return "none";
    case JitterDistribution::Uniform: return "uniform";
    case JitterDistribution::Normal: return "normal";
    case JitterDistribution::LogNormal: return "lognormal";
  }
  return "none";
}

double jitter_factor(const TaskJitter& jitter, std::uint64_t task) {
  const std::uint64_t key = mix(mix(mix(jitter.seed) ^ jitter.draw) ^ task);
  const double u1 = unit(key);
  const double u2 = unit(mix(key));
  double factor = 1.0;
  switch (jitter.distribution) {
    case JitterDistribution::None: return 1.0;
    case JitterDistribution::Uniform: factor = jitter.a + (jitter.b - jitter.a) * u1; break;
    case JitterDistribution::Normal:
    case JitterDistribution::LogNormal: {
      // Box-Muller: 1 - u1 is in (0, 1], so its logarithm is finite.
      const double n = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
      factor = jitter.distribution == JitterDistribution::Normal ? jitter.a + jitter.b * n
                                                                 : std::exp(jitter.a + jitter.b * n);
      break;
    }
  }
  if (!(factor > 0)) return 0.0;  // (NaN too)
  return factor < kMaxJitterFactor ? factor : kMaxJitterFactor;
}

Time jittered_span(const TaskJitter& jitter, std::uint64_t task, Time span) {
  if (!jitter.active() || span.ps == 0) return span;
  // (a span is at most ~2^53 ps in practice; x 1000 stays far below 2^64)
  const double ps = std::floor(static_cast<double>(span.ps) * jitter_factor(jitter, task) + 0.5);
  return Time{ps < 1.8e19 ? static_cast<std::uint64_t>(ps) : std::numeric_limits<std::uint64_t>::max()};
}

}  // namespace hcclsim

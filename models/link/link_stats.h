// What a link direction (a channel) did, as counters since the platform was
// built: bytes it carried, time it was busy serializing (or holding a segment
// until its tail arrived), and the most flows it had at once (flows with
// bytes waiting at it or in service) since the peak was last reset. Any link
// model fills it (the segment model in channel.h; a flow-level model the
// same way), and sim/report/link_stats.h turns deltas of it into per-run
// utilization.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace hcclsim {

struct LinkStats {
  std::uint64_t bytes = 0;
  Time busy;
  std::uint32_t peak_flows = 0;
};

}  // namespace hcclsim

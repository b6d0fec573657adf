// A run's link usage: every link direction's (channel's) bytes, busy time,
// utilization (busy / the run's elapsed time) and peak concurrent flows, as
// the delta of the link model's counters (models/link/link_stats.h) over one
// run, and its summary (the busiest link, the bytes per link kind). Formats
// (JSON, --stats, --links CSV) are in sim/report/link_stats.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/link/link_stats.h"
#include "topologies/platform.h"

namespace hcclsim {

// busy / elapsed (0 for an empty run).
inline double busy_fraction(Time busy, Time elapsed) {
  return elapsed.ps == 0 ? 0.0 : static_cast<double>(busy.ps) / static_cast<double>(elapsed.ps);
}

struct LinkUsage {
  std::string label;       // "hccs npu0->npu1", "npu3 local memory"
  std::string kind;        // hccs, sio, ub, roce, memory
  std::uint64_t bytes = 0;
  Time busy;
  double utilization = 0;  // busy / elapsed of the run
  std::uint32_t peak_flows = 0;
};

struct LinkSummary {
  std::string busiest;                               // label of the most utilized link ("" when none carried bytes)
  double busiest_utilization = 0;
  std::map<std::string, std::uint64_t> bytes_by_kind;  // every kind of the platform, 0 when unused
};

// "hccs" of "hccs npu0->npu1", "memory" of "npu3 local memory".
std::string link_kind(const std::string& label);

// Snapshots every channel of a platform (links and on-chip memories) at
// start() and reports the difference at stop(): the links that carried bytes
// or were busy during the run, in platform order.
class LinkMeter {
 public:
  explicit LinkMeter(Platform& platform);
  void start();
  std::vector<LinkUsage> stop(Time elapsed) const;
  // The summary of the same interval, without building the list.
  LinkSummary summary(Time elapsed) const;

 private:
  std::vector<const Channel*> channels_;
  std::vector<Channel*> mutable_;
  std::vector<std::string> kinds_;
  std::vector<LinkStats> base_;
};

LinkSummary summarize_links(const std::vector<LinkUsage>& links);

}  // namespace hcclsim

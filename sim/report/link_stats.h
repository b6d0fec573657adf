// Link utilization per run: every link direction's (channel's) bytes, busy
// time, utilization (busy / the run's elapsed time) and peak concurrent
// flows, as the delta of the link model's counters (models/link/link_stats.h)
// over one run; a summary for JSON rows (the busiest link and the bytes per
// link kind), the busiest-links listing of --stats and the CSV of --links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "models/link/link_stats.h"
#include "topologies/platform.h"

namespace hcclsim {

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
nlohmann::json link_summary_json(const LinkSummary& summary);
LinkSummary link_summary_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception
nlohmann::json link_usages_json(const std::vector<LinkUsage>& links);
std::vector<LinkUsage> link_usages_from_json(const nlohmann::json& j);

// Several runs as one: bytes and busy time summed, utilization = total busy /
// total elapsed, peak = the largest peak.
class LinkTotals {
 public:
  void add(const std::vector<LinkUsage>& links, Time elapsed);
  std::vector<LinkUsage> links() const;

 private:
  std::map<std::string, LinkUsage> by_label_;
  std::vector<std::string> order_;
  Time elapsed_;
};

// The `n` most utilized links (ties: more bytes first, then label), as lines
// "  hccs npu0->npu1   util 93.1%  1.07 GB  busy 51.3 us  peak 2 flows".
std::vector<LinkUsage> busiest_links(std::vector<LinkUsage> links, std::size_t n);
std::string format_busiest_links(const std::vector<LinkUsage>& links, std::size_t n, const std::string& heading);

// --links: "row,data_size,link,kind,bytes,busy_us,utilization,peak_flows".
void write_links_csv_header(std::ostream& out);
void write_links_csv(std::ostream& out, const std::string& row, const std::string& data_size,
                     const std::vector<LinkUsage>& links);

}  // namespace hcclsim

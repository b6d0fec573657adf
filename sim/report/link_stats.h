// Link usage (sim/link_usage.h) as output: the JSON of a row's summary and
// list, several runs' totals, the busiest-links listing of --stats and the
// CSV of --links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "sim/link_usage.h"

namespace hcclsim {

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

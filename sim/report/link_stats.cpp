#include "sim/report/link_stats.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace hcclsim {

nlohmann::json link_summary_json(const LinkSummary& s) {
  nlohmann::json bytes = nlohmann::json::object();
  for (const auto& [kind, b] : s.bytes_by_kind) bytes[kind] = b;
  char util[32];
  std::snprintf(util, sizeof util, "%.4f", s.busiest_utilization);
  return {{"busiest", s.busiest}, {"busiest_utilization", std::stod(util)}, {"bytes_by_kind", bytes}};
}

LinkSummary link_summary_from_json(const nlohmann::json& j) {
  LinkSummary s;
  s.busiest = j.at("busiest").get<std::string>();
  s.busiest_utilization = j.at("busiest_utilization").get<double>();
  for (const auto& [kind, b] : j.at("bytes_by_kind").items()) s.bytes_by_kind[kind] = b.get<std::uint64_t>();
  return s;
}

nlohmann::json link_usages_json(const std::vector<LinkUsage>& links) {
  nlohmann::json a = nlohmann::json::array();
  for (const LinkUsage& u : links) {
    a.push_back(nlohmann::json::array({u.label, u.kind, u.bytes, u.busy.ps, u.utilization, u.peak_flows}));
  }
  return a;
}

std::vector<LinkUsage> link_usages_from_json(const nlohmann::json& j) {
  std::vector<LinkUsage> out;
  for (const auto& e : j) {
    LinkUsage u;
    u.label = e.at(0).get<std::string>();
    u.kind = e.at(1).get<std::string>();
    u.bytes = e.at(2).get<std::uint64_t>();
    u.busy = Time{e.at(3).get<std::uint64_t>()};
    u.utilization = e.at(4).get<double>();
    u.peak_flows = e.at(5).get<std::uint32_t>();
    out.push_back(std::move(u));
  }
  return out;
}

void LinkTotals::add(const std::vector<LinkUsage>& links, Time elapsed) {
  elapsed_ += elapsed;
  for (const LinkUsage& u : links) {
    auto [it, fresh] = by_label_.emplace(u.label, u);
    if (fresh) {
      order_.push_back(u.label);
      continue;
    }
    it->second.bytes += u.bytes;
    it->second.busy += u.busy;
    it->second.peak_flows = std::max(it->second.peak_flows, u.peak_flows);
  }
}

std::vector<LinkUsage> LinkTotals::links() const {
  std::vector<LinkUsage> out;
  for (const std::string& label : order_) {
    LinkUsage u = by_label_.at(label);
    u.utilization = busy_fraction(u.busy, elapsed_);
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<LinkUsage> busiest_links(std::vector<LinkUsage> links, std::size_t n) {
  std::stable_sort(links.begin(), links.end(), [](const LinkUsage& a, const LinkUsage& b) {
    if (a.busy != b.busy) return a.busy > b.busy;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.label < b.label;
  });
  if (links.size() > n) links.resize(n);
  return links;
}

std::string format_busiest_links(const std::vector<LinkUsage>& links, std::size_t n, const std::string& heading) {
  const std::vector<LinkUsage> top = busiest_links(links, n);
  std::string out = heading + " (" + std::to_string(top.size()) + " of " + std::to_string(links.size()) +
                    " links that carried data, by utilization):\n";
  for (const LinkUsage& u : top) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-32s util %6.2f%%  %14llu B  busy %14s us  peak %u flow%s\n",
                  u.label.c_str(), 100.0 * u.utilization, static_cast<unsigned long long>(u.bytes),
                  format_us(u.busy).c_str(), u.peak_flows, u.peak_flows == 1 ? "" : "s");
    out += line;
  }
  return out;
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
}  // namespace

void write_links_csv_header(std::ostream& out) {
  out << "row,data_size,link,kind,bytes,busy_us,utilization,peak_flows\n";
}

void write_links_csv(std::ostream& out, const std::string& row, const std::string& data_size,
                     const std::vector<LinkUsage>& links) {
  for (const LinkUsage& u : links) {
    char util[32];
    std::snprintf(util, sizeof util, "%.6f", u.utilization);
    out << csv_field(row) << ',' << data_size << ',' << csv_field(u.label) << ',' << u.kind << ',' << u.bytes << ','
        << format_us(u.busy, 6) << ',' << util << ',' << u.peak_flows << '\n';
  }
  out.flush();
}

}  // namespace hcclsim

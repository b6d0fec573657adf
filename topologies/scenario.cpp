#include "topologies/scenario.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/json_reader.h"

namespace hcclsim {

namespace {

// A finite number in [min, max] at `key`, or `fallback` when absent.
double number_in_or(ObjectReader& o, const std::string& key, double min, double max, double fallback) {
  const nlohmann::json* v = o.optional_value(key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min || v->get<double>() > max) {
    std::ostringstream range;
    range << "expected a number in [" << min << ", " << max << "]";
    o.location_of(key).fail(range.str());
  }
  return v->get<double>();
}

double required_number_in(ObjectReader& o, const std::string& key, double min, double max) {
  o.required_value(key);
  return number_in_or(o, key, min, max, 0);
}

int rank_at(const nlohmann::json& v, const JsonLocation& where) {
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > (1 << 20)) {
    where.fail("expected a rank, an integer in [0, 1048576]");
  }
  return v.get<int>();
}

// An array of at most kMaxScenarioEntries elements at `key` (absent: empty).
const nlohmann::json* entries(ObjectReader& o, const std::string& key) {
  if (!o.has(key)) return nullptr;
  const nlohmann::json& arr = o.required_array(key);
  if (arr.size() > kMaxScenarioEntries) {
    o.location_of(key).fail("more than " + std::to_string(kMaxScenarioEntries) + " entries");
  }
  return &arr;
}

Time latency_at(ObjectReader& o, const std::string& key) {
  const Time t = o.time_or(key, Time{});
  if (t.ps > kMaxExtraLatencyPs) o.location_of(key).fail("expected at most 1s");
  return t;
}

LinkChange read_link_change(const nlohmann::json& v, const JsonLocation& where) {
  ObjectReader o(v, where);
  LinkChange c;
  c.path = where.path;
  if (o.has("kind")) c.select.kind = o.required_choice("kind", link_kind_names());
  if (o.has("between")) {
    const nlohmann::json& ends = o.required_array("between");
    if (ends.size() != 2) o.location_of("between").fail("expected two ranks [a, b]");
    const int a = rank_at(ends[0], o.location_of("between").index(0));
    const int b = rank_at(ends[1], o.location_of("between").index(1));
    if (a == b) o.location_of("between").fail("expected two different ranks");
    c.select.between = std::pair{a, b};
  }
  if (o.has("rank")) c.select.rank = static_cast<int>(o.required_int_in("rank", 0, 1 << 20));
  if (o.has("server")) c.select.server = static_cast<int>(o.required_int_in("server", 0, 1 << 20));
  if (o.has("plane")) c.select.plane = static_cast<int>(o.required_int_in("plane", 0, 1 << 20));
  if (!c.select.kind && !c.select.between && !c.select.rank && !c.select.server && !c.select.plane) {
    where.fail("a link change needs a selector: \"kind\", \"between\", \"rank\", \"server\" or \"plane\"");
  }
  c.down = o.bool_or("down", false);
  c.bandwidth_factor = number_in_or(o, "bandwidth_factor", 0, kMaxBandwidthFactor, 1.0);
  if (o.has("bandwidth_factor") && c.bandwidth_factor <= 0) {
    o.location_of("bandwidth_factor").fail("expected a factor above 0 (a link that carries nothing is \"down\": true)");
  }
  c.extra_latency = latency_at(o, "extra_latency");
  if (c.down && (o.has("bandwidth_factor") || o.has("extra_latency"))) {
    where.fail("a link that is down has no bandwidth or latency: give \"down\": true alone, or a degradation");
  }
  if (!c.down && !o.has("bandwidth_factor") && !o.has("extra_latency")) {
    where.fail("expected what happens to the links: \"down\": true, \"bandwidth_factor\" or \"extra_latency\"");
  }
  o.finish();
  return c;
}

TaskJitter read_jitter(ObjectReader& o) {
  TaskJitter j;
  const std::string d = o.required_choice("distribution", {"uniform", "normal", "lognormal"});
  if (d == "uniform") {
    j.distribution = JitterDistribution::Uniform;
    j.a = required_number_in(o, "low", 0, 100);
    j.b = required_number_in(o, "high", 0, 100);
    if (j.b < j.a) o.location_of("high").fail("expected high >= low");
  } else if (d == "normal") {
    j.distribution = JitterDistribution::Normal;
    j.a = number_in_or(o, "mean", 0, 100, 1.0);
    j.b = required_number_in(o, "stddev", 0, 100);
  } else {
    j.distribution = JitterDistribution::LogNormal;
    j.a = number_in_or(o, "mu", -10, 10, 0.0);
    j.b = required_number_in(o, "sigma", 0, 4);
  }
  o.finish();
  return j;
}

std::string node_label(const TopologySpec& spec, int node) {
  return node < spec.npus ? "npu" + std::to_string(node) : "switch" + std::to_string(node - spec.npus);
}
std::string link_label(const TopologySpec& spec, const LinkSpec& l) {
  return l.kind + " " + node_label(spec, l.a) + "<->" + node_label(spec, l.b);
}

// The links of UB plane k: each server switch's link to its k-th L2 switch
// (the spines of the "ub" fabric; cloudmatrix384.json: one L2 per plane).
// Empty when the topology has no such fabric; `planes` gets the count.
std::vector<std::size_t> plane_links(const TopologySpec& spec, int plane, int& planes) {
  std::set<std::pair<int, int>> wanted;
  planes = 0;
  for (const FabricSpec& f : spec.fabrics) {
    if (f.kind != "ub") continue;
    for (std::size_t leaf = 0; leaf < f.spines_of.size(); ++leaf) {
      const std::vector<int>& spines = f.spines_of[leaf];
      planes = std::max(planes, static_cast<int>(spines.size()));
      if (plane < static_cast<int>(spines.size())) {
        wanted.insert({static_cast<int>(leaf), spines[static_cast<std::size_t>(plane)]});
      }
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    const LinkSpec& l = spec.links[i];
    if (wanted.count({l.a, l.b}) != 0 || wanted.count({l.b, l.a}) != 0) out.push_back(i);
  }
  return out;
}

[[noreturn]] void fail_at(const Scenario& s, const std::string& path, const std::string& message) {
  throw InputError(s.file + " at " + path, message);
}

std::vector<std::size_t> select_links(const Scenario& s, const TopologySpec& spec, const LinkChange& c) {
  const LinkSelector& sel = c.select;
  const auto check_rank = [&](int r, const std::string& key) {
    if (r >= spec.npus) {
      fail_at(s, c.path + "." + key, "rank " + std::to_string(r) + " is beyond topology '" + spec.name + "' (ranks 0.." +
                                         std::to_string(spec.npus - 1) + ")");
    }
  };
  if (sel.between) {
    check_rank(sel.between->first, "between");
    check_rank(sel.between->second, "between");
  }
  if (sel.rank) check_rank(*sel.rank, "rank");
  const int servers = spec.npus == 0 ? 0 : server_of(spec, spec.npus - 1) + 1;
  if (sel.server && *sel.server >= servers) {
    fail_at(s, c.path + ".server", "topology '" + spec.name + "' has servers 0.." + std::to_string(servers - 1));
  }
  std::set<std::size_t> in_plane;
  if (sel.plane) {
    int planes = 0;
    const std::vector<std::size_t> links = plane_links(spec, *sel.plane, planes);
    if (planes == 0) {
      fail_at(s, c.path + ".plane", "topology '" + spec.name + "' has no UB planes (an A3 supernode of two or more "
                                    "servers has one L2 switch per plane)");
    }
    if (*sel.plane >= planes) fail_at(s, c.path + ".plane", "expected a plane in [0, " + std::to_string(planes - 1) + "]");
    in_plane.insert(links.begin(), links.end());
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    const LinkSpec& l = spec.links[i];
    if (sel.kind && l.kind != *sel.kind) continue;
    if (sel.between && !((l.a == sel.between->first && l.b == sel.between->second) ||
                         (l.a == sel.between->second && l.b == sel.between->first))) {
      continue;
    }
    if (sel.rank && l.a != *sel.rank && l.b != *sel.rank) continue;
    if (sel.server) {
      const bool a_in = l.a < spec.npus && server_of(spec, l.a) == *sel.server;
      const bool b_in = l.b < spec.npus && server_of(spec, l.b) == *sel.server;
      const bool a_ok = a_in || l.a >= spec.npus;
      const bool b_ok = b_in || l.b >= spec.npus;
      if (!(a_in || b_in) || !a_ok || !b_ok) continue;
    }
    if (sel.plane && in_plane.count(i) == 0) continue;
    out.push_back(i);
  }
  if (out.empty()) {
    fail_at(s, c.path, "matches no link of topology '" + spec.name + "'" +
                           (sel.between ? std::string(" (\"between\" names a link joining the two ranks directly; "
                                                      "dies of different A3 chips meet at their server switch: "
                                                      "select a die's port with \"rank\")")
                                        : std::string()));
  }
  return out;
}

Bandwidth scaled(Bandwidth b, double factor) {
  if (b.bytes_per_s == 0) return b;  // 0: no cap
  const double v = std::floor(static_cast<double>(b.bytes_per_s) * factor + 0.5);
  return Bandwidth{v < 1.0 ? 1 : static_cast<std::uint64_t>(v)};
}

std::string format_factor(double f) {
  std::ostringstream out;
  out << f;
  return out.str();
}

// "hccs npu0<->npu1" for one link, "7 hccs links" for more.
std::string links_named(const TopologySpec& spec, const std::vector<std::size_t>& links) {
  if (links.size() == 1) return link_label(spec, spec.links[links.front()]);
  std::set<std::string> kinds;
  for (const std::size_t i : links) kinds.insert(spec.links[i].kind);
  std::string k;
  for (const std::string& kind : kinds) k += (k.empty() ? "" : "/") + kind;
  return std::to_string(links.size()) + " " + k + " links";
}

void set_down(TopologySpec& spec, const std::vector<std::size_t>& links) {
  for (const std::size_t i : links) spec.links[i].down = true;
}

}  // namespace

Scenario read_scenario(const nlohmann::json& doc, const std::string& file) {
  Scenario s;
  s.file = file;
  ObjectReader root(doc, JsonLocation{file, "$"});
  s.description = root.string_or("description", "");
  if (const nlohmann::json* links = entries(root, "links")) {
    for (std::size_t i = 0; i < links->size(); ++i) {
      s.links.push_back(read_link_change((*links)[i], root.location_of("links").index(i)));
    }
  }
  for (const char* key : {"nics_down", "planes_lost"}) {
    if (const nlohmann::json* list = entries(root, key)) {
      auto& out = std::string(key) == "nics_down" ? s.nics_down : s.planes_lost;
      std::set<int> seen;
      for (std::size_t i = 0; i < list->size(); ++i) {
        const JsonLocation at = root.location_of(key).index(i);
        const int value = rank_at((*list)[i], at);
        if (!seen.insert(value).second) at.fail("given twice");
        out.emplace_back(value, at.path);
      }
    }
  }
  if (const nlohmann::json* slow = entries(root, "slow_ranks")) {
    std::set<int> seen;
    for (std::size_t i = 0; i < slow->size(); ++i) {
      const JsonLocation at = root.location_of("slow_ranks").index(i);
      ObjectReader o((*slow)[i], at);
      SlowRank r;
      r.path = at.path;
      r.rank = static_cast<int>(o.required_int_in("rank", 0, 1 << 20));
      if (!seen.insert(r.rank).second) o.location_of("rank").fail("rank " + std::to_string(r.rank) + " is slow twice");
      r.compute_factor = number_in_or(o, "compute_factor", 0, kMaxComputeFactor, 1.0);
      r.extra_delay = latency_at(o, "extra_delay");
      if (!o.has("compute_factor") && !o.has("extra_delay")) {
        at.fail("expected \"compute_factor\" or \"extra_delay\" (or both)");
      }
      o.finish();
      s.slow_ranks.push_back(r);
    }
  }
  if (root.has("jitter")) {
    ObjectReader j = root.required_object("jitter");
    s.jitter = read_jitter(j);
  }
  root.finish();
  return s;
}

Scenario load_scenario(const std::string& file) { return read_scenario(load_json_file(file), file); }

AppliedScenario apply_scenario(const Scenario& s, const TopologySpec& healthy) {
  AppliedScenario out;
  out.spec = healthy;
  TopologySpec& spec = out.spec;
  for (const LinkChange& c : s.links) {
    const std::vector<std::size_t> links = select_links(s, healthy, c);
    if (c.down) {
      set_down(spec, links);
      out.changes.push_back(links_named(healthy, links) + " down (" + c.path + ")");
      continue;
    }
    for (const std::size_t i : links) {
      ChannelParams& p = spec.links[i].params;
      p.bandwidth = scaled(p.bandwidth, c.bandwidth_factor);
      p.write_bandwidth = scaled(p.write_bandwidth, c.bandwidth_factor);
      p.sdma_write_rate = scaled(p.sdma_write_rate, c.bandwidth_factor);
      p.sdma_read_rate = scaled(p.sdma_read_rate, c.bandwidth_factor);
      p.transport_rate = scaled(p.transport_rate, c.bandwidth_factor);
      p.latency = p.latency + c.extra_latency;
    }
    std::string what;
    if (c.bandwidth_factor != 1.0) what += "bandwidth x" + format_factor(c.bandwidth_factor);
    if (c.extra_latency.ps != 0) what += (what.empty() ? "" : ", ") + ("latency +" + format_us(c.extra_latency) + " us");
    out.changes.push_back(links_named(healthy, links) + " degraded: " + (what.empty() ? "unchanged" : what) + " (" +
                          c.path + ")");
  }
  for (const auto& [rank, path] : s.nics_down) {
    if (rank >= healthy.npus) {
      fail_at(s, path, "rank " + std::to_string(rank) + " is beyond topology '" + healthy.name + "' (ranks 0.." +
                           std::to_string(healthy.npus - 1) + ")");
    }
    std::vector<std::size_t> nic;
    for (std::size_t i = 0; i < healthy.links.size(); ++i) {
      const LinkSpec& l = healthy.links[i];
      if (l.kind == "roce" && (l.a == rank || l.b == rank)) nic.push_back(i);
    }
    if (nic.empty()) fail_at(s, path, "npu" + std::to_string(rank) + " has no RoCE NIC in topology '" + healthy.name + "'");
    set_down(spec, nic);
    out.changes.push_back("NIC of npu" + std::to_string(rank) + " down (" + path + ")");
  }
  for (const auto& [plane, path] : s.planes_lost) {
    int planes = 0;
    const std::vector<std::size_t> links = plane_links(healthy, plane, planes);
    if (planes == 0) {
      fail_at(s, path, "topology '" + healthy.name + "' has no UB planes (an A3 supernode of two or more servers has "
                       "one L2 switch per plane)");
    }
    if (plane >= planes) fail_at(s, path, "expected a plane in [0, " + std::to_string(planes - 1) + "]");
    set_down(spec, links);
    out.changes.push_back("UB plane " + std::to_string(plane) + " lost: " + std::to_string(links.size()) +
                          " server-switch links to its L2 switch down, traffic over the other " +
                          std::to_string(planes - 1) + " planes (" + path + ")");
  }
  for (const SlowRank& r : s.slow_ranks) {
    if (r.rank >= healthy.npus) {
      fail_at(s, r.path + ".rank", "rank " + std::to_string(r.rank) + " is beyond topology '" + healthy.name +
                                       "' (ranks 0.." + std::to_string(healthy.npus - 1) + ")");
    }
    NpuParams npu = npu_params_of(spec, r.rank);
    npu.cores.compute_factor *= r.compute_factor;
    // Every task of its streams starts this much later: the gap before it
    // (task_dispatch), or the launch before a stream's first (op_launch).
    npu.stream.task_dispatch = npu.stream.task_dispatch + r.extra_delay;
    npu.stream.op_launch = npu.stream.op_launch + r.extra_delay;
    spec.npu_overrides[r.rank] = npu;
    std::string what;
    if (r.compute_factor != 1.0) what += "compute x" + format_factor(r.compute_factor);
    if (r.extra_delay.ps != 0) what += (what.empty() ? "" : ", ") + ("+" + format_us(r.extra_delay) + " us per task");
    out.changes.push_back("slow rank " + std::to_string(r.rank) + ": " + (what.empty() ? "unchanged" : what) + " (" +
                          r.path + ")");
  }
  if (s.jitter.active()) {
    spec.jitter = s.jitter;
    std::ostringstream what;
    what << "every task's own duration x a factor drawn " << jitter_distribution_name(s.jitter.distribution);
    switch (s.jitter.distribution) {
      case JitterDistribution::Uniform: what << " in [" << s.jitter.a << ", " << s.jitter.b << ")"; break;
      case JitterDistribution::Normal: what << " (mean " << s.jitter.a << ", stddev " << s.jitter.b << ")"; break;
      case JitterDistribution::LogNormal: what << " (mu " << s.jitter.a << ", sigma " << s.jitter.b << ")"; break;
      case JitterDistribution::None: break;
    }
    out.changes.push_back("jitter: " + what.str() + " ($.jitter)");
  }
  if (out.changes.empty()) out.changes.push_back("nothing (the scenario changes no link, rank or task)");
  return out;
}

}  // namespace hcclsim

#include "sim/report/baseline.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "base/json_reader.h"

namespace hcclsim {

namespace {
constexpr const char* kFormat = "hcclsim-baseline-1";

double round_ps(double us) { return std::round(us * 1e6) / 1e6; }

std::string xml_escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* status_name(ItemComparison::Status s) {
  switch (s) {
    case ItemComparison::Status::Held: return "held";
    case ItemComparison::Status::Faster: return "faster";
    case ItemComparison::Status::Slower: return "SLOWER";
    case ItemComparison::Status::Missing: return "MISSING";
    case ItemComparison::Status::Added: return "ADDED";
  }
  return "?";
}

bool is_failure(ItemComparison::Status s) {
  return s == ItemComparison::Status::Slower || s == ItemComparison::Status::Missing ||
         s == ItemComparison::Status::Added;
}
}  // namespace

BaselineItem perf_row_item(const std::string& op, std::uint64_t data_size, const std::string& algo, double time_us) {
  BaselineItem item;
  item.id = op + " " + std::to_string(data_size) + " B";
  item.kind = "row";
  item.op = op;
  item.data_size = data_size;
  item.algo = algo;
  item.time_us = round_ps(time_us);
  return item;
}

BaselineItem handle_item(const std::string& name, int domain, int repeat, const std::string& op, double time_us) {
  BaselineItem item;
  item.id = "handle " + name + " (domain " + std::to_string(domain) + ", repeat " + std::to_string(repeat) + ")";
  item.kind = "handle";
  item.op = op;
  item.handle = name;
  item.domain = domain;
  item.repeat = repeat;
  item.time_us = round_ps(time_us);
  return item;
}

BaselineItem total_item(double time_us) {
  BaselineItem item;
  item.id = "total";
  item.kind = "total";
  item.time_us = round_ps(time_us);
  return item;
}

std::string baseline_json(const Baseline& b) {
  nlohmann::ordered_json out;
  out["format"] = kFormat;
  out["hcclsim_version"] = b.version;
  out["command"] = b.command;
  out["inputs"] = nlohmann::ordered_json::array();
  for (const InputFile& f : b.inputs) out["inputs"].push_back({{"path", f.path}, {"hash", f.hash}});
  out["command_kind"] = b.command_kind;
  out["results"] = nlohmann::ordered_json::array();
  for (const BaselineItem& i : b.items) {
    nlohmann::ordered_json r{{"id", i.id}, {"kind", i.kind}};
    if (i.kind == "row") {
      r["op"] = i.op;
      r["data_size"] = i.data_size;
      r["algo"] = i.algo;
    } else if (i.kind == "handle") {
      r["handle"] = i.handle;
      r["domain"] = i.domain;
      r["repeat"] = i.repeat;
      r["op"] = i.op;
    }
    r["time_us"] = i.time_us;
    out["results"].push_back(r);
  }
  return out.dump(2) + "\n";
}

Baseline load_baseline(const std::string& file) {
  const nlohmann::json doc = load_json_file(file);
  ObjectReader top(doc, JsonLocation{file});
  Baseline b;
  const std::string format = top.required_string("format");
  if (format != kFormat) {
    top.location_of("format").fail("unknown baseline format '" + format + "'; expected " + kFormat);
  }
  b.version = top.required_string("hcclsim_version");
  const nlohmann::json& command = top.required_array("command");
  for (std::size_t i = 0; i < command.size(); ++i) {
    if (!command[i].is_string()) top.location_of("command").index(i).fail("expected a string");
    b.command.push_back(command[i].get<std::string>());
  }
  if (b.command.empty()) top.location_of("command").fail("the command is empty");
  const nlohmann::json& inputs = top.required_array("inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    ObjectReader in(inputs[i], top.location_of("inputs").index(i));
    b.inputs.push_back({in.required_string("path"), in.required_string("hash")});
    in.finish();
  }
  b.command_kind = top.required_choice("command_kind", {"perf", "run"});
  const nlohmann::json& results = top.required_array("results");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const JsonLocation where = top.location_of("results").index(i);
    ObjectReader r(results[i], where);
    BaselineItem item;
    item.id = r.required_string("id");
    item.kind = r.required_choice("kind", {"row", "handle", "total"});
    if (item.kind == "row") {
      item.op = r.required_string("op");
      item.data_size = static_cast<std::uint64_t>(r.required_int_in("data_size", 0, INT64_MAX));
      item.algo = r.required_string("algo");
    } else if (item.kind == "handle") {
      item.handle = r.required_string("handle");
      item.domain = static_cast<int>(r.required_int_in("domain", 0, 1 << 20));
      item.repeat = static_cast<int>(r.required_int_in("repeat", 0, 1 << 20));
      item.op = r.required_string("op");
    }
    const nlohmann::json& t = r.required_value("time_us");
    // (every simulated run takes time: a zero or negative one is no baseline to compare with)
    if (!t.is_number() || !(t.get<double>() > 0)) where.key("time_us").fail("expected a positive number of microseconds");
    item.time_us = t.get<double>();
    r.finish();
    for (const BaselineItem& seen : b.items) {
      if (seen.id == item.id) where.key("id").fail("duplicate result id '" + item.id + "'");
    }
    b.items.push_back(item);
  }
  top.finish();
  return b;
}

int Comparison::count(ItemComparison::Status s) const {
  int n = 0;
  for (const ItemComparison& i : items) n += i.status == s ? 1 : 0;
  return n;
}

bool Comparison::regressed() const {
  for (const ItemComparison& i : items) {
    if (is_failure(i.status)) return true;
  }
  return false;
}

Comparison compare_baseline(const Baseline& old, const std::vector<BaselineItem>& now,
                            const std::vector<InputFile>& inputs_now, double tolerance_pct) {
  Comparison c;
  c.tolerance_pct = tolerance_pct;
  std::map<std::string, const BaselineItem*> by_id;
  for (const BaselineItem& i : now) by_id[i.id] = &i;
  std::map<std::string, bool> matched;
  for (const BaselineItem& o : old.items) {
    ItemComparison ic;
    ic.id = o.id;
    ic.old_us = o.time_us;
    const auto found = by_id.find(o.id);
    if (found == by_id.end()) {
      ic.status = ItemComparison::Status::Missing;
      ic.note = "the command no longer produces this result";
      c.items.push_back(ic);
      continue;
    }
    matched[o.id] = true;
    const BaselineItem& n = *found->second;
    ic.new_us = n.time_us;
    if (o.time_us > 0) {
      ic.change_pct = (n.time_us - o.time_us) / o.time_us * 100.0;
    } else {
      ic.change_pct = n.time_us > 0 ? 100.0 : 0.0;
    }
    if (ic.change_pct > tolerance_pct) {
      ic.status = ItemComparison::Status::Slower;
    } else if (ic.change_pct < -tolerance_pct) {
      ic.status = ItemComparison::Status::Faster;
    }
    if (o.algo != n.algo) ic.note = "algo " + o.algo + " -> " + n.algo;
    c.items.push_back(ic);
  }
  for (const BaselineItem& n : now) {
    if (matched.count(n.id)) continue;
    ItemComparison ic;
    ic.id = n.id;
    ic.new_us = n.time_us;
    ic.status = ItemComparison::Status::Added;
    ic.note = "not in the baseline";
    c.items.push_back(ic);
  }
  std::map<std::string, std::string> hash_now;
  for (const InputFile& f : inputs_now) hash_now[f.path] = f.hash;
  std::map<std::string, bool> old_paths;
  for (const InputFile& f : old.inputs) {
    old_paths[f.path] = true;
    const auto found = hash_now.find(f.path);
    if (found == hash_now.end()) {
      c.changed_inputs.push_back(f.path + " (no longer read)");
    } else if (found->second != f.hash) {
      c.changed_inputs.push_back(f.path + " (" + f.hash + " -> " + found->second + ")");
    }
  }
  for (const InputFile& f : inputs_now) {
    if (!old_paths.count(f.path)) c.changed_inputs.push_back(f.path + " (newly read)");
  }
  return c;
}

std::string format_comparison(const Comparison& c) {
  std::ostringstream os;
  for (const std::string& f : c.changed_inputs) os << "input changed since the baseline: " << f << "\n";
  bool header = false;
  for (const ItemComparison& i : c.items) {
    const bool moved = i.status != ItemComparison::Status::Held || (i.old_us && i.new_us && *i.old_us != *i.new_us);
    if (!moved && i.note.empty()) continue;
    if (!header) {
      char line[200];
      std::snprintf(line, sizeof line, "%-44s %16s %16s %10s  %s\n", "result", "old_us", "new_us", "change", "status");
      os << line;
      header = true;
    }
    char line[400];
    std::snprintf(line, sizeof line, "%-44s %16s %16s %10s  %s", i.id.c_str(),
                  i.old_us ? format_fixed(*i.old_us, 6).c_str() : "-", i.new_us ? format_fixed(*i.new_us, 6).c_str() : "-",
                  i.old_us && i.new_us ? (format_fixed(i.change_pct, 2) + "%").c_str() : "-", status_name(i.status));
    os << line << (i.note.empty() ? "" : "  (" + i.note + ")") << "\n";
  }
  const int slower = c.count(ItemComparison::Status::Slower);
  const int faster = c.count(ItemComparison::Status::Faster);
  const int missing = c.count(ItemComparison::Status::Missing) + c.count(ItemComparison::Status::Added);
  const int held = c.count(ItemComparison::Status::Held);
  os << "check: " << c.items.size() << " results, tolerance " << format_fixed(c.tolerance_pct, 2) << "%: " << slower
     << " slower beyond it, " << faster << " faster beyond it, " << held << " within it";
  if (missing > 0) os << ", " << missing << " missing or added";
  os << (c.regressed() ? " -> REGRESSION\n" : " -> ok\n");
  return os.str();
}

std::string junit_xml(const Comparison& c, const std::string& suite_name) {
  int failures = 0;
  for (const ItemComparison& i : c.items) failures += is_failure(i.status) ? 1 : 0;
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  os << "<testsuites tests=\"" << c.items.size() << "\" failures=\"" << failures << "\">\n";
  os << "  <testsuite name=\"" << xml_escape(suite_name) << "\" tests=\"" << c.items.size() << "\" failures=\""
     << failures << "\" errors=\"0\">\n";
  for (const ItemComparison& i : c.items) {
    os << "    <testcase classname=\"hcclsim.check\" name=\"" << xml_escape(i.id) << "\"";
    std::string detail = "old " + (i.old_us ? format_fixed(*i.old_us, 6) + " us" : std::string("-")) + ", new " +
                         (i.new_us ? format_fixed(*i.new_us, 6) + " us" : std::string("-"));
    if (i.old_us && i.new_us) detail += ", change " + format_fixed(i.change_pct, 2) + "%";
    detail += ", tolerance " + format_fixed(c.tolerance_pct, 2) + "%";
    if (!i.note.empty()) detail += " (" + i.note + ")";
    if (is_failure(i.status)) {
      const std::string what = i.status == ItemComparison::Status::Slower ? "slower than the baseline beyond the tolerance"
                               : i.status == ItemComparison::Status::Missing ? "missing from the new results"
                                                                             : "not in the baseline";
      os << ">\n      <failure message=\"" << xml_escape(what) << "\">" << xml_escape(detail) << "</failure>\n"
         << "    </testcase>\n";
    } else {
      os << ">\n      <system-out>" << xml_escape(std::string(status_name(i.status)) + ": " + detail)
         << "</system-out>\n    </testcase>\n";
    }
  }
  os << "  </testsuite>\n</testsuites>\n";
  return os.str();
}

double parse_tolerance(const std::string& text) {
  std::string number = text;
  if (!number.empty() && number.back() == '%') number.pop_back();
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !(v >= 0) || !std::isfinite(v)) {
    throw std::invalid_argument("expected a non-negative percentage such as 2% or 0.5%, got '" + text + "'");
  }
  return v;
}

}  // namespace hcclsim

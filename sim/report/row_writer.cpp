#include "sim/report/row_writer.h"

#include "sim/report/link_stats.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace hcclsim {

namespace {
std::string join_csv(const std::vector<std::string>& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
  return line;
}

// hccl_test's layout, from CANN 8.1.RC1 tools/hccl_test/common/src/
// hccl_opbase_rootinfo_base.cc, HcclOpBaseTest::print_execution_time: the
// header is printf("%-15s | %-12s | %-18s | %s\n") of the four column names
// (each longer than its width, so no padding), a row is
// printf("%-17llu | %-14.2f | %-20.5f | <result>\n") of data_size, the
// average time in us and alg_bandwidth in GB/s; the result is "success" or
// "failed", and "NULL" when the check is off (-c 0). hccl_test_common.cc,
// HcclTest::init_hcclComm prints the preamble line before it.
std::string hccl_test_header() {
  char line[160];
  std::snprintf(line, sizeof line, "%-15s | %-12s | %-18s | %s\n", "data_size(Bytes):", "aveg_time(us):",
                "alg_bandwidth(GB/s):", "check_result:");
  return line;
}

std::string hccl_test_row(const PerfRow& r) {
  const char* result = r.check == "success" ? "success" : r.check == "skipped" ? "NULL" : "failed";
  const double time_us = static_cast<double>(r.time.ps) / 1e6;
  char line[160];
  std::snprintf(line, sizeof line, "%-17llu | %-14.2f | %-20.5f | %s\n", static_cast<unsigned long long>(r.data_size),
                time_us, r.algbw_gbps, result);
  return line;
}

std::string hccl_test_preamble(const HcclTestPreamble& p) {
  char line[200];
  std::snprintf(line, sizeof line, "the minbytes is %llu, maxbytes is %llu, iters is %d, warmup_iters is %d\n",
                static_cast<unsigned long long>(p.min_bytes), static_cast<unsigned long long>(p.max_bytes), p.iters,
                p.warmup_iters);
  return line;
}

std::string table_header() {
  char line[256];
  std::snprintf(line, sizeof line, "%14s %14s %16s %16s %-13s %s\n", "data_size", "aveg_time", "alg_bandwidth",
                "bus_bandwidth", "check_result", "executor");
  return line;
}

std::string table_row(const PerfRow& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%14llu %14s %16s %16s ", static_cast<unsigned long long>(r.data_size),
                format_us(r.time, 3).c_str(), format_fixed(r.algbw_gbps, 4).c_str(), format_fixed(r.busbw_gbps, 4).c_str());
  char check[64];
  std::snprintf(check, sizeof check, "%-13s", r.check.c_str());
  return line + (r.check.size() < 13 ? std::string(check) : r.check) + " " + r.executor + "\n";
}
}  // namespace

const std::vector<std::string>& row_format_names() {
  static const std::vector<std::string> names{"table", "csv", "json", "jsonl", "hccl_test"};
  return names;
}

std::optional<RowFormat> parse_row_format(const std::string& name) {
  const auto& names = row_format_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<RowFormat>(i);
  }
  return std::nullopt;
}

std::vector<std::string> perf_csv_columns(bool scenario) {
  std::vector<std::string> columns{"op",         "ranks",   "dtype",     "reduce_op",  "algo",       "count",       "input_bytes",
          "output_bytes", "data_size", "time_us", "algbw_GBps", "busbw_GBps", "check_result", "executor", "model"};
  if (scenario) {
    for (const char* c : {"healthy_us", "p50_us", "p90_us", "p99_us", "max_us", "slowdown", "bottleneck"}) columns.push_back(c);
  }
  return columns;
}

nlohmann::json scenario_json(const ScenarioOutcome& s) {
  const auto us = [](Time t) { return std::stod(format_us(t, 6)); };
  nlohmann::json times = nlohmann::json::array();
  for (const Time t : s.times) times.push_back(us(t));
  return {{"file", s.file},
          {"changes", s.changes},
          {"samples", s.samples},
          {"seed", s.seed},
          {"random", s.random},
          {"healthy_time_us", us(s.healthy)},
          {"p50_us", us(s.p50)},
          {"p90_us", us(s.p90)},
          {"p99_us", us(s.p99)},
          {"max_us", us(s.max)},
          {"times_us", times},
          {"slowdown", std::stod(format_fixed(s.slowdown, 6))},
          {"healthy_bottleneck", s.healthy_bottleneck},
          {"bottleneck", s.bottleneck}};
}

ScenarioOutcome scenario_from_json(const nlohmann::json& j) {
  const auto time = [&](const char* key) { return Time{static_cast<std::uint64_t>(std::llround(j.at(key).get<double>() * 1e6))}; };
  ScenarioOutcome s;
  s.file = j.at("file").get<std::string>();
  s.changes = j.at("changes").get<std::vector<std::string>>();
  s.samples = j.at("samples").get<int>();
  s.seed = j.at("seed").get<std::uint64_t>();
  s.random = j.at("random").get<bool>();
  s.healthy = time("healthy_time_us");
  for (const double us : j.at("times_us").get<std::vector<double>>()) {
    s.times.push_back(Time{static_cast<std::uint64_t>(std::llround(us * 1e6))});
  }
  s.p50 = time("p50_us");
  s.p90 = time("p90_us");
  s.p99 = time("p99_us");
  s.max = time("max_us");
  s.slowdown = j.at("slowdown").get<double>();
  s.healthy_bottleneck = j.at("healthy_bottleneck").get<std::string>();
  s.bottleneck = j.at("bottleneck").get<std::string>();
  return s;
}

std::string scenario_footnote(const std::vector<const ScenarioOutcome*>& rows, const std::vector<std::string>& labels,
                              const std::string& label_heading, const std::string& time_column) {
  if (rows.empty()) return "";
  const ScenarioOutcome& first = *rows.front();
  std::string out = "# scenario " + first.file + ": ";
  for (std::size_t i = 0; i < first.changes.size(); ++i) out += (i ? "; " : "") + first.changes[i];
  out += "\n# " + (first.random ? std::to_string(first.samples) + " draws, seed " + std::to_string(first.seed) +
                                      "; " + time_column + " above is their p50 (nearest rank)"
                                : "no random part: one run; " + time_column + " above is its time");
  out += "\n";
  char line[512];
  std::snprintf(line, sizeof line, "# %14s %12s %12s %12s %12s %12s %9s  %s\n", label_heading.c_str(), "healthy_us", "p50_us",
                "p90_us", "p99_us", "max_us", "slowdown", "bottleneck (healthy -> scenario)");
  out += line;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ScenarioOutcome& s = *rows[i];
    std::snprintf(line, sizeof line, "# %14s %12s %12s %12s %12s %12s %9.4f  %s -> %s\n",
                  labels[i].c_str(), format_us(s.healthy).c_str(), format_us(s.p50).c_str(),
                  format_us(s.p90).c_str(), format_us(s.p99).c_str(), format_us(s.max).c_str(), s.slowdown,
                  s.healthy_bottleneck.empty() ? "none" : s.healthy_bottleneck.c_str(),
                  s.bottleneck.empty() ? "none" : s.bottleneck.c_str());
    out += line;
  }
  return out;
}

namespace {
// CSV-safe: commas and newlines become ';'.
std::string csv_safe(std::string text) {
  for (char& c : text) {
    if (c == ',' || c == '\n') c = ';';
  }
  return text;
}
}  // namespace

std::vector<std::string> perf_csv_fields(const PerfRow& r) {
  const std::string check = csv_safe(r.check);
  std::vector<std::string> fields{r.op_name,
          std::to_string(r.ranks),
          data_type_name(r.dtype),
          reduce_op_name(r.reduce_op),
          r.algo,
          std::to_string(r.count),
          std::to_string(r.input_bytes),
          std::to_string(r.output_bytes),
          std::to_string(r.data_size),
          format_us(r.time, 6),
          format_fixed(r.algbw_gbps, 4),
          format_fixed(r.busbw_gbps, 4),
          check,
          r.executor,
          r.model};
  if (r.scenario) {
    const ScenarioOutcome& sc = *r.scenario;
    for (const Time t : {sc.healthy, sc.p50, sc.p90, sc.p99, sc.max}) fields.push_back(format_us(t, 6));
    fields.push_back(format_fixed(sc.slowdown, 6));
    fields.push_back(csv_safe(sc.bottleneck));
  }
  return fields;
}

nlohmann::json perf_row_json(const PerfRow& r) {
  nlohmann::json j{{"op", r.op_name},
          {"ranks", r.ranks},
          {"dtype", data_type_name(r.dtype)},
          {"reduce_op", reduce_op_name(r.reduce_op)},
          {"algo", r.algo},
          {"count", r.count},
          {"input_bytes", r.input_bytes},
          {"output_bytes", r.output_bytes},
          {"data_size", r.data_size},
          {"time_us", std::stod(format_us(r.time, 6))},
          {"algbw_GBps", std::stod(format_fixed(r.algbw_gbps, 4))},
          {"busbw_GBps", std::stod(format_fixed(r.busbw_gbps, 4))},
          {"check_result", r.check},
          {"executor", r.executor},
          {"executor_rule", r.executor_rule},
          {"model", r.model},
          {"tasks", r.tasks},
          {"links", link_summary_json(r.link_summary)},
          {"assumed", r.assumed}};
  if (r.scenario) j["scenario"] = scenario_json(*r.scenario);
  return j;
}

void JsonArrayStream::add(const nlohmann::json& element) {
  // dump(2) of an array puts each element on its own lines, indented by two.
  std::string text = element.dump(2);
  std::string indented = "  ";
  for (const char c : text) {
    indented += c;
    if (c == '\n') indented += "  ";
  }
  out_ << (count_ == 0 ? "[\n" : ",\n") << indented;
  out_.flush();
  ++count_;
}

void JsonArrayStream::finish() {
  if (finished_) return;
  finished_ = true;
  out_ << (count_ == 0 ? "[]\n" : "\n]\n");
  out_.flush();
}

std::string assumed_footnote(const std::vector<std::string>& assumed, const std::string& profile_file) {
  std::string line = "# assumed constants used: ";
  if (assumed.empty()) return line + "none\n";
  for (std::size_t i = 0; i < assumed.size(); ++i) line += (i ? ", " : "") + assumed[i];
  return line + " (their source in " + (profile_file.empty() ? "the profile" : profile_file) + " says 'assumed')\n";
}

RowWriter::RowWriter(std::ostream& out, RowFormat format, std::string table_heading, HcclTestPreamble preamble,
                     std::string profile_file)
    : out_(out),
      format_(format),
      table_heading_(std::move(table_heading)),
      preamble_(preamble),
      profile_file_(std::move(profile_file)),
      json_(out) {}

void RowWriter::header(const PerfRow* first) {
  switch (format_) {
    case RowFormat::Table:
      out_ << "# " << table_heading_ << ", " << (first ? first->algo : "") << "\n" << table_header();
      break;
    case RowFormat::Csv: out_ << join_csv(perf_csv_columns(first != nullptr && first->scenario)) << "\n"; break;
    case RowFormat::HcclTest: out_ << hccl_test_preamble(preamble_) << hccl_test_header(); break;
    case RowFormat::Json:
    case RowFormat::JsonLines: break;
  }
}

void RowWriter::row(const PerfRow& r) {
  if (rows_ == 0) header(&r);
  switch (format_) {
    case RowFormat::Table:
      out_ << table_row(r);
      assumed_.insert(r.assumed.begin(), r.assumed.end());
      if (!r.executor_rule.empty()) {
        if (choices_.empty() || choices_.back().executor != r.executor || choices_.back().rule != r.executor_rule) {
          choices_.push_back({r.executor, r.executor_rule, r.data_size, r.data_size});
        }
        choices_.back().last_size = r.data_size;
      }
      if (r.scenario) {
        scenarios_.push_back(*r.scenario);
        scenario_labels_.push_back(std::to_string(r.data_size));
      }
      break;
    case RowFormat::Csv: out_ << join_csv(perf_csv_fields(r)) << "\n"; break;
    case RowFormat::HcclTest: out_ << hccl_test_row(r); break;
    case RowFormat::JsonLines: out_ << perf_row_json(r).dump() << "\n"; break;
    case RowFormat::Json: json_.add(perf_row_json(r)); break;
  }
  ++rows_;
  out_.flush();
}

void RowWriter::finish() {
  if (finished_) return;
  finished_ = true;
  if (rows_ == 0) header(nullptr);
  if (format_ == RowFormat::Json) json_.finish();
  if (format_ == RowFormat::Table && rows_ > 0) {
    for (const Choice& c : choices_) {
      out_ << "# " << c.executor << " for data_size " << c.first_size;
      if (c.last_size != c.first_size) out_ << ".." << c.last_size;
      out_ << ": " << c.rule << "\n";
    }
    out_ << assumed_footnote(std::vector<std::string>(assumed_.begin(), assumed_.end()), profile_file_);
    std::vector<const ScenarioOutcome*> scenarios;
    for (const ScenarioOutcome& s : scenarios_) scenarios.push_back(&s);
    out_ << scenario_footnote(scenarios, scenario_labels_, "data_size", "aveg_time");
  }
  out_.flush();
}

std::string format_rows(const std::vector<PerfRow>& rows, RowFormat format, const std::string& table_heading,
                        const HcclTestPreamble& preamble, const std::string& profile_file) {
  std::ostringstream os;
  RowWriter writer(os, format, table_heading, preamble, profile_file);
  for (const PerfRow& r : rows) writer.row(r);
  writer.finish();
  return os.str();
}

}  // namespace hcclsim

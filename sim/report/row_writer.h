// Perf rows as they finish: each row is written and flushed when its size has
// run, in the format the user chose (the table, CSV, a JSON array that is valid
// once finished, JSON lines, or hccl_test's own layout), so a long sweep shows
// its first rows at once and a killed run keeps the rows it had.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <ostream>
#include <string>
#include <vector>

#include "sim/perf/perf.h"

namespace hcclsim {

enum class RowFormat { Table, Csv, Json, JsonLines, HcclTest };

const std::vector<std::string>& row_format_names();  // "table", "csv", "json", "jsonl", "hccl_test"
std::optional<RowFormat> parse_row_format(const std::string& name);

// The columns of the CSV format and one row's fields (CSV-safe: commas and
// newlines in check_result become ';').
// With `scenario`, the columns of PerfRow::scenario follow.
std::vector<std::string> perf_csv_columns(bool scenario = false);
std::vector<std::string> perf_csv_fields(const PerfRow& row);
// One row as the JSON format writes it.
nlohmann::json perf_row_json(const PerfRow& row);
// A row's scenario (its "scenario" field), and the lines a table ends with
// under --scenario: what changed, then per row the healthy time, the
// draws' p50 / p90 / p99 / max, the slowdown and the busiest links.
nlohmann::json scenario_json(const ScenarioOutcome& scenario);
// Back from scenario_json (its times in us with 6 decimals are exact to the
// ps; p50_draw is not carried). Throws nlohmann::json::exception.
ScenarioOutcome scenario_from_json(const nlohmann::json& j);
// `labels` name the rows (under `label_heading`); `time_column` is the
// column of the table above that shows each row's p50.
std::string scenario_footnote(const std::vector<const ScenarioOutcome*>& rows, const std::vector<std::string>& labels,
                              const std::string& label_heading, const std::string& time_column);

// hccl_test prints "the minbytes is B, maxbytes is E, iters is N, warmup_iters
// is W" before its table; the HcclTest format repeats it.
struct HcclTestPreamble {
  std::uint64_t min_bytes = 0;
  std::uint64_t max_bytes = 0;
  int iters = 20;          // hccl_test's defaults
  int warmup_iters = 10;
};

// A JSON array written an element at a time, byte for byte what
// nlohmann::json::dump(2) writes for the whole array.
class JsonArrayStream {
 public:
  explicit JsonArrayStream(std::ostream& out) : out_(out) {}
  void add(const nlohmann::json& element);
  void finish();

 private:
  std::ostream& out_;
  std::size_t count_ = 0;
  bool finished_ = false;
};

class RowWriter {
 public:
  // `table_heading`: the Table format's first line, "# AllReduce on 8 ranks
  // of ..., fp16"; the algorithm of the first row is appended to it. The
  // table ends with assumed_footnote of every row's assumed constants
  // (`profile_file` names where they are marked); hccl_test's layout has none.
  RowWriter(std::ostream& out, RowFormat format, std::string table_heading = "", HcclTestPreamble preamble = {},
            std::string profile_file = "");
  void row(const PerfRow& row);  // writes the row (and the header before the first) and flushes
  void finish();                 // closes the JSON array; idempotent
  std::size_t rows() const { return rows_; }

 private:
  void header(const PerfRow* first);
  std::ostream& out_;
  RowFormat format_;
  std::string table_heading_;
  HcclTestPreamble preamble_;
  std::string profile_file_;
  std::set<std::string> assumed_;   // every row's, for the table's footnote
  // Each executor and the rule that chose it, in the order they first
  // appear, with the data sizes of their rows: the table's "why" lines.
  struct Choice {
    std::string executor, rule;
    std::uint64_t first_size = 0, last_size = 0;
  };
  std::vector<Choice> choices_;
  std::vector<ScenarioOutcome> scenarios_;        // every row's under --scenario, for the footnote
  std::vector<std::string> scenario_labels_;
  JsonArrayStream json_;
  std::size_t rows_ = 0;
  bool finished_ = false;
};


// The line a table ends with: "# assumed constants used: a, b (their source
// in PROFILE says 'assumed')", or "... used: none". Before it, a line per
// executor and the selection rule that chose it: "# AllReduceMeshExecutor
// for data_size 1048576..16777216: graph, one server, > 64 KiB".
std::string assumed_footnote(const std::vector<std::string>& assumed, const std::string& profile_file);

// All rows at once, for callers that have them (tests, tools).
std::string format_rows(const std::vector<PerfRow>& rows, RowFormat format, const std::string& table_heading = "",
                        const HcclTestPreamble& preamble = {}, const std::string& profile_file = "");

}  // namespace hcclsim

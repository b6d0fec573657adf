// Regression baselines for CI: what a command produced (per perf row or per
// program handle, its time), which command and hcclsim version produced it,
// and which files it read with a hash of their bytes. `hcclsim check` runs
// the same command again and compares the times with a tolerance.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/input_files.h"

namespace hcclsim {

// One compared result: a perf row ("all_reduce 8192 B") or a program handle
// ("handle gather (domain 0, repeat 0)") or a program's "total".
struct BaselineItem {
  std::string id;         // unique within a baseline; rows are matched by it
  std::string kind;       // "row", "handle" or "total"
  std::string op;         // perf: the op; run: the handle's collective
  std::uint64_t data_size = 0;  // rows
  std::string algo;       // rows: the algorithm run
  std::string handle;     // handles: name, domain, repeat
  int domain = -1;
  int repeat = -1;
  double time_us = 0;     // 6 decimals: whole picoseconds
};

struct Baseline {
  std::string version;                 // hcclsim's version and git description
  std::vector<std::string> command;    // the words after `hcclsim`
  std::vector<InputFile> inputs;
  std::string command_kind;            // "perf" or "run"
  std::vector<BaselineItem> items;
};

BaselineItem perf_row_item(const std::string& op, std::uint64_t data_size, const std::string& algo, double time_us);
BaselineItem handle_item(const std::string& name, int domain, int repeat, const std::string& op, double time_us);
BaselineItem total_item(double time_us);

std::string baseline_json(const Baseline& baseline);  // the file's text
// Reads a baseline strictly (unknown keys refused; errors name the file and JSON path).
Baseline load_baseline(const std::string& file);

struct ItemComparison {
  enum class Status { Held, Faster, Slower, Missing, Added };
  std::string id;
  Status status = Status::Held;
  std::optional<double> old_us;
  std::optional<double> new_us;
  double change_pct = 0;   // (new - old) / old x 100
  std::string note;        // e.g. "algo level0:ring -> level0:fullmesh"
};

struct Comparison {
  double tolerance_pct = 0;
  std::vector<ItemComparison> items;   // baseline order, then added items
  std::vector<std::string> changed_inputs;  // "path (hash a -> b)", "path (no longer read)", ...
  int count(ItemComparison::Status s) const;
  // A regression: slower beyond the tolerance, or a result missing or added.
  bool regressed() const;
};

// Slower beyond tolerance_pct = Slower; faster beyond it = Faster; else Held.
Comparison compare_baseline(const Baseline& old, const std::vector<BaselineItem>& now,
                            const std::vector<InputFile>& inputs_now, double tolerance_pct);
// What moved, one line per changed item (old, new, change %), and a summary.
std::string format_comparison(const Comparison& c);
// JUnit XML: one testcase per item; a failure element for Slower, Missing, Added.
std::string junit_xml(const Comparison& c, const std::string& suite_name);

// "2%", "2", "0.5%": a non-negative percentage. Throws std::invalid_argument.
double parse_tolerance(const std::string& text);

}  // namespace hcclsim

// `hcclsim check BASELINE`: runs the baseline's command again, in this
// process and through the same dispatcher, on the files as they are now, and
// compares each result's time with the baseline's (sim/report/baseline.h).
#include <iostream>
#include <optional>
#include <sstream>

#include "base/input_files.h"
#include "sim/report/baseline.h"
#include "tools/cli_common.h"
#include "tools/command.h"
#include "tools/dispatch.h"

namespace hcclsim {
namespace {

class CheckCommand : public Command {
 public:
  std::string name() const override { return "check"; }
  std::string summary() const override {
    return "re-run a baseline saved by 'perf/run --save-baseline' and compare the times: exit 1 when a result "
           "got slower beyond the tolerance";
  }
  void declare(CommandOptions& app) override {
    app.add_option("baseline", baseline_file_, "baseline JSON written by --save-baseline")
        ->type_name("FILE")
        ->required();
    app.add_option("--tolerance", tolerance_, "allowed slow-down per result, e.g. 2% (default 2%)")->type_name("PCT");
    app.add_option("--junit", junit_file_, "write JUnit XML, one testcase per result")->type_name("FILE");
  }

  int run(CommandContext& ctx) override {
    double tolerance = 0;
    try {
      tolerance = parse_tolerance(tolerance_);
    } catch (const std::invalid_argument& e) {
      throw InputError("option --tolerance", e.what());
    }
    const Baseline baseline = load_baseline(baseline_file_);
    std::optional<OutputFile> junit;
    if (!junit_file_.empty()) junit.emplace("--junit", junit_file_);
    if (baseline.command.front() == "check") {
      throw InputError(baseline_file_ + " at $.command", "a baseline cannot re-run 'check'");
    }

    std::ostream& out = *ctx.out;
    out << "check: " << baseline_file_ << " (hcclsim " << baseline.version << "), now hcclsim " << hcclsim_version()
        << "\n";
    std::string shown = "hcclsim";
    for (const std::string& w : baseline.command) shown += " " + w;
    out << "re-running: " << shown << "\n";
    out.flush();

    clear_input_files();  // from here on: the files the command reads
    RunRecord record;
    std::ostringstream discarded;  // the command's own output
    SingleProcess one;
    CommandContext replay;
    replay.out = &discarded;
    replay.group = &one;
    replay.record = &record;
    replay.words = baseline.command;
    replay.replay = true;
    const int code = dispatch(baseline.command, replay);
    if (code == 2) {
      throw InputError(baseline_file_ + " at $.command", "the baseline's command no longer runs (see above)");
    }
    if (code == 0 && record.command_kind != baseline.command_kind) {
      throw InputError(baseline_file_ + " at $.command_kind", "the command produced no " + baseline.command_kind +
                                                                  " results");
    }
    const Comparison comparison = compare_baseline(baseline, record.items, input_files_read(), tolerance);
    out << format_comparison(comparison);
    if (code == 1) out << "check: the command itself failed (exit code 1, see above)\n";
    out.flush();
    if (junit) {
      junit->stream() << junit_xml(comparison, "hcclsim check " + baseline_file_);
      junit->close();
    }
    return comparison.regressed() || code != 0 ? 1 : 0;
  }

 private:
  std::string baseline_file_;
  std::string tolerance_ = "2%";
  std::string junit_file_;
};

}  // namespace

std::unique_ptr<Command> make_check_command() { return std::make_unique<CheckCommand>(); }

}  // namespace hcclsim

// `hcclsim validate FILE`: runs every point of a measurement file and
// prints measured, simulated and the error (sim/report/validate.h).
#include <iostream>
#include <optional>

#include "sim/report/validate.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

class ValidateCommand : public Command {
 public:
  std::string name() const override { return "validate"; }
  std::string summary() const override {
    return "run every point of a measurement file; measured, simulated, error % and the mean per group";
  }
  void declare(CommandOptions& app) override {
    app.add_option("file", file_, "measurement file (configs/calibration/measurements.json)")->required();
    app.add_option("--format", format_, "table | json | csv (default table)")->type_name("F");
    app.add_option("--plot", plot_, "write an SVG of simulated against measured")->type_name("OUT.svg");
    app.add_option("--only", only_, "only the points whose id starts with one of these comma-separated prefixes")
        ->type_name("PREFIX[,PREFIX...]");
    app.add_option("--profile", profile_,
                   "run every point with this hardware profile instead of its topology's own (the same product: a "
                   "910B profile for A2 points, a 910C one for A3; another is refused naming the point)")
        ->type_name("FILE");
    app.add_flag("--check", check_,
                 "exit 1 when a point with a stated tolerance is outside it (known gaps are reported, not checked)");
  }
  int run(CommandContext& ctx) override {
    if (format_ != "table" && format_ != "json" && format_ != "csv") {
      throw InputError("option --format", "unknown format '" + format_ + "'; expected table, json or csv");
    }
    std::optional<OutputFile> plot_out;
    if (!plot_.empty()) plot_out.emplace("--plot", plot_);
    std::vector<MeasuredPoint> points = load_measurements(file_);
    if (!only_.empty()) {
      std::vector<std::string> prefixes;
      for (std::size_t at = 0; at <= only_.size();) {
        const std::size_t comma = std::min(only_.find(',', at), only_.size());
        if (comma > at) prefixes.push_back(only_.substr(at, comma - at));
        at = comma + 1;
      }
      std::vector<MeasuredPoint> kept;
      for (const MeasuredPoint& p : points) {
        for (const std::string& prefix : prefixes) {
          if (p.id.rfind(prefix, 0) == 0) {
            kept.push_back(p);
            break;
          }
        }
      }
      if (kept.empty()) throw InputError("option --only", "no point id starts with '" + only_ + "'");
      points = std::move(kept);
    }
    const std::vector<ValidationResult> results =
        run_validation(points, profile_.empty() ? std::nullopt : std::optional<std::string>(profile_));
    const std::vector<GroupSummary> groups = summarize(results);
    if (format_ == "json") {
      *ctx.out << validation_json(results, groups);
    } else if (format_ == "csv") {
      *ctx.out << validation_csv(results);
    } else {
      *ctx.out << validation_table(results, groups);
    }
    if (plot_out) {
      plot_out->stream() << validation_svg(results);
      plot_out->close();
    }
    int outside = 0;
    for (const ValidationResult& r : results) outside += r.status == "outside" ? 1 : 0;
    if (check_ && outside > 0) {
      std::cerr << "hcclsim: " << outside << " point(s) outside their stated tolerance\n";
      return 1;
    }
    return 0;
  }

 private:
  std::string file_;
  std::string format_ = "table";
  std::string plot_;
  std::string only_;
  std::string profile_;
  bool check_ = false;
};

}  // namespace

std::unique_ptr<Command> make_validate_command() { return std::make_unique<ValidateCommand>(); }

}  // namespace hcclsim

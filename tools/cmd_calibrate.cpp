// `hcclsim calibrate FILE... --profile BASE --fit PATH[,PATH...] --out FITTED`:
// fits constants of a hardware profile to measured rows (sim/calibrate/fit.h,
// docs/calibration.md) and writes the profile with the fitted values.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "sim/calibrate/fit.h"
#include "base/input_files.h"
#include "base/json_reader.h"
#include "tools/cli_common.h"
#include "tools/command.h"
#include "tools/dispatch.h"
#include "topologies/config.h"

namespace hcclsim {
namespace {

namespace fs = std::filesystem;

const char* kFooter = R"(Fits the named constants of BASE (dotted JSON paths, e.g. links.hccs.bandwidth,
npu.sdma.task_fixed, npu.stream.op_launch) to the rows of the measurement
files by least squares on the relative error (simulated - measured) /
measured, within the bounds BASE states for each ("bounds": [low, high]),
and writes BASE with the fitted values to FITTED (through a temporary file
renamed at the end; on failure FITTED is not touched). Each fitted constant's
"source" says it was fitted by hcclsim calibrate to the files, "measured"
lists the rows that depend on it, and a "calibration" object records --fit,
the files and --only. Prints per measurement group the mean |error| before
and after and the leave-one-out error (each row predicted by a fit made
without it).

Rows: those whose topology is built of BASE's NPU (910B: A2, 910C: A3), and
with --only those whose id starts with a prefix; rows with a known_gap are
reported but not fitted. Point-to-point and MoE rows run the SystemC model;
a collective row runs in the estimate mode during the fit when, at BASE, it
is within 1% of the detailed model for that row (the JSON output says which
did); the errors before and after are the detailed model's.

Method: Levenberg-Marquardt on each constant scaled to [0, 1] over its
bounds (logarithmically when the low bound is above 0), forward-difference
Jacobian, bounds held, at most 100 iterations, ending when a step would
move no constant by 5e-6 of its value (a tenth of what the rounding below
shows) or lowers the cost by less than 1e-9 of it; independent blocks of rows
and constants are fitted apart. The fit is deterministic: the same inputs give
byte-identical output. Values are rounded to 4 significant digits in the
unit BASE writes them in, and the fit is repeated from the rounded values
until they repeat. Leave-one-out fits are solved on the model linearized at
the full fit, and each row then simulated at their values.

Limits: a handful of constants (each Jacobian simulates every row once per
constant it depends on); a constant without bounds, one no row depends on
(moving it across its bounds changes no simulated row by more than 0.001%)
and a set of files without a row of BASE's product are refused (exit 2). Cost: about rows x
(constants + 3) simulations per iteration; re-creating the shipped A2 and A3
profiles takes about half a minute each. MoE rows take seconds per simulation (two
constants fitted with the 16 A3 MoE rows: 16 minutes): leave them out with
--only.

With neither FILE nor --fit, FILE, --fit and --only are those of BASE's
"calibration" object (re-creating the shipped constants).)";

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    if (comma > at) out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// A file written next to its destination and renamed over it at the end;
// removed if the command fails before.
class ReplacingFile {
 public:
  ReplacingFile(const std::string& option, const std::string& path) : option_(option), path_(path) {
    std::string pattern = (fs::path(path).parent_path() / (fs::path(path).filename().string() + ".tmp-XXXXXX")).string();
    if (fs::path(path).parent_path().empty()) pattern = fs::path(path).filename().string() + ".tmp-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    const int fd = mkstemp(name.data());
    if (fd < 0) throw InputError("option " + option, "cannot write next to " + path);
    ::close(fd);
    temp_ = name.data();
  }
  const std::string& temp() const { return temp_; }
  ~ReplacingFile() {
    if (!temp_.empty()) std::remove(temp_.c_str());
  }
  void commit(const std::string& text) {
    {
      std::ofstream out(temp_, std::ios::binary | std::ios::trunc);
      out << text;
      out.flush();
      if (!out) throw InputError("option " + option_, "writing " + temp_ + " failed");
    }
    if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
      throw InputError("option " + option_, "cannot rename " + temp_ + " to " + path_);
    }
    temp_.clear();
  }

 private:
  std::string option_;
  std::string path_;
  std::string temp_;
};

class CalibrateCommand : public Command {
 public:
  std::string name() const override { return "calibrate"; }
  std::string summary() const override {
    return "fit profile constants to measured rows (least squares within bounds); write the fitted profile";
  }
  void declare(CommandOptions& app) override {
    app.add_option("files", files_, "measurement files (configs/calibration/measurements.json)");
    app.add_option("--profile", profile_, "the profile to start from (BASE)")->required()->type_name("BASE");
    app.add_option("--fit", fit_, "constants to fit, dotted paths into the profile (each states bounds)")
        ->type_name("PATH[,PATH...]");
    app.add_option("--only", only_, "only the rows whose id starts with one of these prefixes")
        ->type_name("PREFIX[,PREFIX...]");
    app.add_option("--out", out_, "where the fitted profile goes (may be BASE)")->required()->type_name("FITTED");
    app.add_option("--format", format_, "table | json (default table)")->type_name("F");
    app.footer(kFooter);
  }
  int run(CommandContext& ctx) override {
    if (format_ != "table" && format_ != "json") {
      throw InputError("option --format", "unknown format '" + format_ + "'; expected table or json");
    }
    CalibrateRequest request;
    request.profile_file = profile_;
    request.out_file = out_;
    request.log = &std::cerr;
    if (files_.empty() && fit_.empty()) {
      // The profile's own record of what was fitted together.
      const ProfileCalibration recorded = load_profile(profile_).calibration;
      if (recorded.fit.empty()) {
        throw InputError("option --fit", "no constants to fit: give FILE... and --fit, or a --profile with a "
                                         "\"calibration\" object naming them");
      }
      if (!only_.empty()) throw InputError("option --only", "given without FILE and --fit; give all three or none");
      const fs::path dir = fs::path(profile_).parent_path();
      for (const std::string& f : recorded.measurements) request.measurement_files.push_back((dir / f).lexically_normal().string());
      request.fit = recorded.fit;
      request.only = recorded.only;
      if (!recorded.then.empty()) return run_stages(ctx, recorded, request.measurement_files);
    } else {
      if (files_.empty()) throw InputError("option --fit", "no measurement file given (FILE...)");
      if (fit_.empty()) throw InputError("option --fit", "missing: the constants to fit");
      request.measurement_files = files_;
      request.fit = split_list(fit_);
      request.only = split_list(only_);
    }
    ReplacingFile out("--out", out_);
    const WallClock clock;
    const CalibrationReport report = calibrate(request);
    out.commit(profile_text(report.profile));
    *ctx.out << (format_ == "json" ? calibration_json(report) : calibration_table(report));
    std::fprintf(stderr, "calibrate: %zu constants, %zu rows, %llu simulations, wall %.1f s; wrote %s\n",
                 report.constants.size(), report.points.size(), static_cast<unsigned long long>(report.simulations),
                 clock.seconds(), out_.c_str());
    return 0;
  }

 private:
  // A record with later stages: each stage is `hcclsim calibrate FILES
  // --profile <the stage before's result> --fit ... --only ...`, run in a
  // child process of its own (SystemC elaborates a process's platforms
  // once, before its first run, and each stage builds its own), then the
  // last result, with the whole record restored, replaces --out.
  int run_stages(CommandContext& ctx, const ProfileCalibration& recorded, const std::vector<std::string>& files) {
    std::vector<CalibrationStage> stages{{recorded.fit, recorded.only}};
    stages.insert(stages.end(), recorded.then.begin(), recorded.then.end());
    ReplacingFile out("--out", out_);
    std::vector<std::unique_ptr<ReplacingFile>> results;  // each stage's profile, removed at the end
    std::string current = profile_;
    for (std::size_t k = 0; k < stages.size(); ++k) {
      results.push_back(std::make_unique<ReplacingFile>("--out", out_));
      std::vector<std::string> words{"calibrate"};
      words.insert(words.end(), files.begin(), files.end());
      words.insert(words.end(), {"--profile", current, "--fit", joined(stages[k].fit), "--out", results.back()->temp(),
                                 "--format", format_});
      if (!stages[k].only.empty()) words.insert(words.end(), {"--only", joined(stages[k].only)});
      std::fprintf(stderr, "calibrate: stage %zu of %zu: %s\n", k + 1, stages.size(), joined(stages[k].fit).c_str());
      if (format_ == "table") *ctx.out << (k == 0 ? "" : "\n") << "stage " << k + 1 << " of " << stages.size() << "\n";
      const int code = run_in_child(words, ctx);
      if (code != 0) return code;
      current = results.back()->temp();
    }
    // The last stage's profile, with the record of every stage in place of its own.
    nlohmann::ordered_json fitted = nlohmann::ordered_json::parse(read_regular_file(current, kMaxJsonFileBytes));
    fitted["calibration"] = nlohmann::ordered_json::parse(read_regular_file(profile_, kMaxJsonFileBytes))["calibration"];
    out.commit(profile_text(fitted));
    return 0;
  }

  static std::string joined(const std::vector<std::string>& list) {
    std::string text;
    for (const std::string& item : list) text += (text.empty() ? "" : ",") + item;
    return text;
  }

  // `hcclsim WORDS` in a child process; its exit code.
  static int run_in_child(const std::vector<std::string>& words, CommandContext& ctx) {
    ctx.out->flush();
    std::fflush(nullptr);
    const pid_t child = ::fork();
    if (child < 0) throw GraphError("calibrate: cannot start a process for a stage");
    if (child == 0) {
      CommandContext stage_ctx;
      stage_ctx.out = ctx.out;
      std::vector<std::string> stage_words = words;
      stage_ctx.words = stage_words;
      const int code = dispatch(stage_words, stage_ctx);
      ctx.out->flush();
      std::fflush(nullptr);
      std::_Exit(code);
    }
    int status = 0;
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    throw GraphError("calibrate: a stage ended by signal " + std::to_string(WTERMSIG(status)));
  }

  std::vector<std::string> files_;
  std::string profile_;
  std::string fit_;
  std::string only_;
  std::string out_;
  std::string format_ = "table";
};

}  // namespace

std::unique_ptr<Command> make_calibrate_command() { return std::make_unique<CalibrateCommand>(); }

}  // namespace hcclsim

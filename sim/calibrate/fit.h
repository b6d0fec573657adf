// `hcclsim calibrate`: fits constants of a hardware profile to measured rows
// (docs/calibration.md).
//
// Contract:
// - The constants are named by dotted paths into the profile JSON
//   ("links.hccs.bandwidth", "npu.sdma.task_fixed"); each must be a cited
//   time, bandwidth or size that states "bounds": [low, high] in the profile.
// - The rows are those of the measurement files whose topology is built of
//   the profile's NPU (910B: A2, 910C: A3), and whose id starts with one of
//   `only` when given. Rows with a known_gap are reported but not fitted.
// - The fit minimises the sum over the fitted rows of the squared relative
//   error (simulated - measured) / measured, by bounded Levenberg-Marquardt
//   on each constant scaled to [0, 1] over its bounds (logarithmically when
//   the low bound is above 0), ending where a step would move no constant
//   by a tenth of what its rounding (below) shows; deterministic. A trial value is written into a
//   copy of the profile JSON, read again into typed parameters and applied to
//   platforms elaborated once (Platform::set_parameters).
// - Fitted values are rounded to kFitDigits significant digits in the unit
//   the profile wrote them in, and the fit is repeated from the rounded
//   values until they repeat, so calibrating the written profile again
//   gives the same values.
// - Collective rows run in the estimate mode during the fit when, at the
//   base profile, it is within 1% of the detailed model for that row;
//   point-to-point and MoE rows have no closed form and always run the
//   SystemC model. The errors reported before and after are the detailed
//   model's.
// Bad input (a path, a constant without bounds, one no row depends on, no
// rows) is an InputError naming the option or the file and JSON path.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>   // CalibrationReport holds an ordered_json by value
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/report/validate.h"

namespace hcclsim {

constexpr int kFitDigits = 4;
// A row depends on a constant when moving the constant from one bound to
// the other changes the row's simulated value by more than this fraction.
constexpr double kDependence = 1e-5;
constexpr const char* kDependenceText = "0.001%";
// The fit's iteration cap.
constexpr int kFitIterations = 100;
// A collective row runs in the estimate mode during a fit when it is this
// close to the detailed model at the base profile.
constexpr double kEstimateAgreement = 0.01;

struct CalibrateRequest {
  std::vector<std::string> measurement_files;
  std::string profile_file;          // BASE
  std::vector<std::string> fit;      // dotted paths of the constants to fit
  std::vector<std::string> only;     // row id prefixes; empty: every row of the product
  // Where the fitted profile will be written: the measurement files are
  // named relative to its directory in it. Empty: as given.
  std::string out_file;
  std::ostream* log = nullptr;       // progress notes (stderr), or none
  bool leave_one_out = true;         // false: no leave-one-out fits (their errors stay empty)
};

struct FittedConstant {
  std::string path;
  std::string before;                // as the base profile writes it ("27.1GBps")
  std::string after;                 // as the fitted profile writes it
  std::string low, high;
  std::string at_bound;              // "low", "high" or "" (inside its bounds)
  std::vector<std::string> rows;     // ids of the fitted rows that depend on it
};

struct CalibratedPoint {
  std::size_t point = 0;             // index into CalibrationReport::points
  bool fitted = false;               // took part in the fit (no known gap)
  bool estimate = false;             // the fit ran it in the estimate mode
  double before_pct = 0;             // error of the detailed model at the base profile
  double after_pct = 0;              // ... at the fitted profile
  std::optional<double> loo_pct;     // fitted rows: predicted by a fit made without it
};

struct CalibratedGroup {
  std::string group;
  int points = 0;
  int fitted = 0;
  double before_pct = 0;             // mean |error| over its points
  double after_pct = 0;
  std::optional<double> loo_pct;     // mean |leave-one-out error| over its fitted points
};

struct CalibrationReport {
  std::vector<std::string> files;    // the measurement files as the fitted profile names them
  std::vector<MeasuredPoint> points; // the rows that took part (the profile's product, `only`)
  std::vector<FittedConstant> constants;
  std::vector<CalibratedPoint> rows;
  std::vector<CalibratedGroup> groups;
  int iterations = 0;                // Jacobians of the final fit
  std::uint64_t simulations = 0;     // rows simulated (a cache answers repeats)
  nlohmann::ordered_json profile;    // the base profile with the fitted values
};

CalibrationReport calibrate(const CalibrateRequest& request);

std::string calibration_table(const CalibrationReport& report);
std::string calibration_json(const CalibrationReport& report);

// A profile as the shipped ones are laid out: an object whose members hold
// no object (a cited constant) on one line, others one member per line.
std::string profile_text(const nlohmann::ordered_json& profile);

}  // namespace hcclsim

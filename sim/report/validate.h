// `hcclsim validate FILE`: every point of a measurement file run on the
// simulator, against its measured value. The file format is a contract
// other tools write to (docs/calibration.md "The measurement file"):
//   {"points": [{"id", "group", "topology", "servers", "ranks", "op", "dtype",
//     "size_bytes", "size_means", "metric", "value", "options", "source",
//     "tolerance_pct"?, "known_gap"?, "block_bytes"?, "total_bytes"?}]}
// Point-to-point rows use op "p2p_write", "p2p_read" or "p2p_notify" with
// block_bytes / total_bytes and options.method single_task | batch | domain.
// MoE rows use op "moe_dispatch" / "moe_combine" with the MoE parameters
// under options. Step rows use op "step" with options.model (a Hugging Face
// config.json, resolved as the topology is), layout, batch, phase and
// dispatcher as `hcclsim step` takes them, and metric time_us or
// tokens_per_npu_s (tokens a step processes / its time / NPUs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/json_reader.h"
#include "sim/executors/executor.h"
#include "topologies/platform_spec.h"

namespace hcclsim {

struct HardwareProfile;

struct MeasuredPoint {
  std::string id;
  std::string group;
  std::string topology;        // as written in the file
  std::string topology_file;   // resolved path
  std::string model_file;      // a step point: options.model resolved
  int servers = -1;            // -1: as the topology says
  int ranks = 0;               // 0: every NPU
  std::string op;              // a perf op name, p2p_write / p2p_read / p2p_notify, moe_dispatch / moe_combine, step
  std::string dtype = "fp16";
  std::uint64_t size_bytes = 0;
  std::string size_means = "hccl_test";   // input_per_rank | output_per_rank | hccl_test
  std::string metric = "time_us";         // time_us | algbw_GBps | busbw_GBps | tokens_per_npu_s (step)
  double value = 0;
  std::map<std::string, std::string> options;  // strings as written (numbers as their text)
  std::string source;
  std::optional<double> tolerance_pct;
  std::string known_gap;
  std::uint64_t block_bytes = 0;
  std::uint64_t total_bytes = 0;
  JsonLocation where;          // the point in its file ("FILE at $.points[3]"), for errors
};

struct ValidationResult {
  const MeasuredPoint* point = nullptr;
  double simulated = 0;
  double error_pct = 0;        // 100 (simulated - measured) / measured
  std::string executor;        // what ran (an executor, a p2p method, a MoE kernel)
  // "ok" (within tolerance), "outside" (beyond it), "gap" (a known gap),
  // "-" (no tolerance stated).
  std::string status;
};

struct GroupSummary {
  std::string group;
  int points = 0;
  double mean_abs_error_pct = 0;
  // Rows marked known_gap (each with the mechanism it lacks, pinned by a
  // test) and the mean over the other rows: what the model claims to
  // reproduce. Without rows left, the mean is not defined (nullopt).
  int known_gaps = 0;
  std::optional<double> mean_abs_error_without_gaps_pct;
};

// The collectives a point may name: the perf ops and alltoallv.
const std::vector<std::string>& measured_collective_ops();

// Reads the file strictly (unknown keys refused, errors name the file and
// the JSON path). Relative topology paths resolve against the working
// directory, else against the nearest directory above the file that holds them.
std::vector<MeasuredPoint> load_measurements(const std::string& file);

// A measurement file of `points` (sim/calibrate/import.h writes one): the
// description, then one point a line with its keys in the order above;
// servers, ranks, options, tolerance_pct and known_gap only when set.
// load_measurements reads back the same points (options as their text).
std::string measurements_json(const std::vector<MeasuredPoint>& points, const std::string& description);

// The topology a point runs on: its file with its servers (-1: as the file
// says; 1 on a listed, one-server topology: that topology as it is).
TopologySpec load_point_topology(const std::string& file, int servers);

// Runs points on platforms elaborated once: one per (topology, servers,
// flow quantum) of the points it is made with, all before the first run
// (SystemC elaborates once). `hcclsim validate` runs each point once;
// `hcclsim calibrate` re-times the same platforms for each trial profile.
class PointRunner {
 public:
  // With `profile_file`, every topology takes that profile instead of its
  // own, which must describe the same NPU (910B: A2, 910C: A3); otherwise an
  // InputError names option --profile and the point.
  explicit PointRunner(const std::vector<MeasuredPoint>& points,
                       const std::optional<std::string>& profile_file = std::nullopt);
  ~PointRunner();
  PointRunner(const PointRunner&) = delete;
  PointRunner& operator=(const PointRunner&) = delete;

  // Every platform re-timed with `profile` (of the same NPU): the hardware
  // stays elaborated, its constants change (Platform::set_parameters).
  void set_profile(const HardwareProfile& profile);

  // One of the points it was made with. `estimate`: a collective point from
  // the closed forms (--model estimate) instead of the SystemC model; the
  // other points have none (has_closed_form) and ignore it.
  ValidationResult run(const MeasuredPoint& p, bool estimate = false);

 private:
  struct Site;
  std::vector<std::unique_ptr<Site>> sites_;
  std::map<std::tuple<std::string, int, std::uint64_t>, std::size_t> index_;
};

// Whether `--model estimate` has a form for the point: collectives do;
// point-to-point and MoE points run on the SystemC model only. Step points
// always run on the step's estimate (a real step is hundreds of millions of
// tasks), so they have one too.
bool has_closed_form(const MeasuredPoint& p);

// Runs every point (each topology elaborated once, all before the first
// run), with `profile_file` in place of each topology's profile if given.
std::vector<ValidationResult> run_validation(const std::vector<MeasuredPoint>& points,
                                             const std::optional<std::string>& profile_file = std::nullopt);
std::vector<GroupSummary> summarize(const std::vector<ValidationResult>& results);

std::string validation_table(const std::vector<ValidationResult>& results, const std::vector<GroupSummary>& groups);
std::string validation_csv(const std::vector<ValidationResult>& results);
std::string validation_json(const std::vector<ValidationResult>& results, const std::vector<GroupSummary>& groups);
// Simulated against measured, log-log, one colour per group, the y = x line
// and a +-10% band.
std::string validation_svg(const std::vector<ValidationResult>& results);

}  // namespace hcclsim

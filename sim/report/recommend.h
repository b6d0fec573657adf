// `hcclsim recommend`: for each op and size, HCCL's default choice against
// the best HCCL_ALGO / HCCL_OP_EXPANSION_MODE setting hcclsim finds among
// the candidates valid for the topology, and the predicted gain; as a table,
// JSON, or the environment lines to export.
//
// Each candidate is a perf request (PerfRequest::algo, ::expansion) run by
// the caller's runner (estimate_perf or run_perf). Candidates that make HCCL
// run the same executor with the same level plan for a size take the same
// time (the executors' builders and closed forms read only the plan), so
// each such pair runs once per size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/perf/perf.h"

namespace hcclsim {

// The expansion modes HCCL_OP_EXPANSION_MODE offers on the product (CANN
// envvar reference): A2 HOST (default) and AIV; A3 AI_CPU (default) and AIV.
std::vector<Expansion> supported_expansions(const HcclApiLimits& api);
// HCCL_OP_EXPANSION_MODE's spelling: HOST, AI_CPU, AIV.
std::string expansion_env_value(Expansion expansion);

// One setting tried: an HCCL_ALGO value naming every level the hierarchy
// has ("level0:NA;level1:NHR"; NA = HCCL's choice) and an expansion mode.
struct RecommendCandidate {
  std::string algo;
  AlgoRequest request;        // `algo` parsed
  Expansion expansion = Expansion::Host;
  bool is_default = false;    // every level NA and the product's default mode
};
// The default first, then level 0 {NA, fullmesh, ring}, level 1 (more than
// one server) {NA, ring, H-D_R, NHR, NB, pairwise, pipeline}, level 2 (more
// than one supernode) {NA, ring, H-D_R, NHR, NB, pairwise}, each with every
// supported expansion mode. Some are refused for some ops and sizes; those
// are skipped.
std::vector<RecommendCandidate> recommend_candidates(const Hierarchy& h, const HcclApiLimits& api);

// (default / best - 1) x 100: how much faster the best setting is, in %.
double gain_pct(Time default_time, Time best_time);

struct RecommendChoice {
  std::string executor;
  std::string algo;           // the HCCL_ALGO value
  std::string levels;         // the levels that run ("level0:fullmesh;level1:NHR", "flat:NHR")
  Expansion expansion = Expansion::Host;
  Time time;
  bool is_default = false;
  std::size_t candidate = 0;  // index into the candidates
  std::vector<std::string> assumed;  // the assumed constants its tasks used
};

struct RecommendRow {
  std::string op;             // coll_op_name
  std::uint64_t data_size = 0;
  int ranks = 0;
  std::string dtype;          // data_type_name
  std::string model;          // "estimate" or "detailed"
  RecommendChoice by_default;
  RecommendChoice best;       // by_default when nothing beats it
  double gain = 0;            // gain_pct(by_default.time, best.time)
  std::size_t evaluated = 0;  // candidates HCCL accepts at this size
  std::size_t skipped = 0;    // candidates refused (for the op, the size, or hcclsim's models)
};

// One op over the sweep: the rows, and each candidate's time per size
// (nullopt: refused there), for the per-process choice.
struct RecommendOp {
  CollOp op = CollOp::AllReduce;
  std::string model;
  std::vector<std::uint64_t> sizes;                      // of the rows
  std::vector<RecommendRow> rows;
  std::vector<std::vector<std::optional<Time>>> times;   // [candidate][row]
  std::vector<std::string> notes;                        // sizes left out, with the reason
};

// "estimate", "detailed", or "auto": the estimate when it has a closed form
// for every executor the op's candidates select, else detailed.
enum class RecommendModel : std::uint8_t { Auto, Estimate, Detailed };

// Runs `base` (op, ranks, dtype, buffer; no algo or expansion) with
// `request.sizes` for one model; throws std::invalid_argument (or
// InputError) when a candidate cannot run.
using RecommendRunner = std::function<std::vector<PerfRow>(const PerfRequest& request, bool estimate)>;

// Evaluates every candidate of `base.op` at each of `sizes`. A size whose
// default HCCL refuses is left out with a note; with --model estimate a
// candidate whose executor has no closed form is skipped (the default
// without one: std::invalid_argument naming it).
RecommendOp recommend_op(const TopologySpec& topology, const PerfRequest& base,
                         const std::vector<std::uint64_t>& sizes, const std::vector<RecommendCandidate>& candidates,
                         RecommendModel model, const RecommendRunner& runner);

// The per-process settings: HCCL_ALGO and HCCL_OP_EXPANSION_MODE hold one
// value per process. One expansion mode for every op (the least time summed
// over the ops and sizes), then per op the candidate of that mode with the
// least time summed over its sizes (only candidates valid at every size).
// Ties keep the default, then the earlier candidate.
struct ProcessSetting {
  Expansion expansion = Expansion::Host;
  bool expansion_is_default = true;
  Time expansion_total;          // summed over the ops with `expansion`
  Time default_total;            // the same with HCCL's defaults
  struct PerOp {
    std::size_t candidate = 0;   // into the candidates
    Time total;                  // summed over the op's sizes
    Time default_total;
    std::size_t alone = 0;       // the op's own best over every mode (what --ops OP alone would say)
    Time alone_total;
  };
  std::vector<PerOp> ops;        // as the RecommendOps
  // Modes left out: an op has no candidate of that mode valid at every size
  // (HCCL refuses it, or hcclsim does not model the executor HCCL would run).
  std::vector<std::pair<Expansion, std::string>> unusable;   // mode, the first such op
};
ProcessSetting choose_process_setting(const std::vector<RecommendOp>& ops,
                                      const std::vector<RecommendCandidate>& candidates, const HcclApiLimits& api);

// Outputs. `heading` names the ranks, topology, dtype.
void write_recommend_table(std::ostream& out, const std::string& heading, const std::vector<RecommendOp>& ops,
                           std::size_t candidates);
nlohmann::json recommend_json(const std::vector<RecommendOp>& ops);
void write_recommend_env(std::ostream& out, const std::string& heading, const std::vector<RecommendOp>& ops,
                         const std::vector<RecommendCandidate>& candidates, const HcclApiLimits& api);

}  // namespace hcclsim

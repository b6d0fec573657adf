// hccl_test on the simulator: one collective over a sweep of sizes, each
// size run on the same elaborated hardware after the previous one, timed
// from its own start, with the data check and the bandwidth figures.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/executors/hierarchy.h"
#include "sim/executors/executor.h"
#include "sim/link_usage.h"
#include "sim/scenario/scenario_run.h"
#include "sim/task_graph.h"
#include "sim/trace.h"
#include "topologies/platform.h"

namespace hcclsim {

struct PerfRequest {
  CollOp op = CollOp::AllReduce;
  int ranks = 8;
  DataType dtype = DataType::Fp16;
  ReduceOp reduce_op = ReduceOp::Sum;
  int root = 0;
  std::vector<std::uint64_t> sizes;       // data_size of each row, bytes
  AlgoRequest algo;                       // unset levels: HCCL's choice
  std::uint64_t buffer_bytes = 0;         // HCCL_BUFFSIZE
  bool check = true;
  WorkflowMode mode = WorkflowMode::OpBase;
  std::optional<Expansion> expansion;     // unset: HCCL's default for the product
  bool deterministic = false;
  std::string executor;                   // non-empty: run this executor instead of HCCL's choice
  // AlltoAllV (op AlltoAll): how each rank's data_size splits over its peers;
  // empty for a plain AlltoAll. See alltoallv_counts().
  std::string alltoallv_distribution;
  // Every link's usage in each row (PerfRow::links), for --links and --stats;
  // the summary (PerfRow::link_summary) is always filled.
  bool link_details = false;
  // Estimate: the largest executor graph built (not run) to list the assumed
  // constants a row's tasks would use; a larger collective's row lists every
  // assumed constant of the profile (an upper bound). hcclsim step, which
  // estimates many large collectives, builds smaller ones only.
  // 2^17: building one takes about 0.1 s on the project's VM (2^20 took about
  // a second, the whole of a large sweep's wall).
  std::uint64_t assumed_graph_max_tasks = std::uint64_t{1} << 17;
};

struct PerfRow {
  std::string op_name;          // hccl_test's name; "alltoallv" for AlltoAllV
  CollOp op;
  int ranks;
  DataType dtype;
  ReduceOp reduce_op;
  std::string algo;
  std::string executor;         // HCCL's executor name
  std::string executor_rule;    // the selection rule that chose it
  std::uint64_t count;          // elements, hccl_test's count
  std::uint64_t input_bytes;    // per rank
  std::uint64_t output_bytes;   // per rank
  std::uint64_t data_size;      // bytes the bandwidths divide (docs/user-guide.md)
  Time time;
  double algbw_gbps;
  double busbw_gbps;
  std::string check;            // "success", "fail: ...", or "skipped"
  std::string model = "detailed";  // "detailed" (SystemC) or "estimate" (closed form)
  std::uint64_t tasks;
  std::uint64_t activations;
  // Wall seconds this process spent producing the row (choosing, building
  // and running, or evaluating the closed form); for --stats, never in the
  // rows themselves (they stay bit-for-bit repeatable).
  double seconds = 0;
  LinkSummary link_summary;       // the busiest link and bytes per link kind during this row
  std::vector<LinkUsage> links;   // every link that carried data (with PerfRequest::link_details)
  // The profile's assumed constants the row's tasks paid, as dotted paths,
  // sorted (sim/used_constants.h; README "Assumed constants").
  std::vector<std::string> assumed;
  // With --scenario: the healthy time beside the scenario's draws (`time`
  // is then their p50), what changed and the busiest links.
  std::optional<ScenarioOutcome> scenario;
};

// Elements per rank (hccl_test's count) for a requested data_size, rounded
// down to whole elements per rank; the row reports the size actually used.
std::uint64_t count_for_size(CollOp op, int ranks, DataType dtype, std::uint64_t data_size);
std::uint64_t data_size_of(CollOp op, int ranks, DataType dtype, std::uint64_t count);
// nccl-tests bus bandwidth factor: AllReduce 2(n-1)/n; AllGather,
// ReduceScatter, AlltoAll (n-1)/n; Broadcast, Reduce 1.
double bus_factor(CollOp op, int ranks);

// Per-peer element counts [from][to] for an AlltoAllV in which every rank
// sends about `elements` in all: "uniform" (equal shares), "random:SEED"
// (each share uniform in [0, 2 x mean], from a fixed generator), "zipf:S"
// (rank r gives peer r+k a share proportional to 1/(k+1)^S, so near peers
// get more). Throws std::invalid_argument naming the accepted forms.
std::vector<std::vector<std::uint64_t>> alltoallv_counts(const std::string& distribution, int ranks,
                                                         std::uint64_t elements);

// hccl_test's sizes: first, first x factor, ... while not past last (factor 1:
// just first). Throws std::invalid_argument unless 0 < first <= last.
std::vector<std::uint64_t> perf_sizes(std::uint64_t first, std::uint64_t last, std::uint64_t factor);
// Why `size` cannot be a row of `op` on `ranks` ranks ("data_size 3 is not a
// multiple of the fp16 element size (2 bytes)"), or "" when it can.
std::string perf_size_problem(CollOp op, const std::string& op_name, int ranks, DataType dtype, std::uint64_t size);

// What a run allocates, estimated before it starts, so that a run that would
// exhaust memory is refused with the reason instead of ending in
// std::bad_alloc (or the OOM killer): the platform (kPlatformBytesPerNpu per
// NPU, channels, engines and routes) plus the task graph (kBytesPerTask per
// task by the time it has run). The default limit is kMaxRunBytes (16 GiB;
// the CLI's --max-memory changes it).
constexpr std::uint64_t kMaxRunBytes = 16ULL << 30;
constexpr std::uint64_t kPlatformBytesPerNpu = 64ULL << 10;
struct Footprint {
  std::uint64_t tasks = 0;
  std::uint64_t bytes = 0;
};
// A rough upper estimate for one row of `size` bytes: ranks x buffer loops x
// (tasks per loop: about 20 per server peer and 24 per level-1 step).
Footprint estimate_perf_row(const TopologySpec& topology, const PerfRequest& request, std::uint64_t size);
// "too large: ... needs about 27 GiB ..." when `f` is over `limit`, else "".
std::string footprint_problem(const Footprint& f, const std::string& what, std::uint64_t limit = kMaxRunBytes);

// How the first `ranks` NPUs of a platform split into servers and supernodes.
// Throws std::invalid_argument when `ranks` cuts a server in two.
Hierarchy hierarchy_of(const TopologySpec& topology, int ranks);
Hierarchy hierarchy_of(const Platform& platform, int ranks);

// The selection context of a request on a platform.
ExecContext exec_context(const TopologySpec& topology, const PerfRequest& request);
ExecContext exec_context(const Platform& platform, const PerfRequest& request);

// The collective of a row of `size` bytes (hccl_test's count for it).
CollectiveSpec collective_for(const PerfRequest& request, std::uint64_t size);

// What perf would run for a row of `size` bytes (HCCL's selection, or
// request.executor), without running it: the same choice run_perf and
// estimate_perf make. Throws std::invalid_argument where they would refuse
// it before building anything (an executor HCCL would pick that hcclsim
// does not model, one that cannot run the collective). The executor and
// plan fix the row's time (hcclsim recommend runs each such pair once).
ExecutorChoice perf_choice(const TopologySpec& topology, const PerfRequest& request, std::uint64_t size);

// Called with each row as soon as its size has run (index into request.sizes),
// so that a caller can write it before the next, longer size starts.
using PerfRowCallback = std::function<void(std::size_t index, const PerfRow& row)>;

// Runs the sweep; a row whose run deadlocks throws GraphError (a bug in an
// algorithm, never the user's input).
std::vector<PerfRow> run_perf(Platform& platform, const PerfRequest& request, TraceWriter* trace = nullptr,
                              const PerfRowCallback& on_row = {});

// run_perf under a scenario (sim/scenario/scenario_run.h): each size on
// the healthy parameters, then the scenario's draws; each row is the p50
// draw's, with PerfRow::scenario filled. OperationFailed when HCCL would
// fail the operation under the scenario.
std::vector<PerfRow> run_perf_scenario(Platform& platform, const PerfRequest& request, const ScenarioSetup& setup,
                                       const PerfRowCallback& on_row = {});

// `--model estimate`: the same rows from the executors' closed forms
// (sim/estimate), without SystemC and without a data check ("skipped").
// Throws std::invalid_argument for an executor that has no closed form.
// Throws std::invalid_argument (estimate_problem's text) for a size it
// refuses.
std::vector<PerfRow> estimate_perf(const TopologySpec& topology, const PerfRequest& request,
                                   const PerfRowCallback& on_row = {});
// The closed forms walk the loops over the HCCL buffer (a few per
// data_size / HCCL_BUFFSIZE): why a row of `size` bytes is refused when
// there would be more than kMaxEstimateLoops of them, or "".
constexpr std::uint64_t kMaxEstimateLoops = 1ULL << 16;
std::string estimate_problem(const PerfRequest& request, std::uint64_t size);

// Output formats: sim/report/row_writer.h.

}  // namespace hcclsim

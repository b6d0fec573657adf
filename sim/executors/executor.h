// HCCL's executors as hcclsim runs them: each collective goes through the
// selection HCCL makes for its product (operator SelectAlg*), which names an
// executor (e.g. AllReduceMeshOpbaseLoopExecutor); the executor registered
// under that name builds the task graph with that executor's streams,
// copies, reads or writes and synchronisation. No SystemC here.
//
// Registry contract: an executor registers once, by HCCL's name, with the
// HCCL source its structure follows, a support predicate (can it run this
// collective in this context at all) and a builder. Selection never names
// an executor whose predicate refuses the context; `--executor` may ask for
// any registered one, and is refused with the predicate's reason.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/params.h"
#include "sim/executors/collective.h"
#include "sim/executors/hierarchy.h"

namespace hcclsim {

// HCCL's workflow mode: op-base (single operator: hccl_test, torch eager) or
// graph (operators compiled into a graph, "offload").
enum class WorkflowMode : std::uint8_t { OpBase, Graph };
// HCCL_OP_EXPANSION_MODE: who expands an operator into tasks. Host and AI CPU
// expansion issue SDMA / RDMA tasks on streams; AIV runs the collective as a
// kernel on the AI Vector cores.
enum class Expansion : std::uint8_t { Host, AiCpu, Aiv };

std::string workflow_mode_name(WorkflowMode mode);            // "opbase", "graph"
std::optional<WorkflowMode> parse_workflow_mode(const std::string& name);
std::string expansion_name(Expansion expansion);             // "host", "aicpu", "aiv"
std::optional<Expansion> parse_expansion(const std::string& name);
// HCCL's default (HCCL_OP_EXPANSION_MODE.md: HOST on A2, AI_CPU on A3), as
// the profile states it (npu.hccl_api.expanding_engine).
Expansion default_expansion(const HcclApiLimits& api);

// What HCCL's selection looks at besides the collective itself.
struct ExecContext {
  HcclRules hccl_rules = HcclRules::A2;
  WorkflowMode mode = WorkflowMode::OpBase;
  Expansion expansion = Expansion::Host;
  bool deterministic = false;             // HCCL_DETERMINISTIC=true
  Hierarchy hierarchy;                    // servers and supernodes taking part
  Bandwidth inter_server_bandwidth;       // per NPU, for HCCL's level-1 cost model
  int aiv_cores = 48;                     // AI Vector cores per NPU
  HcclApiLimits hccl;                     // the profile's npu.hccl_api: how HCCL builds some executors on it
  AlgoRequest algo;                       // HCCL_ALGO; unset levels are HCCL's choice
};

// The selection's answer: which executor, and for hierarchical executors the
// algorithms of each level.
struct ExecutorChoice {
  std::string executor;
  AlgoPlan plan;
  std::string rule;                       // the selection rule that chose it, for tests and messages
  // "level0:double_ring;level1:NHR"-style description of the levels that take part.
  std::string describe(const ExecContext& ctx, CollOp op) const;
};

class EstimateFabric;

struct Executor {
  std::string name;                        // HCCL's executor name
  std::string source;                      // the HCCL source file its structure follows
  std::string summary;                     // one line: streams, copies, who moves the bytes
  // Empty when the executor can run `spec` in `ctx`; otherwise why not.
  std::function<std::string(const CollectiveSpec&, const ExecContext&)> refuses;
  std::function<TaskGraph(const CollectiveSpec&, const ExecContext&, const AlgoPlan&)> build;
  // Its closed form for --model estimate (sim/estimate): the collective's
  // time in ps on the estimate's fabric. Empty: the detailed model only.
  using Estimate = std::function<double(const CollectiveSpec&, const ExecContext&, const AlgoPlan&, const EstimateFabric&)>;
  Estimate estimate = {};
  bool on_aiv = false;                     // its graph moves data on the AI Vector cores (flags, AIV copies)
};

// Every registered executor, in registration order.
const std::vector<Executor>& executors();
// nullptr when no executor has that name.
const Executor* find_executor(const std::string& name);

// HCCL's selection for the product of `ctx` (select_a2.cpp, select_a3.cpp).
// Throws std::invalid_argument when HCCL would run an executor whose task
// structure hcclsim does not model, naming it.
ExecutorChoice select_executor(const CollectiveSpec& spec, const ExecContext& ctx);

// The level algorithms HCCL would run for a hierarchical executor (HCCL_ALGO,
// else the product's defaults): what a requested executor runs with.
AlgoPlan default_levels(const CollectiveSpec& spec, const ExecContext& ctx);

// Builds the chosen executor's graph; refuses (std::invalid_argument) an
// executor that does not support the context, with its reason.
TaskGraph build_executor(const CollectiveSpec& spec, const ExecContext& ctx, const ExecutorChoice& choice);

// SDMA inline reduction (Reduce_Inline) exists for fp32/fp16/bf16/int8/
// int16/int32 with sum/max/min on 910B and 910_93 (hcomm device_capacity.cc
// IsSupportSDMAReduce); other dtypes and prod take HCCL's non-inline paths.
bool sdma_inline_reduce(DataType dtype, ReduceOp op);

// The distances of each round, flat: up to 8 a round, 12,480 rounds on
// 99,840 dies, where one small vector each cost a millisecond a point to
// allocate.
class DistanceRounds {
 public:
  struct Round {  // one round's distances, in place
    const int* first;
    std::size_t count;
    std::size_t size() const { return count; }
    int operator[](std::size_t j) const { return first[j]; }
    const int* begin() const { return first; }
    const int* end() const { return first + count; }
  };
  std::size_t size() const { return ends_.size(); }
  Round operator[](std::size_t k) const {
    const std::size_t from = k == 0 ? 0 : ends_[k - 1];
    return Round{distances_.data() + from, ends_[k] - from};
  }
  void add(int distance) { distances_.push_back(distance); }
  void reserve(std::size_t distances, std::size_t rounds) {
    distances_.reserve(distances);
    ends_.reserve(rounds);
  }
  // Ends the round of the distances added since the last (none: no round).
  void end_round() {
    if (distances_.size() > (ends_.empty() ? 0 : ends_.back())) ends_.push_back(distances_.size());
  }

 private:
  std::vector<int> distances_;
  std::vector<std::size_t> ends_;  // round k ends at distances_[ends_[k]]
};
// RunAlltoAllDirectFullmesh's layout (mesh_a2.cpp): up to 8 peers at once
// (distances +-i in rounds), one or two groups of CCL_IN blocks (two for
// AlltoAllV or pairs over 1 MiB), `steps` pieces of `block` elements for the
// largest pair. Shared by the builder and the closed form (sim/estimate).
struct DirectFullmeshPlan {
  int concurrent = 1;
  int groups = 1;
  std::uint64_t block = 1;  // elements
  DistanceRounds rounds;
  std::uint64_t steps = 0;
};
DirectFullmeshPlan direct_fullmesh_plan(const CollectiveSpec& spec, std::uint64_t largest_pair, bool alltoallv);

// The closed form of HCCL's executor `name`, or nullptr (no such executor,
// or one the estimate has no form for).
const Executor::Estimate* find_estimate(const std::string& name);

// Registration, called once by executors() in a fixed order: the builders
// (sim/executors/*.cpp), then the closed forms by executor name
// (sim/executors/*_estimate.cpp), each of which must name a registered executor.
void register_mesh_executors(std::vector<Executor>& out);
void register_ring_executors(std::vector<Executor>& out);
void register_aiv_executors(std::vector<Executor>& out);
void register_hierarchical_executors(std::vector<Executor>& out);
void register_mesh_estimates(std::map<std::string, Executor::Estimate>& out);
void register_level1_estimates(std::map<std::string, Executor::Estimate>& out);
void register_hierarchical_estimates(std::map<std::string, Executor::Estimate>& out);
void register_ring_estimates(std::map<std::string, Executor::Estimate>& out);
void register_aiv_estimates(std::map<std::string, Executor::Estimate>& out);

}  // namespace hcclsim

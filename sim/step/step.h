// hcclsim step: one training (or inference) step of a model on a layout,
// every parallel group's communication at once on one fabric, with compute.
//
// Ranks in Megatron's order "tp-cp-ep-dp-pp": rank = t + tp * (c + cp * (d +
// dp * s)) for TP index t, CP index c, DP index d and pipeline stage s; an EP
// group is ep consecutive DP indices (ep divides dp), an expert-DP group the
// DP indices equal modulo ep. Each group is an HCCL communication domain:
// its collectives go through HCCL's selection (sim/executors) in a view of
// the topology in which the group's ranks come first (so the hierarchy,
// servers and supernodes are the group's own), and the detailed back end
// appends every instance's graph onto the global ranks of ONE TaskGraph, so
// that the groups contend for links. The estimate back end times each
// collective by its executor's closed form alone and evaluates the same
// schedule of operations (no contention between groups).
//
// Schedule (Megatron / MindSpeed-LLM as modelled): 1F1B (interleaved with
// vpp > 1, m a multiple of pp); TP AllReduce after attention and MLP, or
// with sequence parallelism AllGather before and ReduceScatter after each,
// on the compute stream (blocking; no --tp-comm-overlap); EP dispatch and
// combine blocking (alltoall: AlltoAll; allgather: AllGather + ReduceScatter;
// deepep: the MoE kernels of sim/moe); CP: ring attention, cp steps of the
// core attention, each overlapping the send of the K/V block to the next
// rank of the ring (a 2-rank Broadcast on a stream of its own); PP:
// a send is a 2-rank Broadcast from the sender on a stream of its own
// (HCCL's BatchSendRecv is not modelled), the receiver blocks; DP:
// distributed optimizer, gradient ReduceScatter per bucket (Megatron's
// bucket of max(40M, 1M x dp) parameters) on a DP stream as the last
// micro-batch's backward completes each bucket (--overlap-grad-reduce),
// then the optimizer, then the parameter AllGather (no --overlap-param-gather).
// Compute: a roofline per operator and micro-batch, max(flops / cube rate,
// bytes / HBM bandwidth), backward twice the forward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/link_usage.h"
#include "sim/step/chakra.h"
#include "sim/step/model_config.h"
#include "sim/trace.h"
#include "topologies/platform.h"
#include "topologies/platform_spec.h"

namespace hcclsim {

enum class StepPhase : std::uint8_t { Train, Prefill, Decode };
enum class Dispatcher : std::uint8_t { AlltoAll, AllGather, DeepEp };

// Activation recomputation, as Megatron's --recompute-granularity full:
// the layers recomputed keep only their input and run their forward again
// (its compute and its TP, CP and EP communication) just before their
// backward. `layers` < 0: every layer (--recompute-method uniform
// --recompute-num-layers 1); else the first `layers` of each model chunk on
// a stage (--recompute-method block --recompute-num-layers N).
struct Recompute {
  bool on = false;
  int layers = -1;
  bool covers(std::int64_t index_in_chunk) const { return on && (layers < 0 || index_in_chunk < layers); }
};
// "none", "full" or "block:N" (N >= 1); throws InputError naming --recompute.
Recompute parse_recompute(const std::string& text);
// "17,20,22,21": positive layer counts; throws InputError naming --num-layer-list.
std::vector<std::int64_t> parse_layer_list(const std::string& text);

struct StepRequest {
  ModelConfig model;
  Layout layout;
  Batch batch;
  StepPhase phase = StepPhase::Train;
  Dispatcher dispatcher = Dispatcher::AlltoAll;
  bool sequence_parallel = true;   // with tp > 1
  bool mc2 = false;                // --mc2: TP AllGather / ReduceScatter fused with their matmuls (needs sequence_parallel)
  Recompute recompute;             // --recompute (train)
  // Megatron's data parallelism (train): the distributed optimizer
  // (gradients reduce-scattered, optimizer state sharded, parameters
  // all-gathered after the step) or, without it, plain DDP (gradients
  // all-reduced, every rank's optimizer whole); with overlap_grad_reduce a
  // bucket's collective starts as soon as its layers' last backward is
  // done, else all wait for the end of the backward.
  bool distributed_optimizer = true;   // --no-distributed-optimizer
  bool overlap_grad_reduce = true;     // --no-overlap-grad-reduce
  // --overlap-param-gather: the parameters gathered at the step's start in
  // the gradient buckets, each under the forward until the first micro-batch
  // reaches a layer of its bucket (steady state), not after the optimizer.
  bool overlap_param_gather = false;
  // --num-layer-list (MindSpeed): the layers of each pipeline stage, in
  // order (vpp 1); empty: as even as possible, the first stages one more.
  std::vector<std::int64_t> layer_list;
  ComputeTable compute;            // --compute; empty: the roofline
};

// Bytes per rank the layout needs in HBM, on the stage that needs the most
// (train: bf16 parameters, fp32 gradients, the optimizer's fp32 master
// weights and Adam moments, sharded over DP by the distributed optimizer
// (expert parameters over dp / ep), whole without it, activations 34 x s x b x h / (tp x cp) bytes per layer and
// micro-batch in flight, min(pp - s, m) of them on stage s, a recomputed
// layer 2 x s x b x h / (tp x cp) (its input) and, once, the 34 of the
// layer being recomputed; inference:
// parameters and the K/V cache of the micro-batches in flight).
struct MemoryUse {
  std::uint64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;
  std::uint64_t total() const { return parameters + gradients + optimizer + activations; }
};
MemoryUse step_memory(const StepRequest& request);

struct StepGroupResult {
  std::string group;               // tp, cp, ep, dp, pp
  std::vector<int> ranks;          // the instance holding the critical rank
  std::string executor;            // the executors its collectives ran, joined by '+'
  double time_us = 0;              // the time its collectives were under way on the critical rank
  double exposed_us = 0;           // of which no compute ran on that rank
};

struct StepPathEntry {
  std::string op;                  // "F mb0 L3 attn_core", "tp AllReduce F mb0 L3"
  std::string group;               // "compute" or the group
  int rank = 0;                    // compute: its rank; a collective: its first member
  double start_us = 0, end_us = 0;
};

// One model layer on the critical rank, over its micro-batches and both
// directions: its compute, the time its collectives were under way, and
// the part of that no compute of the layer covers.
struct StepLayerResult {
  int layer = 0;
  double compute_us = 0, communication_us = 0, exposed_us = 0;
};

// Two groups whose collectives cross the same link directions while both
// are under way in the estimate's schedule. The estimate times each group's
// collectives alone, so where groups share links it is optimistic; the
// detailed model shares them (max-min).
struct StepSharedLinks {
  std::string first, second;              // group names ("dp", "ep")
  std::vector<std::string> link_kinds;    // of the shared links, sorted ("hccs", "ub")
  int link_directions = 0;                // how many link directions both cross
  double together_us = 0;                 // time both have a collective under way
};

struct StepResult {
  double step_time_us = 0, compute_us = 0, bubble_us = 0;
  int critical_rank = 0;
  int micro_batches = 0;
  std::vector<StepGroupResult> groups;
  std::vector<StepPathEntry> critical_path;
  std::vector<StepLayerResult> layers;      // by layer (a Chakra workload has none)
  std::vector<LinkUsage> busiest_links;     // detailed only, by utilization, at most 8
  std::vector<StepSharedLinks> shared_links;  // estimate only: contention it does not model
  std::vector<std::string> assumed;
  std::uint64_t tasks = 0;
};

// The step's operations, planned once for either back end. Throws
// InputError for a layout, batch or model the step cannot run, naming the
// option and the layout.
class StepPlan;
struct StepPlanDeleter {
  void operator()(StepPlan* p) const;
};
using StepPlanPtr = std::unique_ptr<StepPlan, StepPlanDeleter>;
// EveryRank: every rank's operations (the detailed back end, --export-chakra).
// Symmetric: the estimate alone, which has no contention, and the layout's
// ranks of one stage and CP index are alike (same operations, uniform
// routing): only TP and DP index 0 of each are planned, and collectives wait
// for those members; its times and report equal the every-rank plan's (a
// test checks it) at 1 / (tp x dp) of the operations.
enum class StepPlanScope : std::uint8_t { EveryRank, Symmetric };
StepPlanPtr plan_step(const TopologySpec& topology, const StepRequest& request,
                      StepPlanScope scope = StepPlanScope::EveryRank);
// Operations the plan holds.
std::uint64_t step_plan_ops(const StepPlan& plan);
// Whether the plan runs MoE kernels (--dispatcher deepep): its estimate then needs a platform.
bool step_has_moe_kernels(const StepPlan& plan);
// Tasks the detailed run will hold (for the memory pre-check).
std::uint64_t step_tasks(const StepPlan& plan);

// --search "tp=1,2,4,8;pp=1,2;ep=8,16[;cp=..][;vpp=..][;dp=..]": every
// combination (dp, when not listed, fills the topology: NPUs / (tp x cp x
// pp)) is planned and, when it is valid and fits the profile's HBM
// (step_memory), timed by the estimate; the rows come sorted by step time.
struct SearchRow {
  Layout layout;
  bool valid = false;              // planned and fits
  std::string why;                 // when not: the reason
  double step_time_us = 0, compute_us = 0, bubble_us = 0, exposed_us = 0;
  double memory_gib = 0;
};
std::vector<SearchRow> search_layouts(const TopologySpec& topology, const StepRequest& base, const std::string& grid);

// hcclsim step --chakra DIR: a Chakra workload (one trace per rank, ranks
// 0..n-1 on the topology's first n NPUs) as a plan. Compute nodes run at
// their duration_micros, one after another in dependency order on their
// rank's compute stream; memory and metadata nodes take no time; a
// collective node (its process group from comm_group.json, else every
// rank; comm_size read as ASTRA-sim does: the whole buffer of a rank)
// goes through HCCL's selection like the step's groups, once every member
// has reached it (the n-th collective of a group on each member is one
// collective); a send and its receive are a 2-rank Broadcast from the
// sender. Barrier is a small AllReduce (8 bytes, assumed). Throws InputError
// naming the file and node for traces it cannot run.
StepPlanPtr plan_chakra(const TopologySpec& topology, const ChakraWorkload& workload);
// The plan as Chakra traces (--export-chakra): a node per compute op on its
// rank, a COMM_COLL node on every member of a collective (pg_name = its
// group's id in the groups), data_deps the ops it waits for on that rank,
// ctrl_deps its stream's previous op. Durations in whole microseconds.
ChakraWorkload export_chakra(const StepPlan& plan);

StepResult run_step_detailed(Platform& platform, const StepPlan& plan, TraceWriter* trace = nullptr);
// `trace`: the estimate's schedule, a slice per operation on each planned
// rank. `platform`: the step's topology, on which the MoE kernels of
// --dispatcher deepep, which have no closed form, are timed, once per
// distinct call, alone on their group's ranks (without it such a plan is
// refused, exit 2).
StepResult run_step_estimate(const StepPlan& plan, TraceWriter* trace = nullptr, Platform* platform = nullptr);

}  // namespace hcclsim

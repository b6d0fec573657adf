// MoE expert-parallel dispatch and combine as the Ascend kernels run them
// (DeepEP on Ascend in sgl-kernel-npu; CANN ops-transformer mc2
// MoeDistributeDispatch / MoeDistributeCombine): AIV kernels on every vector
// core of every rank that write token rows into peers' memory windows (or
// read them from there) and signal with flags in memory. No SystemC here:
// build_moe makes the task graph of one call (AIV copies, flags, vector
// compute, RDMA writes between A2 servers) from typed parameters and a
// MoeFabric; `hcclsim moe` (run_moe) and the MoE calls of programs
// (sim/program) both run the graphs it builds.
//
// Normal mode (A3, DeepEP `dispatch` / `combine`):
//   dispatch = layout (counts per rank and expert), a count exchange kernel
//   (notify_dispatch: each rank flags every peer and pulls its slice of the
//   counts), a host synchronisation (the host reads the receive counts to
//   size the outputs), then the data kernel: every core stages its share of
//   the (token, expert) rows in the rank's own window (INT8 quantisation
//   on the way), one status flag per (source rank, expert) to the expert's
//   rank, and each receiver pulls the rows of its (local expert, source)
//   slots from the source windows.
//   combine = one kernel: the expert rank pushes each row back into the
//   token owner's window with a flag; the owner waits for a token's K rows
//   and sums them, weighted, on its vector cores.
// Low-latency mode (MoeDistributeDispatchV2 / CombineV2, "fullmesh_v1"):
//   no count exchange and no host round trip; rows are pushed straight into
//   fixed per-(source, expert) slots of the destination window, the count
//   travels in the status flag, and the receiver copies its window into the
//   output.
// Normal mode across A2 servers runs DeepEP's A2 kernels (notify_dispatch_a2,
// dispatch_normal_a2, moe_distribute_combine_a2; sgl-kernel-npu
// csrc/deepep/ops2): the AI CPU writes one block per server to the rank of
// the same local index there, the cores move rows inside the server in row
// loops (docs/user-guide.md says how). Otherwise across RDMA domains (low
// latency; another product) a generic layered form: a row crosses the RDMA
// network once per (token, destination server), to the rank of the same
// local index there, which forwards it over HCCS to the expert ranks;
// combine reduces inside the expert's server first and sends one row per
// (token, server) back. On A2 every AIV move to or from a peer also passes
// both NPUs' AIV ports (npu.aiv.remote_bandwidth, Platform::aiv_route).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/params.h"
#include "sim/executors/hierarchy.h"
#include "sim/task_graph.h"
#include "topologies/platform.h"

namespace hcclsim {

enum class MoePhase : std::uint8_t { Dispatch, Combine };
enum class MoeMode : std::uint8_t { Normal, LowLatency };

struct MoeParams {
  int ep = 8;                  // ranks taking part (expert parallelism)
  int tokens = 128;            // per rank
  int hidden = 7168;
  int topk = 8;
  int experts = 256;
  MoeMode mode = MoeMode::Normal;
  bool int8 = true;            // dispatch payload quantised to INT8 (combine is always BF16)
  std::string routing = "uniform";   // uniform | balanced | zipf:S | file:F
  std::uint64_t seed = 1;
};

bool operator==(const MoeParams& a, const MoeParams& b);
inline bool operator!=(const MoeParams& a, const MoeParams& b) { return !(a == b); }

// The first parameter that the kernels' tilings would refuse: its name as
// in MoeParams ("ep", "topk", "routing", ...) and what was expected.
struct MoeParamProblem {
  std::string param;
  std::string why;
};
std::optional<MoeParamProblem> moe_params_problem(const MoeParams& p, int npus);
// The same as an InputError naming the command-line option ("option --topk").
void check_moe_params(const MoeParams& p, int npus);

// Expert ids per token, [rank][token][k]; -1 = no expert (dropped).
using MoeRouting = std::vector<std::vector<std::vector<int>>>;
// Deterministic for a seed. "file:F" reads F: {"experts": [[[e, ...] per token] per rank]}.
MoeRouting make_routing(const MoeParams& p);

// Row sizes in the windows (bytes): a dispatch slot holds the payload
// (32-byte aligned), 32 bytes of scale and 12 of (source rank, token, k),
// rounded to 512; a combine slot holds the BF16 row rounded to 512.
std::uint64_t dispatch_slot_bytes(const MoeParams& p);
std::uint64_t combine_slot_bytes(const MoeParams& p);

struct MoeRun {
  MoePhase phase;
  double time_us = 0;          // the slowest rank, from the call's start to its last task
  double time_min_us = 0;
  double time_mean_us = 0;
  double kernel_time_us = 0;   // normal dispatch: its data kernel alone (from its start on a rank to the rank's end), mean over ranks
  double bandwidth_gbps = 0;   // DeepEP's definition (docs/user-guide.md "MoE dispatch and combine"), mean bytes per rank / mean time
  double bytes_per_rank = 0;   // what that bandwidth counts, mean over ranks
  std::map<std::string, std::uint64_t> link_bytes;  // by link kind ("hccs", "sio", "ub", "roce", "local")
  double expert_imbalance = 0; // the busiest expert's rows / the mean
  std::uint64_t tasks = 0;
  std::uint64_t events = 0;
  std::string kernel;          // e.g. "cam_moe_dispatch_normal"
  std::vector<std::string> assumed;  // the profile's assumed constants its tasks paid (sim/used_constants.h)
};

// What build_moe needs of the machine, for the call's ranks 0..ep-1: the
// NPU's parameters (vector cores, their rate, the host synchronisation) and
// each rank's SDMA domain (a server on A2, a supernode on A3). Ranks of
// different domains reach each other only by RDMA writes.
struct MoeFabric {
  NpuParams npu;
  std::vector<int> domain;   // per call rank; empty: every rank in one domain
  bool rdma_between(int a, int b) const {
    return !domain.empty() && domain[static_cast<std::size_t>(a)] != domain[static_cast<std::size_t>(b)];
  }
};
// The fabric of a call on `ranks` (NPUs in EP rank order) of a topology whose
// NPU n is in SDMA domain sdma_domain_of[n] (TopologySpec; empty: one domain).
MoeFabric moe_fabric(const NpuParams& npu, const std::vector<int>& sdma_domain_of, const std::vector<int>& ranks);
// Why the builder cannot lay the call out on the fabric, or empty: across
// domains each domain's ranks must be consecutive and every domain the same
// size (a row to another domain goes to the rank of the same local index there).
std::string moe_fabric_problem(const MoeFabric& fabric);

// Builds the graph of one phase on ranks 0..ep-1 (threads "AIV<i>" and
// "Host" per rank; flags and notifies numbered from 0).
// With `kernel_starts`, a normal-mode dispatch lists there the first task of
// its data kernel on each core of each rank (after the host synchronisation).
TaskGraph build_moe(const MoeParams& p, MoePhase phase, const MoeRouting& routing, const MoeFabric& fabric,
                    std::string* kernel, std::vector<TaskId>* kernel_starts = nullptr);

// The flow model's quantum (network.h, FlowBatching) a call needs when the
// user sets none: low latency moves one row (about 1 us) per transfer, so a
// transfer starting up to 1 us late would distort it (EP 128 dispatch came
// out 20% slower than with 0.1 us); normal mode moves whole blocks.
Time moe_flow_quantum(const MoeParams& p);

// Runs the phases in turn on the platform (each from its own start).
std::vector<MoeRun> run_moe(Platform& platform, const MoeParams& p, const std::vector<MoePhase>& phases,
                            class TraceWriter* trace = nullptr);


}  // namespace hcclsim

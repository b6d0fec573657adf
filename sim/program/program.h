// A communication program as HCCL users write it, recorded call by call and
// then turned into one TaskGraph:
// - host side, the thread/notify API (seed HcclThreadAcquire.md): threads
//   acquired per communicator, notify record/wait between threads, local
//   copy/reduce, writes and reads to peers over channels;
// - kernel side, the Ascend C Hccl API (seed InterHcclGroupSync.md): Prepare
//   a collective (expanded by the level-0 algorithms), Commit releases one
//   repeat, Wait returns when that repeat has finished on this rank, Query
//   reports finished repeats, InterHcclGroupSync makes every later task of a
//   domain wait for a handle of another domain; plus compute on AIC / AIV,
//   MoE dispatch / combine kernels on the AIV cores (sim/moe), and the
//   CrossCoreSetFlag / CrossCoreWaitFlag pairs that order AIC and AIV work.
// Each call checks HCCL's limits and returns the HcclResult HCCL would; the
// message of the last failure says why. hccl_api.h wraps this in the
// functions' own names; the JSON reader calls the same methods.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/params.h"
#include "sim/executors/collective.h"
#include "sim/moe/moe.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/platform_spec.h"

namespace hcclsim {

enum HcclResult : int {
  HCCL_SUCCESS = 0,
  HCCL_E_PARA = 1,
  HCCL_E_PTR = 2,
  HCCL_E_MEMORY = 3,
  HCCL_E_INTERNAL = 4,
  HCCL_E_NOT_SUPPORT = 5,
  HCCL_E_NOT_FOUND = 6,
  HCCL_E_UNAVAIL = 7,
  HCCL_E_TIMEOUT = 9,
  HCCL_E_REMOTE = 21,
};
const char* hccl_result_name(HcclResult r);

enum CommEngine : int {
  COMM_ENGINE_CPU = 0,
  COMM_ENGINE_CPU_TS = 1,
  COMM_ENGINE_AICPU = 2,
  COMM_ENGINE_AICPU_TS = 3,
  COMM_ENGINE_AIV = 4,
  COMM_ENGINE_CCU = 5,
};
const char* comm_engine_name(CommEngine e);
std::optional<CommEngine> parse_comm_engine(const std::string& name);  // "AICPU_TS"

using ThreadHandle = std::uint64_t;
using HcclHandle = std::int8_t;
// The Hccl kernel API's contexts, GetHcclContext<0> and <1> (the same on every
// product); the per-product limits are the profile's npu.hccl_api.
struct HcclLimits {
  static constexpr int kContexts = 2;
};

class Program;

// One rank's view of a communicator (what HcclComm points to).
struct Communicator {
  Program* program = nullptr;
  int domain = 0;
  int rank = 0;       // global rank
};
using HcclComm = Communicator*;

class Program {
 public:
  // A program on `topology`: its NPUs, their profile (the product's API
  // limits come from npu.hccl_api), servers and SDMA domains. build() runs
  // each prepared collective on the executor HCCL selects for its domain, as
  // `hcclsim perf` does (sim/executors).
  explicit Program(const TopologySpec& topology);
  // Only `ranks` NPUs with `npu`'s profile and no topology: enough to record
  // calls and check HCCL's API limits; build() refuses a collective.
  Program(int ranks, const NpuParams& npu);

  int ranks() const { return ranks_; }
  // The message of the last call that did not return HCCL_SUCCESS.
  const std::string& last_error() const { return last_error_; }

  // Communication domains: `id` over global `ranks` (in domain rank order).
  HcclResult add_domain(int id, const std::vector<int>& ranks);
  HcclComm comm(int domain, int rank);
  int domain_size(int domain) const;   // 0 if the domain does not exist

  // ---- host side: the thread/notify API ----
  HcclResult thread_acquire(HcclComm comm, CommEngine engine, std::uint32_t thread_num,
                            std::uint32_t notify_num_per_thread, ThreadHandle* threads);
  HcclResult thread_acquire_with_stream(HcclComm comm, CommEngine engine, std::uint32_t stream_num,
                                        ThreadHandle* threads);
  HcclResult thread_export(HcclComm comm, std::uint32_t thread_num, const ThreadHandle* threads,
                           CommEngine dst_engine, ThreadHandle* exported);
  HcclResult notify_record(ThreadHandle thread, ThreadHandle dst_thread, std::uint32_t dst_notify);
  // `timeout` 0 = forever.
  HcclResult notify_wait(ThreadHandle thread, std::uint32_t notify, Time timeout);
  HcclResult local_copy(ThreadHandle thread, std::uint64_t bytes);
  HcclResult local_reduce(ThreadHandle thread, std::uint64_t bytes);
  // To / from `peer_rank` of the thread's domain (a channel). With a notify,
  // the write is followed by a record to (remote_thread, notify) on the peer.
  HcclResult write(ThreadHandle thread, int peer_rank, std::uint64_t bytes);
  HcclResult read(ThreadHandle thread, int peer_rank, std::uint64_t bytes);
  HcclResult write_with_notify(ThreadHandle thread, int peer_rank, std::uint64_t bytes, ThreadHandle remote_thread,
                               std::uint32_t notify);
  HcclResult channel_notify_record(ThreadHandle thread, int peer_rank, ThreadHandle remote_thread,
                                   std::uint32_t notify);
  HcclResult thread_compute(ThreadHandle thread, CoreKind kind, int cores, Time duration);
  // Finds a rank's thread by handle index order (for programs that name
  // remote threads): the `index`-th thread acquired on (domain, rank).
  std::optional<ThreadHandle> thread_of(int domain, int rank, std::size_t index) const;

  // ---- kernel side: the Ascend C Hccl API, per rank and core type ----
  HcclResult hccl_init(int rank, CoreKind core, int context, int domain);
  HcclResult hccl_set_tiling(int rank, CoreKind core, int context);
  struct PrepareArgs {
    CollOp op = CollOp::AllReduce;
    bool alltoallv = false;
    bool batch_write = false;
    std::uint64_t count = 0;
    DataType dtype = DataType::Fp16;
    ReduceOp reduce_op = ReduceOp::Sum;
    std::uint64_t stride_count = 0;   // accepted; addresses do not change timing here
    int repeat = 1;
    std::vector<std::uint64_t> send_counts;  // AlltoAllV: elements to each domain rank
    std::vector<std::pair<int, std::uint64_t>> batch;  // BatchWrite: (domain rank, bytes)
  };
  // Returns the handle, or -1 with last_error() set (as Prepare does).
  HcclHandle hccl_prepare(int rank, CoreKind core, int context, const PrepareArgs& args, HcclResult* result = nullptr);
  HcclResult hccl_commit(int rank, CoreKind core, int context, HcclHandle handle);
  HcclResult hccl_wait(int rank, CoreKind core, int context, HcclHandle handle);
  HcclResult hccl_query(int rank, CoreKind core, int context, HcclHandle handle);
  HcclResult hccl_inter_group_sync(int rank, CoreKind core, int context, int src_context, HcclHandle src_handle);
  HcclResult hccl_iterate(int rank, CoreKind core, int context);
  HcclResult hccl_finalize(int rank, CoreKind core, int context);
  // Compute on the kernel's own cores: matmul M x N x K (2MNK flops) on AIC,
  // or a vector pass over `bytes` on AIV.
  HcclResult kernel_matmul(int rank, std::uint64_t m, std::uint64_t n, std::uint64_t k, int cores);
  HcclResult kernel_vector(int rank, std::uint64_t bytes, int cores);
  // An MoE dispatch or combine (sim/moe: the kernel on every AIV core of
  // each rank) over `ranks` (global ranks in EP rank order, params.ep of
  // them), called from `rank`'s AIV list. Every rank of `ranks` makes the
  // same calls in the same order: the i-th call on `ranks` of each rank is
  // one kernel, and its parameters must agree. On each rank the call's
  // tasks start after the AIV list's earlier steps, and its later steps
  // start once the call's tasks on that rank have finished. `call`, if
  // given, receives the call's index in Built::moe_calls.
  HcclResult kernel_moe(int rank, const std::vector<int>& ranks, MoePhase phase, const MoeParams& params,
                        std::size_t* call = nullptr);
  // Ascend C CrossCoreSetFlag / CrossCoreWaitFlag (mode 2) between the AIC
  // and the AIV list of one rank's kernel: flag ids 0 to 10; each flag
  // counts, so the n-th wait on `core` for `flag` returns once the other
  // list has made its n-th set of `flag`.
  HcclResult kernel_cross_core_set(int rank, CoreKind core, int flag);
  HcclResult kernel_cross_core_wait(int rank, CoreKind core, int flag);
  static constexpr int kCrossCoreFlags = 11;

  // ---- the result ----
  struct HandleInfo {
    int domain;
    int context_rank;         // a rank that prepared it (for naming)
    HcclHandle handle;
    std::string op;
    int repeat;
    std::vector<std::vector<TaskId>> tasks;  // per repeat, every task of the expansion
    std::string executor;     // HCCL's executor that ran it ("" for a batch write)
    int ranks = 0;            // the domain's
  };
  struct QueryInfo {
    int rank;
    int domain;
    HcclHandle handle;
    TaskId task;
  };
  struct MoeCallInfo {
    std::string op;              // "moe_dispatch" / "moe_combine"
    std::string kernel;          // the kernel it models (build_moe)
    MoeParams params;
    std::vector<int> ranks;      // global, EP rank order
    std::vector<TaskId> tasks;   // every task of the call
  };
  struct Built {
    TaskGraph graph;
    std::vector<HandleInfo> handles;
    std::vector<QueryInfo> queries;
    std::vector<MoeCallInfo> moe_calls;   // in the order they were first called
  };
  // Expands everything recorded. Throws InputError-like std::runtime_error
  // (ProgramError) when ranks disagree or a Wait could never return.
  Built build() const;

 private:
  struct ThreadRec;
  struct KernelRec;
  struct HostOp;
  struct KernelStep;
  HcclResult fail(HcclResult code, const std::string& message);
  TaskGraph expand(const CollectiveSpec& spec, const std::vector<int>& members, int domain, std::string* executor) const;
  ThreadRec* thread(ThreadHandle handle);
  KernelRec& kernel(int rank, CoreKind core);
  struct ContextState;
  ContextState* context(int rank, CoreKind core, int ctx, HcclResult* result);

  int ranks_;
  std::shared_ptr<const TopologySpec> topology_;   // null: limits only
  std::vector<int> sdma_domains_;  // per NPU; empty: one domain
  NpuParams npu_;
  std::string last_error_;
  std::map<int, std::vector<int>> domains_;
  std::map<std::pair<int, int>, Communicator> comms_;   // (domain, rank)

  // A thread: `alias` points at the real thread for exported handles.
  struct ThreadRec {
    int domain = 0;
    int rank = 0;
    CommEngine engine = COMM_ENGINE_CPU;
    std::uint32_t notifies = 0;
    std::size_t index = 0;          // order of acquisition on (domain, rank)
    std::int64_t alias = -1;        // exported: the handle it stands for
    std::vector<std::size_t> ops;   // indices into host_ops_
  };
  enum class HostKind : std::uint8_t { Record, Wait, LocalCopy, LocalReduce, Write, Read, Compute };
  struct HostOp {
    HostKind kind;
    ThreadHandle thread;            // the real (non-alias) thread
    ThreadHandle target = 0;        // record: real destination thread
    int peer = -1;                  // global rank
    std::uint32_t notify = 0;
    std::uint64_t bytes = 0;
    Time time;                      // wait timeout / compute duration
    CoreKind core = CoreKind::Aiv;
    int cores = 0;
  };
  static HostOp make_host_op(HostKind kind, ThreadHandle thread);
  std::vector<ThreadRec> threads_;  // handle = index + 1
  std::vector<HostOp> host_ops_;
  std::map<std::pair<int, int>, std::size_t> threads_per_comm_;
  std::map<std::pair<int, int>, std::size_t> notifies_per_comm_;

  enum class StepKind : std::uint8_t {
    Prepare, Commit, Wait, Query, InterSync, Finalize, Matmul, Vector, Init, Moe, CrossSet, CrossWait
  };
  struct KernelStep {
    StepKind kind;
    int context = 0;
    int domain = 0;
    HcclHandle handle = -1;
    int src_domain = 0;
    HcclHandle src_handle = -1;
    Time duration;
    int cores = 0;
    std::size_t moe = 0;     // Moe: index into moe_calls_
    int flag = 0;            // CrossSet / CrossWait
  };
  static KernelStep make_step(StepKind kind, int context = 0, int domain = 0, HcclHandle handle = -1);
  struct Prepared {
    PrepareArgs args;
    CoreKind core;
    int commits = 0;
    int waits = 0;
    std::size_t step = 0;   // index of the Prepare step in the kernel's list
  };
  struct ContextState {
    bool initialised = false;
    bool tiling = false;
    bool finalized = false;
    int domain = -1;
    int messages = 0;                 // Prepare (+ InterHcclGroupSync on A3)
    std::vector<Prepared> prepared;   // by handle
  };
  struct KernelRec {
    std::vector<KernelStep> steps;
  };
  std::map<std::pair<int, int>, KernelRec> kernels_;       // (rank, core kind)
  std::map<std::pair<int, int>, ContextState> contexts_;   // (rank, context index)

  // MoE calls; a call's routing is drawn once and shared by calls with the
  // same routing inputs (a dispatch and its combine).
  struct MoeCall {
    MoePhase phase;
    MoeParams params;
    std::vector<int> ranks;
    std::vector<bool> joined;   // per EP rank: its kernel has made the call
    std::shared_ptr<const MoeRouting> routing;
  };
  std::vector<MoeCall> moe_calls_;
  std::map<std::vector<int>, std::vector<std::size_t>> moe_groups_;     // ranks -> calls on them, in order
  std::map<std::pair<int, std::vector<int>>, std::size_t> moe_joined_;  // (rank, ranks) -> calls made
  std::map<std::string, std::shared_ptr<const MoeRouting>> routings_;    // by routing inputs
};

// A program that is well-formed call by call but cannot be built or run as a whole.
class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hcclsim

// The stream engine of one NPU: runs the task lists of its streams in order,
// each task occupying the hardware it needs.
//
// Contract:
// - a Delay task marked started_while_blocked (a kernel's Wait) counts as
//   started when the stream reaches it, so its span shows how long it blocked;
// - a stream starts its first task `op_launch` after the workload is loaded
//   and each next one `task_dispatch` after the previous one ends, and only
//   once the task's explicit dependencies have all finished;
// - NotifyRecord lasts record_local / record_remote and sets the target
//   register when it ends; NotifyWait ends at the instant its register is set
//   (or after `wait` if it was already set) and clears it; a record that lands
//   on a register already set is lost, as in hardware;
// - Transfer takes one SDMA engine (FIFO if none free), pays its fixed cost,
//   then moves its bytes as a flow over its path of channels at most at its
//   rate cap; an AIV transfer takes its `cores` AIV cores instead, or with
//   0 cores none (it runs on the write pipe of a core its kernel holds);
// - FlagSet adds one to a flag (a counter in memory) of its target when the
//   store lands, `aiv.flag_write` after it starts; FlagWait polls a flag of
//   its target (its own NPU or a peer) until it holds at least its count and
//   ends one `aiv.flag_poll` after that; flags only grow (as HCCL's
//   tag-valued flags), so any number of cores may wait on one;
// - Compute takes `cores` AIC or AIV cores (FIFO) for its duration;
// - RdmaWrite and RdmaNotify occupy the stream for `rdma.post` (posting the
//   work request); then the bytes travel on their own. A queue pair per peer
//   keeps order: an RdmaNotify sets the remote register only once every
//   RdmaWrite posted before it to the same peer has arrived.
// Inputs from other models (records landing, dependencies released, flows
// finishing) are queued and handled when the engine steps in the clock's
// next delta round, so the order of events is deterministic.
#pragma once

#include <cstdint>
#include <deque>
#include <queue>
#include <unordered_map>
#include <string>
#include <systemc>
#include <vector>

#include "models/link/channel.h"
#include "models/link/network.h"
#include "models/npu/exec_task.h"
#include "models/npu/resource_pool.h"
#include "models/npu/units.h"
#include "models/params.h"
#include "models/wake_clock.h"

namespace hcclsim {

class TaskEngine : public sc_core::sc_module, public FlowListener, public Clocked {
 public:
  // Transfers go through `network` (segment or flow model); `clock` steps the
  // engine, for its own timers and for inputs. Both outlive the engine.
  TaskEngine(sc_core::sc_module_name name, int rank, const NpuParams& params, Network& network, WakeClock& clock);

  const char* kind() const override { return "hcclsim::TaskEngine"; }
  int rank() const { return rank_; }
  const NpuParams& params() const { return params_; }
  // Other timing constants for the next workloads (`hcclsim calibrate`
  // re-times an elaborated platform): between runs only, and with the same
  // counts of SDMA engines and cores, which size the engine's pools.
  void set_params(const NpuParams& params);

  // A new workload: `*streams[i]` lists ids into `tasks` in stream order.
  // Both stay the caller's and must outlive the run (they are millions of
  // ids at scale, not worth a copy). Starts them at the current simulated
  // time once the simulation runs.
  // Every notify register starts clear, whatever an earlier (failed) workload left.
  // Notify registers and flags are sized by what the workload uses. Each
  // stream's first task waits npu.stream.op_launch, unless `charge_launch`
  // is false (the workload's own tasks launch it).
  void load(ExecProgram* tasks, const std::vector<const std::vector<std::uint32_t>*>& streams,
            TaskObserver* observer, int notify_registers, int flags, bool charge_launch = true);

  // From other engines / the scheduler; handled at the current time.
  void notify_land(int reg, std::uint32_t record_task);
  void flag_land(int flag, std::uint32_t set_task);
  // `waiter` polls flag `flag` here until it reaches `value`; told through
  // its flag_seen once it does (possibly at once).
  void flag_watch(int flag, std::uint32_t value, TaskEngine* waiter, std::uint32_t stream);
  void flag_seen(std::uint32_t stream, std::uint32_t set_task);
  void release_dependency(std::uint32_t stream);
  void flow_finished(Flow& flow) override;
  void on_clock(std::uint64_t at) override;
  void on_delta() override;

  bool all_done() const { return done_streams_ == streams_.size(); }

  enum class Phase : std::uint8_t { Dispatch, Deps, Sdma, Cores, Fixed, Flow, Notify, Busy, Done, Failed };
  struct StreamState {
    std::uint32_t task;   // head task id (meaningless when Done)
    Phase phase;
    std::uint64_t since_ps;
  };
  // One entry per stream not yet done, for deadlock reports.
  std::vector<std::pair<std::uint32_t, StreamState>> unfinished() const;
  bool register_set(int reg) const { return notify_.is_set(reg); }
  std::uint32_t flag_value(int flag) const { return flags_.value(flag); }

  std::uint64_t activations() const { return activations_; }
  std::uint64_t records_lost() const { return notify_.records_lost(); }
  // Records that landed on register `reg` while it was already set (lost).
  std::uint64_t records_lost_on(int reg) const { return notify_.records_lost_on(reg); }

 private:
  enum class TimerKind : std::uint8_t { DispatchDone, FixedDone, BusyDone, RecordDone, Timeout, Posted, FlagDone };
  struct Timer {
    std::uint64_t at;
    std::uint64_t seq;
    std::uint32_t stream;
    TimerKind kind;
    std::uint32_t token;
    bool operator>(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  enum class InputKind : std::uint8_t { Land, Dependency, FlowDone, RdmaDone, FlagLand, FlagWatch, FlagSeen };
  struct Input {
    InputKind kind;
    std::uint32_t value;
    std::uint32_t record = 0;   // Land: the record task; FlagWatch: the value awaited; FlagSeen: the FlagSet
    TaskEngine* from = nullptr; // FlagWatch: the waiting engine
    std::uint32_t stream = 0;   // FlagWatch: its stream
  };
  using QueuePair = RdmaQueuePairs::QueuePair;
  using RdmaOp = RdmaQueuePairs::Op;
  struct Stream {
    const std::uint32_t* tasks = nullptr;  // the caller's list (see load)
    std::size_t count = 0;
    std::size_t pos = 0;
    // tasks[pos], read while its line is warm (when the previous task ends):
    // by the time the dispatch gap ends it has left the caches at thousands of NPUs.
    std::uint32_t head = 0;
    Phase phase = Phase::Dispatch;
    std::uint64_t since_ps = 0;
    std::uint32_t token = 0;        // invalidates stale timeouts
    bool announced = false;         // the head task has been reported started
    Flow flow;                      // at most one transfer in flight per stream
    // The queue pair this stream last posted on: a stream posts its writes
    // and their notify to one peer in a row.
    int qp_peer = -1;
    QueuePair* qp = nullptr;
  };

  void step();
  void step_in_next_delta();
  void handle_timer(const Timer& t, std::uint64_t now);
  void handle_input(const Input& in, std::uint64_t now);
  void begin_dispatch(std::uint32_t s, std::uint64_t now, Time gap);
  void try_start(std::uint32_t s, std::uint64_t now);
  bool start_ahead(std::uint32_t s, std::uint64_t now, Time gap);
  void begin_transfer(std::uint32_t s, std::uint64_t now);
  void begin_compute(std::uint32_t s, std::uint64_t now);
  void core_granted(std::uint32_t s, std::uint64_t now);
  void poll_flag(std::uint32_t s, std::uint64_t now);
  void release_mover(const ExecTask& task, std::uint64_t now);
  void post_rdma(std::uint32_t s, std::uint64_t now);
  void rdma_arrived(std::uint32_t op, std::uint64_t now);
  QueuePair& queue_pair(Stream& st, int peer);
  void complete(std::uint32_t s, std::uint64_t now);
  void set_timer(std::uint32_t s, TimerKind kind, std::uint64_t at);
  ExecTask& head(std::uint32_t s) { return (*tasks_)[head_id(s)]; }
  std::uint32_t head_id(std::uint32_t s) const { return streams_[s].head; }
  ResourcePool& cores_of(CoreKind kind) { return kind == CoreKind::Aic ? aic_.pool : aiv_.pool; }

  int rank_;
  NpuParams params_;
  Network& network_;
  WakeClock& clock_;
  std::uint64_t next_wake_ = WakeClock::kNever;   // the wake-up the clock holds for this engine
  ExecProgram* tasks_ = nullptr;
  TaskObserver* observer_ = nullptr;
  std::vector<Stream> streams_;
  std::size_t done_streams_ = 0;
  // The units (children in the module hierarchy).
  NotifyUnit notify_;
  FlagMemory flags_;
  UnitPool sdma_;
  UnitPool aic_;
  UnitPool aiv_;
  RdmaQueuePairs rdma_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::uint64_t timer_seq_ = 0;
  std::vector<Input> inbox_;
  std::vector<Input> draining_;
  bool delta_asked_ = false;   // a step in the clock's next delta round is due
  std::uint64_t activations_ = 0;
};

const char* phase_name(TaskEngine::Phase phase);

}  // namespace hcclsim

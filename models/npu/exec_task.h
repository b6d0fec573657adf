// The executable form of a task, as the stream engine of an NPU runs it.
// sim/scheduler compiles a TaskGraph into these: paths resolved to channels,
// notify targets resolved to engines. Models need nothing else.
#pragma once

#include <cstdint>
#include <vector>

#include "base/chunked_vector.h"
#include "base/units.h"

namespace hcclsim {

class Channel;
class TaskEngine;

enum class ExecKind : std::uint8_t {
  NotifyRecord, NotifyWait, Transfer, Compute, Delay, RdmaWrite, RdmaNotify, FlagSet, FlagWait
};
enum class CoreKind : std::uint8_t { Aic, Aiv };

// 48 bytes, fields ordered by size: large runs compile millions of these.
struct ExecTask {
  ExecKind kind = ExecKind::Delay;
  bool remote = false;              // NotifyRecord: the record crosses chips
  bool reduce = false;              // Reduce_Inline: capped at the SDMA reduce rate
  bool aiv = false;                 // moved by an AIV core, not an SDMA engine
  bool started_while_blocked = false;  // Delay: reported started when reached, not when released
  CoreKind core_kind = CoreKind::Aiv;
  std::uint16_t cores = 0;          // Compute: `cores` cores of `core_kind`; AIV transfer: cores moving it (0: a held core's write pipe)
  // Dependencies beyond stream order (explicit edges); the scheduler counts down.
  std::uint32_t unmet_deps = 0;
  // Each kind reads only its own members of the unions below (48 bytes in
  // all, not 64: a CloudMatrix384 AllReduce of 1 GiB compiles 4.9 M tasks).
  //
  // NotifyRecord: the register `notify` of `target` is set when the task ends.
  // FlagSet: adds one to flag `notify` of `target` (a counter in memory)
  // when the store lands, `flag_write` after it starts. FlagWait: polls flag
  // `notify` of `target` until it holds at least `count` and sees it one
  // `flag_poll` later (flags only grow: several producers may add to one,
  // several cores may wait on one). RdmaWrite: `peer` is the queue pair's
  // peer (an RdmaNotify's is its target's rank, kept in `qp_peer`).
  union {
    int notify = 0;
    int peer;
  };
  // Transfer: `bytes` over `path` (none: nothing moves, only fixed cost).
  // By an SDMA engine (fixed cost, then at most `rate_cap`), or with
  // `aiv` by one AI Vector core of the stream's NPU (its own copy rate).
  // RdmaWrite: the stream posts the write and goes on; the bytes cross
  // `path` on their own. RdmaNotify: a small write that sets `notify` of
  // `target` once it and every earlier RdmaWrite to the same peer have
  // arrived (a queue pair delivers in order).
  union {
    TaskEngine* target = nullptr;   // the notify and flag kinds
    Bandwidth rate_cap;             // Transfer: the flow's own cap (engine rate, write limit of the path); 0: none
  };
  const std::vector<Channel*>* path = nullptr;
  union {
    std::uint64_t bytes = 0;        // Transfer, RdmaWrite
    std::uint32_t count;            // FlagWait
    std::uint32_t qp_peer;          // RdmaNotify: its target's rank, naming its queue pair without reading the target
  };
  // One time whose meaning depends on the kind: Transfer, the set-up before
  // the first byte (read or write form); Compute and Delay, how long the
  // stream (or cores) stay busy; NotifyWait, the timeout (0 = forever).
  Time span;
};

static_assert(sizeof(ExecTask) <= 48, "a compiled task's size multiplies by millions of tasks");

// A compiled workload, indexed by task id. In chunks, so that a scheduler
// compiling a graph it frees chunk by chunk builds this in the freed memory.
using ExecProgram = ChunkedVector<ExecTask>;

// What the stream engines tell the scheduler. Ids index the compiled program.
class TaskObserver {
 public:
  virtual void task_started(std::uint32_t id, Time at) = 0;
  virtual void task_finished(std::uint32_t id, Time at) = 0;
  // The bytes of a transfer have all arrived (an SDMA transfer just before
  // it finishes; an RDMA write after the stream has moved on).
  virtual void data_landed(std::uint32_t id, Time at) = 0;
  // The wait `wait` was released by the record `record` (for flow arrows
  // and the critical path).
  virtual void wait_released(std::uint32_t wait, std::uint32_t record) = 0;
  // A wait, begun at `started`, whose timeout expired; the stream stops there.
  virtual void task_timed_out(std::uint32_t id, Time started, Time at) = 0;

 protected:
  ~TaskObserver() = default;
};

}  // namespace hcclsim

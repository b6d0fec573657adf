// The units of one NPU that a workload's tasks occupy, each a SystemC
// module named under its NPU (npuN.notify, npuN.flags, npuN.sdma, npuN.aic,
// npuN.aiv, npuN.rdma; `hcclsim describe` prints them). Each owns its state.
// None has a process of its own: the NPU's stream engine (TaskEngine, the
// one timing kernel, models/npu/task_engine.h) drives them by calls when it
// steps, which keeps one activation per NPU and delta round however many
// units a task touches.
#pragma once

#include <cstdint>
#include <deque>
#include <systemc>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/link/channel.h"
#include "models/npu/resource_pool.h"

namespace hcclsim {

class TaskEngine;

// Notify registers: a record sets one, a wait clears it. A register is
// idle, waited on by one stream, or set (never both: a record landing on a
// waited register releases the wait at once); its state sits in one place
// because a wait or a landing reads all of it.
class NotifyUnit : public sc_core::sc_module {
 public:
  struct Register {
    static constexpr std::int32_t kIdle = -1;
    static constexpr std::int32_t kSet = -2;
    std::int32_t state = kIdle;       // a stream blocked on it (>= 0), kIdle or kSet
    std::uint32_t set_by = 0;         // kSet: the record task that set it
  };
  explicit NotifyUnit(sc_core::sc_module_name name) : sc_core::sc_module(name) {}
  const char* kind() const override { return "hcclsim::NotifyUnit"; }

  // A workload's registers, all clear (its losses per register restart too).
  void reset(int registers) {
    this->registers.assign(static_cast<std::size_t>(registers), Register{});
    lost_on.clear();
  }

  std::vector<Register> registers;
  std::uint64_t records_lost = 0;                     // records that landed on a set register, since elaboration
  std::unordered_map<int, std::uint64_t> lost_on;     // of this workload, per register
};

// Flags: counters in memory that AIV kernels add to (FlagSet) and poll
// (FlagWait); they only grow, so any number of cores may wait on one.
class FlagMemory : public sc_core::sc_module {
 public:
  struct Watcher {
    std::uint32_t value;
    TaskEngine* engine;
    std::uint32_t stream;
  };
  explicit FlagMemory(sc_core::sc_module_name name) : sc_core::sc_module(name) {}
  const char* kind() const override { return "hcclsim::FlagMemory"; }

  void reset(int flags) {
    values.assign(static_cast<std::size_t>(flags), 0);
    watchers.assign(static_cast<std::size_t>(flags), {});
    set_by.assign(static_cast<std::size_t>(flags), 0);
  }

  std::vector<std::uint32_t> values;                  // flag counters
  std::vector<std::vector<Watcher>> watchers;         // polls not yet satisfied, per flag
  std::vector<std::uint32_t> set_by;                  // the last FlagSet that landed on each flag
};

// A pool of identical units handed out first come, first served: the SDMA
// engines, the AIC cores, the AIV cores.
class UnitPool : public sc_core::sc_module {
 public:
  UnitPool(sc_core::sc_module_name name, int units) : sc_core::sc_module(name), pool(units) {}
  const char* kind() const override { return "hcclsim::UnitPool"; }
  ResourcePool pool;
};

// RDMA work requests in flight and, per peer, the queue pair that keeps
// their order (a notify lands only after every write posted before it).
class RdmaQueuePairs : public sc_core::sc_module {
 public:
  struct QueuePair {
    std::uint64_t posted_writes = 0;
    std::vector<std::uint64_t> outstanding;   // seqs of writes not yet arrived, in post order
    std::vector<std::uint32_t> notifies;      // notify ops in post order, not yet landed
  };
  struct Op {
    Flow flow;
    std::uint32_t task = 0;
    // A notify: the register it sets (copied from its task, which is cold by the time it lands).
    TaskEngine* target = nullptr;
    int reg = 0;
    bool notify = false;
    bool arrived = false;
    std::uint64_t seq = 0;          // write: its post number; notify: writes posted before it
    QueuePair* qp = nullptr;        // the queue pair it was posted on
  };
  explicit RdmaQueuePairs(sc_core::sc_module_name name) : sc_core::sc_module(name) {}
  const char* kind() const override { return "hcclsim::RdmaQueuePairs"; }

  // A workload's queue pairs start empty (its operations in flight are gone).
  void reset() {
    qp_of_peer.clear();
    queue_pairs.clear();
  }

  std::deque<Op> ops;                       // a deque: flows in flight keep their address as it grows
  std::vector<std::uint32_t> free_ops;
  // Queue pairs by peer NPU: an NPU talks to few of thousands, so a sorted
  // array of (peer, index into queue_pairs) searched by halves, a few
  // adjacent lines, rather than a hash map's bucket and node.
  std::vector<std::pair<int, std::uint32_t>> qp_of_peer;
  std::deque<QueuePair> queue_pairs;        // a deque: operations in flight point to theirs
};

}  // namespace hcclsim

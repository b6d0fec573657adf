// The units of one NPU that a workload's tasks occupy, each a SystemC
// module named under its NPU (npuN.notify, npuN.flags, npuN.sdma, npuN.aic,
// npuN.aiv, npuN.rdma; `hcclsim describe` prints them). Each owns its state
// and the rules of that state: when a register is set or releases a wait,
// which pollers a flag satisfies, who a pool grants next, when a queue
// pair's notify may land. None has a process of its own: the NPU's stream
// engine (TaskEngine, the one timing kernel, models/npu/task_engine.h)
// calls them as its streams step and times what they answer, which keeps
// one activation per NPU and delta round however many units a task touches.
#pragma once

#include <algorithm>
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
  static constexpr std::int32_t kNoStream = -1;
  explicit NotifyUnit(sc_core::sc_module_name name) : sc_core::sc_module(name) {}
  const char* kind() const override { return "hcclsim::NotifyUnit"; }

  // A workload's registers, all clear (its losses per register restart too).
  void reset(int registers) {
    registers_.assign(static_cast<std::size_t>(registers), Register{});
    lost_on_.clear();
  }

  // A record lands on `reg`: the stream blocked on it, released (the
  // register is idle again), or kNoStream: the register is now set by
  // `record`, or, already set, loses the record (counted).
  std::int32_t land(int reg, std::uint32_t record) {
    Register& r = registers_[static_cast<std::size_t>(reg)];
    const std::int32_t waiting = r.state;
    if (waiting >= 0) {
      r.state = Register::kIdle;
      return waiting;
    }
    if (waiting == Register::kSet) {
      ++records_lost_;
      ++lost_on_[reg];
    } else {
      r.state = Register::kSet;
      r.set_by = record;
    }
    return kNoStream;
  }
  // Stream `stream` waits on `reg`: a set register is cleared at once (true,
  // with the record that set it in *record); otherwise the stream blocks on it.
  bool wait(int reg, std::uint32_t stream, std::uint32_t* record) {
    Register& r = registers_[static_cast<std::size_t>(reg)];
    if (r.state == Register::kSet) {
      r.state = Register::kIdle;
      *record = r.set_by;
      return true;
    }
    r.state = static_cast<std::int32_t>(stream);
    return false;
  }
  // The wait blocked on `reg` gives up (its timeout): the register is idle.
  void give_up(int reg) { registers_[static_cast<std::size_t>(reg)].state = Register::kIdle; }

  bool is_set(int reg) const { return registers_[static_cast<std::size_t>(reg)].state == Register::kSet; }
  // Records that landed on a set register, since elaboration.
  std::uint64_t records_lost() const { return records_lost_; }
  // Those of this workload on register `reg`.
  std::uint64_t records_lost_on(int reg) const {
    const auto found = lost_on_.find(reg);
    return found == lost_on_.end() ? 0 : found->second;
  }

 private:
  struct Register {
    static constexpr std::int32_t kIdle = -1;
    static constexpr std::int32_t kSet = -2;
    std::int32_t state = kIdle;       // a stream blocked on it (>= 0), kIdle or kSet
    std::uint32_t set_by = 0;         // kSet: the record task that set it
  };
  std::vector<Register> registers_;
  std::uint64_t records_lost_ = 0;
  std::unordered_map<int, std::uint64_t> lost_on_;
};

// Flags: counters in memory that AIV kernels add to (FlagSet) and poll
// (FlagWait); they only grow, so any number of cores may wait on one.
class FlagMemory : public sc_core::sc_module {
 public:
  explicit FlagMemory(sc_core::sc_module_name name) : sc_core::sc_module(name) {}
  const char* kind() const override { return "hcclsim::FlagMemory"; }

  void reset(int flags) {
    values_.assign(static_cast<std::size_t>(flags), 0);
    watchers_.assign(static_cast<std::size_t>(flags), {});
    set_by_.assign(static_cast<std::size_t>(flags), 0);
  }

  // A FlagSet `record` lands on `flag`: the counter rises, and each poller
  // it now satisfies is told, `seen(engine, stream)`, in the order they
  // began polling.
  template <class Seen>
  void add(int flag, std::uint32_t record, Seen&& seen) {
    const auto f = static_cast<std::size_t>(flag);
    ++values_[f];
    set_by_[f] = record;
    std::vector<Watcher>& watchers = watchers_[f];
    std::size_t kept = 0;
    for (const Watcher& w : watchers) {
      if (w.value <= values_[f]) {
        seen(w.engine, w.stream);
      } else {
        watchers[kept++] = w;
      }
    }
    watchers.resize(kept);
  }
  // `engine`'s stream polls `flag` for `value`: true if it is there already
  // (the last FlagSet that landed in *set_by); otherwise the poller waits.
  bool watch(int flag, std::uint32_t value, TaskEngine* engine, std::uint32_t stream, std::uint32_t* set_by) {
    const auto f = static_cast<std::size_t>(flag);
    if (values_[f] >= value) {
      *set_by = set_by_[f];
      return true;
    }
    watchers_[f].push_back(Watcher{value, engine, stream});
    return false;
  }
  std::uint32_t value(int flag) const { return values_[static_cast<std::size_t>(flag)]; }

 private:
  struct Watcher {
    std::uint32_t value;
    TaskEngine* engine;
    std::uint32_t stream;
  };
  std::vector<std::uint32_t> values_;                  // flag counters
  std::vector<std::vector<Watcher>> watchers_;         // polls not yet satisfied, per flag
  std::vector<std::uint32_t> set_by_;                  // the last FlagSet that landed on each flag
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
// their order: a notify lands only after every write posted before it on
// its queue pair has arrived, and notifies land in post order.
class RdmaQueuePairs : public sc_core::sc_module {
 public:
  struct QueuePair {
    std::uint64_t posted_writes = 0;
    std::vector<std::uint64_t> outstanding;   // seqs of writes not yet arrived, in post order
    std::vector<std::uint32_t> notifies;      // notify ops in post order, not yet landed
  };
  // One work request; the engine fills in what it moves before post().
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
    qp_of_peer_.clear();
    queue_pairs_.clear();
  }

  // A free op (a new one's flow reports to `listener` under tag `tag_base` + its index).
  std::uint32_t take_op(FlowListener* listener, std::uint64_t tag_base) {
    if (!free_ops_.empty()) {
      const std::uint32_t index = free_ops_.back();
      free_ops_.pop_back();
      return index;
    }
    const auto index = static_cast<std::uint32_t>(ops_.size());
    Op& added = ops_.emplace_back();
    added.flow.listener = listener;
    added.flow.tag = tag_base + index;
    return index;
  }
  Op& op(std::uint32_t index) { return ops_[index]; }
  // The queue pair to `peer` (made on first use; it stays put).
  QueuePair& queue_pair(int peer) {
    auto it = std::lower_bound(qp_of_peer_.begin(), qp_of_peer_.end(), peer,
                               [](const std::pair<int, std::uint32_t>& e, int p) { return e.first < p; });
    if (it == qp_of_peer_.end() || it->first != peer) {
      it = qp_of_peer_.insert(it, {peer, static_cast<std::uint32_t>(queue_pairs_.size())});
      queue_pairs_.emplace_back();
    }
    return queue_pairs_[it->second];
  }
  // Op `index` (its notify, target and reg set) is posted on `qp`: a write
  // takes the next post number, a notify queues behind the writes so far.
  void post(std::uint32_t index, QueuePair& qp) {
    Op& o = ops_[index];
    o.qp = &qp;
    o.arrived = false;
    if (o.notify) {
      o.seq = qp.posted_writes;
      qp.notifies.push_back(index);
    } else {
      o.seq = ++qp.posted_writes;
      qp.outstanding.push_back(o.seq);
    }
  }
  // Op `index`'s bytes have arrived. Every notify of its queue pair that may
  // land now is handed to `land(op)`, in post order; landed notifies and
  // an arrived write free their ops.
  template <class Land>
  void arrived(std::uint32_t index, Land&& land) {
    Op& o = ops_[index];
    QueuePair& qp = *o.qp;
    o.arrived = true;
    if (!o.notify) {
      qp.outstanding.erase(std::find(qp.outstanding.begin(), qp.outstanding.end(), o.seq));
      free_ops_.push_back(index);
    }
    std::size_t landed = 0;
    for (; landed < qp.notifies.size(); ++landed) {
      const Op& n = ops_[qp.notifies[landed]];
      const bool writes_done = qp.outstanding.empty() || qp.outstanding.front() > n.seq;
      if (!n.arrived || !writes_done) break;
      land(n);
      free_ops_.push_back(qp.notifies[landed]);
    }
    qp.notifies.erase(qp.notifies.begin(), qp.notifies.begin() + static_cast<std::ptrdiff_t>(landed));
  }

 private:
  std::deque<Op> ops_;                      // a deque: flows in flight keep their address as it grows
  std::vector<std::uint32_t> free_ops_;
  // Queue pairs by peer NPU: an NPU talks to few of thousands, so a sorted
  // array of (peer, index into queue_pairs_) searched by halves, a few
  // adjacent lines, rather than a hash map's bucket and node.
  std::vector<std::pair<int, std::uint32_t>> qp_of_peer_;
  std::deque<QueuePair> queue_pairs_;       // a deque: operations in flight point to theirs
};

}  // namespace hcclsim

// A collective or a program as tasks on threads (streams) of ranks.
//
// Edges: each thread runs its tasks in order; a notify wait is released by a
// notify record to its (rank, notify index); an explicit dependency makes a
// task wait for another to finish (InterHcclGroupSync, Commit). Built by the
// algorithms and front ends, validated, then compiled by the scheduler.
// Knows nothing of hardware timing or SystemC.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/npu/exec_task.h"
#include "models/npu/task_costs.h"
#include "base/chunked_vector.h"
#include "base/units.h"

namespace hcclsim {

using TaskId = std::uint32_t;
using ThreadId = std::uint32_t;
// A task's label, interned by its graph (TaskGraph::intern, TaskGraph::label):
// millions of tasks share a few thousand labels. 0 is the empty label.
using LabelId = std::uint32_t;

enum class TaskKind : std::uint8_t { NotifyRecord, NotifyWait, Memcpy, ReduceInline, Compute, Delay, FlagSet, FlagWait };
const char* task_kind_name(TaskKind kind);  // the msprof names: "Notify Record", "Memcpy", ...

// Who moves a Memcpy / Reduce_Inline: an SDMA engine (HCCL's host and AI CPU
// expansion), or one AI Vector core of the thread's rank (AIV expansion and
// MoE kernels: loads and stores, a reduction as an atomic store).
enum class Mover : std::uint8_t { Sdma, Aiv };

// Buffers the data check follows: the user's input and output, and the HCCL
// buffer (CCL buffer, HCCL_BUFFSIZE) of each rank.
enum class BufferKind : std::uint8_t { Input, Output, Scratch };
const char* buffer_kind_name(BufferKind kind);

// A place in a rank's buffer. 12 bytes (the offset in 48 bits, up to
// 256 TiB): a task holds two.
class BufferRef {
 public:
  static constexpr std::uint64_t kOffsetLimit = std::uint64_t{1} << 48;

  constexpr BufferRef() = default;
  // Throws std::length_error for an offset of kOffsetLimit or more.
  BufferRef(int on_rank, BufferKind kind, std::uint64_t at) : rank(on_rank), buffer(kind) { set_offset(at); }
  std::uint64_t offset() const { return std::uint64_t{offset_high_} << 32 | offset_low_; }
  void set_offset(std::uint64_t at) {
    if (at >= kOffsetLimit) {
      throw std::length_error("a buffer offset of " + std::to_string(at) +
                              " bytes is beyond what a task addresses (256 TiB); use a smaller data size or fewer ranks");
    }
    offset_low_ = static_cast<std::uint32_t>(at);
    offset_high_ = static_cast<std::uint16_t>(at >> 32);
  }

  int rank = 0;
  BufferKind buffer = BufferKind::Input;

 private:
  std::uint16_t offset_high_ = 0;
  std::uint32_t offset_low_ = 0;
};

static_assert(sizeof(BufferRef) == 12, "a task holds two");

// 48 bytes: large runs hold millions (a 1 GiB AllReduce on CloudMatrix384:
// 4.9 M). Fields a kind never reads share their place with another
// kind's; each kind sets and reads only its own.
struct Task {
  // (union members with constructors, BufferRef and Time, need one spelled out)
  Task() : src(), dst(), bytes(0) {}

  TaskKind kind = TaskKind::Delay;
  Mover mover = Mover::Sdma;          // Memcpy / ReduceInline
  CoreKind core_kind = CoreKind::Aiv; // Compute
  // Delay only: the thread is busy in it while its dependencies are unmet
  // (a kernel's Wait), so it starts when the thread reaches it.
  bool started_while_blocked = false;
  ThreadId thread = 0;
  LabelId label = 0;                  // shown in the trace, e.g. "AllGather#1 step 3"
  int cores = 0;                      // Compute; AIV moves: cores working together
  // Memcpy / ReduceInline: `bytes` from src to dst; src or dst is on this rank.
  // NotifyRecord: sets `notify` of `peer`. NotifyWait: waits on `notify` of its own rank.
  // FlagSet: adds one to flag `notify` of `peer` (a counter in memory).
  // FlagWait: polls flag `notify` of `peer` (its own rank or another) until
  // it holds at least `count`; flags only grow.
  union {
    BufferRef src;
    int peer;
  };
  union {
    BufferRef dst;
    int notify;
  };
  union {
    std::uint64_t bytes;              // Memcpy / ReduceInline
    Time duration;                    // Compute / Delay; NotifyWait: its timeout (0 = forever)
    std::uint32_t count;              // FlagWait
  };
};

static_assert(sizeof(Task) <= 48, "a task's size multiplies by millions of tasks");

// What a task costs by the time it has run (the task, its compiled form,
// timing, dependencies, its share of the data check), rounded up: the
// memory pre-check (sim/perf/perf.h) and the task limit use it. Measured lower
// since tasks shrank and perf frees them as they compile (peak RSS per
// task: about 65 bytes on CloudMatrix384 unchecked, 166 in a checked
// reduce_scatter on 1024 A2 NPUs); kept conservative: a trace keeps the
// graph and every task's timing, and the data check's share varies by op.
constexpr std::uint64_t kBytesPerTask = 450;

struct Thread {
  int rank = 0;
  std::string name;                   // track name, e.g. "Plane1" or "domain0/aiv"
  std::vector<TaskId> tasks;
};

class TaskGraph {
 public:
  ThreadId add_thread(int rank, std::string name);
  // Appends to the task's thread (in-order edge from the previous task).
  TaskId add(Task task);
  // The id of `text` as a label of this graph's tasks, and back.
  LabelId intern(const std::string& text);
  const std::string& label(const Task& task) const { return labels_[task.label]; }
  // `after` starts only once `before` has finished.
  void add_dependency(TaskId before, TaskId after);

  // Convenience builders.
  TaskId record(ThreadId thread, int peer, int notify, const std::string& label = {});
  TaskId wait(ThreadId thread, int notify, const std::string& label = {}, Time timeout = {});
  TaskId copy(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes, const std::string& label = {});
  TaskId reduce(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes, const std::string& label = {});
  // The thread is busy for `duration` (an issuer's work, a kernel's fixed cost).
  TaskId delay(ThreadId thread, Time duration, const std::string& label = {});
  // AIV: a copy, or an atomic-add store, by `cores` vector cores working
  // together (one by default), or with 0 by the write pipe (MTE3) of a core
  // its kernel already holds (no core taken, one core's rate); flags.
  TaskId aiv_move(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes, bool reduce,
                  const std::string& label = {}, int cores = 1);
  TaskId flag_set(ThreadId thread, int peer, int flag, const std::string& label = {});
  TaskId flag_wait(ThreadId thread, int owner, int flag, std::uint32_t value, const std::string& label = {});

  // Copies `part` into this graph: its rank r becomes rank_map[r], its notify
  // (and flag) n becomes notify_base + n, its thread names get `thread_prefix`. With
  // `reuse`, a thread whose (rank, name) is already in it continues that
  // thread (the tasks queue behind its earlier ones) and new threads are
  // added to it. Returns the new id of each of part's tasks (index = old id).
  using ThreadIndex = std::map<std::pair<int, std::string>, ThreadId>;
  std::vector<TaskId> append(const TaskGraph& part, const std::vector<int>& rank_map, int notify_base,
                             const std::string& thread_prefix, ThreadIndex* reuse = nullptr);
  // Profile constants a builder baked into durations (a Compute's rate, a
  // host synchronisation's Delay): its tasks alone do not show them
  // (sim/used_constants.h). append() carries them over.
  void note_constant(Constant c) { noted_.add(c); }
  const UsedConstants& noted_constants() const { return noted_; }
  // Whether the graph's own Delays stand for npu.stream.op_launch (the step
  // launches each collective on its streams): then the stream engines do not
  // charge it again before a stream's first task when the workload loads.
  void set_launches_in_graph(bool in_graph) { launches_in_graph_ = in_graph; }
  bool launches_in_graph() const { return launches_in_graph_; }

  // One more than the largest notify (flag) index used (0 if none).
  int notifies_used() const;
  int flags_used() const;

  // For a reader done with them (sim/scheduler's releasing run): frees the
  // memory of tasks below `end`, which must not be read again. Threads and
  // labels stay; tasks().size() is unchanged.
  void release_tasks_before(TaskId end) { tasks_.release_before(end); }
  // The same for the explicit dependencies (all of them).
  void release_dependencies() { std::vector<std::pair<TaskId, TaskId>>().swap(dependencies_); }

  const ChunkedVector<Task>& tasks() const { return tasks_; }
  const std::vector<Thread>& threads() const { return threads_; }
  const Task& task(TaskId id) const { return tasks_[id]; }
  const Thread& thread(ThreadId id) const { return threads_[id]; }
  int rank_of(TaskId id) const { return threads_[tasks_[id].thread].rank; }
  const std::vector<std::pair<TaskId, TaskId>>& dependencies() const { return dependencies_; }

  // "rank 3 Plane2 task #7 (Notify Wait notify 12)".
  std::string describe(TaskId id) const;

  // Throws GraphError naming the tasks involved: a negative notify index, a
  // rank outside [0, ranks), a wait that nothing records, two threads
  // waiting on one notify, a flag wait for more than is ever set, a cycle.
  void validate(int ranks) const;
  // The two halves of validate. check_references: everything but the cycle
  // (linear, a few passes). check_cycles: a cycle through the threads'
  // order, explicit dependencies and statically paired record -> wait
  // edges (a topological sort over every task: at millions of tasks it
  // costs more than the other checks together, so the scheduler runs it
  // only after a run that did not finish; a cycle can only deadlock).
  // check_cycles expects check_references to have passed.
  void check_references(int ranks) const;
  void check_cycles(int ranks) const;

 private:
  template <class Visit>
  void for_each_notify(int ranks, Visit visit) const;
  bool one_recorder(const std::vector<TaskId>& records) const;  // all on one thread

  ChunkedVector<Task> tasks_;
  UsedConstants noted_;
  bool launches_in_graph_ = false;
  std::vector<std::string> labels_{std::string()};
  std::unordered_map<std::string, LabelId> label_ids_;
  LabelId last_label_ = 0;   // the label interned last (0, the empty one, at first)
  std::vector<Thread> threads_;
  std::vector<std::pair<TaskId, TaskId>> dependencies_;
};

}  // namespace hcclsim

// Runs a TaskGraph on a Platform: compiles tasks into the engines' executable
// form, starts every stream, lets SystemC run until no event is left, then
// either reports the timings or, if tasks remain, a deadlock report naming
// each blocked thread and what it waits for. Never spins: an unfinishable
// graph simply runs out of events.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/npu/exec_task.h"
#include "sim/data_check.h"
#include "sim/serial_worker.h"
#include "sim/task_graph.h"
#include "sim/used_constants.h"
#include "topologies/platform.h"

namespace hcclsim {

struct TaskTiming {
  Time start;
  Time end;
  std::int32_t released_by = -1;   // NotifyWait: the record that released it (task ids stay below 2^25)
  bool started = false;
  bool finished = false;
};

struct RunResult {
  Time begin;                      // simulated time when the run started
  Time end;                        // when its last task finished
  Time elapsed() const { return end - begin; }
  std::vector<TaskTiming> timings;  // by TaskId, absolute simulated time; empty unless kept (keep_timings)
  // Empty when every task finished. Otherwise why not: a deadlock or a timeout.
  std::string failure;
  bool timed_out = false;
  std::string check_error;         // data check: first out-of-bounds access, if any
  std::uint64_t activations = 0;   // SystemC process activations in this run
  // The profile constants its tasks paid (sim/used_constants.h): reports
  // list the assumed ones.
  UsedConstants constants;
};

class Scheduler : private TaskObserver {
 public:
  explicit Scheduler(Platform& platform) : platform_(platform) {}

  // Graph rank r runs on NPU r. `tracker` (optional) follows the data.
  // Throws GraphError for a graph validate() refuses (a cycle is looked
  // for only once a run has not finished).
  RunResult run(const TaskGraph& graph, DataTracker* tracker = nullptr);
  // The same run of a graph its caller no longer needs: its tasks are
  // freed chunk by chunk as they are compiled, so the compiled tasks reuse
  // their memory instead of taking as much again (a 1 GiB CloudMatrix384
  // AllReduce: 4.9 M tasks of 48 bytes, as many compiled; on this VM every
  // fresh page costs a slow first touch). The data check keeps the ends of
  // each copy (24 bytes). A report that names tasks (a run that does not
  // finish, a copy beyond its buffers) needs them again, so `rebuild` must
  // make the same graph anew; it is called only then. Results are run()'s.
  RunResult run_releasing(TaskGraph graph, const std::function<TaskGraph()>& rebuild,
                          DataTracker* tracker = nullptr);
  // Whether runs record every task's timing (the default). A caller that
  // needs only the run's end (perf without a trace) turns it off: at
  // millions of tasks the timings are 24 bytes and two cache misses a task.
  void keep_timings(bool keep) { keep_timings_ = keep; }
  // How many copy events the data check logs before replaying them (tests
  // shrink it to cross batch boundaries; results never depend on it).
  void check_batch(std::size_t events) { copy_batch_ = events > 0 ? events : 1; }
  // Whether the runs' SDMA transfers are one-sided batch descriptors
  // (hixl_cs, HcclBatchPut/Get) rather than HCCL's two-sided transport:
  // the links' transport_rate does not hold them (default: transport).
  void one_sided(bool batch) { one_sided_ = batch; }

 private:
  void task_started(std::uint32_t id, Time at) override;
  void task_finished(std::uint32_t id, Time at) override;
  void data_landed(std::uint32_t id, Time at) override;
  void task_timed_out(std::uint32_t id, Time started, Time at) override;
  void wait_released(std::uint32_t wait, std::uint32_t record) override;
  // What both runs share: validation, the data check's marks, compiling
  // (`release`: the same graph, whose tasks are freed once compiled) and the run.
  void check_compile_execute(const TaskGraph& graph, TaskGraph* release, DataTracker* tracker);
  void compile(const TaskGraph& graph, TaskGraph* release);
  void execute(const TaskGraph& graph);   // loads the engines and runs; the graph's tasks are not read
  // Whether the run needs its tasks to tell what went wrong.
  bool needs_report() const;
  // After execute: the failure and the check error, if any, told from
  // `graph` (with every task).
  void report_failure(const TaskGraph& graph);
  bool all_done() const;   // every engine finished every stream
  std::string deadlock_report(const TaskGraph& graph) const;

  Platform& platform_;
  DataTracker* tracker_ = nullptr;
  ExecProgram exec_;
  // Per NPU, as many notify registers and flags as the graph uses there.
  std::vector<int> registers_used_;
  std::vector<int> flags_used_;
  // The first wait that timed out (told once the run is over and the graph is at hand).
  struct Timeout {
    TaskId task;
    Time started;
    Time at;
  };
  std::optional<Timeout> timeout_;
  // Explicit dependencies as flat per-task lists: the successors of task i
  // at [first_successor_[i], first_successor_[i + 1]), each with its
  // thread (A2 clusters have about one dependency per task; a
  // CloudMatrix384 AllReduce one per 25).
  struct Successor {
    TaskId task;
    ThreadId thread;
  };
  std::vector<std::uint32_t> first_successor_;
  std::vector<Successor> successors_;
  // By thread: the engine and stream that run it (no read of the graph's
  // task during the run).
  struct StreamOf {
    std::uint32_t rank;
    std::uint32_t stream;
  };
  std::vector<StreamOf> stream_of_thread_;
  // The data check. Before the run every copy's bounds are checked and
  // its ends kept (a sequential pass); the run then only logs, in order,
  // each copy's start and landing, naming a slot per copy in flight, and
  // the tracker replays the log in batches of copy_batch_ events
  // (replay_copies) and at the end. A full log is handed to a thread of
  // its own (replayer_) while the run logs into a new one, so that the
  // check's work runs on the second core beside the simulation; the
  // replay keeps log order, as one thread would (the same verdicts), and
  // the run waits only while kQueuedLogs logs are waiting. Applied as
  // they happened, the tracker's pieces of thousands of buffers, the
  // tasks and the model's own
  // state evicted each other from the caches (a 1024-NPU AllGather: 2.2x
  // the unchecked time, a third of it misses in the model). The replay
  // reads a copy's ends here and its length and kind in the event, never
  // a task (the graph is freed before the run; the compiled tasks' lines
  // are the run's, which writes their dependency counts).
  enum class CopyStep : std::uint8_t { Read, Land };
  struct CopyEvent {
    CopyEvent(std::uint32_t in_slot, std::uint32_t copy_index, std::uint64_t bytes, bool reduce, CopyStep step)
        : bytes_reduce(bytes << 1 | (reduce ? 1 : 0)),
          slot(in_slot),
          copy_step(copy_index << 1 | (step == CopyStep::Land ? 1 : 0)) {}
    std::uint64_t bytes() const { return bytes_reduce >> 1; }
    bool reduce() const { return (bytes_reduce & 1) != 0; }
    std::uint32_t copy() const { return copy_step >> 1; }  // index into copy_ends_
    CopyStep step() const { return (copy_step & 1) != 0 ? CopyStep::Land : CopyStep::Read; }
    std::uint64_t bytes_reduce;  // bytes << 1 | reduce (a task moves under 2^63 bytes)
    std::uint32_t slot;
    std::uint32_t copy_step;     // copy << 1 | landing (copies are below 2^31)
  };
  static_assert(sizeof(CopyEvent) == 16, "the run logs two a copy");
  // A copy's two ends, each its rank, buffer kind and offset in 64 bits
  // (16 bytes a copy, not 24: a 1024-NPU ReduceScatter checks 1.3 M
  // copies). mark_copies refuses a run beyond kMaxCheckedRanks ranks or
  // with a buffer of kMaxCheckedOffset bytes or more.
  static constexpr int kRankBits = 17;
  static constexpr int kOffsetBits = 45;
  static constexpr std::uint64_t kMaxCheckedRanks = std::uint64_t{1} << kRankBits;    // 131,072
  static constexpr std::uint64_t kMaxCheckedOffset = std::uint64_t{1} << kOffsetBits;  // 32 TiB
  struct CopyEnds {
    std::uint64_t src;
    std::uint64_t dst;
    BufferRef source() const { return unpack(src); }
    BufferRef destination() const { return unpack(dst); }
    static std::uint64_t pack(const BufferRef& b) {
      return static_cast<std::uint64_t>(b.rank) << (kOffsetBits + 2) |
             static_cast<std::uint64_t>(b.buffer) << kOffsetBits | b.offset();
    }
    static BufferRef unpack(std::uint64_t packed) {
      return BufferRef{static_cast<int>(packed >> (kOffsetBits + 2)),
                       static_cast<BufferKind>((packed >> kOffsetBits) & 3),
                       packed & (kMaxCheckedOffset - 1)};
    }
  };
  static_assert(sizeof(CopyEnds) == 16, "a checked run holds one per copy");
  std::size_t copy_batch_ = std::size_t{1} << 16;  // 1 MiB of events
  static constexpr std::size_t kQueuedLogs = 8;  // (8 MiB of events at most waiting)
  void mark_copies(const TaskGraph& graph);
  std::string copy_bounds_error(const Task& t) const;  // "" when the copy stays inside both buffers
  void log_copy(const CopyEvent& e);
  // Applies `log` to the tracker, in order, and empties it.
  void replay_copies(std::vector<CopyEvent>& log);
  std::vector<CopyEvent> copy_log_;
  std::vector<CopyEnds> copy_ends_;               // the copies within their buffers, in task order
  // A copy's read is taken when the copy lands, not when it starts, unless
  // something lands on the bytes it reads in between: that landing first
  // takes the read, so the copy still gets what its source held when it
  // started. Until then a read is a few words, not its spans: a 1024-NPU
  // ReduceScatter ends with 7,168 copies of 8 MiB in flight, whose spans
  // held as they started took 28 MiB and most of the replay's last 150 ms
  // growing the heap. A buffer keeps at most kMaxPendingReads; reads
  // beyond are taken at once.
  struct SlotRead {
    std::vector<DataSpan> spans;  // the read, once taken
    BufferRef source;             // while pending: what it reads
    std::uint64_t bytes = 0;
    bool pending = false;
  };
  struct PendingRead {
    std::uint32_t slot;
    std::uint64_t begin;  // its source bytes [begin, end) (the slot's, here so that a landing's scan reads only this list)
    std::uint64_t end;
  };
  static constexpr std::size_t kMaxPendingReads = 16;
  void start_read(std::uint32_t slot, const BufferRef& source, std::uint64_t bytes);
  // Takes, as they are now, the pending reads of bytes [offset, offset + bytes) of `target`'s buffer.
  void take_reads_overlapping(const BufferRef& target, std::uint64_t bytes);
  void drop_pending(std::uint32_t slot);
  // By slot, the replay's own (it grows it as slots appear in the log).
  std::vector<SlotRead> slot_reads_;
  std::vector<std::vector<PendingRead>> pending_reads_;  // by DataTracker::buffer_index of their source
  std::vector<DataSpan> landing_spans_;                 // a read taken as its copy lands (reused: one at a time)
  std::vector<std::uint32_t> slot_copy_;           // by slot: its copy
  // By task: kNotCopy, kBadCopy, a copy not started (its index into
  // copy_ends_, below kInFlight), or a copy in flight (kInFlight + its slot).
  std::vector<std::uint32_t> in_flight_;
  std::vector<std::uint32_t> free_slots_;
  static constexpr std::uint32_t kNotCopy = 0xffffffffu;  // not a copy, or landed
  static constexpr std::uint32_t kBadCopy = 0xfffffffeu;  // a copy beyond its buffers
  static constexpr std::uint32_t kInFlight = 0x80000000u;
  static constexpr std::uint32_t kMaxSlots = kBadCopy - kInFlight;
  std::optional<TaskId> first_bad_copy_;   // the first copy beyond its buffers to start
  RunResult result_;
  UsedConstants constants_;      // of the graph being run (read before compile frees its tasks)
  bool keep_timings_ = true;
  bool one_sided_ = false;
  std::vector<bool> finished_;   // by task, for the deadlock report whether timings are kept or not
  // The replay thread of a checked run (null otherwise). Declared last, so
  // that it stops before what it reads is destroyed.
  std::unique_ptr<SerialWorker<std::vector<CopyEvent>>> replayer_;
};

}  // namespace hcclsim

#include "sim/scheduler.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <systemc>

#include "base/error.h"
#include "base/json_reader.h"
#include "models/link/channel.h"
#include "models/npu/task_engine.h"

namespace hcclsim {

void Scheduler::compile(const TaskGraph& graph, TaskGraph* release) {
  const auto& tasks = graph.tasks();
  // Explicit dependencies as flat per-task lists, in the graph's order for
  // one task (the order their releases are sent in), each with its thread:
  // a rank's threads are its engine's streams, in graph order (as execute()
  // loads them). Made first: it reads the tasks that `release` frees; the
  // graph's own list of dependencies is freed then as well.
  stream_of_thread_.assign(graph.threads().size(), StreamOf{});
  {
    std::vector<std::uint32_t> streams_on(static_cast<std::size_t>(platform_.npus()), 0);
    for (ThreadId th = 0; th < graph.threads().size(); ++th) {
      const auto rank = static_cast<std::uint32_t>(graph.thread(th).rank);
      stream_of_thread_[th] = StreamOf{rank, streams_on[rank]++};
    }
  }
  first_successor_.assign(tasks.size() + 1, 0);
  for (const auto& [before, after] : graph.dependencies()) ++first_successor_[before + 1];
  for (std::size_t i = 0; i < tasks.size(); ++i) first_successor_[i + 1] += first_successor_[i];
  successors_.resize(graph.dependencies().size());
  // Filled through the starts themselves (each ends as the next one's
  // start, then all move up one): no second array of a word per task.
  for (const auto& [before, after] : graph.dependencies()) {
    successors_[first_successor_[before]++] = Successor{after, tasks[after].thread};
  }
  for (std::size_t i = tasks.size(); i > 0; --i) first_successor_[i] = first_successor_[i - 1];
  first_successor_[0] = 0;
  if (release != nullptr) release->release_dependencies();

  const auto npus = static_cast<std::size_t>(platform_.npus());
  const TaskJitter& jitter = platform_.spec().jitter;
  registers_used_.assign(npus, 0);
  flags_used_.assign(npus, 0);
  exec_ = ExecProgram{};
  for (TaskId id = 0; id < tasks.size(); ++id) {
    // Each compiled chunk is taken after the tasks before it were freed (a
    // chunk of them is larger than one of compiled tasks).
    if (release != nullptr && id % ExecProgram::kChunk == 0) release->release_tasks_before(id);
    const Task& t = tasks[id];
    const int rank = graph.rank_of(id);
    if (t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::NotifyWait) {
      int& used = registers_used_[static_cast<std::size_t>(t.kind == TaskKind::NotifyRecord ? t.peer : rank)];
      used = std::max(used, t.notify + 1);
    } else if (t.kind == TaskKind::FlagSet || t.kind == TaskKind::FlagWait) {
      int& used = flags_used_[static_cast<std::size_t>(t.peer)];
      used = std::max(used, t.notify + 1);
    }
    ExecTask e{};
    switch (t.kind) {
      case TaskKind::NotifyRecord:
        e.kind = ExecKind::NotifyRecord;
        e.target = &platform_.engine(t.peer);
        e.notify = t.notify;
        e.remote = !platform_.same_chip(rank, t.peer);
        if (platform_.rdma_between(rank, t.peer)) {  // a 4-byte RDMA write through the NICs
          e.kind = ExecKind::RdmaNotify;  // its queue pair's peer is its target's rank
          e.qp_peer = static_cast<std::uint32_t>(t.peer);
          e.path = &platform_.route(rank, t.peer);
        }
        break;
      case TaskKind::NotifyWait:
        e.kind = ExecKind::NotifyWait;
        e.notify = t.notify;
        e.span = t.duration;  // its timeout
        break;
      case TaskKind::FlagSet:
        e.kind = ExecKind::FlagSet;
        e.target = &platform_.engine(t.peer);
        e.notify = t.notify;
        break;
      case TaskKind::FlagWait:
        e.kind = ExecKind::FlagWait;
        e.target = &platform_.engine(t.peer);
        e.notify = t.notify;
        e.count = t.count;
        break;
      case TaskKind::Memcpy:
      case TaskKind::ReduceInline: {
        e.kind = ExecKind::Transfer;
        // (the engines time transfers up to what the graph addresses; beyond, a size near 2^64 came out free)
        if (t.bytes > kMaxCheckedOffset) {
          throw GraphError(graph.describe(id) + " moves " + std::to_string(t.bytes) + " bytes, beyond the 32 TiB a task may move");
        }
        e.bytes = t.bytes;
        e.reduce = t.kind == TaskKind::ReduceInline;
        e.aiv = t.mover == Mover::Aiv;
        if (t.bytes > 0) {
          e.path = e.aiv ? &platform_.aiv_route(t.src.rank, t.dst.rank) : &platform_.route(t.src.rank, t.dst.rank);
        }
        // A read pulls a peer's memory into this rank's: the request crosses
        // first (its own fixed cost) and the write limit of the links does not apply.
        const bool read = t.src.rank != rank;
        const NpuParams& npu = platform_.engine(rank).params();
        if (e.aiv) {
          const int cores = t.cores;   // 0: the write pipe of a core its kernel holds
          if (cores < 0 || cores > npu.cores.aiv) {
            throw GraphError(graph.describe(id) + " needs " + std::to_string(cores) + " AIV cores but the NPU has " +
                             std::to_string(npu.cores.aiv));
          }
          e.cores = static_cast<std::uint16_t>(cores);
          e.span = npu.aiv.copy_fixed;
          e.rate_cap = Bandwidth{npu.aiv.core_bandwidth.bytes_per_s * static_cast<std::uint64_t>(std::max(1, cores))};
        } else {
          e.span = read ? npu.sdma.read_fixed : npu.sdma.task_fixed;
          e.rate_cap = e.reduce ? npu.sdma.reduce_bandwidth : npu.sdma.copy_bandwidth;
        }
        if (e.path != nullptr) {
          // The links' caps on this transfer: a write's (write_bandwidth),
          // one SDMA task's (sdma_*_rate; transport_rate unless one-sided),
          // and an SDMA task's extra wait.
          const auto lower_cap = [&e](Bandwidth cap) {
            if (cap.bytes_per_s != 0 && (e.rate_cap.bytes_per_s == 0 || cap.bytes_per_s < e.rate_cap.bytes_per_s)) {
              e.rate_cap = cap;
            }
          };
          Time extra;
          for (const Channel* ch : *e.path) {
            const ChannelParams& link = ch->params();
            if (!read) lower_cap(link.write_bandwidth);
            if (e.aiv) continue;
            lower_cap(read ? link.sdma_read_rate : link.sdma_write_rate);
            if (!one_sided_) lower_cap(link.transport_rate);
            const Time x = read ? link.sdma_read_extra : link.sdma_write_extra;
            if (x > extra) extra = x;
          }
          e.span = e.span + extra;
        }
        if (platform_.rdma_between(t.src.rank, t.dst.rank)) {
          if (e.aiv) {
            throw GraphError(graph.describe(id) + " moves data with an AIV core between RDMA domains; AIV cores "
                             "reach only the memory of their SDMA domain (server or supernode)");
          }
          if (e.reduce) {
            throw GraphError(graph.describe(id) + " reduces across RDMA, which only writes: write into the peer's "
                             "buffer and reduce there");
          }
          e.kind = ExecKind::RdmaWrite;
          e.peer = t.src.rank == rank ? t.dst.rank : t.src.rank;
        }
        break;
      }
      case TaskKind::Compute: {
        e.kind = ExecKind::Compute;
        e.core_kind = t.core_kind;
        e.span = t.duration;
        const CoreParams& cores = platform_.engine(rank).params().cores;
        const int available = t.core_kind == CoreKind::Aic ? cores.aic : cores.aiv;
        if (t.cores < 1 || t.cores > available) {
          throw GraphError(graph.describe(id) + " needs " + std::to_string(t.cores) + " cores but the NPU has " +
                           std::to_string(available));
        }
        e.cores = static_cast<std::uint16_t>(t.cores);
        break;
      }
      case TaskKind::Delay:
        e.kind = ExecKind::Delay;
        e.span = t.duration;
        e.started_while_blocked = t.started_while_blocked;
        break;
    }
    // A scenario's what-ifs on durations (topologies/scenario.h): a slow
    // rank's compute factor, then every task's jitter on its own span (a
    // transfer's set-up, not its bytes' time on the links; a wait's span is
    // its timeout and stays).
    // A span they make longer than an input may give is refused, never
    // saturated (sums of simulated time must stay far below 2^64 ps).
    const Time given = e.span;
    if (e.kind == ExecKind::Compute) {
      const double factor = platform_.engine(rank).params().cores.compute_factor;
      if (factor != 1.0) {
        const double ps = std::floor(static_cast<double>(e.span.ps) * factor + 0.5);
        e.span = Time{ps < static_cast<double>(kMaxInputTime.ps) ? static_cast<std::uint64_t>(ps) : ~0ULL};
      }
    }
    if (e.kind != ExecKind::NotifyWait) e.span = jittered_span(jitter, id, e.span);
    if (e.span > kMaxInputTime && e.span != given) {
      throw InputError("option --scenario", graph.describe(id) + " would take longer than 10^6 s, the limit of one "
                                            "task's time, under the scenario's compute factor or jitter");
    }
    exec_.push_back(e);
  }
  if (release != nullptr) release->release_tasks_before(tasks.size());
  for (const Successor& next : successors_) ++exec_[next.task].unmet_deps;
}

void Scheduler::check_compile_execute(const TaskGraph& graph, TaskGraph* release, DataTracker* tracker) {
  graph.check_references(platform_.npus());  // the cycle check waits for a run that does not finish
  tracker_ = tracker;
  if (tracker_) mark_copies(graph);
  PlatformPaths paths(platform_);
  constants_ = used_constants(graph, paths);
  compile(graph, release);
  execute(graph);
  result_.constants = constants_;
}

RunResult Scheduler::run(const TaskGraph& graph, DataTracker* tracker) {
  check_compile_execute(graph, nullptr, tracker);
  if (needs_report()) report_failure(graph);
  return result_;
}

RunResult Scheduler::run_releasing(TaskGraph graph, const std::function<TaskGraph()>& rebuild,
                                   DataTracker* tracker) {
  check_compile_execute(graph, &graph, tracker);
  if (needs_report()) {
    const TaskGraph whole = rebuild();
    if (whole.tasks().size() != graph.tasks().size() || whole.threads().size() != graph.threads().size()) {
      throw std::logic_error("scheduler: the graph rebuilt for a failure report differs from the one run");
    }
    report_failure(whole);
  }
  return result_;
}

void Scheduler::execute(const TaskGraph& graph) {
  const int npus = platform_.npus();
  result_ = RunResult{};
  timeout_.reset();
  first_bad_copy_.reset();
  result_.begin = Time{sc_core::sc_time_stamp().value()};
  result_.end = result_.begin;
  result_.timings.assign(keep_timings_ ? graph.tasks().size() : 0, TaskTiming{});
  finished_.assign(graph.tasks().size(), false);
  const std::uint64_t activations_before = platform_.activations();

  std::vector<std::vector<const std::vector<std::uint32_t>*>> streams(static_cast<std::size_t>(npus));
  for (const Thread& th : graph.threads()) streams[static_cast<std::size_t>(th.rank)].push_back(&th.tasks);
  for (int n = 0; n < npus; ++n) {
    platform_.engine(n).load(&exec_, streams[static_cast<std::size_t>(n)], this,
                             registers_used_[static_cast<std::size_t>(n)], flags_used_[static_cast<std::size_t>(n)],
                             !graph.launches_in_graph());
  }
  if (tracker_) {
    replayer_ = std::make_unique<SerialWorker<std::vector<CopyEvent>>>(
        [this](std::vector<CopyEvent>& log) { replay_copies(log); }, kQueuedLogs);
  }
  try {
    sc_core::sc_start();
  } catch (...) {
    replayer_.reset();  // done with the tracker before the caller's unwinding destroys it
    throw;
  }

  if (const std::string why = time_limit_problem(result_.end); !why.empty()) throw InputError("the run", why);
  result_.activations = platform_.activations() - activations_before;
  in_flight_ = {};  // what landed no longer needs its place
  free_slots_ = {};
  slot_copy_ = {};
  if (tracker_) {
    replayer_->finish();  // (a replay's error is thrown here)
    replayer_.reset();
    replay_copies(copy_log_);
  }
  copy_log_ = {};
  slot_reads_ = {};
  pending_reads_ = {};
  landing_spans_ = {};
  copy_ends_ = {};
}

bool Scheduler::needs_report() const { return timeout_ || first_bad_copy_ || !all_done(); }

bool Scheduler::all_done() const {
  for (int n = 0; n < platform_.npus(); ++n) {
    if (!platform_.engine(n).all_done()) return false;
  }
  return true;
}

void Scheduler::report_failure(const TaskGraph& graph) {
  if (first_bad_copy_) {
    result_.check_error = graph.describe(*first_bad_copy_) + ": " + copy_bounds_error(graph.task(*first_bad_copy_));
  }
  if (timeout_) {
    std::ostringstream os;
    os << "HCCL_E_TIMEOUT: " << graph.describe(timeout_->task) << " timed out at " << format_us(timeout_->at)
       << " us after waiting " << format_us(timeout_->at - timeout_->started) << " us; nothing recorded notify "
       << graph.task(timeout_->task).notify << " in time";
    result_.failure = os.str();
  } else if (!all_done()) {
    result_.failure = deadlock_report(graph);
  }
  // A graph with a cycle never finishes: it is refused as validate() would
  // have refused it before the run, naming the tasks of the cycle.
  if (!result_.failure.empty()) graph.check_cycles(platform_.npus());
}

void Scheduler::mark_copies(const TaskGraph& graph) {
  replayer_.reset();  // a run that ended by an exception may have left one going
  copy_log_.clear();
  copy_log_.reserve(copy_batch_);
  slot_reads_.clear();
  pending_reads_.assign(tracker_->buffer_count(), {});
  slot_copy_.clear();
  free_slots_.clear();
  std::size_t copies = 0;
  for (const Task& t : graph.tasks()) copies += t.kind == TaskKind::Memcpy || t.kind == TaskKind::ReduceInline;
  if (copies >= kInFlight) throw std::length_error("data check: more than 2^31 copies");
  // A copy within its buffers (the bounds check below) then packs into CopyEnds.
  const int ranks = tracker_->sets().ranks();
  std::uint64_t largest = 0;
  for (int r = 0; r < ranks; ++r) {
    for (const BufferKind kind : {BufferKind::Input, BufferKind::Output, BufferKind::Scratch}) {
      largest = std::max(largest, tracker_->buffer(r, kind).size());
    }
  }
  if (static_cast<std::uint64_t>(ranks) > kMaxCheckedRanks || largest > kMaxCheckedOffset) {
    throw std::length_error("data check: at most " + std::to_string(kMaxCheckedRanks) +
                            " ranks and buffers of at most 32 TiB (this run: " + std::to_string(ranks) + " ranks, " +
                            std::to_string(largest) + " bytes); use --no-check");
  }
  copy_ends_.clear();
  copy_ends_.reserve(copies);
  in_flight_.assign(graph.tasks().size(), kNotCopy);
  for (TaskId id = 0; id < graph.tasks().size(); ++id) {
    const Task& t = graph.task(id);
    if (t.kind != TaskKind::Memcpy && t.kind != TaskKind::ReduceInline) continue;
    if (!copy_bounds_error(t).empty()) {
      in_flight_[id] = kBadCopy;
      continue;
    }
    in_flight_[id] = static_cast<std::uint32_t>(copy_ends_.size());
    copy_ends_.push_back(CopyEnds{CopyEnds::pack(t.src), CopyEnds::pack(t.dst)});
  }
}

std::string Scheduler::copy_bounds_error(const Task& t) const {
  std::string bad = tracker_->bounds_error(t.src, t.bytes);
  return bad.empty() ? tracker_->bounds_error(t.dst, t.bytes) : bad;
}

void Scheduler::task_started(std::uint32_t id, Time at) {
  if (keep_timings_) {
    TaskTiming& timing = result_.timings[id];
    timing.start = at;
    timing.started = true;
  }
  if (!tracker_) return;
  const std::uint32_t mark = in_flight_[id];
  if (mark == kNotCopy) return;
  if (mark == kBadCopy) {  // the first to start is reported, once the run is over
    if (!first_bad_copy_) first_bad_copy_ = id;
    return;
  }
  std::uint32_t slot;
  if (free_slots_.empty()) {
    if (slot_copy_.size() == kMaxSlots) throw std::length_error("data check: too many copies in flight");
    slot = static_cast<std::uint32_t>(slot_copy_.size());
    slot_copy_.push_back(0);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  slot_copy_[slot] = mark;
  in_flight_[id] = kInFlight + slot;
  const ExecTask& t = exec_[id];
  log_copy(CopyEvent{slot, mark, t.bytes, t.reduce, CopyStep::Read});
}

void Scheduler::data_landed(std::uint32_t id, Time at) {
  if (result_.end < at) result_.end = at;
  if (!tracker_) return;
  const std::uint32_t mark = in_flight_[id];
  if (mark < kInFlight || mark >= kBadCopy) return;  // not a copy in flight
  const std::uint32_t slot = mark - kInFlight;
  const ExecTask& t = exec_[id];
  log_copy(CopyEvent{slot, slot_copy_[slot], t.bytes, t.reduce, CopyStep::Land});
  in_flight_[id] = kNotCopy;
  free_slots_.push_back(slot);
}

void Scheduler::log_copy(const CopyEvent& e) {
  copy_log_.push_back(e);
  if (copy_log_.size() < copy_batch_) return;
  replayer_->hand_over(std::move(copy_log_));
  copy_log_ = {};
  copy_log_.reserve(copy_batch_);
}

void Scheduler::replay_copies(std::vector<CopyEvent>& log) {
  const std::size_t n = log.size();
  // The copies and buffers an event touches are independent of the next
  // events', so their first cache lines are fetched a few events ahead, in
  // stages: the copy's ends, its buffer, the buffer's
  // block views, the entry its last search ended on (each stage reading
  // only what the one before fetched). A landing touches its destination
  // (and its source, whose read is mostly taken then).
  constexpr std::size_t kAhead = 4;
  auto prefetch = [&](const CopyEvent& e, int stage) {
    if (e.step() != CopyStep::Land) return;
    const CopyEnds& ends = copy_ends_[e.copy()];
    tracker_->prefetch(ends.destination(), stage);
    tracker_->prefetch(ends.source(), stage);
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (i + 4 * kAhead < n) {
      const CopyEvent& ahead = log[i + 4 * kAhead];
      __builtin_prefetch(&copy_ends_[ahead.copy()]);
    }
    if (i + 3 * kAhead < n) prefetch(log[i + 3 * kAhead], 0);
    if (i + 2 * kAhead < n) prefetch(log[i + 2 * kAhead], 1);
    if (i + kAhead < n) prefetch(log[i + kAhead], 2);
    const CopyEvent& e = log[i];
    if (e.slot >= slot_reads_.size()) slot_reads_.resize(static_cast<std::size_t>(e.slot) + 1);
    const CopyEnds& ends = copy_ends_[e.copy()];
    if (e.step() == CopyStep::Read) {
      start_read(e.slot, ends.source(), e.bytes());
      continue;
    }
    SlotRead& read = slot_reads_[e.slot];
    std::vector<DataSpan>* spans = &read.spans;
    if (read.pending) {  // nothing landed on its bytes since it started
      drop_pending(e.slot);
      tracker_->read(read.source, read.bytes, landing_spans_);
      spans = &landing_spans_;
    }
    const BufferRef destination = ends.destination();
    take_reads_overlapping(destination, e.bytes());
    if (e.reduce()) {
      tracker_->reduce(destination, *spans);
    } else {
      tracker_->write(destination, *spans);
    }
    spans->clear();
    if (spans != &landing_spans_ && spans->capacity() > 64) std::vector<DataSpan>().swap(*spans);  // a slot keeps no long read
  }
  log.clear();
}

void Scheduler::start_read(std::uint32_t slot, const BufferRef& source, std::uint64_t bytes) {
  SlotRead& read = slot_reads_[slot];
  std::vector<PendingRead>& pending = pending_reads_[DataTracker::buffer_index(source.rank, source.buffer)];
  if (pending.size() == kMaxPendingReads) {
    tracker_->read(source, bytes, read.spans);
    return;
  }
  pending.push_back(PendingRead{slot, source.offset(), source.offset() + bytes});
  read.source = source;
  read.bytes = bytes;
  read.pending = true;
}

void Scheduler::drop_pending(std::uint32_t slot) {
  SlotRead& read = slot_reads_[slot];
  std::vector<PendingRead>& pending = pending_reads_[DataTracker::buffer_index(read.source.rank, read.source.buffer)];
  for (std::size_t k = 0; k < pending.size(); ++k) {
    if (pending[k].slot == slot) {
      pending[k] = pending.back();
      pending.pop_back();
      break;
    }
  }
  read.pending = false;
}

void Scheduler::take_reads_overlapping(const BufferRef& target, std::uint64_t bytes) {
  std::vector<PendingRead>& pending = pending_reads_[DataTracker::buffer_index(target.rank, target.buffer)];
  const std::uint64_t begin = target.offset();
  const std::uint64_t end = begin + bytes;
  for (std::size_t k = 0; k < pending.size();) {
    const PendingRead p = pending[k];
    if (p.begin >= end || begin >= p.end) {
      ++k;
      continue;
    }
    SlotRead& read = slot_reads_[p.slot];
    tracker_->read(read.source, read.bytes, read.spans);
    read.pending = false;
    pending[k] = pending.back();
    pending.pop_back();
  }
}

void Scheduler::task_finished(std::uint32_t id, Time at) {
  if (keep_timings_) {
    TaskTiming& timing = result_.timings[id];
    timing.end = at;
    timing.finished = true;
  }
  finished_[id] = true;
  if (result_.end < at) result_.end = at;
  for (std::uint32_t k = first_successor_[id]; k < first_successor_[id + 1]; ++k) {
    const Successor& next = successors_[k];
    if (--exec_[next.task].unmet_deps == 0) {
      const StreamOf& where = stream_of_thread_[next.thread];
      platform_.engine(static_cast<int>(where.rank)).release_dependency(where.stream);
    }
  }
}

void Scheduler::wait_released(std::uint32_t wait, std::uint32_t record) {
  if (keep_timings_) result_.timings[wait].released_by = static_cast<std::int32_t>(record);
}

void Scheduler::task_timed_out(std::uint32_t id, Time started, Time at) {
  if (timeout_) return;  // the first one is reported
  result_.timed_out = true;
  timeout_ = Timeout{id, started, at};
}

std::string Scheduler::deadlock_report(const TaskGraph& graph) const {
  std::ostringstream os;
  os << "deadlock: the simulation ran out of events with tasks unfinished. Blocked threads:";
  for (int n = 0; n < platform_.npus(); ++n) {
    for (const auto& [stream, state] : platform_.engine(n).unfinished()) {
      (void)stream;
      os << "\n  " << graph.describe(state.task) << " " << phase_name(state.phase) << " since "
         << format_us(Time{state.since_ps}) << " us";
      if (state.phase == TaskEngine::Phase::Notify && graph.task(state.task).kind == TaskKind::FlagWait) {
        const Task& w = graph.task(state.task);
        os << " (flag " << w.notify << " of rank " << w.peer << " holds " << platform_.engine(w.peer).flag_value(w.notify)
           << ", it polls for " << w.count << ")";
      } else if (state.phase == TaskEngine::Phase::Notify) {
        const int notify = graph.task(state.task).notify;
        const std::uint64_t lost = platform_.engine(n).records_lost_on(notify);
        os << " (notify " << notify << " of rank " << n << " is not set and nothing records it any more";
        if (lost > 0) os << "; " << lost << " record(s) to it landed while it was already set and were lost";
        os << ")";
      }
      if (state.phase == TaskEngine::Phase::Deps) {
        for (const auto& [before, after] : graph.dependencies()) {
          if (after == state.task && !finished_[before]) {
            os << "\n    depends on unfinished " << graph.describe(before);
          }
        }
      }
    }
  }
  return os.str();
}

}  // namespace hcclsim

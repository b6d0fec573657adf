#include "models/npu/task_engine.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace hcclsim {

const char* phase_name(TaskEngine::Phase phase) {
  switch (phase) {
    case TaskEngine::Phase::Dispatch: return "being dispatched";
    case TaskEngine::Phase::Deps: return "waiting for a task it depends on";
    case TaskEngine::Phase::Sdma: return "waiting for a free SDMA engine";
    case TaskEngine::Phase::Cores: return "waiting for free AI cores";
    case TaskEngine::Phase::Fixed: return "in SDMA set-up";
    case TaskEngine::Phase::Flow: return "moving data";
    case TaskEngine::Phase::Notify: return "waiting for a notify record";
    case TaskEngine::Phase::Busy: return "running";
    case TaskEngine::Phase::Done: return "done";
    case TaskEngine::Phase::Failed: return "failed";
  }
  return "?";
}

TaskEngine::TaskEngine(sc_core::sc_module_name name, int rank, const NpuParams& params, Network& network,
                       WakeClock& clock)
    : sc_core::sc_module(name),
      rank_(rank),
      params_(params),
      network_(network),
      clock_(clock),
      notify_("notify"),
      flags_("flags"),
      sdma_("sdma", params.sdma.engines),
      aic_("aic", params.cores.aic),
      aiv_("aiv", params.cores.aiv),
      rdma_("rdma") {}

void TaskEngine::set_params(const NpuParams& params) {
  if (params.sdma.engines != params_.sdma.engines || params.cores.aic != params_.cores.aic ||
      params.cores.aiv != params_.cores.aiv) {
    throw std::invalid_argument("npu" + std::to_string(rank_) +
                                ": new parameters change the number of SDMA engines or cores, which are elaborated");
  }
  params_ = params;
}

void TaskEngine::load(ExecProgram* tasks, const std::vector<const std::vector<std::uint32_t>*>& streams,
                      TaskObserver* observer, int notify_registers, int flags, bool charge_launch) {
  tasks_ = tasks;
  observer_ = observer;
  streams_.clear();
  streams_.resize(streams.size());
  done_streams_ = 0;
  // A workload starts from clean notifies: a wait left blocked by a failed
  // run names a stream of that run, and a record that landed after its wait
  // gave up must not release a wait of this one.
  notify_.reset(notify_registers);
  flags_.reset(flags);
  rdma_.reset();
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  for (std::uint32_t s = 0; s < streams.size(); ++s) {
    streams_[s].tasks = streams[s]->data();
    streams_[s].count = streams[s]->size();
    streams_[s].flow.listener = this;
    streams_[s].flow.tag = s;
    if (streams_[s].count == 0) {
      streams_[s].phase = Phase::Done;
      ++done_streams_;
      continue;
    }
    streams_[s].head = streams_[s].tasks[0];
    const Time launch = charge_launch ? params_.stream.op_launch : Time{};
    if (!start_ahead(s, now, launch)) begin_dispatch(s, now, launch);
  }
  step_in_next_delta();
}

void TaskEngine::notify_land(int reg, std::uint32_t record_task) {
  inbox_.push_back(Input{InputKind::Land, static_cast<std::uint32_t>(reg), record_task});
  step_in_next_delta();
}

void TaskEngine::flag_land(int flag, std::uint32_t set_task) {
  inbox_.push_back(Input{InputKind::FlagLand, static_cast<std::uint32_t>(flag), set_task});
  step_in_next_delta();
}

void TaskEngine::flag_watch(int flag, std::uint32_t value, TaskEngine* waiter, std::uint32_t stream) {
  inbox_.push_back(Input{InputKind::FlagWatch, static_cast<std::uint32_t>(flag), value, waiter, stream});
  step_in_next_delta();
}

void TaskEngine::flag_seen(std::uint32_t stream, std::uint32_t set_task) {
  inbox_.push_back(Input{InputKind::FlagSeen, stream, set_task});
  step_in_next_delta();
}

void TaskEngine::release_dependency(std::uint32_t stream) {
  inbox_.push_back(Input{InputKind::Dependency, stream});
  step_in_next_delta();
}

namespace {
constexpr std::uint64_t kRdmaTag = 1ULL << 40;  // flow tags: stream index, or kRdmaTag + RDMA op
}

void TaskEngine::flow_finished(Flow& flow) {
  if (flow.tag >= kRdmaTag) {
    inbox_.push_back(Input{InputKind::RdmaDone, static_cast<std::uint32_t>(flow.tag - kRdmaTag)});
  } else {
    inbox_.push_back(Input{InputKind::FlowDone, static_cast<std::uint32_t>(flow.tag)});
  }
  step_in_next_delta();
}

// The work request is posted: its bytes start moving; the stream goes on.
void TaskEngine::post_rdma(std::uint32_t s, std::uint64_t now) {
  const ExecTask& task = head(s);
  const std::uint32_t op_index = rdma_.take_op(this, kRdmaTag);
  RdmaOp& op = rdma_.op(op_index);
  op.task = head_id(s);
  op.notify = task.kind == ExecKind::RdmaNotify;
  if (op.notify) {
    op.target = task.target;
    op.reg = task.notify;
    op.flow.bytes = params_.rdma.notify_bytes;
  } else {
    op.flow.bytes = task.bytes;
  }
  rdma_.post(op_index, queue_pair(streams_[s], op.notify ? static_cast<int>(task.qp_peer) : task.peer));
  op.flow.path = task.path;
  op.flow.rate_cap = Bandwidth{};
  if (op.flow.bytes == 0 || op.flow.path == nullptr) {
    rdma_arrived(op_index, now);
  } else {
    network_.start_flow(op.flow);
  }
  complete(s, now);
}

TaskEngine::QueuePair& TaskEngine::queue_pair(Stream& st, int peer) {
  if (st.qp_peer != peer) {
    st.qp_peer = peer;
    st.qp = &rdma_.queue_pair(peer);
  }
  return *st.qp;
}

void TaskEngine::rdma_arrived(std::uint32_t op_index, std::uint64_t now) {
  const RdmaOp& op = rdma_.op(op_index);
  if (!op.notify) observer_->data_landed(op.task, Time{now});
  rdma_.arrived(op_index, [](const RdmaOp& landed) { landed.target->notify_land(landed.reg, landed.task); });
}

void TaskEngine::step() {
  ++activations_;
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  // Timers first, then inputs; repeat while handling one creates work due now.
  for (;;) {
    bool progressed = false;
    while (!timers_.empty() && timers_.top().at <= now) {
      Timer t = timers_.top();
      timers_.pop();
      handle_timer(t, now);
      progressed = true;
    }
    if (!inbox_.empty()) {
      draining_.swap(inbox_);
      for (const Input& in : draining_) handle_input(in, now);
      draining_.clear();
      progressed = true;
    }
    if (!progressed) break;
  }
  // The next timer through the platform's clock (only an earlier one needs a new request).
  if (!timers_.empty() && timers_.top().at < next_wake_) {
    next_wake_ = timers_.top().at;
    clock_.wake(this, next_wake_);
  }
}

void TaskEngine::step_in_next_delta() {
  if (delta_asked_) return;
  delta_asked_ = true;
  clock_.wake_delta(this);
}

void TaskEngine::on_delta() {
  delta_asked_ = false;
  step();
}

void TaskEngine::on_clock(std::uint64_t at) {
  if (at != next_wake_) return;  // a wake-up replaced by an earlier one
  next_wake_ = WakeClock::kNever;
  step();
}

void TaskEngine::set_timer(std::uint32_t s, TimerKind kind, std::uint64_t at) {
  timers_.push(Timer{at, timer_seq_++, s, kind, streams_[s].token});
}

void TaskEngine::begin_dispatch(std::uint32_t s, std::uint64_t now, Time gap) {
  Stream& st = streams_[s];
  // The head task is read again when the gap ends; at scale it is far away in memory.
  __builtin_prefetch(&head(s));
  st.phase = Phase::Dispatch;
  st.since_ps = now;
  set_timer(s, TimerKind::DispatchDone, now + gap.ps);
}

// A task with no dependency left whose course depends on nothing but its
// own duration (a record, an RDMA post, a flag store, a delay) is timed to
// its end at once: one engine wake instead of two (the dispatch gap's end
// and the task's). Nothing arriving during the gap could change it, since a
// dependency count only falls. Returns false for every other task.
bool TaskEngine::start_ahead(std::uint32_t s, std::uint64_t now, Time gap) {
  const ExecTask& task = head(s);
  if (task.unmet_deps > 0) return false;
  TimerKind kind;
  Time busy;
  switch (task.kind) {
    case ExecKind::NotifyRecord:
      kind = TimerKind::RecordDone;
      busy = task.remote ? params_.notify.record_remote : params_.notify.record_local;
      break;
    case ExecKind::RdmaWrite:
    case ExecKind::RdmaNotify:
      kind = TimerKind::Posted;
      busy = params_.rdma.post;
      break;
    case ExecKind::FlagSet:
      kind = TimerKind::FlagDone;
      busy = params_.aiv.flag_write;
      break;
    case ExecKind::Delay:
      kind = TimerKind::BusyDone;
      busy = task.span;
      break;
    default:
      return false;
  }
  Stream& st = streams_[s];
  const std::uint64_t start = now + gap.ps;
  st.phase = Phase::Busy;
  st.since_ps = start;
  observer_->task_started(head_id(s), Time{start});
  set_timer(s, kind, start + busy.ps);
  return true;
}

void TaskEngine::handle_timer(const Timer& t, std::uint64_t now) {
  Stream& st = streams_[t.stream];
  switch (t.kind) {
    case TimerKind::DispatchDone:
      try_start(t.stream, now);
      break;
    case TimerKind::FixedDone: {
      ExecTask& task = head(t.stream);
      if (task.bytes == 0 || task.path == nullptr) {
        release_mover(task, now);
        observer_->data_landed(head_id(t.stream), Time{now});
        complete(t.stream, now);
        break;
      }
      st.phase = Phase::Flow;
      st.flow.bytes = task.bytes;
      st.flow.path = task.path;
      st.flow.rate_cap = task.rate_cap;
      network_.start_flow(st.flow);
      break;
    }
    case TimerKind::BusyDone:
      if (head(t.stream).kind == ExecKind::Compute) {
        const ExecTask& task = head(t.stream);
        cores_of(task.core_kind).release(task.cores, [&](std::uint32_t w) { core_granted(w, now); });
      }
      complete(t.stream, now);
      break;
    case TimerKind::RecordDone: {
      const ExecTask& task = head(t.stream);
      task.target->notify_land(task.notify, head_id(t.stream));
      complete(t.stream, now);
      break;
    }
    case TimerKind::Posted:
      post_rdma(t.stream, now);
      break;
    case TimerKind::FlagDone: {
      const ExecTask& task = head(t.stream);
      task.target->flag_land(task.notify, head_id(t.stream));
      complete(t.stream, now);
      break;
    }
    case TimerKind::Timeout:
      if (st.phase == Phase::Notify && st.token == t.token) {
        notify_.give_up(head(t.stream).notify);
        const Time started{st.since_ps};
        st.phase = Phase::Failed;
        st.since_ps = now;
        ++done_streams_;  // a failed stream will not go on; the observer reports it
        observer_->task_timed_out(head_id(t.stream), started, Time{now});
      }
      break;
  }
}

void TaskEngine::handle_input(const Input& in, std::uint64_t now) {
  switch (in.kind) {
    case InputKind::Land: {
      const std::int32_t w = notify_.land(static_cast<int>(in.value), in.record);
      if (w != NotifyUnit::kNoStream) {
        ++streams_[w].token;  // cancels its timeout
        observer_->wait_released(head_id(static_cast<std::uint32_t>(w)), in.record);
        complete(static_cast<std::uint32_t>(w), now);
      }
      break;
    }
    case InputKind::Dependency:
      if (streams_[in.value].phase == Phase::Deps) try_start(in.value, now);
      break;
    case InputKind::FlowDone:
      release_mover(head(in.value), now);
      observer_->data_landed(head_id(in.value), Time{now});
      complete(in.value, now);
      break;
    case InputKind::RdmaDone:
      rdma_arrived(in.value, now);
      break;
    case InputKind::FlagLand:
      flags_.add(static_cast<int>(in.value), in.record,
                 [&](TaskEngine* engine, std::uint32_t stream) { engine->flag_seen(stream, in.record); });
      break;
    case InputKind::FlagWatch: {
      std::uint32_t set_by = 0;
      if (flags_.watch(static_cast<int>(in.value), in.record, in.from, in.stream, &set_by)) {
        in.from->flag_seen(in.stream, set_by);
      }
      break;
    }
    case InputKind::FlagSeen:
      observer_->wait_released(head_id(in.value), in.record);
      poll_flag(in.value, now);
      break;
  }
}

// The flag holds what was awaited: the polling core sees it one poll later.
void TaskEngine::poll_flag(std::uint32_t s, std::uint64_t now) {
  streams_[s].phase = Phase::Busy;
  set_timer(s, TimerKind::BusyDone, now + params_.aiv.flag_poll.ps);
}

// An SDMA engine or an AIV core is free again for the next queued transfer.
void TaskEngine::release_mover(const ExecTask& task, std::uint64_t now) {
  if (task.aiv) {
    if (task.cores == 0) return;
    aiv_.pool.release(task.cores, [&](std::uint32_t w) { core_granted(w, now); });
  } else {
    sdma_.pool.release(1, [&](std::uint32_t w) { begin_transfer(w, now); });
  }
}

void TaskEngine::try_start(std::uint32_t s, std::uint64_t now) {
  Stream& st = streams_[s];
  ExecTask& task = head(s);
  if (task.unmet_deps > 0) {
    if (st.phase != Phase::Deps) st.since_ps = now;
    st.phase = Phase::Deps;
    if (task.started_while_blocked && !st.announced) {
      st.announced = true;
      observer_->task_started(head_id(s), Time{now});
    }
    return;
  }
  st.since_ps = now;
  switch (task.kind) {
    case ExecKind::NotifyRecord:
      observer_->task_started(head_id(s), Time{now});
      st.phase = Phase::Busy;
      set_timer(s, TimerKind::RecordDone,
                now + (task.remote ? params_.notify.record_remote.ps : params_.notify.record_local.ps));
      break;
    case ExecKind::NotifyWait: {
      observer_->task_started(head_id(s), Time{now});
      std::uint32_t set_by = 0;
      if (notify_.wait(task.notify, s, &set_by)) {
        observer_->wait_released(head_id(s), set_by);
        st.phase = Phase::Busy;
        set_timer(s, TimerKind::BusyDone, now + params_.notify.wait.ps);
      } else {
        st.phase = Phase::Notify;
        if (task.span.ps > 0) set_timer(s, TimerKind::Timeout, now + task.span.ps);
      }
      break;
    }
    case ExecKind::Transfer:
      st.phase = task.aiv ? Phase::Cores : Phase::Sdma;
      if (task.aiv && task.cores == 0) {
        begin_transfer(s, now);   // a core's write pipe: the core is its kernel's already
      } else if (task.aiv ? aiv_.pool.acquire(s, task.cores) : sdma_.pool.acquire(s, 1)) {
        begin_transfer(s, now);
      }
      break;
    case ExecKind::FlagSet:
      observer_->task_started(head_id(s), Time{now});
      st.phase = Phase::Busy;
      set_timer(s, TimerKind::FlagDone, now + params_.aiv.flag_write.ps);
      break;
    case ExecKind::FlagWait:
      // Polling goes through the flag's owner (this NPU or a peer), in its own process.
      observer_->task_started(head_id(s), Time{now});
      st.phase = Phase::Notify;
      task.target->flag_watch(task.notify, task.count, this, s);
      break;
    case ExecKind::Compute:
      st.phase = Phase::Cores;
      if (cores_of(task.core_kind).acquire(s, task.cores)) begin_compute(s, now);
      break;
    case ExecKind::Delay:
      if (!st.announced) observer_->task_started(head_id(s), Time{now});
      st.phase = Phase::Busy;
      set_timer(s, TimerKind::BusyDone, now + task.span.ps);
      break;
    case ExecKind::RdmaWrite:
    case ExecKind::RdmaNotify:
      observer_->task_started(head_id(s), Time{now});
      st.phase = Phase::Busy;
      set_timer(s, TimerKind::Posted, now + params_.rdma.post.ps);
      break;
  }
}

void TaskEngine::begin_transfer(std::uint32_t s, std::uint64_t now) {
  Stream& st = streams_[s];
  st.phase = Phase::Fixed;
  st.since_ps = now;
  observer_->task_started(head_id(s), Time{now});
  set_timer(s, TimerKind::FixedDone, now + head(s).span.ps);
}

// AIV cores serve both vector compute and AIV copies: a stream granted
// cores starts whichever its head task is.
void TaskEngine::core_granted(std::uint32_t s, std::uint64_t now) {
  if (head(s).kind == ExecKind::Transfer) {
    begin_transfer(s, now);
  } else {
    begin_compute(s, now);
  }
}

void TaskEngine::begin_compute(std::uint32_t s, std::uint64_t now) {
  Stream& st = streams_[s];
  st.phase = Phase::Busy;
  st.since_ps = now;
  observer_->task_started(head_id(s), Time{now});
  set_timer(s, TimerKind::BusyDone, now + head(s).span.ps);
}

void TaskEngine::complete(std::uint32_t s, std::uint64_t now) {
  Stream& st = streams_[s];
  const std::uint32_t id = head_id(s);
  st.announced = false;
  ++st.pos;
  if (st.pos == st.count) {
    st.phase = Phase::Done;
    st.since_ps = now;
    ++done_streams_;
  } else {
    st.head = st.tasks[st.pos];
    if (!start_ahead(s, now, params_.stream.task_dispatch)) begin_dispatch(s, now, params_.stream.task_dispatch);
  }
  // After the stream moved on, so that a dependency released on this very
  // stream finds it in a consistent state.
  observer_->task_finished(id, Time{now});
}

std::vector<std::pair<std::uint32_t, TaskEngine::StreamState>> TaskEngine::unfinished() const {
  std::vector<std::pair<std::uint32_t, StreamState>> out;
  for (std::uint32_t s = 0; s < streams_.size(); ++s) {
    const Stream& st = streams_[s];
    if (st.phase == Phase::Done) continue;
    out.push_back({s, StreamState{st.head, st.phase, st.since_ps}});
  }
  return out;
}

}  // namespace hcclsim

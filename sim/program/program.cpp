#include "sim/program/program.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"

namespace hcclsim {

const char* hccl_result_name(HcclResult r) {
  switch (r) {
    case HCCL_SUCCESS: return "HCCL_SUCCESS";
    case HCCL_E_PARA: return "HCCL_E_PARA";
    case HCCL_E_PTR: return "HCCL_E_PTR";
    case HCCL_E_MEMORY: return "HCCL_E_MEMORY";
    case HCCL_E_INTERNAL: return "HCCL_E_INTERNAL";
    case HCCL_E_NOT_SUPPORT: return "HCCL_E_NOT_SUPPORT";
    case HCCL_E_NOT_FOUND: return "HCCL_E_NOT_FOUND";
    case HCCL_E_UNAVAIL: return "HCCL_E_UNAVAIL";
    case HCCL_E_TIMEOUT: return "HCCL_E_TIMEOUT";
    case HCCL_E_REMOTE: return "HCCL_E_REMOTE";
  }
  return "HCCL_E_?";
}

namespace {
const char* kEngineNames[] = {"CPU", "CPU_TS", "AICPU", "AICPU_TS", "AIV", "CCU"};
const char* core_name(CoreKind k) { return k == CoreKind::Aic ? "AIC" : "AIV"; }

// ceil(work * 1e12 / rate) picoseconds, exactly.
// work / rate in picoseconds, rounded up; ~0 (refused by the callers) past
// 10^6 s. `work` must be below 2^128 / 10^12.
Time duration_for(unsigned __int128 work, unsigned __int128 rate) {
  const unsigned __int128 ps = (work * 1000000000000ULL + rate - 1) / rate;
  if (ps > 1000000ULL * 1000000000000ULL) return Time{~0ULL};
  return Time{static_cast<std::uint64_t>(ps)};
}
}  // namespace

const char* comm_engine_name(CommEngine e) {
  return e >= COMM_ENGINE_CPU && e <= COMM_ENGINE_CCU ? kEngineNames[e] : "?";
}

std::optional<CommEngine> parse_comm_engine(const std::string& name) {
  for (int e = COMM_ENGINE_CPU; e <= COMM_ENGINE_CCU; ++e) {
    if (name == kEngineNames[e]) return static_cast<CommEngine>(e);
  }
  return std::nullopt;
}

Program::HostOp Program::make_host_op(HostKind kind, ThreadHandle thread) {
  HostOp op{};
  op.kind = kind;
  op.thread = thread;
  return op;
}

Program::KernelStep Program::make_step(StepKind kind, int context, int domain, HcclHandle handle) {
  KernelStep step{};
  step.kind = kind;
  step.context = context;
  step.domain = domain;
  step.handle = handle;
  return step;
}

Program::Program(const TopologySpec& topology)
    : ranks_(topology.npus),
      topology_(std::make_shared<const TopologySpec>(topology)),
      sdma_domains_(topology.sdma_domain_of),
      npu_(topology.npu) {}

Program::Program(int ranks, const NpuParams& npu) : ranks_(ranks), npu_(npu) {}

HcclResult Program::fail(HcclResult code, const std::string& message) {
  last_error_ = std::string(hccl_result_name(code)) + ": " + message;
  return code;
}

HcclResult Program::add_domain(int id, const std::vector<int>& ranks) {
  if (domains_.count(id)) return fail(HCCL_E_PARA, "domain " + std::to_string(id) + " is defined twice");
  if (ranks.empty()) return fail(HCCL_E_PARA, "domain " + std::to_string(id) + " has no ranks");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return fail(HCCL_E_PARA, "domain " + std::to_string(id) + " lists a rank twice");
  }
  for (int r : ranks) {
    if (r < 0 || r >= ranks_) {
      return fail(HCCL_E_PARA, "domain " + std::to_string(id) + " names rank " + std::to_string(r) +
                                   " but the topology has ranks 0.." + std::to_string(ranks_ - 1));
    }
  }
  domains_[id] = ranks;
  for (int r : ranks) comms_[{id, r}] = Communicator{this, id, r};
  return HCCL_SUCCESS;
}

HcclComm Program::comm(int domain, int rank) {
  auto found = comms_.find({domain, rank});
  return found == comms_.end() ? nullptr : &found->second;
}

int Program::domain_size(int domain) const {
  const auto found = domains_.find(domain);
  return found == domains_.end() ? 0 : static_cast<int>(found->second.size());
}

Program::ThreadRec* Program::thread(ThreadHandle handle) {
  if (handle == 0 || handle > threads_.size()) return nullptr;
  return &threads_[handle - 1];
}

std::optional<ThreadHandle> Program::thread_of(int domain, int rank, std::size_t index) const {
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    const ThreadRec& t = threads_[i];
    if (t.domain == domain && t.rank == rank && t.index == index) return i + 1;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- host side

HcclResult Program::thread_acquire(HcclComm comm, CommEngine engine, std::uint32_t thread_num,
                                   std::uint32_t notify_num_per_thread, ThreadHandle* threads) {
  if (comm == nullptr || comm->program != this) return fail(HCCL_E_PTR, "the communicator is not valid");
  if (threads == nullptr) return fail(HCCL_E_PTR, "threads is null");
  if (!parse_comm_engine(comm_engine_name(engine))) return fail(HCCL_E_PARA, "unknown CommEngine");
  if (thread_num == 0) return fail(HCCL_E_PARA, "threadNum must be at least 1");
  const auto key = std::pair{comm->domain, comm->rank};
  std::size_t& used_threads = threads_per_comm_[key];
  std::size_t& used_notifies = notifies_per_comm_[key];
  if (used_threads + thread_num > static_cast<std::size_t>(npu_.hccl_api.threads_per_comm)) {
    return fail(HCCL_E_UNAVAIL, "a communicator holds at most " + std::to_string(npu_.hccl_api.threads_per_comm) +
                                    " threads; " + std::to_string(used_threads) +
                                    " acquired, " + std::to_string(thread_num) + " more asked");
  }
  const auto notify_limit = static_cast<std::size_t>(npu_.hccl_api.notifies_per_comm);
  if (used_notifies + std::size_t{thread_num} * notify_num_per_thread > notify_limit) {
    return fail(HCCL_E_UNAVAIL, "a communicator holds at most " + std::to_string(notify_limit) + " notifies; " +
                                    std::to_string(used_notifies) +
                                    " acquired, " + std::to_string(thread_num * notify_num_per_thread) + " more asked");
  }
  for (std::uint32_t i = 0; i < thread_num; ++i) {
    ThreadRec t;
    t.domain = comm->domain;
    t.rank = comm->rank;
    t.engine = engine;
    t.notifies = notify_num_per_thread;
    t.index = used_threads++;
    threads_.push_back(t);
    threads[i] = threads_.size();
  }
  used_notifies += std::size_t{thread_num} * notify_num_per_thread;
  return HCCL_SUCCESS;
}

HcclResult Program::thread_acquire_with_stream(HcclComm comm, CommEngine engine, std::uint32_t stream_num,
                                               ThreadHandle* threads) {
  // A thread bound to a caller's stream; it gets one notify, which the seed
  // example waits on.
  return thread_acquire(comm, engine, stream_num, 1, threads);
}

HcclResult Program::thread_export(HcclComm comm, std::uint32_t thread_num, const ThreadHandle* threads,
                                  CommEngine dst_engine, ThreadHandle* exported) {
  if (comm == nullptr || comm->program != this) return fail(HCCL_E_PTR, "the communicator is not valid");
  if (threads == nullptr || exported == nullptr) return fail(HCCL_E_PTR, "threads or the output is null");
  if (thread_num < 1 || thread_num > static_cast<std::uint32_t>(npu_.hccl_api.threads_per_comm)) {
    return fail(HCCL_E_PARA, "a thread export takes 1 to " + std::to_string(npu_.hccl_api.threads_per_comm) +
                                 " threads, not " + std::to_string(thread_num));
  }
  if (!parse_comm_engine(comm_engine_name(dst_engine))) return fail(HCCL_E_PARA, "unknown CommEngine");
  for (std::uint32_t i = 0; i < thread_num; ++i) {
    ThreadRec* t = thread(threads[i]);
    if (t == nullptr || t->domain != comm->domain || t->rank != comm->rank) {
      return fail(HCCL_E_PARA, "thread " + std::to_string(i) + " of the export is not a thread of this communicator");
    }
  }
  for (std::uint32_t i = 0; i < thread_num; ++i) {
    ThreadRec alias = *thread(threads[i]);
    alias.alias = static_cast<std::int64_t>(alias.alias >= 0 ? alias.alias : static_cast<std::int64_t>(threads[i]));
    alias.engine = dst_engine;
    alias.ops.clear();
    threads_.push_back(alias);
    exported[i] = threads_.size();
  }
  return HCCL_SUCCESS;
}

namespace {
ThreadHandle real_handle(ThreadHandle h, std::int64_t alias) { return alias >= 0 ? static_cast<ThreadHandle>(alias) : h; }
}  // namespace

HcclResult Program::notify_record(ThreadHandle thread_h, ThreadHandle dst_h, std::uint32_t dst_notify) {
  ThreadRec* t = thread(thread_h);
  ThreadRec* d = thread(dst_h);
  if (t == nullptr || d == nullptr) return fail(HCCL_E_PARA, "the thread or destination thread handle is not valid");
  if (t->rank != d->rank) {
    return fail(HCCL_E_PARA, "a thread notify record stays on one rank; use a channel notify record for rank " +
                                 std::to_string(d->rank));
  }
  if (dst_notify >= d->notifies) {
    return fail(HCCL_E_PARA, "notify index " + std::to_string(dst_notify) + " does not exist; the destination thread has " +
                                 std::to_string(d->notifies) + " notifies");
  }
  const ThreadHandle self = real_handle(thread_h, t->alias);
  HostOp op = make_host_op(HostKind::Record, self);
  op.target = real_handle(dst_h, d->alias);
  op.peer = d->rank;
  op.notify = dst_notify;
  host_ops_.push_back(op);
  threads_[self - 1].ops.push_back(host_ops_.size() - 1);
  return HCCL_SUCCESS;
}

HcclResult Program::notify_wait(ThreadHandle thread_h, std::uint32_t notify, Time timeout) {
  ThreadRec* t = thread(thread_h);
  if (t == nullptr) return fail(HCCL_E_PARA, "the thread handle is not valid");
  if (notify >= t->notifies) {
    return fail(HCCL_E_PARA, "notify index " + std::to_string(notify) + " does not exist; the thread has " +
                                 std::to_string(t->notifies) + " notifies");
  }
  const ThreadHandle self = real_handle(thread_h, t->alias);
  HostOp op = make_host_op(HostKind::Wait, self);
  op.notify = notify;
  op.time = timeout;
  host_ops_.push_back(op);
  threads_[self - 1].ops.push_back(host_ops_.size() - 1);
  return HCCL_SUCCESS;
}

HcclResult Program::local_copy(ThreadHandle thread_h, std::uint64_t bytes) {
  ThreadRec* t = thread(thread_h);
  if (t == nullptr) return fail(HCCL_E_PARA, "the thread handle is not valid");
  const ThreadHandle self = real_handle(thread_h, t->alias);
  HostOp op = make_host_op(HostKind::LocalCopy, self);
  op.bytes = bytes;
  host_ops_.push_back(op);
  threads_[self - 1].ops.push_back(host_ops_.size() - 1);
  return HCCL_SUCCESS;
}

HcclResult Program::local_reduce(ThreadHandle thread_h, std::uint64_t bytes) {
  const HcclResult r = local_copy(thread_h, bytes);
  if (r == HCCL_SUCCESS) host_ops_.back().kind = HostKind::LocalReduce;
  return r;
}

HcclResult Program::write(ThreadHandle thread_h, int peer_rank, std::uint64_t bytes) {
  ThreadRec* t = thread(thread_h);
  if (t == nullptr) return fail(HCCL_E_PARA, "the thread handle is not valid");
  const auto& members = domains_.at(t->domain);
  if (peer_rank < 0 || peer_rank >= static_cast<int>(members.size()) || members[peer_rank] == t->rank) {
    return fail(HCCL_E_PARA, "peer " + std::to_string(peer_rank) + " is not another rank of domain " +
                                 std::to_string(t->domain) + " (domain ranks 0.." + std::to_string(members.size() - 1) + ")");
  }
  const ThreadHandle self = real_handle(thread_h, t->alias);
  HostOp op = make_host_op(HostKind::Write, self);
  op.peer = members[peer_rank];
  op.bytes = bytes;
  host_ops_.push_back(op);
  threads_[self - 1].ops.push_back(host_ops_.size() - 1);
  return HCCL_SUCCESS;
}

HcclResult Program::read(ThreadHandle thread_h, int peer_rank, std::uint64_t bytes) {
  const HcclResult r = write(thread_h, peer_rank, bytes);
  if (r == HCCL_SUCCESS) host_ops_.back().kind = HostKind::Read;
  return r;
}

HcclResult Program::channel_notify_record(ThreadHandle thread_h, int peer_rank, ThreadHandle remote_h,
                                          std::uint32_t notify) {
  ThreadRec* t = thread(thread_h);
  ThreadRec* remote = thread(remote_h);
  if (t == nullptr || remote == nullptr) return fail(HCCL_E_PARA, "the thread or remote thread handle is not valid");
  const auto& members = domains_.at(t->domain);
  if (peer_rank < 0 || peer_rank >= static_cast<int>(members.size()) || members[peer_rank] != remote->rank ||
      remote->domain != t->domain) {
    return fail(HCCL_E_PARA, "the remote thread is not a thread of domain rank " + std::to_string(peer_rank));
  }
  if (notify >= remote->notifies) {
    return fail(HCCL_E_PARA, "notify index " + std::to_string(notify) + " does not exist on the remote thread (" +
                                 std::to_string(remote->notifies) + " notifies)");
  }
  const ThreadHandle self = real_handle(thread_h, t->alias);
  HostOp op = make_host_op(HostKind::Record, self);
  op.target = real_handle(remote_h, remote->alias);
  op.peer = remote->rank;
  op.notify = notify;
  host_ops_.push_back(op);
  threads_[self - 1].ops.push_back(host_ops_.size() - 1);
  return HCCL_SUCCESS;
}

HcclResult Program::write_with_notify(ThreadHandle thread_h, int peer_rank, std::uint64_t bytes,
                                      ThreadHandle remote_thread, std::uint32_t notify) {
  // Validate the notify first so that a failure leaves nothing recorded.
  ThreadRec* remote = thread(remote_thread);
  if (remote == nullptr || notify >= remote->notifies) {
    return fail(HCCL_E_PARA, "the remote thread or its notify index is not valid");
  }
  HcclResult r = write(thread_h, peer_rank, bytes);
  if (r != HCCL_SUCCESS) return r;
  return channel_notify_record(thread_h, peer_rank, remote_thread, notify);
}

HcclResult Program::thread_compute(ThreadHandle thread_h, CoreKind kind, int cores, Time duration) {
  ThreadRec* t = thread(thread_h);
  if (t == nullptr) return fail(HCCL_E_PARA, "the thread handle is not valid");
  const int available = kind == CoreKind::Aic ? npu_.cores.aic : npu_.cores.aiv;
  if (cores < 1 || cores > available) {
    return fail(HCCL_E_PARA, std::string("compute asks for ") + std::to_string(cores) + " " + core_name(kind) +
                                 " cores; the NPU has " + std::to_string(available));
  }
  const ThreadHandle self = real_handle(thread_h, t->alias);
  HostOp op = make_host_op(HostKind::Compute, self);
  op.core = kind;
  op.cores = cores;
  op.time = duration;
  host_ops_.push_back(op);
  threads_[self - 1].ops.push_back(host_ops_.size() - 1);
  return HCCL_SUCCESS;
}

// --------------------------------------------------------------- kernel side

Program::KernelRec& Program::kernel(int rank, CoreKind core) { return kernels_[{rank, static_cast<int>(core)}]; }

Program::ContextState* Program::context(int rank, CoreKind, int ctx, HcclResult* result) {
  if (ctx < 0 || ctx >= HcclLimits::kContexts) {
    *result = fail(HCCL_E_PARA, "GetHcclContext takes 0 or 1, not " + std::to_string(ctx));
    return nullptr;
  }
  ContextState& c = contexts_[{rank, ctx}];
  if (!c.initialised) {
    *result = fail(HCCL_E_PARA, "context " + std::to_string(ctx) + " on rank " + std::to_string(rank) +
                                    " is used before InitV2");
    return nullptr;
  }
  *result = HCCL_SUCCESS;
  return &c;
}

HcclResult Program::hccl_init(int rank, CoreKind core, int ctx, int domain) {
  if (ctx < 0 || ctx >= HcclLimits::kContexts) {
    return fail(HCCL_E_PARA, "GetHcclContext takes 0 or 1 (at most two domains per kernel), not " + std::to_string(ctx));
  }
  auto d = domains_.find(domain);
  if (d == domains_.end()) return fail(HCCL_E_PARA, "domain " + std::to_string(domain) + " does not exist");
  if (std::find(d->second.begin(), d->second.end(), rank) == d->second.end()) {
    return fail(HCCL_E_PARA, "rank " + std::to_string(rank) + " is not in domain " + std::to_string(domain));
  }
  ContextState& c = contexts_[{rank, ctx}];
  if (c.initialised) return fail(HCCL_E_PARA, "context " + std::to_string(ctx) + " is initialised twice");
  for (const auto& [key, other] : contexts_) {
    if (key.first == rank && other.initialised && other.domain == domain) {
      return fail(HCCL_E_PARA, "domain " + std::to_string(domain) + " is already bound to context " +
                                   std::to_string(key.second) + " on rank " + std::to_string(rank));
    }
  }
  c.initialised = true;
  c.domain = domain;
  kernel(rank, core).steps.push_back(make_step(StepKind::Init, ctx, domain));
  return HCCL_SUCCESS;
}

HcclResult Program::hccl_set_tiling(int rank, CoreKind core, int ctx) {
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  if (c == nullptr) return r;
  c->tiling = true;
  return HCCL_SUCCESS;
}

HcclHandle Program::hccl_prepare(int rank, CoreKind core, int ctx, const PrepareArgs& args, HcclResult* result) {
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  auto done = [&](HcclResult code) -> HcclHandle {
    if (result) *result = code;
    return -1;
  };
  if (c == nullptr) return done(r);
  if (!c->tiling) return done(fail(HCCL_E_PARA, "Prepare before SetCcTilingV2 on context " + std::to_string(ctx)));
  if (c->finalized) return done(fail(HCCL_E_PARA, "Prepare after Finalize on context " + std::to_string(ctx)));
  const int domain_size = static_cast<int>(domains_.at(c->domain).size());
  if (args.alltoallv && !npu_.hccl_api.alltoallv) {
    return done(fail(HCCL_E_NOT_SUPPORT, "AlltoAllV is supported on Atlas A3 only"));
  }
  const int alltoall_max = npu_.hccl_api.alltoall_max_ranks;
  if (alltoall_max > 0 && args.op == CollOp::AlltoAll && domain_size > alltoall_max) {
    return done(fail(HCCL_E_PARA, "AlltoAll/AlltoAllV take at most " + std::to_string(alltoall_max) +
                                      " ranks on " + npu_.traits.name + "; domain " +
                                      std::to_string(c->domain) + " has " + std::to_string(domain_size)));
  }
  if (c->messages >= npu_.hccl_api.messages_per_domain) {
    return done(fail(HCCL_E_PARA, std::string(npu_.hccl_api.inter_group_sync ? "Prepare and InterHcclGroupSync calls together"
                                                                             : "Prepare calls") +
                                      " are limited to " + std::to_string(npu_.hccl_api.messages_per_domain) +
                                      " per domain; this is call " + std::to_string(c->messages + 1)));
  }
  if (args.repeat < 1) return done(fail(HCCL_E_PARA, "repeat must be at least 1"));
  if (args.alltoallv && args.send_counts.size() != static_cast<std::size_t>(domain_size)) {
    return done(fail(HCCL_E_PARA, "AlltoAllV needs one send count per rank of the domain (" +
                                      std::to_string(domain_size) + ")"));
  }
  for (const auto& [peer, bytes] : args.batch) {
    (void)bytes;
    if (peer < 0 || peer >= domain_size) return done(fail(HCCL_E_PARA, "BatchWrite names a rank outside the domain"));
  }
  ++c->messages;
  Prepared p;
  p.args = args;
  p.core = core;
  p.step = kernel(rank, core).steps.size();
  c->prepared.push_back(p);
  const HcclHandle handle = static_cast<HcclHandle>(c->prepared.size() - 1);
  kernel(rank, core).steps.push_back(make_step(StepKind::Prepare, ctx, c->domain, handle));
  if (result) *result = HCCL_SUCCESS;
  return handle;
}

namespace {
std::string handle_text(int ctx, HcclHandle h) {
  return "handle " + std::to_string(h) + " of context " + std::to_string(ctx);
}
}  // namespace

HcclResult Program::hccl_commit(int rank, CoreKind core, int ctx, HcclHandle handle) {
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  if (c == nullptr) return r;
  if (handle < 0 || static_cast<std::size_t>(handle) >= c->prepared.size()) {
    return fail(HCCL_E_PARA, "Commit of " + handle_text(ctx, handle) + ", which was never prepared");
  }
  Prepared& p = c->prepared[static_cast<std::size_t>(handle)];
  if (p.core != core) {
    return fail(HCCL_E_PARA, std::string("Commit on ") + core_name(core) + " of " + handle_text(ctx, handle) +
                                 " prepared on " + core_name(p.core) + "; they must run on the same core type");
  }
  if (p.commits >= p.args.repeat) {
    return fail(HCCL_E_PARA, "Commit of " + handle_text(ctx, handle) + " more often than its repeat (" +
                                 std::to_string(p.args.repeat) + ")");
  }
  ++p.commits;
  kernel(rank, core).steps.push_back(make_step(StepKind::Commit, ctx, c->domain, handle));
  return HCCL_SUCCESS;
}

HcclResult Program::hccl_wait(int rank, CoreKind core, int ctx, HcclHandle handle) {
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  if (c == nullptr) return r;
  if (handle < 0 || static_cast<std::size_t>(handle) >= c->prepared.size()) {
    return fail(HCCL_E_PARA, "Wait on " + handle_text(ctx, handle) + ", which was never prepared");
  }
  Prepared& p = c->prepared[static_cast<std::size_t>(handle)];
  if (p.core != core) {
    return fail(HCCL_E_PARA, std::string("Wait on ") + core_name(core) + " for " + handle_text(ctx, handle) +
                                 " prepared on " + core_name(p.core) + "; they must run on the same core type");
  }
  for (HcclHandle earlier = 0; earlier < handle; ++earlier) {
    const Prepared& e = c->prepared[static_cast<std::size_t>(earlier)];
    if (e.waits < e.args.repeat) {
      return fail(HCCL_E_PARA, "Wait on " + handle_text(ctx, handle) + " before handle " + std::to_string(earlier) +
                                   " has been waited for; Wait calls follow Prepare order");
    }
  }
  if (p.waits >= p.args.repeat) {
    return fail(HCCL_E_PARA, "Wait on " + handle_text(ctx, handle) + " more often than its repeat (" +
                                 std::to_string(p.args.repeat) + ")");
  }
  ++p.waits;
  kernel(rank, core).steps.push_back(make_step(StepKind::Wait, ctx, c->domain, handle));
  return HCCL_SUCCESS;
}

HcclResult Program::hccl_query(int rank, CoreKind core, int ctx, HcclHandle handle) {
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  if (c == nullptr) return r;
  if (handle < 0 || static_cast<std::size_t>(handle) >= c->prepared.size()) {
    return fail(HCCL_E_PARA, "Query of " + handle_text(ctx, handle) + ", which was never prepared");
  }
  if (c->prepared[static_cast<std::size_t>(handle)].core != core) {
    return fail(HCCL_E_PARA, "Query must run on the core type of the Prepare");
  }
  kernel(rank, core).steps.push_back(make_step(StepKind::Query, ctx, c->domain, handle));
  return HCCL_SUCCESS;
}

HcclResult Program::hccl_inter_group_sync(int rank, CoreKind core, int ctx, int src_ctx, HcclHandle src_handle) {
  if (!npu_.hccl_api.inter_group_sync) return fail(HCCL_E_NOT_SUPPORT, "InterHcclGroupSync is supported on Atlas A3 only");
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  if (c == nullptr) return r;
  ContextState* src = context(rank, core, src_ctx, &r);
  if (src == nullptr) return r;
  if (src_ctx == ctx) return fail(HCCL_E_PARA, "InterHcclGroupSync waits on another domain, not its own");
  if (src_handle < 0 || static_cast<std::size_t>(src_handle) >= src->prepared.size()) {
    return fail(HCCL_E_PARA, "InterHcclGroupSync on " + handle_text(src_ctx, src_handle) + ", which was never prepared");
  }
  if (src->prepared[static_cast<std::size_t>(src_handle)].core != core) {
    return fail(HCCL_E_PARA, "InterHcclGroupSync must run on the core type of the Prepare");
  }
  if (c->messages >= npu_.hccl_api.messages_per_domain) {
    return fail(HCCL_E_PARA, "Prepare and InterHcclGroupSync calls together are limited to " +
                                 std::to_string(npu_.hccl_api.messages_per_domain) + " per domain; this is call " +
                                 std::to_string(c->messages + 1));
  }
  ++c->messages;
  KernelStep step = make_step(StepKind::InterSync, ctx, c->domain);
  step.src_domain = src->domain;
  step.src_handle = src_handle;
  kernel(rank, core).steps.push_back(step);
  return HCCL_SUCCESS;
}

HcclResult Program::hccl_iterate(int rank, CoreKind core, int ctx) {
  if (!npu_.hccl_api.iterate) return fail(HCCL_E_NOT_SUPPORT, "Iterate is supported on Atlas A3 only");
  HcclResult r;
  if (context(rank, core, ctx, &r) == nullptr) return r;
  return fail(HCCL_E_NOT_SUPPORT, "Iterate is not modelled by hcclsim");
}

HcclResult Program::hccl_finalize(int rank, CoreKind core, int ctx) {
  HcclResult r;
  ContextState* c = context(rank, core, ctx, &r);
  if (c == nullptr) return r;
  for (const Prepared& p : c->prepared) {
    if (p.core != core) return fail(HCCL_E_PARA, "Finalize must run on the core type of the Prepare calls");
  }
  c->finalized = true;
  kernel(rank, core).steps.push_back(make_step(StepKind::Finalize, ctx, c->domain));
  return HCCL_SUCCESS;
}

HcclResult Program::kernel_matmul(int rank, std::uint64_t m, std::uint64_t n, std::uint64_t k, int cores) {
  if (rank < 0 || rank >= ranks_) return fail(HCCL_E_PARA, "rank " + std::to_string(rank) + " does not exist");
  if (cores < 1 || cores > npu_.cores.aic) {
    return fail(HCCL_E_PARA, "a matmul asks for " + std::to_string(cores) + " AIC cores; the NPU has " +
                                 std::to_string(npu_.cores.aic));
  }
  if (npu_.cores.aic_flops_per_s == 0) return fail(HCCL_E_NOT_SUPPORT, "the profile gives no AIC rate");
  KernelStep step = make_step(StepKind::Matmul);
  step.cores = cores;
  // Each dimension is at most 2^40 (program_json.cpp), but a product of three may not fit 128 bits.
  const unsigned __int128 mn = static_cast<unsigned __int128>(m) * n;
  const unsigned __int128 limit = ~static_cast<unsigned __int128>(0) / 1000000000000ULL / 2;
  if (k != 0 && mn > limit / k) return fail(HCCL_E_PARA, "a matmul of m x n x k too large to time");
  step.duration = duration_for(static_cast<unsigned __int128>(2) * mn * k,
                               static_cast<unsigned __int128>(npu_.cores.aic_flops_per_s) * cores);
  if (step.duration.ps == ~0ULL) {
    return fail(HCCL_E_PARA, "a matmul of " + std::to_string(m) + " x " + std::to_string(n) + " x " +
                                 std::to_string(k) + " would take more than 10^6 s");
  }
  kernel(rank, CoreKind::Aic).steps.push_back(step);
  return HCCL_SUCCESS;
}

HcclResult Program::kernel_vector(int rank, std::uint64_t bytes, int cores) {
  if (rank < 0 || rank >= ranks_) return fail(HCCL_E_PARA, "rank " + std::to_string(rank) + " does not exist");
  if (cores < 1 || cores > npu_.cores.aiv) {
    return fail(HCCL_E_PARA, "a vector op asks for " + std::to_string(cores) + " AIV cores; the NPU has " +
                                 std::to_string(npu_.cores.aiv));
  }
  KernelStep step = make_step(StepKind::Vector);
  step.cores = cores;
  if (npu_.cores.aiv_bandwidth.bytes_per_s == 0) return fail(HCCL_E_NOT_SUPPORT, "the profile gives no AIV rate");
  step.duration = duration_for(bytes, static_cast<unsigned __int128>(npu_.cores.aiv_bandwidth.bytes_per_s) * cores);
  if (step.duration.ps == ~0ULL) {
    return fail(HCCL_E_PARA, "a vector op over " + std::to_string(bytes) + " bytes would take more than 10^6 s");
  }
  kernel(rank, CoreKind::Aiv).steps.push_back(step);
  return HCCL_SUCCESS;
}

HcclResult Program::kernel_moe(int rank, const std::vector<int>& ranks, MoePhase phase, const MoeParams& params,
                               std::size_t* call) {
  const char* op = phase == MoePhase::Dispatch ? "moe_dispatch" : "moe_combine";
  const auto pos = std::find(ranks.begin(), ranks.end(), rank);
  if (pos == ranks.end()) return fail(HCCL_E_PARA, std::string(op) + " on rank " + std::to_string(rank) + ", which is not one of its ranks");
  if (static_cast<int>(ranks.size()) != params.ep) {
    return fail(HCCL_E_PARA, std::string(op) + " with ep " + std::to_string(params.ep) + " on " +
                                 std::to_string(ranks.size()) + " ranks; ep is the number of ranks taking part");
  }
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return fail(HCCL_E_PARA, std::string(op) + " lists a rank twice");
  if (sorted.front() < 0 || sorted.back() >= ranks_) {
    return fail(HCCL_E_PARA, std::string(op) + " names rank " + std::to_string(sorted.front() < 0 ? sorted.front() : sorted.back()) +
                                 " but the topology has ranks 0.." + std::to_string(ranks_ - 1));
  }
  if (const auto problem = moe_params_problem(params, ranks_)) {
    return fail(HCCL_E_PARA, std::string(op) + " parameter " + problem->param + ": " + problem->why);
  }
  const std::string layout = moe_fabric_problem(moe_fabric(npu_, sdma_domains_, ranks));
  if (!layout.empty()) return fail(HCCL_E_PARA, std::string(op) + " on these ranks: " + layout);
  if (npu_.cores.aiv < 1) return fail(HCCL_E_NOT_SUPPORT, "the profile gives the NPU no AIV cores");

  std::vector<std::size_t>& group = moe_groups_[ranks];
  std::size_t& made = moe_joined_[{rank, ranks}];
  const std::size_t ep_rank = static_cast<std::size_t>(pos - ranks.begin());
  std::size_t index;
  if (made < group.size()) {
    index = group[made];
    const MoeCall& first = moe_calls_[index];
    if (first.phase != phase || first.params != params) {
      int other = 0;
      for (std::size_t r = 0; r < first.joined.size(); ++r) {
        if (first.joined[r]) {
          other = first.ranks[r];
          break;
        }
      }
      return fail(HCCL_E_PARA, "rank " + std::to_string(rank) + "'s MoE call " + std::to_string(made + 1) +
                                   " on these ranks differs from rank " + std::to_string(other) + "'s (" +
                                   (first.phase == MoePhase::Dispatch ? "moe_dispatch" : "moe_combine") +
                                   "): every rank of the call must give the same op and parameters");
    }
  } else {
    // The routing is drawn here, once per set of routing inputs.
    std::ostringstream key;
    key << params.ep << "/" << params.tokens << "/" << params.topk << "/" << params.experts << "/" << params.seed << "/"
        << params.routing;
    std::shared_ptr<const MoeRouting>& routing = routings_[key.str()];
    if (!routing) {
      try {
        routing = std::make_shared<const MoeRouting>(make_routing(params));
      } catch (const InputError& e) {
        routings_.erase(key.str());
        return fail(HCCL_E_PARA, std::string(op) + " routing: " + e.what());
      }
    }
    MoeCall c{phase, params, ranks, std::vector<bool>(ranks.size(), false), routing};
    moe_calls_.push_back(std::move(c));
    index = moe_calls_.size() - 1;
    group.push_back(index);
  }
  moe_calls_[index].joined[ep_rank] = true;
  ++made;
  KernelStep step = make_step(StepKind::Moe);
  step.moe = index;
  kernel(rank, CoreKind::Aiv).steps.push_back(step);
  if (call) *call = index;
  return HCCL_SUCCESS;
}

HcclResult Program::kernel_cross_core_set(int rank, CoreKind core, int flag) {
  if (rank < 0 || rank >= ranks_) return fail(HCCL_E_PARA, "rank " + std::to_string(rank) + " does not exist");
  if (flag < 0 || flag >= kCrossCoreFlags) {
    return fail(HCCL_E_PARA, "CrossCoreSetFlag takes a flag id from 0 to " + std::to_string(kCrossCoreFlags - 1) + ", not " + std::to_string(flag));
  }
  KernelStep step = make_step(StepKind::CrossSet);
  step.flag = flag;
  kernel(rank, core).steps.push_back(step);
  return HCCL_SUCCESS;
}

HcclResult Program::kernel_cross_core_wait(int rank, CoreKind core, int flag) {
  if (rank < 0 || rank >= ranks_) return fail(HCCL_E_PARA, "rank " + std::to_string(rank) + " does not exist");
  if (flag < 0 || flag >= kCrossCoreFlags) {
    return fail(HCCL_E_PARA, "CrossCoreWaitFlag takes a flag id from 0 to " + std::to_string(kCrossCoreFlags - 1) + ", not " + std::to_string(flag));
  }
  KernelStep step = make_step(StepKind::CrossWait);
  step.flag = flag;
  kernel(rank, core).steps.push_back(step);
  return HCCL_SUCCESS;
}

}  // namespace hcclsim

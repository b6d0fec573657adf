// Program::build: the recorded calls become one TaskGraph.
//
// Host threads become streams named "d<domain>/<ENGINE>/thread<i>"; each
// keeps its notifies at a base of its own in its rank's notify registers.
// Kernel calls run in order on "kernel/AIC" or "kernel/AIV". Each prepared
// collective repeat runs the executor HCCL selects for its domain (as perf) on streams
// "d<domain>/<HOST|AICPU>/Main", ".../Plane<i>", using a notify region of its own;
// on every rank its first tasks wait for that repeat's Commit, for the
// previous collective of the domain (one domain runs its tasks in order) and
// for the handles named by earlier InterHcclGroupSync calls. A zero-length
// marker on "d<domain>/done" closes each repeat on each rank: Wait and later
// syncs depend on it.
//
// An MoE call (sim/moe) is built once by build_moe on the call's ranks and
// appended on streams "moe<call>/AIV<i>" and "moe<call>/Host" with a notify
// and flag region of its own (flags only grow, so calls never share one). On
// each rank its first tasks wait for the AIV list's previous step, and a
// marker on the AIV list, which the list's next step follows, waits for its
// last tasks. A CrossCoreWaitFlag step waits for the matching
// CrossCoreSetFlag step of the other list of its rank.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "sim/perf/perf.h"
#include "sim/program/program.h"
#include "topologies/group_view.h"

namespace hcclsim {

namespace {

struct PartInfo {
  std::vector<TaskId> first;  // per part thread on the rank
  std::vector<TaskId> last;
};

std::string domain_prefix(int domain) { return "d" + std::to_string(domain) + "/"; }

}  // namespace

// A domain's collective runs the executor HCCL selects for it, as `hcclsim
// perf` selects and builds it (sim/executors), on the domain's view of the
// topology: its members as ranks 0..n-1, with their servers and supernodes.
TaskGraph Program::expand(const CollectiveSpec& spec, const std::vector<int>& members, int domain,
                          std::string* executor) const {
  const std::string where = "domain " + std::to_string(domain);
  if (!topology_) {
    throw ProgramError(where + ": a collective is built on the program's topology; this program has none (made "
                       "from a rank count and a profile, for API limits only)");
  }
  try {
    const TopologySpec view = group_view(*topology_, members, "its members");
    PerfRequest request;
    request.op = spec.op;
    request.ranks = static_cast<int>(members.size());
    request.dtype = spec.dtype;
    const ExecContext ctx = exec_context(view, request);
    const ExecutorChoice choice = select_executor(spec, ctx);
    *executor = choice.executor;
    return build_executor(spec, ctx, choice);
  } catch (const std::invalid_argument& e) {
    throw ProgramError(where + ": " + e.what());
  }
}

Program::Built Program::build() const {
  Built out;
  TaskGraph& g = out.graph;

  // Host threads and their notify bases.
  std::vector<int> next_notify(static_cast<std::size_t>(ranks_), 0);
  std::map<ThreadHandle, ThreadId> stream_of;
  std::map<ThreadHandle, int> notify_base;
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    const ThreadRec& t = threads_[i];
    if (t.alias >= 0) continue;
    const ThreadHandle h = i + 1;
    stream_of[h] = g.add_thread(t.rank, domain_prefix(t.domain) + comm_engine_name(t.engine) + "/thread" +
                                            std::to_string(t.index));
    notify_base[h] = next_notify[static_cast<std::size_t>(t.rank)];
    next_notify[static_cast<std::size_t>(t.rank)] += static_cast<int>(t.notifies);
  }
  for (const HostOp& op : host_ops_) {
    const ThreadId th = stream_of.at(op.thread);
    const int rank = threads_[op.thread - 1].rank;
    switch (op.kind) {
      case HostKind::Record: g.record(th, op.peer, notify_base.at(op.target) + static_cast<int>(op.notify)); break;
      case HostKind::Wait:
        g.wait(th, notify_base.at(op.thread) + static_cast<int>(op.notify), {}, op.time);
        break;
      case HostKind::LocalCopy:
        g.copy(th, {rank, BufferKind::Input, 0}, {rank, BufferKind::Output, 0}, op.bytes, "local copy");
        break;
      case HostKind::LocalReduce:
        g.reduce(th, {rank, BufferKind::Input, 0}, {rank, BufferKind::Output, 0}, op.bytes, "local reduce");
        break;
      case HostKind::Write:
        g.copy(th, {rank, BufferKind::Input, 0}, {op.peer, BufferKind::Output, 0}, op.bytes, "write");
        break;
      case HostKind::Read:
        g.copy(th, {op.peer, BufferKind::Input, 0}, {rank, BufferKind::Output, 0}, op.bytes, "read");
        break;
      case HostKind::Compute: {
        Task t;
        t.kind = TaskKind::Compute;
        t.thread = th;
        t.core_kind = op.core;
        t.cores = op.cores;
        t.duration = op.time;
        g.add(std::move(t));
        break;
      }
    }
  }

  // Kernel threads. Ids of Commit / Wait tasks per (rank, domain, handle).
  using HandleKey = std::tuple<int, int, int>;  // global rank, domain, handle
  std::map<HandleKey, std::vector<TaskId>> commits;
  std::map<HandleKey, std::vector<TaskId>> waits;
  struct Gate {
    int src_domain;
    int src_handle;
  };
  // Gates for each prepared (rank, domain, handle): earlier InterHcclGroupSync.
  std::map<HandleKey, std::vector<Gate>> gates;
  // MoE calls: per (call, global rank), the AIV list's previous task and the marker.
  struct MoeAnchor {
    std::optional<TaskId> before;
    TaskId marker = 0;
  };
  std::map<std::pair<std::size_t, int>, MoeAnchor> moe_anchor;
  // Cross-core flags: per (rank, core kind, flag), the sets / waits in list order.
  using FlagKey = std::tuple<int, int, int>;
  std::map<FlagKey, std::vector<TaskId>> cross_sets;
  std::map<FlagKey, std::vector<TaskId>> cross_waits;
  for (const auto& [key, rec] : kernels_) {
    const int rank = key.first;
    const CoreKind core = static_cast<CoreKind>(key.second);
    const ThreadId th = g.add_thread(rank, std::string("kernel/") + (core == CoreKind::Aic ? "AIC" : "AIV"));
    std::map<int, std::vector<Gate>> syncs_so_far;  // per domain
    for (const KernelStep& step : rec.steps) {
      Task t;
      t.kind = TaskKind::Delay;
      t.thread = th;
      const HandleKey hk{rank, step.domain, step.handle};
      const std::string what = "d" + std::to_string(step.domain) + " handle " + std::to_string(step.handle);
      switch (step.kind) {
        case StepKind::Init: t.label = g.intern("InitV2 context " + std::to_string(step.context)); break;
        case StepKind::Prepare:
          t.label = g.intern("Prepare " + what);
          gates[hk] = syncs_so_far[step.domain];
          break;
        case StepKind::Commit: t.label = g.intern("Commit " + what); break;
        case StepKind::Wait:
          t.label = g.intern("Wait " + what);
          t.started_while_blocked = true;
          break;
        case StepKind::Query: t.label = g.intern("Query " + what); break;
        case StepKind::InterSync:
          t.label = g.intern("InterHcclGroupSync d" + std::to_string(step.domain) + " on d" + std::to_string(step.src_domain) +
                    " handle " + std::to_string(step.src_handle));
          syncs_so_far[step.domain].push_back(Gate{step.src_domain, step.src_handle});
          break;
        case StepKind::Finalize: t.label = g.intern("Finalize context " + std::to_string(step.context)); break;
        case StepKind::Matmul:
        case StepKind::Vector:
          t.kind = TaskKind::Compute;
          t.core_kind = step.kind == StepKind::Matmul ? CoreKind::Aic : CoreKind::Aiv;
          t.cores = step.cores;
          t.duration = step.duration;
          t.label = g.intern(step.kind == StepKind::Matmul ? "matmul" : "vector");
          // program.cpp timed it from the profile's rate (kernel_matmul, kernel_vector).
          g.note_constant(step.kind == StepKind::Matmul ? Constant::CoresAicRate : Constant::CoresAivBandwidth);
          break;
        case StepKind::Moe:
          // The list waits here until the call's tasks on this rank are done.
          t.label = g.intern(std::string(moe_calls_[step.moe].phase == MoePhase::Dispatch ? "moe_dispatch" : "moe_combine") +
                    " (call " + std::to_string(step.moe) + ") returns");
          t.started_while_blocked = true;
          break;
        case StepKind::CrossSet: t.label = g.intern("CrossCoreSetFlag " + std::to_string(step.flag)); break;
        case StepKind::CrossWait:
          t.label = g.intern("CrossCoreWaitFlag " + std::to_string(step.flag));
          t.started_while_blocked = true;
          break;
      }
      const auto& so_far = g.thread(th).tasks;
      const std::optional<TaskId> previous_step = so_far.empty() ? std::nullopt : std::optional<TaskId>(so_far.back());
      const TaskId id = g.add(std::move(t));
      if (step.kind == StepKind::Moe) moe_anchor[{step.moe, rank}] = MoeAnchor{previous_step, id};
      if (step.kind == StepKind::CrossSet) cross_sets[{rank, key.second, step.flag}].push_back(id);
      if (step.kind == StepKind::CrossWait) cross_waits[{rank, key.second, step.flag}].push_back(id);
      if (step.kind == StepKind::Commit) commits[hk].push_back(id);
      if (step.kind == StepKind::Wait) waits[hk].push_back(id);
      if (step.kind == StepKind::Query) out.queries.push_back(QueryInfo{rank, step.domain, step.handle, id});
    }
  }

  // The n-th CrossCoreWaitFlag of a flag on one list returns after the n-th
  // CrossCoreSetFlag of that flag on the rank's other list.
  for (const auto& [fk, wait_ids] : cross_waits) {
    const auto& [rank, core, flag] = fk;
    const int other = core == static_cast<int>(CoreKind::Aic) ? static_cast<int>(CoreKind::Aiv) : static_cast<int>(CoreKind::Aic);
    const auto sets = cross_sets.find({rank, other, flag});
    const std::size_t available = sets == cross_sets.end() ? 0 : sets->second.size();
    const char* me = core == static_cast<int>(CoreKind::Aic) ? "AIC" : "AIV";
    const char* them = core == static_cast<int>(CoreKind::Aic) ? "AIV" : "AIC";
    if (wait_ids.size() > available) {
      auto times = [](std::size_t n) { return n == 1 ? std::string("once") : std::to_string(n) + " times"; };
      throw ProgramError("rank " + std::to_string(rank) + ": the " + me + " list waits " + times(wait_ids.size()) +
                         " for cross-core flag " + std::to_string(flag) + " but the " + them + " list sets it " +
                         times(available) + "; wait number " + std::to_string(available + 1) + " would block forever");
    }
    for (std::size_t i = 0; i < wait_ids.size(); ++i) g.add_dependency(sets->second[i], wait_ids[i]);
  }

  // The prepared handles of each domain, in order, checked to agree across ranks.
  struct DomainPlan {
    std::vector<int> members;
    std::vector<std::vector<const Prepared*>> per_rank;  // [domain rank][handle]
  };
  std::map<int, DomainPlan> plans;
  for (const auto& [key, ctx] : contexts_) {
    if (!ctx.initialised) continue;
    DomainPlan& plan = plans[ctx.domain];
    plan.members = domains_.at(ctx.domain);
    plan.per_rank.resize(plan.members.size());
    const auto pos = std::find(plan.members.begin(), plan.members.end(), key.first) - plan.members.begin();
    for (const Prepared& p : ctx.prepared) plan.per_rank[static_cast<std::size_t>(pos)].push_back(&p);
  }

  // Expand each handle's collective once (repeats are identical).
  std::map<std::pair<int, int>, TaskGraph> parts;  // (domain, handle)
  std::map<std::pair<int, int>, std::string> part_executor;
  // Each handle's collective keeps a notify region of its own: the executors
  // number their notifies independently, and a notify belongs to one thread.
  std::map<std::pair<int, int>, int> region_size;  // (domain, handle)
  for (auto& [domain, plan] : plans) {
    const std::size_t handles = plan.per_rank.front().size();
    for (std::size_t r = 0; r < plan.per_rank.size(); ++r) {
      if (plan.per_rank[r].size() != handles) {
        throw ProgramError("domain " + std::to_string(domain) + ": rank " + std::to_string(plan.members[r]) +
                           " prepares " + std::to_string(plan.per_rank[r].size()) + " collectives but rank " +
                           std::to_string(plan.members[0]) + " prepares " + std::to_string(handles) +
                           "; every rank of a domain must prepare the same collectives in the same order");
      }
    }
    for (std::size_t h = 0; h < handles; ++h) {
      const PrepareArgs& a = plan.per_rank[0][h]->args;
      for (std::size_t r = 1; r < plan.per_rank.size(); ++r) {
        const PrepareArgs& b = plan.per_rank[r][h]->args;
        if (a.op != b.op || a.alltoallv != b.alltoallv || a.batch_write != b.batch_write || a.count != b.count ||
            a.dtype != b.dtype || a.reduce_op != b.reduce_op || a.repeat != b.repeat) {
          throw ProgramError("domain " + std::to_string(domain) + " handle " + std::to_string(h) + ": rank " +
                             std::to_string(plan.members[r]) + " prepares a different collective from rank " +
                             std::to_string(plan.members[0]));
        }
      }
      const int p = static_cast<int>(plan.members.size());
      TaskGraph part;
      if (a.batch_write) {
        for (int r = 0; r < p; ++r) {
          const ThreadId th = part.add_thread(r, "Batch");
          for (const auto& [peer, bytes] : plan.per_rank[static_cast<std::size_t>(r)][h]->args.batch) {
            part.copy(th, {r, BufferKind::Input, 0}, {peer, BufferKind::Output, 0}, bytes, "BatchWrite");
          }
        }
      } else {
        CollectiveSpec spec;
        spec.op = a.op;
        spec.ranks = p;
        spec.dtype = a.dtype;
        spec.reduce_op = a.reduce_op;
        spec.count = a.count;
        spec.buffer_bytes = npu_.hccl_buffer_bytes;
        if (a.alltoallv) {
          for (int r = 0; r < p; ++r) spec.alltoallv_counts.push_back(plan.per_rank[static_cast<std::size_t>(r)][h]->args.send_counts);
        }
        if (p < 2) throw ProgramError("domain " + std::to_string(domain) + " has one rank: a collective needs two");
        part = expand(spec, plan.members, domain, &part_executor[{domain, static_cast<int>(h)}]);
      }
      region_size[{domain, static_cast<int>(h)}] = part.notifies_used();
      parts.emplace(std::pair{domain, static_cast<int>(h)}, std::move(part));
    }
  }
  int host_notifies = 0;
  for (int n : next_notify) host_notifies = std::max(host_notifies, n);
  std::map<std::pair<int, int>, int> region_base;  // (domain, handle)
  int next_region = host_notifies;
  for (const auto& [key, size] : region_size) {
    region_base[key] = next_region;
    next_region += size;
  }

  // Append every repeat; remember first/last tasks per rank and markers.
  std::map<std::pair<int, int>, ThreadId> marker_thread;    // (domain, global rank)
  std::map<std::tuple<int, int, int, int>, TaskId> marker;  // (domain, handle, repeat, global rank)
  struct RepeatPart {
    int domain;
    int handle;
    int repeat;
    std::map<int, PartInfo> per_rank;  // global rank
  };
  std::vector<RepeatPart> repeats;
  // A domain's streams are created once and reused by its later collectives
  // and repeats, as HCCL does; one notify is then always waited on by one thread.
  TaskGraph::ThreadIndex domain_threads;  // (global rank, "d<domain>/<engine>/<name>")
  // Who expands a Prepare into tasks: HCCL_OP_EXPANSION_MODE's default, the
  // host on A2 and the AI CPU on A3 (docs/sources.md §3; the profile's
  // npu.hccl_api.expanding_engine). Named in the stream.
  const std::string expansion = npu_.hccl_api.expanding_engine + "/";
  for (auto& [domain, plan] : plans) {
    for (std::size_t h = 0; h < plan.per_rank.front().size(); ++h) {
      const TaskGraph& part = parts.at({domain, static_cast<int>(h)});
      const PrepareArgs& a = plan.per_rank[0][h]->args;
      HandleInfo info{domain, plan.members[0], static_cast<HcclHandle>(h),
                      a.batch_write ? "batch_write" : (a.alltoallv ? "alltoallv" : coll_op_name(a.op)), a.repeat, {},
                      part_executor[{domain, static_cast<int>(h)}], static_cast<int>(plan.members.size())};
      for (int rep = 0; rep < a.repeat; ++rep) {
        const std::vector<TaskId> ids =
            g.append(part, plan.members, region_base.at({domain, static_cast<int>(h)}), domain_prefix(domain) + expansion,
                     &domain_threads);
        info.tasks.push_back(ids);
        RepeatPart rp{domain, static_cast<int>(h), rep, {}};
        for (const Thread& th : part.threads()) {
          if (th.tasks.empty()) continue;
          PartInfo& pi = rp.per_rank[plan.members[static_cast<std::size_t>(th.rank)]];
          pi.first.push_back(ids[th.tasks.front()]);
          pi.last.push_back(ids[th.tasks.back()]);
        }
        for (int member : plan.members) {
          auto mt = marker_thread.find({domain, member});
          if (mt == marker_thread.end()) {
            mt = marker_thread.emplace(std::pair{domain, member}, g.add_thread(member, domain_prefix(domain) + "done")).first;
          }
          Task t;
          t.kind = TaskKind::Delay;
          t.thread = mt->second;
          t.label = g.intern(info.op + " handle " + std::to_string(h) + " repeat " + std::to_string(rep) + " done");
          const TaskId m = g.add(std::move(t));
          marker[{domain, static_cast<int>(h), rep, member}] = m;
          for (TaskId last : rp.per_rank[member].last) g.add_dependency(last, m);
        }
        repeats.push_back(std::move(rp));
      }
      out.handles.push_back(std::move(info));
    }
  }

  // Gating: Commit, the domain's previous repeat, InterHcclGroupSync.
  std::map<std::pair<int, int>, TaskId> previous;  // (domain, global rank) -> last marker
  for (const RepeatPart& rp : repeats) {
    const DomainPlan& plan = plans.at(rp.domain);
    for (int member : plan.members) {
      const HandleKey hk{member, rp.domain, rp.handle};
      std::vector<TaskId> before;
      const auto c = commits.find(hk);
      if (c == commits.end() || static_cast<int>(c->second.size()) <= rp.repeat) {
        throw ProgramError("rank " + std::to_string(member) + " never commits repeat " + std::to_string(rp.repeat + 1) +
                           " of handle " + std::to_string(rp.handle) + " of domain " + std::to_string(rp.domain) +
                           " (committed " + std::to_string(c == commits.end() ? 0 : c->second.size()) +
                           " times): that collective never starts and its Wait and Finalize would block forever");
      }
      before.push_back(c->second[static_cast<std::size_t>(rp.repeat)]);
      const auto prev = previous.find({rp.domain, member});
      if (prev != previous.end()) before.push_back(prev->second);
      for (const Gate& gate : gates[hk]) {
        const auto& src_plan = plans.at(gate.src_domain);
        const int src_repeats = src_plan.per_rank.front().at(static_cast<std::size_t>(gate.src_handle))->args.repeat;
        before.push_back(marker.at({gate.src_domain, gate.src_handle, src_repeats - 1, member}));
      }
      const TaskId own_marker = marker.at({rp.domain, rp.handle, rp.repeat, member});
      const auto pi = rp.per_rank.find(member);
      for (TaskId b : before) {
        if (pi == rp.per_rank.end() || pi->second.first.empty()) {
          g.add_dependency(b, own_marker);
        } else {
          for (TaskId f : pi->second.first) g.add_dependency(b, f);
        }
      }
      previous[{rp.domain, member}] = own_marker;
    }
  }
  for (const auto& [hk, ids] : waits) {
    const auto& [rank, domain, handle] = hk;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      g.add_dependency(marker.at({domain, handle, static_cast<int>(i), rank}), ids[i]);
    }
  }

  // MoE calls, each with its own notify and flag region.
  for (std::size_t i = 0; i < moe_calls_.size(); ++i) {
    const MoeCall& call = moe_calls_[i];
    MoeCallInfo info;
    info.op = call.phase == MoePhase::Dispatch ? "moe_dispatch" : "moe_combine";
    info.params = call.params;
    info.ranks = call.ranks;
    for (std::size_t r = 0; r < call.joined.size(); ++r) {
      if (call.joined[r]) continue;
      throw ProgramError("rank " + std::to_string(call.ranks[r]) + " never makes MoE call " + std::to_string(i) + " (" +
                         info.op + " on " + std::to_string(call.ranks.size()) + " ranks from rank " +
                         std::to_string(call.ranks.front()) + "): the other ranks would wait for it forever");
    }
    const TaskGraph part = build_moe(call.params, call.phase, *call.routing, moe_fabric(npu_, sdma_domains_, call.ranks), &info.kernel);
    const int base = next_region;
    next_region += std::max(part.notifies_used(), part.flags_used());
    info.tasks = g.append(part, call.ranks, base, "moe" + std::to_string(i) + "/");
    std::map<int, PartInfo> per_rank;   // global rank
    for (const Thread& th : part.threads()) {
      if (th.tasks.empty()) continue;
      PartInfo& pi = per_rank[call.ranks[static_cast<std::size_t>(th.rank)]];
      pi.first.push_back(info.tasks[th.tasks.front()]);
      pi.last.push_back(info.tasks[th.tasks.back()]);
    }
    for (const int member : call.ranks) {
      const MoeAnchor& anchor = moe_anchor.at({i, member});
      const auto pi = per_rank.find(member);
      if (pi == per_rank.end()) {
        if (anchor.before) g.add_dependency(*anchor.before, anchor.marker);
        continue;
      }
      if (anchor.before) {
        for (const TaskId f : pi->second.first) g.add_dependency(*anchor.before, f);
      }
      for (const TaskId l : pi->second.last) g.add_dependency(l, anchor.marker);
    }
    out.moe_calls.push_back(std::move(info));
  }
  return out;
}

}  // namespace hcclsim

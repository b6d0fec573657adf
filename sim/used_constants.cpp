#include "sim/used_constants.h"

#include <algorithm>
#include <iterator>

#include "models/link/channel.h"
#include "topologies/platform.h"
#include "topologies/routes.h"

namespace hcclsim {

namespace {
std::uint8_t kind_bit(LinkKind kind) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(kind)); }

// A task as Scheduler::compile turns it into an ExecTask (sim/scheduler.cpp:
// the same tests of RDMA domains, chips and reads).
ChargedTask charged(const Task& t, int rank, RankPaths& paths) {
  ChargedTask c;
  c.cores = t.cores;          // (read for AIV moves and Compute only)
  c.core_kind = t.core_kind;
  switch (t.kind) {
    case TaskKind::NotifyRecord:
      if (paths.rdma_between(rank, t.peer)) {
        c.kind = ExecKind::RdmaNotify;
        c.moves_bytes = true;
        c.path_kinds = paths.path(rank, t.peer).kinds;
      } else {
        c.kind = ExecKind::NotifyRecord;
        c.remote = !paths.same_chip(rank, t.peer);
      }
      break;
    case TaskKind::NotifyWait: c.kind = ExecKind::NotifyWait; break;
    case TaskKind::FlagSet: c.kind = ExecKind::FlagSet; break;
    case TaskKind::FlagWait: c.kind = ExecKind::FlagWait; break;
    case TaskKind::Memcpy:
    case TaskKind::ReduceInline: {
      c.kind = ExecKind::Transfer;
      c.reduce = t.kind == TaskKind::ReduceInline;
      c.aiv = t.mover == Mover::Aiv;
      c.read = t.src.rank != rank;
      c.moves_bytes = t.bytes > 0;
      if (c.moves_bytes) {
        const PathClass p = paths.path(t.src.rank, t.dst.rank);
        c.path_kinds = p.kinds;
        if (!c.read) c.write_capped_kinds = p.write_limited_kinds;
        c.aiv_port = c.aiv && p.aiv_ports;
      }
      if (paths.rdma_between(t.src.rank, t.dst.rank)) {
        c.kind = ExecKind::RdmaWrite;  // the NIC moves it: no SDMA cost, no write limit
        c.write_capped_kinds = 0;
      }
      break;
    }
    case TaskKind::Compute: c.kind = ExecKind::Compute; break;
    case TaskKind::Delay: c.kind = ExecKind::Delay; break;
  }
  return c;
}
}  // namespace

bool PlatformPaths::rdma_between(int a, int b) const { return platform_.rdma_between(a, b); }
bool PlatformPaths::same_chip(int a, int b) const { return platform_.same_chip(a, b); }

PathClass PlatformPaths::path(int src, int dst) {
  PathClass p;
  for (const Channel* ch : platform_.route(src, dst)) {
    p.kinds |= kind_bit(ch->params().kind);
    if (ch->params().write_bandwidth.bytes_per_s != 0) p.write_limited_kinds |= kind_bit(ch->params().kind);
  }
  p.aiv_ports = src != dst && platform_.spec().npu.aiv.remote_bandwidth.bytes_per_s != 0;
  return p;
}

TopologyPaths::TopologyPaths(const TopologySpec& spec) : spec_(spec), finder_(std::make_unique<RouteFinder>(spec)) {}
TopologyPaths::~TopologyPaths() = default;

bool TopologyPaths::rdma_between(int a, int b) const { return finder_->rdma_between(a, b); }
bool TopologyPaths::same_chip(int a, int b) const {
  return a / spec_.npus_per_chip == b / spec_.npus_per_chip;
}

PathClass TopologyPaths::path(int src, int dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
  if (const auto found = memo_.find(key); found != memo_.end()) return found->second;
  PathClass p;
  if (src == dst) {
    p.kinds = kind_bit(LinkKind::Memory);  // as Platform::route: the NPU's local memory
  } else {
    for (const int index : finder_->path(src, dst)) {
      const LinkSpec& link = spec_.links[static_cast<std::size_t>(index) / 2];  // channel 2i / 2i + 1: link i
      const LinkKind kind = parse_link_kind(link.kind);
      p.kinds |= kind_bit(kind);
      if (link.params.write_bandwidth.bytes_per_s != 0) p.write_limited_kinds |= kind_bit(kind);
    }
    p.aiv_ports = spec_.npu.aiv.remote_bandwidth.bytes_per_s != 0;
  }
  return memo_.emplace(key, p).first->second;
}

UsedConstants used_constants(const TaskGraph& graph, RankPaths& paths) {
  UsedConstants used = graph.noted_constants();
  // TaskEngine::load: a stream's first task starts op_launch after the
  // load; complete(): each next one task_dispatch after the one before.
  for (const Thread& th : graph.threads()) {
    if (!th.tasks.empty()) used.add(Constant::StreamOpLaunch);
    if (th.tasks.size() > 1) used.add(Constant::StreamTaskDispatch);
  }
  const auto& tasks = graph.tasks();
  for (TaskId id = 0; id < tasks.size(); ++id) {
    add_charged_constants(charged(tasks[id], graph.rank_of(id), paths), used);
  }
  return used;
}

std::vector<std::string> assumed_constants_used(const UsedConstants& used, const TopologySpec& spec) {
  const std::vector<std::string> paths = used.paths();
  std::vector<std::string> out;
  std::set_intersection(paths.begin(), paths.end(), spec.assumed_constants.begin(), spec.assumed_constants.end(),
                        std::back_inserter(out));
  return out;
}

}  // namespace hcclsim

// Closed forms of the executors that compose level-0 mesh stages and
// level-1 stages (sim/collectives/hierarchy.cpp, mesh.cpp) on A2 clusters,
// the Pipeline forms, and the pairwise AlltoAll over every rank. A stage
// starts on a rank when the previous one ended there; the level-1 stages
// of all rails run at once (their flows counted together).
#include <algorithm>
#include <string>
#include <vector>

#include "sim/collectives/plan.h"
#include "sim/estimate/level1.h"
#include "sim/estimate/steps.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

// One pairwise phase of the mesh-atomic templates on every plane of a rank:
// [pre-sync] read `bytes` from the peer (inline reduce) post-sync, between
// Main's fork and join. The representative is the last rank, whose peers
// serve it on their last plane (released last by their fork).
double atomic_phase(const EstimateFabric& f, int p, double free, double bytes, bool reduce, bool pre_sync) {
  const StepCosts& c = f.costs();
  const PathCost path = f.path(0, 1);
  auto all_pairs = [p](std::vector<FlowPair>& flows) {
    for (int r = 0; r < p; ++r)
      for (int q = 0; q < p; ++q)
        if (q != r) flows.push_back(FlowPair{r, q});
  };
  const double rate = f.shared_rate("mesh/" + std::to_string(p), all_pairs, c.sdma_cap(reduce), false);
  MeshPhase ph;
  ph.k = p - 1;
  ph.ack = pre_sync;
  ph.data = true;
  ph.record = path.same_chip ? c.record_local : c.record_remote;
  ph.partner = [p](int) { return p - 2; };
  ph.body = [&](int, double t) { return bytes > 0 ? sdma_task(c, t, c.sdma_read_fixed, bytes, rate, path.latency) : t; };
  return mesh_phase(c, ph, free);
}

double copies(const StepCosts& c, double free, int count, double bytes) {
  for (int i = 0; i < count && bytes > 0; ++i) {
    free = sdma_task(c, free, c.sdma_fixed, bytes, std::min(c.local_rate, c.copy_rate), c.local_latency);
  }
  return free;
}

GroupLayout rails(const Hierarchy& h) {
  GroupLayout g;
  g.members = h.servers();
  g.stride = h.per_server;
  g.groups = h.per_server;
  g.group_step = 1;
  return g;
}

CollectiveSpec stage(const CollectiveSpec& whole, CollOp op, int ranks, std::uint64_t count, std::uint64_t buffer) {
  CollectiveSpec s = whole;
  s.op = op;
  s.ranks = ranks;
  s.count = count;
  s.buffer_bytes = buffer;
  return s;
}

// The stage times of one slice of `n` elements, in order.
std::vector<double> slice_stages(const CollectiveSpec& s, const Hierarchy& h, const AlgoPlan& plan,
                                 const EstimateFabric& f, std::uint64_t n, std::uint64_t level1_buffer) {
  const StepCosts& c = f.costs();
  const int p0 = h.per_server;
  const int servers = h.servers();
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const double bytes = static_cast<double>(n) * esz;
  const double zero = 0;
  std::vector<double> out;
  switch (s.op) {
    case CollOp::AllReduce: {
      const double chunk = static_cast<double>((n + p0 - 1) / p0) * esz;
      // The chunked stages leave their data in the HCCL buffer: the
      // reduce-scatter copies nothing out, the all-gather nothing in.
      out.push_back(atomic_phase(f, p0, copies(c, zero, 1, bytes), chunk, true, true));
      const std::uint64_t elems = (n + p0 - 1) / static_cast<std::uint64_t>(p0);
      out.push_back(level1_estimate(f, stage(s, CollOp::AllReduce, servers, elems, level1_buffer), plan.level1, rails(h), zero));
      out.push_back(copies(c, atomic_phase(f, p0, zero, chunk, false, true), 1, bytes));
      break;
    }
    case CollOp::ReduceScatter:
      out.push_back(copies(c, atomic_phase(f, p0, copies(c, zero, p0 * servers, bytes), servers * bytes, true, true),
                           servers, bytes));
      out.push_back(level1_estimate(f, stage(s, CollOp::ReduceScatter, servers, n, level1_buffer), plan.level1, rails(h), zero));
      break;
    case CollOp::AllGather:
      out.push_back(level1_estimate(f, stage(s, CollOp::AllGather, servers, n, level1_buffer), plan.level1, rails(h), zero));
      out.push_back(copies(c, atomic_phase(f, p0, copies(c, zero, servers, bytes), servers * bytes, false, true),
                           p0 * servers, bytes));
      break;
    default: break;
  }
  return out;
}

double hierarchical(const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const Hierarchy& h = ctx.hierarchy;
  const std::uint64_t esz = data_type_size(s.dtype);
  const std::uint64_t g0 = static_cast<std::uint64_t>(h.per_server);
  const std::uint64_t servers = static_cast<std::uint64_t>(h.servers());
  std::uint64_t per_slice;
  std::uint64_t level1_buffer;
  if (plan.pipeline) {
    const std::uint64_t region = s.buffer_bytes / 2 / esz;
    per_slice = s.op == CollOp::AllReduce ? region / g0 * g0 : region / (g0 * servers);
    level1_buffer = s.buffer_bytes / 2;
  } else {
    const std::uint64_t half = s.buffer_bytes / 2 / esz;
    per_slice = s.op == CollOp::AllReduce ? half / g0 * g0 : std::max<std::uint64_t>(1, half / (g0 * servers));
    level1_buffer = s.buffer_bytes / 4;
  }
  per_slice = std::max<std::uint64_t>(per_slice, 1);
  // Stage ends per slice; a plain composition runs them back to back, a
  // Pipeline lets stage l of slice k start once stage l of slice k-1 and
  // stage l-1 of slice k ended (and slice k's first once slice k-2 ended).
  std::vector<std::vector<double>> ends;
  double t = c.launch;
  for (std::uint64_t first = 0; first == 0 || first < s.count; first += per_slice) {
    const std::vector<double> st = slice_stages(s, h, plan, f, std::min(per_slice, s.count - first), level1_buffer);
    std::vector<double> e(st.size());
    for (std::size_t l = 0; l < st.size(); ++l) {
      double ready = t;
      if (plan.pipeline) {
        const std::size_t k = ends.size();
        ready = c.launch;
        if (k >= 1) ready = std::max(ready, ends[k - 1][l]);
        if (l >= 1) ready = std::max(ready, e[l - 1]);
        if (l == 0 && k >= 2) ready = std::max(ready, ends[k - 2].back());
      }
      e[l] = ready + st[l] - c.dispatch;  // a stage's first task starts as soon as it is released

      t = e[l];
    }
    ends.push_back(e);
    if (s.count == 0) break;
  }
  double end = 0;
  for (const auto& e : ends) end = std::max(end, e.back());
  return end;
}

// Broadcast across servers: level-1 broadcast on the root's rail, then in
// every server the mesh-atomic broadcast (copy in at the root, scatter,
// all-gather, copy out) per loop. Reduce the other way round: the
// mesh-atomic reduce (copy in, reduce-scatter, gather to the root, copy
// out), then the level-1 reduce on the root's rail.
double rooted(const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const Hierarchy& h = ctx.hierarchy;
  const int p0 = h.per_server;
  const double esz = static_cast<double>(data_type_size(s.dtype));
  GroupLayout rail;
  rail.members = h.servers();
  rail.stride = p0;
  rail.groups = 1;
  rail.group_step = s.root % p0;
  auto rail_stage = [&](double free) {
    CollectiveSpec r1 = s;
    r1.ranks = h.servers();
    r1.root = s.root / p0;
    return level1_estimate(f, r1, plan.level1, rail, free);
  };
  auto server_stage = [&](double free) {
    const std::uint64_t per_loop = std::max<std::uint64_t>(1, s.buffer_bytes / data_type_size(s.dtype));
    std::uint64_t first = 0;
    do {
      const std::uint64_t n = std::min(per_loop, s.count - first);
      const double bytes = static_cast<double>(n) * esz;
      const double chunk = static_cast<double>((n + p0 - 1) / p0) * esz;
      if (s.op == CollOp::Broadcast) {
        free = copies(c, free, 1, bytes);
        free = atomic_phase(f, p0, free, chunk, false, true);
        free = atomic_phase(f, p0, free, chunk, false, true);
      } else {
        free = copies(c, free, 1, bytes);
        free = atomic_phase(f, p0, free, chunk, true, true);
        free = atomic_phase(f, p0, free, chunk, false, false);
      }
      free = copies(c, free, 1, bytes);
      first += per_loop;
    } while (first < s.count);
    return free;
  };
  const double begin = c.launch - c.dispatch;
  if (s.op == CollOp::Broadcast) return server_stage(rail_stage(begin) - c.dispatch);
  return rail_stage(server_stage(begin) - c.dispatch);
}

}  // namespace

void register_hierarchical_estimates(std::map<std::string, EstimateFn>& out) {
  const EstimateFn composed = [](const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan,
                                 const EstimateFabric& f) { return hierarchical(s, ctx, plan, f); };
  for (const char* name : {"AllReduceMeshExecutor", "AllGatherMeshExecutor", "ReduceScatterMeshExecutor",
                           "AllReduceMeshOpbasePipelineExecutor", "AllGatherMeshOpbasePipelineExecutor",
                           "ReduceScatterMeshOpbasePipelineExecutor"}) {
    out[name] = composed;
  }
  // Across servers the mesh Broadcast and Reduce executors compose levels;
  // inside one server they keep their own closed forms (mesh.cpp).
  for (const char* name : {"BroadCastMeshExecutor", "ReduceMeshExecutor"}) {
    const EstimateFn one_server = out.at(name);
    out[name] = [one_server](const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan,
                             const EstimateFabric& f) {
      return ctx.hierarchy.servers() > 1 ? rooted(s, ctx, plan, f) : one_server(s, ctx, plan, f);
    };
  }
  out["RunAlltoAllVTwoLevelPipeline"] = [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&,
                                           const EstimateFabric& f) {
    GroupLayout g;
    g.members = g.group_step = s.ranks;
    return level1_estimate(f, s, Level1Algo::Pairwise, g, f.costs().launch - f.costs().dispatch);
  };
}

}  // namespace hcclsim

// Closed forms of the executors that compose level-0 mesh stages and
// level-1 stages (sim/executors/hierarchy.cpp, mesh.cpp) on A2 clusters,
// the Pipeline forms, and the pairwise AlltoAll over every rank.
//
// Every server runs alike, so the form follows one server's ranks, each
// with its own time (a rank's peers may be ahead of it or behind): a stage
// starts on a rank when the previous one ended there; a level-1 stage
// (all rails at once, their flows counted together) takes each rail the
// same time from when its rank of this server starts it.
#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/executors/plan.h"
#include "sim/executors/level1_estimate.h"
#include "sim/estimate/steps.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

using Times = std::vector<double>;  // per rank of one server: when its stream is free

// One pairwise phase of the mesh-atomic templates (mesh.cpp phase()) on
// every rank of a server: Main forks one plane per peer (records in peer
// order); on the plane towards j, if the pair moves anything: [pre-sync:
// record to j, wait j's record], the read (when `reads(r, j)`: r reads
// `bytes` from j, inline reduce if `reduce`), post-sync; the planes record
// to Main, which waits for them in order. Plane of r towards j has index
// j (j < r) or j - 1, and its partner is j's plane towards r.
Times atomic_phase(const EstimateFabric& f, const Times& free, double bytes, bool reduce, bool pre_sync,
                   const std::function<bool(int, int)>& reads) {
  const StepCosts& c = f.costs();
  const double d = c.dispatch;
  const int p = static_cast<int>(free.size());
  const PathCost path = f.path(0, 1);
  const double record = path.same_chip ? c.record_local : c.record_remote;
  auto all_pairs = [p](std::vector<FlowPair>& flows) { mesh_pairs(p, flows); };
  const double rate = f.shared_rate("mesh/" + std::to_string(p), all_pairs, c.sdma_cap(reduce), false);
  auto index = [](int r, int j) { return j < r ? j : j - 1; };
  auto at = [p](std::vector<double>& v, int r, int i) -> double& { return v[static_cast<std::size_t>(r * p + i)]; };
  std::vector<double> t(static_cast<std::size_t>(p * p), 0.0);
  Times main_free(free);
  for (int r = 0; r < p; ++r) {
    double m = free[static_cast<std::size_t>(r)];
    for (int j = 0; j < p; ++j) {
      if (j == r) continue;
      m += d + c.record_local;
      at(t, r, index(r, j)) = m;
    }
    main_free[static_cast<std::size_t>(r)] = m;
  }
  auto active = [&](int r, int j) { return reads(r, j) || reads(j, r); };
  auto handshake = [&]() {
    std::vector<double> landed(t.size());
    for (int r = 0; r < p; ++r)
      for (int j = 0; j < p; ++j)
        if (j != r && active(r, j)) at(landed, r, index(r, j)) = at(t, r, index(r, j)) + d + record;
    for (int r = 0; r < p; ++r)
      for (int j = 0; j < p; ++j)
        if (j != r && active(r, j)) {
          at(t, r, index(r, j)) = c.wait_end(at(landed, r, index(r, j)) + d, at(landed, j, index(j, r)));
        }
  };
  if (pre_sync) handshake();
  for (int r = 0; r < p; ++r)
    for (int j = 0; j < p; ++j)
      if (j != r && reads(r, j) && bytes > 0) {
        double& x = at(t, r, index(r, j));
        x = sdma_task(c, x, c.sdma_read_fixed + path.read_extra, bytes, rate, path.latency);
      }
  handshake();
  Times out(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    double m = main_free[static_cast<std::size_t>(r)];
    for (int i = 0; i + 1 < p; ++i) m = c.wait_end(m + d, at(t, r, i) + d + c.record_local);
    out[static_cast<std::size_t>(r)] = m;
  }
  return out;
}

bool every_pair(int, int) { return true; }

Times copies(const StepCosts& c, Times free, int count, double bytes, int only = -1) {
  for (std::size_t r = 0; r < free.size(); ++r) {
    if (only >= 0 && static_cast<int>(r) != only) continue;
    // `count` copies back to back (thousands across a large cluster): one product.
    if (count > 0 && bytes > 0) {
      free[r] += count * (sdma_task(c, 0.0, c.sdma_fixed, bytes, std::min(c.local_rate, c.copy_rate), c.local_latency));
    }
  }
  return free;
}

Times plus(Times v, double x) {
  for (double& e : v) e += x;
  return v;
}

GroupLayout rails(const Hierarchy& h) {
  GroupLayout g;
  g.members = h.servers();
  g.stride = h.per_server;
  g.groups = h.per_server;
  g.group_step = 1;
  return g;
}

// A level-1 stage on every rail: each rank's stream from `free` on. Its
// duration depends only on the stage's op and size, so a collective of
// thousands of equal slices computes it once (`memo`).
using RailMemo = std::map<std::pair<CollOp, std::uint64_t>, double>;
Times rail_stage(const EstimateFabric& f, const CollectiveSpec& s, Level1Algo algo, const GroupLayout& g,
                 const Times& free, RailMemo& memo) {
  const auto key = std::make_pair(s.op, s.count);
  auto found = memo.find(key);
  if (found == memo.end()) found = memo.emplace(key, level1_estimate(f, s, algo, g, 0.0)).first;
  return plus(free, found->second);
}

// One slice's stages, in order, each mapping the ranks' free times to their
// ends (a stage's first task starts as soon as it is released, so each
// starts from `free - dispatch`).
std::vector<std::function<Times(const Times&)>> slice_stages(const CollectiveSpec& s, const Hierarchy& h,
                                                              const AlgoPlan& plan, const EstimateFabric& f,
                                                              std::uint64_t n, std::uint64_t level1_buffer,
                                                              RailMemo& memo) {
  const StepCosts& c = f.costs();
  const int p0 = h.per_server;
  const int servers = h.servers();
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const double bytes = static_cast<double>(n) * esz;
  const double d = c.dispatch;
  std::vector<std::function<Times(const Times&)>> out;
  switch (s.op) {
    case CollOp::AllReduce: {
      const std::uint64_t elems = (n + p0 - 1) / static_cast<std::uint64_t>(p0);
      const double chunk = static_cast<double>(elems) * esz;
      // The chunked stages leave their data in the HCCL buffer: the
      // reduce-scatter copies nothing out, the all-gather nothing in.
      out.push_back([=, &f, &memo](const Times& t) {
        return atomic_phase(f, copies(c, plus(t, -d), 1, bytes), chunk, true, true, every_pair);
      });
      out.push_back([=, &f, &memo](const Times& t) {
        return rail_stage(f, stage_spec(s, CollOp::AllReduce, servers, elems, level1_buffer), plan.level1, rails(h), plus(t, -d), memo);
      });
      out.push_back([=, &f, &memo](const Times& t) {
        return copies(c, atomic_phase(f, plus(t, -d), chunk, false, true, every_pair), 1, bytes);
      });
      break;
    }
    case CollOp::ReduceScatter:
      out.push_back([=, &f, &memo](const Times& t) {
        return copies(c, atomic_phase(f, copies(c, plus(t, -d), p0 * servers, bytes), servers * bytes, true, true, every_pair),
                      servers, bytes);
      });
      out.push_back([=, &f, &memo](const Times& t) {
        return rail_stage(f, stage_spec(s, CollOp::ReduceScatter, servers, n, level1_buffer), plan.level1, rails(h), plus(t, -d), memo);
      });
      break;
    case CollOp::AllGather:
      out.push_back([=, &f, &memo](const Times& t) {
        return rail_stage(f, stage_spec(s, CollOp::AllGather, servers, n, level1_buffer), plan.level1, rails(h), plus(t, -d), memo);
      });
      out.push_back([=, &f, &memo](const Times& t) {
        return copies(c, atomic_phase(f, copies(c, plus(t, -d), servers, bytes), servers * bytes, false, true, every_pair),
                      p0 * servers, bytes);
      });
      break;
    default: break;
  }
  return out;
}

double latest(const Times& t) { return *std::max_element(t.begin(), t.end()); }
Times elementwise_max(Times a, const Times& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::max(a[i], b[i]);
  return a;
}

// An AllReduce Pipeline of several slices: three stages per slice (level-0
// reduce-scatter, level-1 all-reduce, level-0 all-gather), stage l of slice
// k after stage l of slice k-1 and stage l-1 of slice k, slice k's first
// after slice k-2 ended. Its two level-0 lanes run at once on the same
// server links, each slice's megabytes long: they share them, each at
// half the links' rate while both run (processor sharing; a lane alone is
// held to one SDMA task's cap, which may leave the links room), while the
// level-1 lane has the NICs to itself. Stages are taken whole (their
// slowest rank), which at these sizes loses nothing but a microsecond.
double pipelined_all_reduce(const CollectiveSpec& s, const Hierarchy& h, const AlgoPlan& plan, const EstimateFabric& f,
                            std::uint64_t per_slice, std::uint64_t level1_buffer);

double pipelined_all_reduce(const CollectiveSpec& s, const Hierarchy& h, const AlgoPlan& plan, const EstimateFabric& f,
                            std::uint64_t per_slice, std::uint64_t level1_buffer) {
  const StepCosts& c = f.costs();
  RailMemo memo;
  const Times zero(static_cast<std::size_t>(h.per_server), 0.0);
  // Stage l of slice k alone, from its release to its end, as its fixed
  // part (what a slice of one element costs: dispatch, notifies, set-up;
  // not shared) and its bytes part (shared by the level-0 lanes).
  const auto fixed_stages = slice_stages(s, h, plan, f, std::min<std::uint64_t>(s.count, h.per_server), level1_buffer, memo);
  std::array<double, 3> fixed{};
  for (std::size_t l = 0; l < 3; ++l) fixed[l] = latest(fixed_stages[l](zero));
  std::vector<std::array<double, 3>> bytes_part;
  std::map<std::uint64_t, std::array<double, 3>> by_size;
  for (std::uint64_t first = 0; first < s.count; first += per_slice) {
    const std::uint64_t n = std::min(per_slice, s.count - first);
    auto found = by_size.find(n);
    if (found == by_size.end()) {
      const auto stages = slice_stages(s, h, plan, f, n, level1_buffer, memo);
      std::array<double, 3> w{};
      // The level-0 stages' local copy of the slice (in, out) uses the
      // NPU's memory, not the links: it is not shared either.
      const double copy = static_cast<double>(n * data_type_size(s.dtype)) / std::min(c.local_rate, c.copy_rate);
      for (std::size_t l = 0; l < 3; ++l) {
        w[l] = std::max(0.0, latest(stages[l](zero)) - fixed[l] - (l == 1 ? 0.0 : copy));
      }
      found = by_size.emplace(n, w).first;
    }
    bytes_part.push_back(found->second);
  }
  const std::size_t slices = bytes_part.size();
  std::vector<std::array<double, 3>> fixed_left(slices), left(bytes_part), end(slices, {-1.0, -1.0, -1.0});
  std::uint64_t first = 0;
  for (std::size_t k = 0; k < slices; ++k, first += per_slice) {
    const double copy =
        static_cast<double>(std::min(per_slice, s.count - first) * data_type_size(s.dtype)) / std::min(c.local_rate, c.copy_rate);
    fixed_left[k] = {fixed[0] + copy, fixed[1], fixed[2] + copy};
  }
  // A level-0 lane's reads are SDMA tasks, each held to one task's cap
  // (links.hccs.transport_rate on A2) below what the server's links carry:
  // lanes running at once each keep up to the links' share, not half the
  // capped rate.
  double headroom = 1;
  {
    const int p = h.per_server;
    auto all_pairs = [p](std::vector<FlowPair>& flows) { mesh_pairs(p, flows); };
    const std::string key = "mesh/" + std::to_string(p);
    headroom = f.shared_rate(key, all_pairs, c.copy_rate, false, false) / f.shared_rate(key, all_pairs, c.copy_rate, false);
  }
  std::vector<std::array<char, 3>> started(slices, {0, 0, 0});
  auto released = [&](std::size_t k, std::size_t l) {
    if (k >= 1 && end[k - 1][l] < 0) return false;
    if (l >= 1 && end[k][l - 1] < 0) return false;
    if (l == 0 && k >= 2 && end[k - 2][2] < 0) return false;
    return true;
  };
  double now = c.launch;
  std::size_t done = 0;
  std::size_t oldest = 0;  // slices before it have ended; only the next few can run (k needs k-2 ended)
  while (done < 3 * slices) {
    while (oldest < slices && end[oldest][2] >= 0) ++oldest;
    std::vector<std::pair<std::size_t, std::size_t>> running;
    for (std::size_t k = oldest; k < std::min(slices, oldest + 3); ++k) {
      for (std::size_t l = 0; l < 3; ++l) {
        if (end[k][l] < 0 && (started[k][l] || released(k, l))) {
          started[k][l] = 1;
          running.emplace_back(k, l);
        }
      }
    }
    // Level-0 stages moving bytes share the links (within their headroom);
    // fixed parts go at full speed.
    int sharing = 0;
    for (const auto& [k, l] : running) sharing += l != 1 && fixed_left[k][l] <= 0 ? 1 : 0;
    auto speed = [&](std::size_t k, std::size_t l) {
      return l == 1 || fixed_left[k][l] > 0 ? 1.0 : std::min(1.0, headroom / std::max(1, sharing));
    };
    auto remaining = [&](std::size_t k, std::size_t l) { return fixed_left[k][l] > 0 ? fixed_left[k][l] : left[k][l]; };
    double step = 1e300;
    for (const auto& [k, l] : running) step = std::min(step, remaining(k, l) / speed(k, l));
    now += step;
    for (const auto& [k, l] : running) {
      const double progress = step * speed(k, l);
      if (fixed_left[k][l] > 0) {
        fixed_left[k][l] -= progress;
        if (fixed_left[k][l] > 1e-6) continue;
        fixed_left[k][l] = 0;
      } else {
        left[k][l] -= progress;
      }
      if (left[k][l] <= 1e-6) {
        end[k][l] = now;
        ++done;
      }
    }
  }
  return end[slices - 1][2];
}

// One server: the mesh-atomic form itself (mesh.cpp), per loop over the
// HCCL buffer: copies in, the pairwise phases between fork and join (a pair
// syncs before its first move of the loop), copies out.
double mesh_atomic(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const std::uint64_t esz = data_type_size(s.dtype);
  const std::uint64_t buffer = std::max<std::uint64_t>(1, s.buffer_bytes / esz);
  const bool per_rank = s.op != CollOp::AllReduce;
  const std::uint64_t per_loop = per_rank ? std::max<std::uint64_t>(1, buffer / static_cast<std::uint64_t>(p)) : buffer;
  Times t(static_cast<std::size_t>(p), c.launch - c.dispatch);
  std::uint64_t first = 0;
  do {
    const std::uint64_t n = std::min(per_loop, s.count - first);
    const double bytes = static_cast<double>(n * esz);
    const double chunk = static_cast<double>((n + static_cast<std::uint64_t>(p) - 1) / static_cast<std::uint64_t>(p) * esz);
    switch (s.op) {
      case CollOp::AllReduce:
        t = atomic_phase(f, copies(c, t, 1, bytes), chunk, true, true, every_pair);
        t = copies(c, atomic_phase(f, t, chunk, false, false, every_pair), 1, bytes);
        break;
      case CollOp::AllGather:
        t = copies(c, atomic_phase(f, copies(c, t, 1, bytes), bytes, false, true, every_pair), p, bytes);
        break;
      default:  // ReduceScatter
        t = copies(c, atomic_phase(f, copies(c, t, p, bytes), bytes, true, true, every_pair), 1, bytes);
        break;
    }
    first += per_loop;
  } while (first < s.count);
  return latest(t);
}

double hierarchical(const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan, const EstimateFabric& f) {
  if (ctx.hierarchy.servers() <= 1) return mesh_atomic(s, f);
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
  if (plan.pipeline && s.op == CollOp::AllReduce && s.count > per_slice) {
    return pipelined_all_reduce(s, h, plan, f, per_slice, level1_buffer);
  }
  // Per slice, each stage's end on every rank. A plain composition runs the
  // stages back to back; a Pipeline starts stage l of slice k once stage l
  // of slice k-1 and stage l-1 of slice k ended (slice k's first stage once
  // slice k-2 ended).
  const Times begin(static_cast<std::size_t>(h.per_server), c.launch);
  std::vector<std::vector<Times>> ends;
  RailMemo memo;
  Times t = begin;
  for (std::uint64_t first = 0; first == 0 || first < s.count; first += per_slice) {
    const auto stages = slice_stages(s, h, plan, f, std::min(per_slice, s.count - first), level1_buffer, memo);
    std::vector<Times> e;
    for (std::size_t l = 0; l < stages.size(); ++l) {
      Times ready = t;
      if (plan.pipeline) {
        const std::size_t k = ends.size();
        ready = begin;
        if (k >= 1) ready = elementwise_max(ready, ends[k - 1][l]);
        if (l >= 1) ready = elementwise_max(ready, e[l - 1]);
        if (l == 0 && k >= 2) ready = elementwise_max(ready, ends[k - 2].back());
      }
      e.push_back(stages[l](ready));
      t = e.back();
    }
    ends.push_back(e);
    if (s.count == 0) break;
  }
  double end = 0;
  for (const auto& e : ends) end = std::max(end, latest(e.back()));
  return end;
}

// Broadcast and Reduce across servers, per plane (hierarchy.cpp), per slice
// of half the buffer. Broadcast: the root's server copies in and scatters
// the slice (the root's peers read their chunk); NPU i of every server
// broadcasts chunk i on its rail; every server all-gathers the chunks and
// copies the slice out. Reduce: every server copies in and reduce-scatters;
// chunk i is reduced on rail i towards the root's server; the root reads
// the chunks and copies the slice out. A Broadcast of one slice follows
// its rails from each server's own start (rooted_rails_once); of several,
// it composes the slices stage after stage: every server's NPU i holds its
// chunk when the root server's NPU i has broadcast it (a rail stage takes
// the same time from when its rank of the root's server starts it), so one
// server's times stand for all. A Reduce's other servers have nothing
// after their rails and run ahead into the next slice, so its slices'
// rails are followed together (rooted_rails_run) with the level-0 phases
// as times.
double rooted(const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const Hierarchy& h = ctx.hierarchy;
  const int p0 = h.per_server;
  const int root = s.root % p0;
  const std::uint64_t esz = data_type_size(s.dtype);
  const std::uint64_t g0 = static_cast<std::uint64_t>(p0);
  const std::uint64_t per_slice = std::max<std::uint64_t>(1, s.buffer_bytes / 2 / esz / g0) * g0;
  const bool broadcast = s.op == CollOp::Broadcast;
  RailMemo memo;
  auto rail = [&](const Times& free, std::uint64_t n) {
    // Every rail moves its own chunk; the largest chunk sets the stage.
    CollectiveSpec r1 = stage_spec(s, s.op, h.servers(), (n + g0 - 1) / g0, s.buffer_bytes / 4);
    r1.root = s.root / p0;
    r1.one_shot = plan.one_shot;
    return rail_stage(f, r1, plan.level1, rails(h), free, memo);
  };
  auto from_root = [root](int r, int j) { return j == root && r != root; };
  auto to_root = [root](int r, int j) { return r == root && j != root; };
  if (broadcast && s.count <= per_slice) {
    // One slice: the rails followed with each server's own start (the
    // other servers' NPUs wait from the op's start, their "ready" long
    // posted, while the root's server scatters), and every server's
    // all-gather from when its own chunks arrived.
    const double bytes = static_cast<double>(s.count * esz);
    const double chunk = static_cast<double>((s.count + g0 - 1) / g0 * esz);
    const Times scattered =
        atomic_phase(f, copies(c, Times(static_cast<std::size_t>(p0), c.launch - c.dispatch), 1, bytes, root), chunk, false,
                     true, from_root);
    CollectiveSpec r1 = stage_spec(s, s.op, h.servers(), (s.count + g0 - 1) / g0, s.buffer_bytes / 4);
    r1.root = s.root / p0;
    r1.one_shot = plan.one_shot;
    std::vector<double> free(static_cast<std::size_t>(h.servers() * p0), c.launch - c.dispatch);
    // (a stage's first task is dispatched while the one before it runs)
    for (int q = 0; q < p0; ++q) free[static_cast<std::size_t>(r1.root * p0 + q)] = scattered[static_cast<std::size_t>(q)] - c.dispatch;
    const std::vector<double> ends = rooted_rails_once(f, r1, plan.level1, rails(h), free);
    if (!ends.empty()) {
      double end = 0;
      for (int x = 0; x < h.servers(); ++x) {
        const Times arrived(ends.begin() + x * p0, ends.begin() + (x + 1) * p0);
        end = std::max(end, latest(copies(c, atomic_phase(f, plus(arrived, -c.dispatch), chunk, false, true, every_pair), 1, bytes)));
      }
      return end;
    }
  }
  if (!broadcast) {
    // The rails of several slices followed at once, with each server's
    // level-0 phases around them: every server but the root's has nothing
    // after its rail and goes on with the next slice while the root's server
    // gathers (the Broadcast's servers all have phases on both sides).
    const Times zero(static_cast<std::size_t>(p0), 0.0);
    auto slice_of = [&](std::uint64_t n) {
      const double bytes = static_cast<double>(n * esz);
      const double chunk = static_cast<double>((n + g0 - 1) / g0 * esz);
      RailSlices::Slice slice;
      slice.count = (n + g0 - 1) / g0;
      slice.alone = copies(c, zero, 1, bytes);
      slice.pre = atomic_phase(f, zero, chunk, true, true, every_pair);
      // The root's server gathers once its last rail ended; its NPUs reach
      // that point as staggered as they left the phase before (the rails of
      // one slice take about as long), which the gather partly absorbs.
      const double last = *std::max_element(slice.pre.begin(), slice.pre.end());
      slice.post = copies(c, atomic_phase(f, slice.pre, chunk, false, true, to_root), 1, bytes, root);
      for (double& t : slice.post) t = std::max(0.0, t - last - c.dispatch);
      // The rail's first task and the gather's are dispatched while the
      // stream waits for the task before them: no dispatch gap.
      for (double& t : slice.pre) t = std::max(0.0, t - c.dispatch);
      return slice;
    };
    RailSlices slices;
    slices.full = s.count / per_slice;
    for (std::uint64_t k = 0; k < std::min<std::uint64_t>(slices.full, kFollowedSlices); ++k) slices.followed.push_back(slice_of(per_slice));
    if (s.count % per_slice > 0 || slices.full == 0) slices.followed.push_back(slice_of(s.count % per_slice));
    CollectiveSpec r1 = stage_spec(s, s.op, h.servers(), per_slice / g0, s.buffer_bytes / 4);
    r1.root = s.root / p0;
    const double end = rooted_rails_run(f, r1, plan.level1, rails(h), slices, c.launch - c.dispatch);
    if (end >= 0) return end;
  }
  Times t(static_cast<std::size_t>(p0), c.launch - c.dispatch);
  std::uint64_t first = 0;
  do {
    const std::uint64_t n = std::min(per_slice, s.count - first);
    const double bytes = static_cast<double>(n * esz);
    const double chunk = static_cast<double>((n + g0 - 1) / g0 * esz);
    if (broadcast) {
      t = atomic_phase(f, copies(c, t, 1, bytes, root), chunk, false, true, from_root);
      t = rail(t, n);
      t = copies(c, atomic_phase(f, t, chunk, false, true, every_pair), 1, bytes);
    } else {
      t = atomic_phase(f, copies(c, t, 1, bytes), chunk, true, true, every_pair);
      t = rail(t, n);
      t = copies(c, atomic_phase(f, t, chunk, false, true, to_root), 1, bytes, root);
    }
    first += per_slice;
  } while (first < s.count);
  return broadcast ? latest(t) : t[static_cast<std::size_t>(root)];
}

}  // namespace

void register_hierarchical_estimates(std::map<std::string, EstimateFn>& out) {
  const EstimateFn composed = [](const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan,
                                 const EstimateFabric& f) { return hierarchical(s, ctx, plan, f); };
  for (const char* name : {"AllReduceMeshExecutor", "AllGatherMeshExecutor", "ReduceScatterMeshExecutor",
                           "AllGatherMeshGraphExecutor", "ReduceScatterMeshGraphExecutor",
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

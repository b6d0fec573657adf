#include "sim/executors/hierarchy.h"

#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>

#include "sim/executors/plan.h"

namespace hcclsim {

namespace {

// Notify regions, allocated in turn from what each form uses
// (level0_notifies, level1_notifies). A rank may already run the next stage
// while a peer still waits in the previous one, so stages that can overlap
// never share registers: level 0 takes the lowest region (two for
// Pipeline's two level-0 lanes); level-1 and level-2 stages each alternate
// between two regions above it, since a region may only come back after an
// all-rank stage among the same ranks (level1.h).

// Appends stages, each starting on a rank after the previous stage there
// ended. Stages of one kind reuse their streams ("L0/Plane2" on a rank is one
// stream for every slice), as HCCL does, so a notify keeps one waiting thread.
class Composer {
 public:
  explicit Composer(int ranks) : last_(static_cast<std::size_t>(ranks)) {}

  void stage(const TaskGraph& part, const std::vector<int>& members, int notify_base, const std::string& prefix) {
    const std::vector<TaskId> ids = graph_.append(part, members, notify_base, prefix, &threads_);
    std::map<int, std::vector<TaskId>> lasts;
    for (const Thread& th : part.threads()) {
      if (th.tasks.empty()) continue;
      const int rank = members[static_cast<std::size_t>(th.rank)];
      for (TaskId before : last_[static_cast<std::size_t>(rank)]) graph_.add_dependency(before, ids[th.tasks.front()]);
      lasts[rank].push_back(ids[th.tasks.back()]);
    }
    for (auto& [rank, ids_of_rank] : lasts) last_[static_cast<std::size_t>(rank)] = std::move(ids_of_rank);
  }
  TaskGraph take() { return std::move(graph_); }

  // For pipelines: a stage with no ordering of its own; the caller orders it.
  using RankTasks = std::map<int, std::vector<TaskId>>;
  struct Ends {
    RankTasks first;
    RankTasks last;
  };
  Ends append(const TaskGraph& part, const std::vector<int>& members, int notify_base, const std::string& prefix) {
    const std::vector<TaskId> ids = graph_.append(part, members, notify_base, prefix, &threads_);
    Ends ends;
    for (const Thread& th : part.threads()) {
      if (th.tasks.empty()) continue;
      const int rank = members[static_cast<std::size_t>(th.rank)];
      ends.first[rank].push_back(ids[th.tasks.front()]);
      ends.last[rank].push_back(ids[th.tasks.back()]);
    }
    return ends;
  }
  // On every rank both name: `after` starts once `before` has ended.
  void order(const RankTasks& before, const RankTasks& after) {
    for (const auto& [rank, firsts] : after) {
      const auto found = before.find(rank);
      if (found == before.end()) continue;
      for (TaskId b : found->second) {
        for (TaskId f : firsts) graph_.add_dependency(b, f);
      }
    }
  }

 private:
  TaskGraph graph_;
  TaskGraph::ThreadIndex threads_;
  std::vector<std::vector<TaskId>> last_;
};

class HierarchyBuilder {
 public:
  HierarchyBuilder(const CollectiveSpec& spec, const Hierarchy& h, const AlgoPlan& plan)
      : spec_(spec),
        h_(h),
        plan_(plan),
        esz_(data_type_size(spec.dtype)),
        level0_size_(level0_notifies(h.per_server, plan.level0)),
        level1_size_(level1_notifies(h.servers(), plan.level1)),
        level2_size_(level1_notifies(h.pods, plan.level2)),
        composer_(h.ranks()) {}

  TaskGraph build() {
    if (plan_.pipeline) {
      pipeline();
      return composer_.take();
    }
    switch (spec_.op) {
      case CollOp::AllReduce: all_reduce(); break;
      case CollOp::ReduceScatter: reduce_scatter(); break;
      case CollOp::AllGather: all_gather(); break;
      case CollOp::Broadcast: broadcast(); break;
      case CollOp::Reduce: reduce(); break;
      case CollOp::AlltoAll: {
        CollectiveSpec flat = spec_;
        flat.ranks = h_.ranks();
        std::vector<int> all(static_cast<std::size_t>(h_.ranks()));
        for (int r = 0; r < h_.ranks(); ++r) all[static_cast<std::size_t>(r)] = r;
        composer_.stage(build_level1(flat, Level1Algo::Pairwise), all, 0, "L1/");
        break;
      }
    }
    return composer_.take();
  }

 private:
  int rank(int pod, int server, int index) const {
    return (pod * h_.servers_per_pod + server) * h_.per_server + index;
  }
  std::vector<int> server_group(int pod, int server) const {
    std::vector<int> g;
    for (int i = 0; i < h_.per_server; ++i) g.push_back(rank(pod, server, i));
    return g;
  }
  // Same index in every server of one pod (or of every pod when `all_pods`).
  std::vector<int> rail(int pod, int index, bool all_pods) const {
    std::vector<int> g;
    for (int p = all_pods ? 0 : pod; p < (all_pods ? h_.pods : pod + 1); ++p) {
      for (int s = 0; s < h_.servers_per_pod; ++s) g.push_back(rank(p, s, index));
    }
    return g;
  }
  std::vector<int> pod_rail(int server, int index) const {
    std::vector<int> g;
    for (int p = 0; p < h_.pods; ++p) g.push_back(rank(p, server, index));
    return g;
  }
  BufferRef ref(BufferKind kind, std::uint64_t elem) const { return {0, kind, elem * esz_}; }

  CollectiveSpec stage_spec(CollOp op, int ranks, std::uint64_t count, BufferRef in, BufferRef out,
                            std::uint64_t scratch_offset, std::uint64_t buffer_bytes) const {
    CollectiveSpec s = hcclsim::stage_spec(spec_, op, ranks, count, buffer_bytes);
    s.input_buffer = in.buffer;
    s.input_offset = in.offset();
    s.output_buffer = out.buffer;
    s.output_offset = out.offset();
    s.scratch_offset = scratch_offset;
    return s;
  }
  TaskGraph level0(const CollectiveSpec& s) const { return build_collective(s, plan_.level0); }
  // A level-0 stage on every server, in pod then server order: its
  // graph does not depend on the server, so it is built once (on a
  // CloudMatrix384 building it per server was a fifth of a 1 GiB run).
  void each_server(const TaskGraph& part, const std::string& prefix) {
    for (int p = 0; p < h_.pods; ++p) {
      for (int s = 0; s < h_.servers_per_pod; ++s) composer_.stage(part, server_group(p, s), 0, prefix);
    }
  }
  // Level-1 regions 0 and 1 alternate; region 2 is for the one two-level
  // remainder of a three-level all-reduce, which follows a region-1 stage
  // among a subset of its ranks with no all-rank stage in between.
  int level1_base(std::uint64_t region) const { return 2 * level0_size_ + static_cast<int>(region) * level1_size_; }
  int level2_base(std::uint64_t turn) const {
    return 2 * level0_size_ + 3 * level1_size_ + static_cast<int>(turn % 2) * level2_size_;
  }

  // Level-1 stages keep their own CCL areas in the upper half of the HCCL
  // buffer; the data being worked on stays in the lower half.
  std::uint64_t half() const { return spec_.buffer_bytes / 2; }

  void all_reduce() {
    const std::uint64_t g0 = static_cast<std::uint64_t>(h_.per_server);
    const std::uint64_t g1 = static_cast<std::uint64_t>(h_.servers_per_pod);
    const bool three_levels = h_.pods > 1 && h_.servers_per_pod > 1;
    // Slices fit half the buffer and split evenly down the levels.
    const std::uint64_t unit = three_levels ? g0 * g1 : g0;
    std::uint64_t per_slice = half() / esz_ / unit * unit;
    if (per_slice == 0) throw std::invalid_argument("the HCCL buffer is too small for this cluster");
    std::uint64_t slice = 0;
    for (std::uint64_t first = 0; first < spec_.count || first == 0; first += per_slice, ++slice) {
      const std::uint64_t n = std::min(per_slice, spec_.count - first);
      // L0: reduce-scatter in each server; rank i keeps chunk(n, i) of the slice in its buffer.
      reduce_scatter_into_buffer(first, n);
      for (int i = 0; i < h_.per_server; ++i) {
        const Span c = chunk_span(n, h_.per_server, i);
        if (c.count == 0) continue;
        if (three_levels && c.count % g1 == 0) {
          // L1 reduce-scatter inside each pod; every rank's block lands at the
          // same place (`landing`), where L2 all-reduces it across pods and L1
          // all-gathers it back into the chunk.
          const std::uint64_t blk = c.count / g1;
          const std::uint64_t landing = spec_.buffer_bytes / esz_;
          for (int p = 0; p < h_.pods; ++p) {
            CollectiveSpec rs = stage_spec(CollOp::ReduceScatter, h_.servers_per_pod, blk, ref(BufferKind::Scratch, c.first),
                                           ref(BufferKind::Scratch, landing), half(), half() / 2);
            composer_.stage(build_level1(rs, plan_.level1), rail(p, i, false), level1_base(0), "L1/");
          }
          for (int s = 0; s < h_.servers_per_pod; ++s) {
            CollectiveSpec ar = stage_spec(CollOp::AllReduce, h_.pods, blk, ref(BufferKind::Scratch, landing),
                                           ref(BufferKind::Scratch, landing), half(), half() / 2);
            composer_.stage(build_level1(ar, plan_.level2), pod_rail(s, i), level2_base(slice), "L2/");
          }
          for (int p = 0; p < h_.pods; ++p) {
            CollectiveSpec ag = stage_spec(CollOp::AllGather, h_.servers_per_pod, blk, ref(BufferKind::Scratch, landing),
                                           ref(BufferKind::Scratch, c.first), half(), half() / 2);
            composer_.stage(build_level1(ag, plan_.level1), rail(p, i, false), level1_base(1), "L1/");
          }
        } else {
          // Two levels (or a remainder that does not split across the pod):
          // all-reduce the chunk across every server of the rail.
          CollectiveSpec ar = stage_spec(CollOp::AllReduce, h_.servers(), c.count, ref(BufferKind::Scratch, c.first),
                                         ref(BufferKind::Scratch, c.first), half(), half() / 2);
          composer_.stage(build_level1(ar, plan_.level1), rail(0, i, true), level1_base(three_levels ? 2 : slice % 2), "L1/");
        }
      }
      // L0: all-gather in each server from the buffer into the output.
      all_gather_into_output(first, n);
      if (spec_.count == 0) break;
    }
  }

  // Pipeline: each op is two or three stage kinds per slice, each kind on
  // streams and notifies of its own ("P0/", "P1/", "P2/"), so slice k+1's
  // first stage runs while slice k is in its later ones. Slices alternate
  // between the two halves of CCL_IN; a slice starts on a rank once the slice
  // two before it has left its half.
  void pipeline() {
    const std::uint64_t g0 = static_cast<std::uint64_t>(h_.per_server);
    const std::uint64_t servers = static_cast<std::uint64_t>(h_.servers());
    // Two data regions fill CCL_IN; level-1 stages keep their areas in CCL_OUT.
    const std::uint64_t region_size = spec_.buffer_bytes / 2 / esz_;  // elements
    const std::uint64_t level1_area = spec_.buffer_bytes;
    const std::uint64_t c = spec_.count;
    std::uint64_t per_slice = spec_.op == CollOp::AllReduce ? region_size / g0 * g0 : region_size / (g0 * servers);
    if (per_slice == 0) throw std::invalid_argument("the HCCL buffer is too small for a pipeline on this cluster");
    std::vector<Composer::RankTasks> slice_end;  // per slice, its last stage's ends
    std::vector<Composer::RankTasks> lane_last(3);
    std::uint64_t k = 0;
    for (std::uint64_t first = 0; first < c || first == 0; first += per_slice, ++k) {
      const std::uint64_t n = std::min(per_slice, c - first);
      const std::uint64_t region = (k % 2) * region_size;  // elements into the HCCL buffer
      std::vector<std::vector<Composer::Ends>> stages;  // per lane, the groups' stages
      auto level0_stage = [&](CollectiveSpec s, int lane) {
        std::vector<Composer::Ends> group;
        const TaskGraph part = level0(s);  // the same on every server
        for (int srv = 0; srv < h_.servers_per_pod; ++srv) {
          group.push_back(composer_.append(part, server_group(0, srv), lane == 0 ? 0 : level0_size_,
                                           "P" + std::to_string(lane) + "/"));
        }
        stages.push_back(std::move(group));
      };
      auto level1_stage = [&](const std::function<CollectiveSpec(int)>& spec_of, int lane) {
        std::vector<Composer::Ends> group;
        for (int i = 0; i < h_.per_server; ++i) {
          const CollectiveSpec s = spec_of(i);
          if (s.count == 0) continue;
          group.push_back(composer_.append(build_level1(s, plan_.level1), rail(0, i, true), level1_base(k % 2),
                                           "P" + std::to_string(lane) + "/"));
        }
        stages.push_back(std::move(group));
      };
      switch (spec_.op) {
        case CollOp::AllReduce: {
          CollectiveSpec rs = stage_spec(CollOp::ReduceScatter, h_.per_server, n, ref(spec_.input_buffer, first),
                                         ref(BufferKind::Scratch, region), region * esz_, spec_.buffer_bytes);
          rs.input_offset = spec_.input_offset + first * esz_;
          rs.chunked = true;
          level0_stage(rs, 0);
          level1_stage(
              [&](int i) {
                const Span ch = chunk_span(n, h_.per_server, i);
                return stage_spec(CollOp::AllReduce, h_.servers(), ch.count, ref(BufferKind::Scratch, region + ch.first),
                                  ref(BufferKind::Scratch, region + ch.first), level1_area, spec_.buffer_bytes / 2);
              },
              1);
          CollectiveSpec ag = stage_spec(CollOp::AllGather, h_.per_server, n, ref(BufferKind::Scratch, region),
                                         ref(spec_.output_buffer, 0), region * esz_, spec_.buffer_bytes);
          ag.output_offset = spec_.output_offset + first * esz_;
          ag.chunked = true;
          level0_stage(ag, 2);
          break;
        }
        case CollOp::ReduceScatter: {
          CollectiveSpec rs = stage_spec(CollOp::ReduceScatter, h_.per_server, n, ref(spec_.input_buffer, first),
                                         ref(BufferKind::Scratch, region), region * esz_, spec_.buffer_bytes);
          rs.input_offset = spec_.input_offset + first * esz_;
          rs.segments = h_.servers();
          rs.block_stride = c;
          level0_stage(rs, 0);
          level1_stage(
              [&](int) {
                CollectiveSpec s = stage_spec(CollOp::ReduceScatter, h_.servers(), n, ref(BufferKind::Scratch, region),
                                              ref(spec_.output_buffer, first), level1_area, spec_.buffer_bytes / 2);
                s.output_offset = spec_.output_offset + first * esz_;
                return s;
              },
              1);
          break;
        }
        case CollOp::AllGather: {
          level1_stage(
              [&](int) {
                CollectiveSpec s = stage_spec(CollOp::AllGather, h_.servers(), n, ref(spec_.input_buffer, first),
                                              ref(BufferKind::Scratch, region), level1_area, spec_.buffer_bytes / 2);
                s.input_offset = spec_.input_offset + first * esz_;
                return s;
              },
              0);
          CollectiveSpec ag = stage_spec(CollOp::AllGather, h_.per_server, n, ref(BufferKind::Scratch, region),
                                         ref(spec_.output_buffer, first), region * esz_, spec_.buffer_bytes);
          ag.output_offset = spec_.output_offset + first * esz_;
          ag.segments = h_.servers();
          ag.block_stride = c;
          level0_stage(ag, 1);
          break;
        }
        default:
          throw std::invalid_argument("Pipeline runs AllReduce, ReduceScatter and AllGather only");
      }
      // Order: each stage after the previous stage of its slice and after its
      // lane's previous slice; the slice's first stage after slice k-2 ended.
      for (std::size_t lane = 0; lane < stages.size(); ++lane) {
        Composer::RankTasks firsts;
        Composer::RankTasks lasts;
        for (const Composer::Ends& e : stages[lane]) {
          for (const auto& [rank, ids] : e.first) firsts[rank].insert(firsts[rank].end(), ids.begin(), ids.end());
          for (const auto& [rank, ids] : e.last) lasts[rank].insert(lasts[rank].end(), ids.begin(), ids.end());
        }
        composer_.order(lane_last[lane], firsts);
        if (lane > 0) composer_.order(lane_last[lane - 1], firsts);
        if (lane == 0 && k >= 2) composer_.order(slice_end[k - 2], firsts);
        lane_last[lane] = std::move(lasts);
      }
      slice_end.push_back(lane_last[stages.size() - 1]);
      if (c == 0) break;
    }
  }


  // Level 0 first (each rank gathers, over its server, the sums of the blocks
  // of every server's rank with its index), then level 1 on the rail.
  void reduce_scatter() {
    const std::uint64_t g0 = static_cast<std::uint64_t>(h_.per_server);
    const std::uint64_t servers = static_cast<std::uint64_t>(h_.servers());
    const std::uint64_t c = spec_.count;
    const std::uint64_t per_slice = std::max<std::uint64_t>(1, half() / esz_ / (g0 * servers));
    std::uint64_t slice = 0;
    for (std::uint64_t first = 0; first < c || first == 0; first += per_slice, ++slice) {
      const std::uint64_t n = std::min(per_slice, c - first);
      CollectiveSpec rs0 = stage_spec(CollOp::ReduceScatter, h_.per_server, n, ref(spec_.input_buffer, first),
                                      ref(BufferKind::Scratch, 0), 0, spec_.buffer_bytes);
      rs0.input_offset = spec_.input_offset + first * esz_;
      rs0.segments = h_.servers();
      rs0.block_stride = c;
      each_server(level0(rs0), "L0/");
      for (int i = 0; i < h_.per_server; ++i) {
        CollectiveSpec rs = stage_spec(CollOp::ReduceScatter, h_.servers(), n, ref(BufferKind::Scratch, 0),
                                       ref(spec_.output_buffer, first), half(), half() / 2);
        rs.output_offset = spec_.output_offset + first * esz_;
        composer_.stage(build_level1(rs, plan_.level1), rail(0, i, true), level1_base(slice % 2), "L1/");
      }
      if (c == 0) break;
    }
  }

  // Level 1 first on the rail (each rank gets its index's block of every
  // server), then level 0 spreads them inside the server.
  void all_gather() {
    const std::uint64_t g0 = static_cast<std::uint64_t>(h_.per_server);
    const std::uint64_t servers = static_cast<std::uint64_t>(h_.servers());
    const std::uint64_t c = spec_.count;
    const std::uint64_t per_slice = std::max<std::uint64_t>(1, half() / esz_ / (g0 * servers));
    std::uint64_t slice = 0;
    for (std::uint64_t first = 0; first < c || first == 0; first += per_slice, ++slice) {
      const std::uint64_t n = std::min(per_slice, c - first);
      for (int i = 0; i < h_.per_server; ++i) {
        CollectiveSpec ag = stage_spec(CollOp::AllGather, h_.servers(), n, ref(spec_.input_buffer, first),
                                       ref(BufferKind::Scratch, 0), half(), half() / 2);
        ag.input_offset = spec_.input_offset + first * esz_;
        composer_.stage(build_level1(ag, plan_.level1), rail(0, i, true), level1_base(slice % 2), "L1/");
      }
      CollectiveSpec ag0 = stage_spec(CollOp::AllGather, h_.per_server, n, ref(BufferKind::Scratch, 0),
                                      ref(spec_.output_buffer, first), 0, spec_.buffer_bytes);
      ag0.output_offset = spec_.output_offset + first * esz_;
      ag0.segments = h_.servers();
      ag0.block_stride = c;
      each_server(level0(ag0), "L0/");
      if (c == 0) break;
    }
  }

  // Elements per slice of a rooted op: half the buffer, in whole NPU shares.
  std::uint64_t rooted_slice() const {
    const std::uint64_t g0 = static_cast<std::uint64_t>(h_.per_server);
    const std::uint64_t per_slice = half() / esz_ / g0 * g0;
    if (per_slice == 0) throw std::invalid_argument("the HCCL buffer is too small for this cluster");
    return per_slice;
  }
  // The level-1 stage of a plane: `op` over the rail of NPU index i, on its
  // chunk of the slice, in place in the HCCL buffer, rooted at the root's server.
  CollectiveSpec plane_spec(CollOp op, const Span& c, int root_server) const {
    CollectiveSpec s = stage_spec(op, h_.servers(), c.count, ref(BufferKind::Scratch, c.first),
                                  ref(BufferKind::Scratch, c.first), half(), half() / 2);
    s.root = root_server;
    s.one_shot = plan_.one_shot;
    return s;
  }

  // Level-0 stages of the slice [first, first + n) in every server: the
  // input reduce-scattered into each NPU's chunk in the buffer, and the
  // chunks in the buffer all-gathered into the output.
  void reduce_scatter_into_buffer(std::uint64_t first, std::uint64_t n) {
    CollectiveSpec rs0 = stage_spec(CollOp::ReduceScatter, h_.per_server, n, ref(spec_.input_buffer, first),
                                    ref(BufferKind::Scratch, 0), 0, spec_.buffer_bytes);
    rs0.input_offset = spec_.input_offset + first * esz_;
    rs0.chunked = true;
    each_server(level0(rs0), "L0/");
  }
  void all_gather_into_output(std::uint64_t first, std::uint64_t n) {
    CollectiveSpec ag0 = stage_spec(CollOp::AllGather, h_.per_server, n, ref(BufferKind::Scratch, 0),
                                    ref(spec_.output_buffer, 0), 0, spec_.buffer_bytes);
    ag0.output_offset = spec_.output_offset + first * esz_;
    ag0.chunked = true;
    each_server(level0(ag0), "L0/");
  }
  // `op` (Broadcast or Reduce) of each NPU's chunk of n elements on its own
  // rail, rooted at the root's server.
  void each_plane(CollOp op, std::uint64_t n, int root_server, std::uint64_t slice) {
    for (int i = 0; i < h_.per_server; ++i) {
      const Span c = chunk_span(n, h_.per_server, i);
      if (c.count == 0) continue;
      composer_.stage(build_level1(plane_spec(op, c, root_server), plan_.level1), rail(0, i, true),
                      level1_base(slice % 2), "L1/");
    }
  }

  // BroadCastMeshExecutor across servers (hcomm coll_broadcast_mesh_executor.cc),
  // per slice: the root's server scatters the slice over its NPUs (ScatterMesh);
  // NPU i of every server broadcasts chunk i on its own rail (one level-1
  // domain per plane, so every NIC works); every server all-gathers the
  // chunks (AllGatherMeshAtomic) into the output.
  void broadcast() {
    if (plan_.level0 != Level0Algo::Mesh) return broadcast_on_root_rail();
    const int root_index = spec_.root % h_.per_server;
    const int root_server = spec_.root / h_.per_server;
    const std::uint64_t per_slice = rooted_slice();
    std::uint64_t slice = 0;
    for (std::uint64_t first = 0; first < spec_.count || first == 0; first += per_slice, ++slice) {
      const std::uint64_t n = std::min(per_slice, spec_.count - first);
      CollectiveSpec scatter = stage_spec(CollOp::Broadcast, h_.per_server, n, ref(spec_.input_buffer, first),
                                          ref(BufferKind::Scratch, 0), 0, spec_.buffer_bytes);
      scatter.input_offset = spec_.input_offset + first * esz_;
      scatter.root = root_index;
      scatter.chunked = true;
      composer_.stage(level0(scatter), server_group(0, root_server), 0, "L0/");
      each_plane(CollOp::Broadcast, n, root_server, slice);
      all_gather_into_output(first, n);
      if (spec_.count == 0) break;
    }
  }

  // ReduceMeshExecutor across servers (hcomm coll_reduce_mesh_executor.cc),
  // per slice: every server reduce-scatters the slice; NPU i of every server
  // reduces chunk i on its own rail to the root's server; the root gathers
  // the chunks from its server's NPUs (GatherMesh) into its output.
  void reduce() {
    if (plan_.level0 != Level0Algo::Mesh) return reduce_on_root_rail();
    const int root_index = spec_.root % h_.per_server;
    const int root_server = spec_.root / h_.per_server;
    const std::uint64_t per_slice = rooted_slice();
    std::uint64_t slice = 0;
    for (std::uint64_t first = 0; first < spec_.count || first == 0; first += per_slice, ++slice) {
      const std::uint64_t n = std::min(per_slice, spec_.count - first);
      reduce_scatter_into_buffer(first, n);
      each_plane(CollOp::Reduce, n, root_server, slice);
      CollectiveSpec gather = stage_spec(CollOp::Reduce, h_.per_server, n, ref(BufferKind::Scratch, 0),
                                         ref(spec_.output_buffer, 0), 0, spec_.buffer_bytes);
      gather.output_offset = spec_.output_offset + first * esz_;
      gather.root = root_index;
      gather.chunked = true;
      composer_.stage(level0(gather), server_group(0, root_server), 0, "L0/");
      if (spec_.count == 0) break;
    }
  }

  // With a ring level 0 (A2 under HCCL_ALGO=level0:ring, A3): the root's
  // rail first, then every server from its rail member.
  void broadcast_on_root_rail() {
    const int root_index = spec_.root % h_.per_server;
    const int root_server = spec_.root / h_.per_server;
    CollectiveSpec b1 = spec_;
    b1.ranks = h_.servers();
    b1.root = root_server;
    composer_.stage(build_level1(b1, plan_.level1), rail(0, root_index, true), level1_base(0), "L1/");
    CollectiveSpec b0 = spec_;
    b0.ranks = h_.per_server;
    b0.root = root_index;
    b0.input_buffer = spec_.output_buffer;  // the rail member received it into its output
    b0.input_offset = spec_.output_offset;
    each_server(level0(b0), "L0/");
  }

  // With a ring level 0: every server to its member on the root's rail, then
  // that rail to the root.
  void reduce_on_root_rail() {
    const int root_index = spec_.root % h_.per_server;
    const int root_server = spec_.root / h_.per_server;
    CollectiveSpec r0 = spec_;
    r0.ranks = h_.per_server;
    r0.root = root_index;
    each_server(level0(r0), "L0/");
    CollectiveSpec r1 = spec_;
    r1.ranks = h_.servers();
    r1.root = root_server;
    r1.input_buffer = spec_.output_buffer;
    r1.input_offset = spec_.output_offset;
    composer_.stage(build_level1(r1, plan_.level1), rail(0, root_index, true), level1_base(0), "L1/");
  }

  CollectiveSpec spec_;
  Hierarchy h_;
  AlgoPlan plan_;
  std::uint64_t esz_;
  int level0_size_;
  int level1_size_;
  int level2_size_;
  Composer composer_;
};

}  // namespace

TaskGraph build_hierarchical(const CollectiveSpec& spec, const Hierarchy& h, const AlgoPlan& plan) {
  if (h.servers() <= 1) return build_collective(spec, plan.level0);
  // One NPU per server: no level 0 (it needs 2 ranks); one level-1 graph over every rank.
  if (h.per_server == 1) {
    CollectiveSpec flat = spec;
    flat.one_shot = plan.one_shot;
    return build_level1(flat, spec.op == CollOp::AlltoAll ? Level1Algo::Pairwise : plan.level1);
  }
  return HierarchyBuilder(spec, h, plan).build();
}

}  // namespace hcclsim

namespace hcclsim {

namespace {


// docs/sources.md §3's alpha-beta costs, in seconds, for one level of p ranks
// moving n bytes per rank.
double alpha_beta_cost(Level1Algo algo, CollOp op, int p, double n, double beta) {
  const double alpha = 60e-6;  // HCCL's selector constant (docs/sources.md §3)
  const double share = (p - 1.0) / p;
  const bool twice = op == CollOp::AllReduce;
  const double bw = (twice ? 2.0 : 1.0) * share * n * beta;
  switch (algo) {
    case Level1Algo::Ring: return (twice ? 2.0 : 1.0) * (p - 1) * alpha + bw;
    case Level1Algo::NHR:
    case Level1Algo::NB: return (twice ? 2.0 : 1.0) * ceil_log2(p) * alpha + bw;
    case Level1Algo::HalvingDoubling: {
      const bool pow2 = (p & (p - 1)) == 0;
      // Non-powers of two fold the extra ranks in and out: two more steps and their data.
      return (twice ? 2.0 : 1.0) * ceil_log2(p) * alpha + bw + (pow2 ? 0.0 : 2.0 * alpha + n * beta);
    }
    case Level1Algo::Pairwise: return (p - 1) * alpha + share * n * beta;
  }
  return 0;
}

Level1Algo pick(CollOp op, int p, double n, double beta) {
  if (op == CollOp::AlltoAll) return Level1Algo::Pairwise;
  Level1Algo best = Level1Algo::Ring;
  double best_cost = -1;
  // Listed in HCCL's tie order: Ring, then NHR, then H-D_R.
  for (Level1Algo a : {Level1Algo::Ring, Level1Algo::NHR, Level1Algo::HalvingDoubling}) {
    if (!level1_supports(op, p, a)) continue;
    const double cost = alpha_beta_cost(a, op, p, n, beta);
    if (best_cost < 0 || cost < best_cost) {
      best = a;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

bool broadcast_one_shot(Level1Algo algo, std::uint64_t slice_bytes, int level1_ranks, Bandwidth nic_bandwidth) {
  if (algo == Level1Algo::NHR) return slice_bytes <= 2 * 1024 * 1024;  // NHR_BCAST_SMALL_SIZE
  if (algo != Level1Algo::NB) return false;
  if (level1_ranks == 2) return true;
  // bandwidth (GB/s) x 60 us, in bytes; scaled by the ranks up to 4, else by
  // (2k - 2) / (k - 2) in whole numbers (k = ceil(log2 ranks)), as HCCL computes it.
  const double base = static_cast<double>(nic_bandwidth.bytes_per_s) / 1e9 * 60.0 * 1000.0;
  const int k = ceil_log2(level1_ranks);
  const double threshold = level1_ranks <= 4 ? level1_ranks * base : static_cast<double>((2 * k - 2) / (k - 2)) * base;
  return static_cast<double>(slice_bytes) < threshold;
}

bool pipeline_supported(CollOp op, const Hierarchy& h, Level0Algo level0) {
  const bool op_ok = op == CollOp::AllReduce || op == CollOp::ReduceScatter || op == CollOp::AllGather;
  // Its two level-0 stages keep 4 notifies per rank each below level 1's region.
  return op_ok && h.pods == 1 && h.servers() > 1 && h.per_server > 1 && h.per_server <= 8 &&
         level0 == Level0Algo::Mesh;
}

std::string AlgoPlan::describe(const Hierarchy& h, CollOp op) const {
  if (flat) return "flat:" + level1_algo_name(level1);
  std::string out = "level0:" + level0_algo_name(level0);
  if (op == CollOp::AlltoAll && h.servers() > 1) return "level1:pairwise";
  if (h.servers() > 1 && h.per_server == 1) return "level1:" + level1_algo_name(level1);  // no level 0
  if (h.servers() > 1) {
    out += ";level1:" + (pipeline ? "pipeline(" + level1_algo_name(level1) + ")" : level1_algo_name(level1));
  }
  if (h.pods > 1 && h.servers_per_pod > 1 && op == CollOp::AllReduce) out += ";level2:" + level1_algo_name(level2);
  return out;
}

AlgoPlan choose_algorithm(CollOp op, const Hierarchy& h, std::uint64_t bytes_per_rank, Bandwidth link_bandwidth,
                          const AlgoRequest& request) {
  AlgoPlan plan;
  plan.level0 = request.level0.value_or(default_level0(op));
  const double beta = link_bandwidth.bytes_per_s > 0 ? 1.0 / static_cast<double>(link_bandwidth.bytes_per_s) : 0.0;
  const double n = static_cast<double>(bytes_per_rank);
  const bool three = h.pods > 1 && h.servers_per_pod > 1 && op == CollOp::AllReduce;
  const int level1_ranks = three ? h.servers_per_pod : h.servers();
  // What one rank moves at level 1: an 1/per_server share for the ops whose
  // level 0 splits the data over the server (Broadcast and Reduce too, by
  // plane, with a mesh level 0), everything for the others.
  const bool rooted = op == CollOp::Broadcast || op == CollOp::Reduce;
  const bool split = op == CollOp::AllReduce || op == CollOp::ReduceScatter || op == CollOp::AllGather ||
                     (rooted && plan.level0 == Level0Algo::Mesh);
  const double level1_bytes = split ? n / h.per_server : n;
  // A requested algorithm that lacks the op is replaced as HCCL's support
  // table says; where it names no replacement HCCL picks on its own.
  auto honour = [&](std::optional<Level1Algo> asked, Level1Algo chosen) {
    if (!asked) return chosen;
    const std::vector<Level1Algo> instead = level1_fallbacks(op, *asked);
    if (!instead.empty()) return instead.front();
    return level1_supports(op, 2, *asked) ? *asked : chosen;
  };
  plan.level1 = honour(request.level1, pick(op, level1_ranks, level1_bytes, beta));
  plan.level2 = honour(request.level2, pick(op, h.pods, level1_bytes / std::max(1, h.servers_per_pod), beta));
  if (op == CollOp::Broadcast) {
    plan.one_shot = broadcast_one_shot(plan.level1, static_cast<std::uint64_t>(level1_bytes), level1_ranks, link_bandwidth);
  }
  if (request.pipeline) {
    if (!pipeline_supported(op, h, plan.level0)) {
      throw std::invalid_argument(
          "level1:pipeline is modelled for AllReduce, ReduceScatter and AllGather on A2 clusters (servers of at "
          "most 8 NPUs, one level of servers, level0 fullmesh) only");
    }
    plan.pipeline = true;
  } else if (!request.level1 && pipeline_supported(op, h, plan.level0)) {
    // HCCL's rule (docs/sources.md §3): pipeline from 32 KiB for ReduceScatter and
    // AllGather, and for AllReduce once each NPU's level-1 share is 1 MiB.
    plan.pipeline = op == CollOp::AllReduce ? level1_bytes >= 1024.0 * 1024.0 : n >= 32.0 * 1024.0;
  }
  return plan;
}

}  // namespace hcclsim

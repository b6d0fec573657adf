// Level-0 Mesh as HCCL's mesh-atomic templates run it (AllReduceMeshExecutor,
// the level-0 stages across A2 servers, graph mode): every rank has a main
// stream and one stream ("Plane") per peer, so all HCCS links work at once.
// Per loop over the HCCL buffer: copy in on the main stream, fork the planes,
// pairwise phases (notify pre-sync when the pair has not yet synchronised in
// this loop, then the receiver READS the peer's data — with inline reduce in
// a reduce-scatter (ReduceScatterMeshAtomic, AllGatherMeshAtomic: hcomm
// base/alg_template/temp_reduce_scatter/reduce_scatter_mesh_atomic.cc) —
// post-sync), join, copy out.
#include <functional>
#include <optional>

#include "sim/executors/plan.h"

namespace hcclsim {

namespace {

struct Move {
  BufferRef src;
  BufferRef dst;
  std::uint64_t elems;
  bool reduce;
};

class MeshBuilder : public PlanBuilder {
 public:
  explicit MeshBuilder(const CollectiveSpec& spec) : PlanBuilder(spec) {
    for (int r = 0; r < p_; ++r) {
      main_.push_back(graph_.add_thread(r, "Main"));
      plane_.emplace_back(static_cast<std::size_t>(p_), ThreadId{0});
      int index = 0;
      for (int j = 0; j < p_; ++j) {
        if (j != r) plane_[r][j] = graph_.add_thread(r, "Plane" + std::to_string(index++));
      }
    }
  }

  TaskGraph build() {
    switch (spec_.op) {
      case CollOp::AllReduce: all_reduce(); break;
      case CollOp::ReduceScatter: reduce_scatter(); break;
      case CollOp::AllGather: all_gather(); break;
      case CollOp::AlltoAll: all_to_all(); break;
      case CollOp::Broadcast: broadcast(); break;
      case CollOp::Reduce: reduce(); break;
    }
    return std::move(graph_);
  }

 private:
  // Notify indices on every rank.
  int ready(int peer) const { return peer; }
  int done(int peer) const { return p_ + peer; }
  int start(int peer) const { return 2 * p_ + peer; }
  int finish(int peer) const { return 3 * p_ + peer; }

  void begin_loop() { synced_.assign(static_cast<std::size_t>(p_ * p_), false); }
  void fork() {
    for (int r = 0; r < p_; ++r) {
      for (int j = 0; j < p_; ++j) {
        if (j == r) continue;
        graph_.record(main_[r], r, start(j), "fork");
        graph_.wait(plane_[r][j], start(j), "fork");
      }
    }
  }
  void join() {
    for (int r = 0; r < p_; ++r) {
      for (int j = 0; j < p_; ++j) {
        if (j != r) graph_.record(plane_[r][j], r, finish(j), "join");
      }
      for (int j = 0; j < p_; ++j) {
        if (j != r) graph_.wait(main_[r], finish(j), "join");
      }
    }
  }
  // One pairwise phase: `move_of(r, j)` is what r sends to j, if anything;
  // j reads it on its stream towards r. Pairs with nothing to move in either
  // direction do not synchronise.
  void phase(const std::string& name, const std::function<std::optional<Move>(int, int)>& move_of) {
    for (int r = 0; r < p_; ++r) {
      for (int j = 0; j < p_; ++j) {
        if (j == r) continue;
        const std::optional<Move> mine = move_of(j, r);  // what r reads from j
        if (!mine && !move_of(r, j)) continue;
        const ThreadId t = plane_[r][j];
        if (!synced_[static_cast<std::size_t>(r * p_ + j)]) {
          graph_.record(t, j, ready(r), name + " pre-sync");
          graph_.wait(t, ready(j), name + " pre-sync");
          synced_[static_cast<std::size_t>(r * p_ + j)] = true;
        }
        if (mine) move(t, mine->src, mine->dst, mine->elems, mine->reduce, name);
        graph_.record(t, j, done(r), name + " post-sync");
        graph_.wait(t, done(j), name + " post-sync");
      }
    }
  }

  // Reduce-scatter of `n` elements held in every rank's CCL_IN at element
  // `base`: rank j ends with chunk j (of size `chunk_of(j)`) fully reduced.
  void reduce_scatter_phase(const std::function<Span(int)>& chunk_of) {
    phase("ReduceScatter", [&](int r, int j) -> std::optional<Move> {
      const Span c = chunk_of(j);
      return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, true};
    });
  }

  void all_reduce() {
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      begin_loop();
      for (int r = 0; r < p_; ++r) move(main_[r], input(r, loop.first), ccl_in(r, 0), loop.count, false, "copy in");
      fork();
      reduce_scatter_phase([&](int j) { return chunk(loop.count, j); });
      join();
      fork();
      phase("AllGather", [&](int r, int j) -> std::optional<Move> {
        const Span c = chunk(loop.count, r);
        return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
      });
      join();
      for (int r = 0; r < p_; ++r) move(main_[r], ccl_in(r, 0), output(r, loop.first), loop.count, false, "copy out");
    }
  }

  void reduce_scatter() {
    if (spec_.chunked) return reduce_scatter_chunked();
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t segs = static_cast<std::uint64_t>(spec_.segments);
    const std::uint64_t p = static_cast<std::uint64_t>(p_);
    const std::uint64_t stride = spec_.block_stride != 0 ? spec_.block_stride : per_rank;
    for (const Span& loop : loops(per_rank, buffer_elements() / (p * segs))) {
      begin_loop();
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) {
        for (std::uint64_t j = 0; j < p; ++j) {
          for (std::uint64_t t = 0; t < segs; ++t) {
            move(main_[r], input(r, (t * p + j) * stride + loop.first), ccl_in(r, (j * segs + t) * n), n, false,
                 "copy in");
          }
        }
      }
      fork();
      reduce_scatter_phase([&](int j) { return Span{static_cast<std::uint64_t>(j) * segs * n, segs * n}; });
      join();
      for (int r = 0; r < p_; ++r) {
        for (std::uint64_t t = 0; t < segs; ++t) {
          move(main_[r], ccl_in(r, (static_cast<std::uint64_t>(r) * segs + t) * n), output(r, t * per_rank + loop.first),
               n, false, "copy out");
        }
      }
    }
  }

  void reduce_scatter_chunked() {
    begin_loop();
    const std::uint64_t n = spec_.count;
    for (int r = 0; r < p_; ++r) move(main_[r], input(r, 0), ccl_in(r, 0), n, false, "copy in");
    fork();
    reduce_scatter_phase([&](int j) { return chunk(n, j); });
    join();
    for (int r = 0; r < p_; ++r) {
      const Span c = chunk(n, r);
      move(main_[r], ccl_in(r, c.first), output(r, c.first), c.count, false, "copy out");
    }
  }

  void all_gather() {
    if (spec_.chunked) return all_gather_chunked();
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t segs = static_cast<std::uint64_t>(spec_.segments);
    const std::uint64_t p = static_cast<std::uint64_t>(p_);
    const std::uint64_t stride = spec_.block_stride != 0 ? spec_.block_stride : per_rank;
    for (const Span& loop : loops(per_rank, buffer_elements() / (p * segs))) {
      begin_loop();
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) {
        for (std::uint64_t t = 0; t < segs; ++t) {
          move(main_[r], input(r, t * per_rank + loop.first), ccl_in(r, (static_cast<std::uint64_t>(r) * segs + t) * n),
               n, false, "copy in");
        }
      }
      fork();
      phase("AllGather", [&](int r, int j) -> std::optional<Move> {
        const std::uint64_t at = static_cast<std::uint64_t>(r) * segs * n;
        return Move{ccl_in(r, at), ccl_in(j, at), segs * n, false};
      });
      join();
      for (int r = 0; r < p_; ++r) {
        for (std::uint64_t j = 0; j < p; ++j) {
          for (std::uint64_t t = 0; t < segs; ++t) {
            move(main_[r], ccl_in(r, (j * segs + t) * n), output(r, (t * p + j) * stride + loop.first), n, false,
                 "copy out");
          }
        }
      }
    }
  }

  void all_gather_chunked() {
    begin_loop();
    const std::uint64_t n = spec_.count;
    for (int r = 0; r < p_; ++r) {
      const Span c = chunk(n, r);
      move(main_[r], input(r, c.first), ccl_in(r, c.first), c.count, false, "copy in");
    }
    fork();
    phase("AllGather", [&](int r, int j) -> std::optional<Move> {
      const Span c = chunk(n, r);
      return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
    });
    join();
    for (int r = 0; r < p_; ++r) move(main_[r], ccl_in(r, 0), output(r, 0), n, false, "copy out");
  }

  // AlltoAll and AlltoAllV: per loop every pair moves up to `n` elements
  // through CCL_IN (sender) and CCL_OUT (receiver).
  void all_to_all() {
    std::uint64_t largest = 0;
    std::vector<std::vector<std::uint64_t>> send_displ(static_cast<std::size_t>(p_)), recv_displ(send_displ);
    for (int r = 0; r < p_; ++r) {
      std::uint64_t s = 0;
      std::uint64_t d = 0;
      for (int j = 0; j < p_; ++j) {
        send_displ[r].push_back(s);
        recv_displ[r].push_back(d);
        s += spec_.pair_count(r, j);
        d += spec_.pair_count(j, r);
        largest = std::max(largest, spec_.pair_count(r, j));
      }
    }
    // Elements of the pair (r, j) that fall in this loop.
    auto part = [&](const Span& loop, int r, int j) {
      const std::uint64_t total = spec_.pair_count(r, j);
      return total <= loop.first ? 0 : std::min(loop.count, total - loop.first);
    };
    for (const Span& loop : loops(largest, buffer_elements() / static_cast<std::uint64_t>(p_))) {
      begin_loop();
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) {
        move(main_[r], input(r, send_displ[r][r] + loop.first), output(r, recv_displ[r][r] + loop.first),
             part(loop, r, r), false, "local block");
        for (int j = 0; j < p_; ++j) {
          if (j == r) continue;
          move(main_[r], input(r, send_displ[r][j] + loop.first), ccl_in(r, static_cast<std::uint64_t>(j) * n),
               part(loop, r, j), false, "copy in");
        }
      }
      fork();
      phase("AlltoAll", [&](int r, int j) -> std::optional<Move> {
        return Move{ccl_in(r, static_cast<std::uint64_t>(j) * n), ccl_out(j, static_cast<std::uint64_t>(r) * n),
                    part(loop, r, j), false};
      });
      join();
      for (int r = 0; r < p_; ++r) {
        for (int j = 0; j < p_; ++j) {
          if (j == r) continue;
          move(main_[r], ccl_out(r, static_cast<std::uint64_t>(j) * n), output(r, recv_displ[r][j] + loop.first),
               part(loop, j, r), false, "copy out");
        }
      }
    }
  }

  // Scatter from the root, then every rank passes its chunk to the others.
  void broadcast() {
    if (spec_.chunked) return scatter_chunked();
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      begin_loop();
      move(main_[root], input(root, loop.first), ccl_in(root, 0), loop.count, false, "copy in");
      fork();
      phase("Scatter", [&](int r, int j) -> std::optional<Move> {
        if (r != root) return std::nullopt;
        const Span c = chunk(loop.count, j);
        return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
      });
      join();
      fork();
      phase("AllGather", [&](int r, int j) -> std::optional<Move> {
        if (j == root) return std::nullopt;
        const Span c = chunk(loop.count, r);
        return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
      });
      join();
      for (int r = 0; r < p_; ++r) move(main_[r], ccl_in(r, 0), output(r, loop.first), loop.count, false, "copy out");
    }
  }

  // The scatter of a Broadcast alone (ScatterMesh, the first stage of
  // BroadCastMeshExecutor across servers): the root copies its input in,
  // every other rank reads its chunk; each rank's chunk then lands in place
  // in its output.
  void scatter_chunked() {
    const int root = spec_.root;
    const std::uint64_t n = spec_.count;
    begin_loop();
    move(main_[root], input(root, 0), ccl_in(root, 0), n, false, "copy in");
    fork();
    phase("Scatter", [&](int r, int j) -> std::optional<Move> {
      if (r != root) return std::nullopt;
      const Span c = chunk(n, j);
      return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
    });
    join();
    for (int r = 0; r < p_; ++r) {
      const Span c = chunk(n, r);
      move(main_[r], ccl_in(r, c.first), output(r, c.first), c.count, false, "copy out");
    }
  }

  // The gather of a Reduce alone (GatherMesh, the last stage of
  // ReduceMeshExecutor across servers): rank r's chunk r, in place in its
  // input, goes to the root, which copies the whole out.
  void gather_chunked() {
    const int root = spec_.root;
    const std::uint64_t n = spec_.count;
    begin_loop();
    for (int r = 0; r < p_; ++r) {
      const Span c = chunk(n, r);
      move(main_[r], input(r, c.first), ccl_in(r, c.first), c.count, false, "copy in");
    }
    fork();
    phase("Gather", [&](int r, int j) -> std::optional<Move> {
      if (j != root) return std::nullopt;
      const Span c = chunk(n, r);
      return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
    });
    join();
    move(main_[root], ccl_in(root, 0), output(root, 0), n, false, "copy out");
  }

  // Reduce-scatter, then every rank sends its reduced chunk to the root.
  void reduce() {
    if (spec_.chunked) return gather_chunked();
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      begin_loop();
      for (int r = 0; r < p_; ++r) move(main_[r], input(r, loop.first), ccl_in(r, 0), loop.count, false, "copy in");
      fork();
      reduce_scatter_phase([&](int j) { return chunk(loop.count, j); });
      join();
      fork();
      phase("Gather", [&](int r, int j) -> std::optional<Move> {
        if (j != root) return std::nullopt;
        const Span c = chunk(loop.count, r);
        return Move{ccl_in(r, c.first), ccl_in(j, c.first), c.count, false};
      });
      join();
      move(main_[root], ccl_in(root, 0), output(root, loop.first), loop.count, false, "copy out");
    }
  }

  std::vector<ThreadId> main_;
  std::vector<std::vector<ThreadId>> plane_;  // plane_[r][j]: r's stream towards j
  std::vector<bool> synced_;
};

}  // namespace

TaskGraph build_mesh(const CollectiveSpec& spec) { return MeshBuilder(spec).build(); }

}  // namespace hcclsim

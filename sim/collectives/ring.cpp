// Level-0 Ring: one stream per rank, data moves only to the next rank.
// Reduce-scatter and all-gather take p-1 steps each; every step waits for the
// previous step's data from the previous rank (a notify per step, so a fast
// neighbour can never overwrite a record not yet consumed). Broadcast is a
// pipelined chain of p chunks; Reduce is a reduce-scatter and a gather to the
// root. AlltoAll has no ring form in HCCL and is refused.
#include <stdexcept>

#include "sim/collectives/plan.h"

namespace hcclsim {

namespace {

class RingBuilder : public PlanBuilder {
 public:
  explicit RingBuilder(const CollectiveSpec& spec) : PlanBuilder(spec) {
    for (int r = 0; r < p_; ++r) stream_.push_back(graph_.add_thread(r, "Plane0"));
  }

  TaskGraph build() {
    switch (spec_.op) {
      case CollOp::AllReduce: all_reduce(); break;
      case CollOp::ReduceScatter: reduce_scatter(); break;
      case CollOp::AllGather: all_gather(); break;
      case CollOp::Broadcast: broadcast(); break;
      case CollOp::Reduce: reduce(); break;
      case CollOp::AlltoAll:
        throw std::invalid_argument(
            "alltoall has no ring algorithm in HCCL (it uses pairwise/mesh exchanges); use level0:mesh");
    }
    return std::move(graph_);
  }

 private:
  int next(int r) const { return (r + 1) % p_; }
  int prev(int r) const { return (r + p_ - 1) % p_; }
  static int mod(int a, int p) { return ((a % p) + p) % p; }
  // Notify indices on every rank.
  static constexpr int kReady = 0;         // the next rank can take data
  static constexpr int kGatherReady = 1;   // the root can take a gathered chunk
  int step_done(int phase, int step) const { return 2 + phase * p_ + step; }
  int gathered(int from) const { return 2 + 2 * p_ + from; }

  // Every rank tells its previous rank it may write, and waits for the next.
  void pre_sync() {
    for (int r = 0; r < p_; ++r) {
      graph_.record(stream_[r], prev(r), kReady, "pre-sync");
      graph_.wait(stream_[r], kReady, "pre-sync");
    }
  }
  // p-1 steps; at step s rank r sends chunk chunk_at(r, s) to the next rank.
  template <typename ChunkAt>
  void ring_phase(int phase, const std::string& name, bool reduce, ChunkAt chunk_at) {
    for (int r = 0; r < p_; ++r) {
      for (int s = 0; s < p_ - 1; ++s) {
        if (s > 0) graph_.wait(stream_[r], step_done(phase, s - 1), name);
        const Span c = chunk_at(r, s);
        move(stream_[r], ccl_in(r, c.first), ccl_in(next(r), c.first), c.count, reduce,
             name + " step " + std::to_string(s));
        graph_.record(stream_[r], next(r), step_done(phase, s), name);
      }
      graph_.wait(stream_[r], step_done(phase, p_ - 2), name);
    }
  }
  // Shifted so that rank q ends owning chunk q.
  template <typename ChunkOf>
  void reduce_scatter_phase(ChunkOf chunk_of) {
    ring_phase(0, "ReduceScatter", true, [&](int r, int s) { return chunk_of(mod(r - s - 1, p_)); });
  }
  template <typename ChunkOf>
  void all_gather_phase(ChunkOf chunk_of) {
    ring_phase(1, "AllGather", false, [&](int r, int s) { return chunk_of(mod(r - s, p_)); });
  }

  void all_reduce() {
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      for (int r = 0; r < p_; ++r) move(stream_[r], input(r, loop.first), ccl_in(r, 0), loop.count, false, "copy in");
      pre_sync();
      reduce_scatter_phase([&](int c) { return chunk(loop.count, c); });
      all_gather_phase([&](int c) { return chunk(loop.count, c); });
      for (int r = 0; r < p_; ++r) move(stream_[r], ccl_in(r, 0), output(r, loop.first), loop.count, false, "copy out");
    }
  }

  void reduce_scatter() {
    const std::uint64_t per_rank = spec_.count;
    for (const Span& loop : loops(per_rank, buffer_elements() / static_cast<std::uint64_t>(p_))) {
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) {
        for (int j = 0; j < p_; ++j) {
          move(stream_[r], input(r, static_cast<std::uint64_t>(j) * per_rank + loop.first),
               ccl_in(r, static_cast<std::uint64_t>(j) * n), n, false, "copy in");
        }
      }
      pre_sync();
      reduce_scatter_phase([&](int c) { return Span{static_cast<std::uint64_t>(c) * n, n}; });
      for (int r = 0; r < p_; ++r) {
        move(stream_[r], ccl_in(r, static_cast<std::uint64_t>(r) * n), output(r, loop.first), n, false, "copy out");
      }
    }
  }

  void all_gather() {
    const std::uint64_t per_rank = spec_.count;
    for (const Span& loop : loops(per_rank, buffer_elements() / static_cast<std::uint64_t>(p_))) {
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) {
        move(stream_[r], input(r, loop.first), ccl_in(r, static_cast<std::uint64_t>(r) * n), n, false, "copy in");
      }
      pre_sync();
      all_gather_phase([&](int c) { return Span{static_cast<std::uint64_t>(c) * n, n}; });
      for (int r = 0; r < p_; ++r) {
        for (int j = 0; j < p_; ++j) {
          move(stream_[r], ccl_in(r, static_cast<std::uint64_t>(j) * n),
               output(r, static_cast<std::uint64_t>(j) * per_rank + loop.first), n, false, "copy out");
        }
      }
    }
  }

  // A chain from the root round the ring, pipelined over p chunks.
  void broadcast() {
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      move(stream_[root], input(root, loop.first), ccl_in(root, 0), loop.count, false, "copy in");
      for (int r = 0; r < p_; ++r) {
        if (r != root) graph_.record(stream_[r], prev(r), kReady, "pre-sync");
        if (next(r) != root) graph_.wait(stream_[r], kReady, "pre-sync");
      }
      for (int r = 0; r < p_; ++r) {
        for (int k = 0; k < p_; ++k) {
          if (r != root) graph_.wait(stream_[r], step_done(0, k), "Broadcast");
          if (next(r) == root) continue;
          const Span c = chunk(loop.count, k);
          move(stream_[r], ccl_in(r, c.first), ccl_in(next(r), c.first), c.count, false,
               "Broadcast chunk " + std::to_string(k));
          graph_.record(stream_[r], next(r), step_done(0, k), "Broadcast");
        }
      }
      for (int r = 0; r < p_; ++r) move(stream_[r], ccl_in(r, 0), output(r, loop.first), loop.count, false, "copy out");
    }
  }

  void reduce() {
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      for (int r = 0; r < p_; ++r) move(stream_[r], input(r, loop.first), ccl_in(r, 0), loop.count, false, "copy in");
      pre_sync();
      reduce_scatter_phase([&](int c) { return chunk(loop.count, c); });
      // Gather: the root, done with its reduce-scatter, invites each rank.
      for (int r = 0; r < p_; ++r) {
        if (r != root) graph_.record(stream_[root], r, kGatherReady, "Gather pre-sync");
      }
      for (int r = 0; r < p_; ++r) {
        if (r == root) continue;
        graph_.wait(stream_[r], kGatherReady, "Gather pre-sync");
        const Span c = chunk(loop.count, r);
        move(stream_[r], ccl_in(r, c.first), ccl_in(root, c.first), c.count, false, "Gather");
        graph_.record(stream_[r], root, gathered(r), "Gather");
      }
      for (int r = 0; r < p_; ++r) {
        if (r != root) graph_.wait(stream_[root], gathered(r), "Gather");
      }
      move(stream_[root], ccl_in(root, 0), output(root, loop.first), loop.count, false, "copy out");
    }
  }

  std::vector<ThreadId> stream_;
};

}  // namespace

TaskGraph build_ring(const CollectiveSpec& spec) { return RingBuilder(spec).build(); }

TaskGraph build_collective(const CollectiveSpec& spec, Level0Algo algo) {
  if (spec.ranks < 2) throw std::invalid_argument("a collective needs at least 2 ranks");
  if (spec.root < 0 || spec.root >= spec.ranks) throw std::invalid_argument("root outside the ranks");
  if (spec.buffer_bytes < data_type_size(spec.dtype) * static_cast<std::uint64_t>(spec.ranks)) {
    throw std::invalid_argument("the HCCL buffer must hold at least one element per rank");
  }
  // The stage forms of hierarchical collectives exist for the mesh only; the
  // ring would ignore them and move the wrong data.
  if (algo == Level0Algo::Ring && (spec.chunked || spec.segments > 1)) {
    throw std::invalid_argument("level0:ring runs inside one server only: it has no form for the " +
                                coll_op_name(spec.op) +
                                " stage of a collective across servers; use level0:NA or level0:fullmesh");
  }
  return algo == Level0Algo::Mesh ? build_mesh(spec) : build_ring(spec);
}

}  // namespace hcclsim

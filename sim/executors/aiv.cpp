// HCCL's AIV-mode executors (HCCL_OP_EXPANSION_MODE=AIV): the collective is
// one kernel on the AI Vector cores, whose cores move data with their own
// loads and stores (local memory or a peer's over the links) and
// synchronise through flags in memory (hcomm/cann-hccl impl/hccl_aiv.cc,
// base/alg_aiv_template/aiv_*_910b_*.h). Each core is a thread "AIV<i>" of
// its rank; a copy takes one AIV core at its copy rate; a reduction is an
// atomic store into the destination (the same cost as a copy).
//
// Modelled kernels (one server; both products run the same kernels):
//   AllReduce small (<= 64 KiB, r cores): one shot, every core pulls one
//     peer's whole input and atomically adds it into the output.
//   AllReduce mid (< 16 MiB, r cores): two shot, copy-in by slices, each core
//     pull-reduces one peer's copy of this rank's slice, then pulls one
//     peer's reduced slice into the output.
//   AllReduce big (>= 16 MiB, 2r cores, staged in the HCCL buffer, looped):
//     copy-in cores publish progress every 760 KiB; pull-reduce cores chase
//     it; then the reduced slices are pulled into the output.
//   AllGather (r cores; r+1 above 700 KiB): copy-in with progress, peers pull.
//   ReduceScatter (r cores): stage the peers' blocks, peers pull-reduce
//     their block into their output (tiles of 760 KiB above 190 KiB).
//   AlltoAll small (< 512 KiB per peer, r cores): stage, handshake, pull.
// Left out: the graph-mode kernels (they read the user input in place), the
// AIV+RDMA kernels across A2 servers and the A3 cross-server ones (selection
// refuses them), the barrier/flag-clearing kernel every 1000 launches.
#include <algorithm>

#include "sim/executors/exec_builder.h"
#include "sim/executors/aiv.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {


class AivExec : public PlanBuilder {
 public:
  AivExec(const CollectiveSpec& spec, int cores) : PlanBuilder(spec), cores_(cores) {
    for (int r = 0; r < p_; ++r) {
      core_.emplace_back();
      for (int i = 0; i < cores; ++i) core_.back().push_back(graph_.add_thread(r, "AIV" + std::to_string(i)));
    }
  }
  TaskGraph take() { return std::move(graph_); }

  // AllReduce, one shot (aiv_all_reduce_910b_smalldata).
  void all_reduce_small() {
    const int ready = flags_.take(1);
    const int out_init = flags_.take(1);
    const std::uint64_t n = spec_.count;
    for (int r = 0; r < p_; ++r) {
      const ThreadId own = core(r, r);
      copy(own, input(r, 0), ccl_in(r, 0), n, false, "stage");
      graph_.flag_set(own, r, ready, "ready");
      copy(own, input(r, 0), output(r, 0), n, false, "output init");
      graph_.flag_set(own, r, out_init, "output ready");
      for (int i = 0; i < p_; ++i) {
        if (i == r) continue;
        graph_.flag_wait(core(r, i), i, ready, 1, "peer ready");
        graph_.flag_wait(core(r, i), r, out_init, 1, "output ready");
        copy(core(r, i), ccl_in(i, 0), output(r, 0), n, true, "pull-reduce");
      }
    }
  }

  // AllReduce, two shot (aiv_all_reduce_910b_middata), and the big kernel's
  // pipelined form (aiv_all_reduce_910b_bigdata: 2r cores, tiles chased by
  // progress flags, loops over the HCCL buffer).
  void all_reduce_two_shot(bool big) {
    const std::uint64_t per_loop = big ? buffer_elements() : spec_.count;
    const std::uint64_t tile = std::max<std::uint64_t>(1, kAivTileBytes / esz_);
    for (const Span& loop : loops(spec_.count, per_loop)) {
      const int copied = flags_.take(p_);   // copied + j: slice j's tiles in this rank's buffer
      const int reduced = flags_.take(1);   // peers done adding into this rank's slice
      const std::uint64_t n = loop.count;
      auto sl = [&](int j) { return chunk(n, j); };
      for (int r = 0; r < p_; ++r) {
        // Copy-in: core j stages slice j (group 0 in the big kernel).
        for (int j = 0; j < p_; ++j) {
          const Span s = sl(j);
          for (const Span& t : loops(s.count, big ? tile : s.count)) {
            copy(core(r, j), input(r, loop.first + s.first + t.first), ccl_in(r, s.first + t.first), t.count, false, "stage");
            graph_.flag_set(core(r, j), r, copied + j, "progress");
          }
        }
        // Reduce-scatter: core for peer i adds i's copy of slice r into r's.
        const Span mine = sl(r);
        const std::vector<Span> tiles = loops(mine.count, big ? tile : mine.count);
        for (int i = 0; i < p_; ++i) {
          if (i == r) continue;
          const ThreadId c = core(r, big ? p_ + i : i);
          for (std::size_t t = 0; t < tiles.size(); ++t) {
            const auto need = static_cast<std::uint32_t>(t + 1);
            graph_.flag_wait(c, r, copied + r, need, "own tile staged");
            graph_.flag_wait(c, i, copied + r, need, "peer tile staged");
            copy(c, ccl_in(i, mine.first + tiles[t].first), ccl_in(r, mine.first + tiles[t].first), tiles[t].count, true,
                 "pull-reduce");
          }
          graph_.flag_set(c, r, reduced, "reduced");
        }
        // All-gather: core for peer i pulls i's reduced slice into the output.
        for (int i = 0; i < p_; ++i) {
          const ThreadId c = core(r, i);
          const Span s = sl(i);
          graph_.flag_wait(c, i, reduced, static_cast<std::uint32_t>(p_ - 1), "slice reduced");
          copy(c, ccl_in(i, s.first), output(r, loop.first + s.first), s.count, false, i == r ? "copy out" : "pull");
        }
      }
      if (big) barrier();
    }
  }

  // AllGather (aiv_all_gather_910b_smalldata / bigdata): the rank's own core
  // stages its input (with progress above 700 KiB), the core for peer i
  // pulls i's data into output slot i; an extra core copies the own slot.
  void all_gather(bool big) {
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t tile = std::max<std::uint64_t>(1, kAivTileBytes / esz_);
    const std::uint64_t per_loop = big ? std::max<std::uint64_t>(1, kAivBufferBytes / esz_) : per_rank;
    for (const Span& loop : loops(per_rank, per_loop)) {
      const int staged = flags_.take(1);
      const int pulled = flags_.take(1);
      const std::vector<Span> tiles = loops(loop.count, big ? tile : loop.count);
      for (int r = 0; r < p_; ++r) {
        const ThreadId own = core(r, r);
        for (const Span& t : tiles) {
          copy(own, input(r, loop.first + t.first), ccl_in(r, t.first), t.count, false, "stage");
          graph_.flag_set(own, r, staged, "progress");
        }
        copy(big ? core(r, p_) : own, input(r, loop.first), output(r, static_cast<std::uint64_t>(r) * per_rank + loop.first),
             loop.count, false, "own slot");
        for (int i = 0; i < p_; ++i) {
          if (i == r) continue;
          for (std::size_t t = 0; t < tiles.size(); ++t) {
            graph_.flag_wait(core(r, i), i, staged, static_cast<std::uint32_t>(t + 1), "peer progress");
            copy(core(r, i), ccl_in(i, tiles[t].first),
                 output(r, static_cast<std::uint64_t>(i) * per_rank + loop.first + tiles[t].first), tiles[t].count, false,
                 "pull");
          }
          graph_.flag_set(core(r, i), i, pulled, "pulled");
        }
        // The buffer is reused by the next loop only once every peer pulled.
        graph_.flag_wait(own, r, pulled, static_cast<std::uint32_t>(p_ - 1), "all pulled");
      }
    }
  }

  // ReduceScatter (aiv_reduce_scatter_910b_smalldata / middata / bigdata):
  // the core for peer i stages this rank's block for i and pull-reduces i's
  // copy of this rank's block into the output; the own core initialises
  // the output with the rank's own block.
  void reduce_scatter(bool tiled) {
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t tile = std::max<std::uint64_t>(1, kAivTileBytes / esz_);
    const std::uint64_t per_loop = std::max<std::uint64_t>(1, buffer_elements() / static_cast<std::uint64_t>(p_));
    const int loop_done = flags_.take(1);   // the rank's staged blocks of the loop were all pulled
    std::uint32_t loop_index = 0;
    for (const Span& loop : loops(per_rank, per_loop)) {
      const int staged = flags_.take(p_);   // staged + j: the block for rank j
      const int out_init = flags_.take(1);
      const int pulled = flags_.take(1);
      const std::vector<Span> tiles = loops(loop.count, tiled ? tile : loop.count);
      auto slot = [&](int j) { return static_cast<std::uint64_t>(j) * loop.count; };
      for (int r = 0; r < p_; ++r) {
        for (const Span& t : tiles) {
          copy(core(r, r), input(r, static_cast<std::uint64_t>(r) * per_rank + loop.first + t.first), output(r, loop.first + t.first),
               t.count, false, "output init");
          graph_.flag_set(core(r, r), r, out_init, "progress");
        }
        for (int i = 0; i < p_; ++i) {
          if (i == r) continue;
          const ThreadId c = core(r, i);
          if (loop_index > 0) graph_.flag_wait(c, r, loop_done, loop_index, "buffer free");
          for (const Span& t : tiles) {
            copy(c, input(r, static_cast<std::uint64_t>(i) * per_rank + loop.first + t.first), ccl_in(r, slot(i) + t.first),
                 t.count, false, "stage");
            graph_.flag_set(c, r, staged + i, "progress");
          }
          for (std::size_t t = 0; t < tiles.size(); ++t) {
            const auto need = static_cast<std::uint32_t>(t + 1);
            graph_.flag_wait(c, i, staged + r, need, "peer progress");
            graph_.flag_wait(c, r, out_init, need, "output ready");
            copy(c, ccl_in(i, slot(r) + tiles[t].first), output(r, loop.first + tiles[t].first), tiles[t].count, true,
                 "pull-reduce");
          }
          graph_.flag_set(c, i, pulled, "pulled");
        }
        graph_.flag_wait(core(r, r), r, pulled, static_cast<std::uint32_t>(p_ - 1), "all pulled");
        graph_.flag_set(core(r, r), r, loop_done, "buffer free");
      }
      ++loop_index;
    }
  }

  // AlltoAll (aiv_all_to_all_910b_smalldata): stage the block for peer i,
  // handshake, pull i's block for this rank, final acknowledgement.
  void alltoall_small() {
    const int ready = flags_.take(p_);
    const int done = flags_.take(p_);
    const std::uint64_t n = spec_.count;
    for (int r = 0; r < p_; ++r) {
      const auto ur = static_cast<std::uint64_t>(r);
      copy(core(r, r), input(r, ur * n), output(r, ur * n), n, false, "own block");
      for (int i = 0; i < p_; ++i) {
        if (i == r) continue;
        const auto ui = static_cast<std::uint64_t>(i);
        const ThreadId c = core(r, i);
        copy(c, input(r, ui * n), ccl_in(r, ui * n), n, false, "stage");
        graph_.flag_set(c, i, ready + r, "ready");
        graph_.flag_wait(c, r, ready + i, 1, "peer ready");
        copy(c, ccl_in(i, ur * n), output(r, ui * n), n, false, "pull");
        graph_.flag_set(c, i, done + r, "done");
        graph_.flag_wait(c, r, done + i, 1, "peer done");
      }
    }
  }

 private:
  ThreadId core(int r, int i) const { return core_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]; }
  void copy(ThreadId t, BufferRef src, BufferRef dst, std::uint64_t elems, bool reduce, std::string label) {
    if (elems == 0) return;
    graph_.aiv_move(t, src, dst, elems * esz_, reduce, std::move(label));
  }
  // All cores of a rank meet (an atomic counter) before the next loop.
  void barrier() {
    const int flag = flags_.take(1);
    for (int r = 0; r < p_; ++r) {
      for (int i = 0; i < cores_; ++i) graph_.flag_set(core(r, i), r, flag, "barrier");
      for (int i = 0; i < cores_; ++i) graph_.flag_wait(core(r, i), r, flag, static_cast<std::uint32_t>(cores_), "barrier");
    }
  }

  int cores_;
  std::vector<std::vector<ThreadId>> core_;
  NotifyAllocator flags_;
};

std::string aiv_refuses(const CollectiveSpec& s, const ExecContext& c, CollOp op, int cores) {
  if (s.op != op) return "runs " + coll_op_title(op) + " only";
  if (c.hierarchy.servers() != 1) return "runs inside one server (its kernels address the peers of one server)";
  if (cores > c.aiv_cores) return "needs " + std::to_string(cores) + " AIV cores per NPU, which has " + std::to_string(c.aiv_cores);
  if (op == CollOp::AlltoAll && !s.alltoallv_counts.empty()) return "runs AlltoAll with equal blocks only";
  return {};
}

Executor aiv_executor(const std::string& name, CollOp op, const std::string& templates, const std::string& summary,
                      std::function<int(const CollectiveSpec&)> cores,
                      std::function<void(AivExec&, const CollectiveSpec&)> run) {
  return Executor{
      name, "cann-hccl src/domain/collective_communication/algorithm/impl/hccl_aiv.cc, base/alg_aiv_template/" + templates,
      summary,
      [op, cores](const CollectiveSpec& s, const ExecContext& c) { return aiv_refuses(s, c, op, cores(s)); },
      [cores, run](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
        AivExec b(s, cores(s));
        run(b, s);
        return b.take();
      },
      {},
      true};
}

std::uint64_t bytes_of(const CollectiveSpec& s) { return s.count * data_type_size(s.dtype); }

}  // namespace

void register_aiv_executors(std::vector<Executor>& out) {
  out.push_back(aiv_executor(
      "AllReduceMeshAivSmallCountExecutor", CollOp::AllReduce, "aiv_all_reduce_910b_smalldata.h, aiv_all_reduce_910b_middata.h",
      "one AIV core per rank; <= 64 KiB one shot (pull-reduce whole inputs), else two shot (stage slices, "
      "pull-reduce own slice, pull reduced slices)",
      [](const CollectiveSpec& s) { return s.ranks; },
      [](AivExec& b, const CollectiveSpec& s) {
        if (bytes_of(s) <= kAivOneShotMax) {
          b.all_reduce_small();
        } else {
          b.all_reduce_two_shot(false);
        }
      }));
  out.push_back(aiv_executor(
      "AllReduceMeshAivExecutor", CollOp::AllReduce, "aiv_all_reduce_910b_bigdata.h",
      "two AIV cores per rank, staged in the HCCL buffer and looped over it: copy-in cores publish progress every "
      "760 KiB, pull-reduce cores chase it, then reduced slices are pulled; a barrier per loop",
      [](const CollectiveSpec& s) { return 2 * s.ranks; },
      [](AivExec& b, const CollectiveSpec&) { b.all_reduce_two_shot(true); }));
  out.push_back(aiv_executor(
      "AllGatherMeshAivSmallCountExecutor", CollOp::AllGather, "aiv_all_gather_910b_smalldata.h",
      "one AIV core per rank: stage, peers pull", [](const CollectiveSpec& s) { return s.ranks; },
      [](AivExec& b, const CollectiveSpec&) { b.all_gather(false); }));
  out.push_back(aiv_executor(
      "AllGatherMeshAivExecutor", CollOp::AllGather, "aiv_all_gather_910b_bigdata.h",
      "r+1 AIV cores: staging with progress every 760 KiB, peers pull behind it, looped over a 32 MiB AIV buffer",
      [](const CollectiveSpec& s) { return s.ranks + 1; }, [](AivExec& b, const CollectiveSpec&) { b.all_gather(true); }));
  out.push_back(aiv_executor(
      "ReduceScatterMeshAivSmallCountExecutor", CollOp::ReduceScatter,
      "aiv_reduce_scatter_910b_smalldata.h, aiv_reduce_scatter_910b_middata.h",
      "one AIV core per rank: stage peers' blocks, pull-reduce own block into the output (tiles of 760 KiB above 190 KiB)",
      [](const CollectiveSpec& s) { return s.ranks; },
      [](AivExec& b, const CollectiveSpec& s) { b.reduce_scatter(bytes_of(s) > kAivTiledAbove); }));
  out.push_back(aiv_executor(
      "ReduceScatterMeshAivExecutor", CollOp::ReduceScatter, "aiv_reduce_scatter_910b_bigdata.h",
      "tiled stage and pull-reduce, looped over the HCCL buffer (the big kernel's second core group is folded into "
      "one core per peer)",
      [](const CollectiveSpec& s) { return s.ranks; }, [](AivExec& b, const CollectiveSpec&) { b.reduce_scatter(true); }));
  out.push_back(aiv_executor(
      "AlltoAllMeshAivExecutor", CollOp::AlltoAll, "aiv_all_to_all_910b_smalldata.h",
      "one AIV core per rank: stage, handshake, pull, acknowledge", [](const CollectiveSpec& s) { return s.ranks; },
      [](AivExec& b, const CollectiveSpec&) { b.alltoall_small(); }));
}

}  // namespace hcclsim

// The single-server mesh executors HCCL runs on an Atlas A2 server (and the
// mesh forms both products share), as the CANN HCCL sources build them
// (hcomm src/legacy/ascend910/algorithm/: impl/coll_executor/ and
// base/alg_template/). Facts carried over, code not.
//
// Who moves the bytes: on HCCS both ends may start a transfer; HCCL's
// templates write with inline reduce where they reduce into a peer
// (HcclReduceAsync with a remote destination) and read where they gather
// (the receiver's SDMA engine pulls the peer's buffer). Reads and writes
// differ in cost (the profile's read_fixed and the links' write_bandwidth).
#include <algorithm>
#include <stdexcept>

#include "sim/executors/exec_builder.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

constexpr std::uint64_t kMeshSliceAlign = 16 * 1024;  // HCCL_MIN_SLICE_ALIGN_910B

class MeshExec : public ExecBuilder {
 public:
  MeshExec(const CollectiveSpec& spec, int slaves) : ExecBuilder(spec, slaves) {}
  TaskGraph take() { return std::move(graph_); }

  // Slave stream k of rank r serves peer (r + k + 1) mod p (forward) or
  // (r - k - 1) mod p (backward), as the templates pair them per round.
  int forward(int r, int k) const { return (r + k + 1) % p_; }
  int backward(int r, int k) const { return ((r - k - 1) % p_ + p_) % p_; }
  // Slices of a loop are 16 KiB-aligned, as long as one fits the buffer.
  std::uint64_t slice_align() const {
    return std::max<std::uint64_t>(1, std::min(kMeshSliceAlign / esz_, buffer_elements()));
  }
  // The most a rank's slice can hold: the buffer, in whole aligned units.
  std::uint64_t slice_capacity() const { return buffer_elements() / slice_align() * slice_align(); }
  Span slice(std::uint64_t n, int j) const { return aligned_slice(n, p_, j, slice_align()); }

  // AllReduceMeshOpbaseLoopExecutor: template AllReduceMeshDirect. No copy
  // into CCL_IN: each rank stages its own slice in CCL_OUT, peers
  // write-reduce their copies of it straight from their user input, then
  // every rank reads the reduced slices from the peers' CCL_OUT into its
  // output. A loop holds CCL/dtype x ranks elements (each rank keeps 1/p).
  void all_reduce_opbase_loop() {
    const Handshake rs = new_handshake();
    const Handshake ag = new_handshake();
    const int k_max = p_ - 1;
    for (const Span& loop : loops(spec_.count, slice_capacity() * static_cast<std::uint64_t>(p_))) {
      auto sl = [&](int j) { return slice(loop.count, j); };
      for (int r = 0; r < p_; ++r) {
        move(main(r), input(r, loop.first + sl(r).first), ccl_out(r, 0), sl(r).count, false, "ReduceScatter local");
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) ack_pair(slave(r, k), r, forward(r, k), rs, "ReduceScatter");
        join(r, k_max);
        placeholder_copy(r);
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) {
          const int peer = forward(r, k);
          move(slave(r, k), input(r, loop.first + sl(peer).first), ccl_out(peer, 0), sl(peer).count, true,
               "ReduceScatter");
          data_pair(slave(r, k), r, peer, rs, "ReduceScatter");
        }
        join(r, k_max);
      }
      for (int r = 0; r < p_; ++r) {
        move(main(r), ccl_out(r, 0), output(r, loop.first + sl(r).first), sl(r).count, false, "AllGather local");
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) ack_pair(slave(r, k), r, backward(r, k), ag, "AllGather");
        join(r, k_max);
        placeholder_copy(r);
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) {
          const int peer = backward(r, k);
          move(slave(r, k), ccl_out(peer, 0), output(r, loop.first + sl(peer).first), sl(peer).count, false,
               "AllGather");
          data_pair(slave(r, k), r, peer, ag, "AllGather");
        }
        join(r, k_max);
      }
    }
  }

  // The deterministic templates' streams: round t (1..p-1) of a rank runs
  // on plane t-1, the last round on Main; plane p-2 is the spare.
  ThreadId round_stream(int r, int round) const { return round == p_ - 1 ? main(r) : slave(r, round - 1); }
  // Their sync of Main and the p-1 planes between phases: 0-byte copy,
  // join, 0-byte copy, fork, 0-byte copy.
  void resync(int r) {
    placeholder_copy(r);
    join(r, p_ - 1);
    placeholder_copy(r);
    fork(r, p_ - 1);
    placeholder_copy(r);
  }

  // AllReduceMeshMidCountLoopExecutor (HCCL_DETERMINISTIC=true, op-base,
  // one server of 8; template AllReduceLocalReduce). Per loop, slot size S =
  // n/p rounded up to 16 KiB (512 B, then one element, when p - 1 such
  // slots would not fit n); rank j's slice is the j-th S. Each rank owns
  // p - 1 slots of S in its CCL_OUT (from slot 0, or slot 1 for the last
  // rank), its own slice staged in slot j. Reduce-scatter: in rounds 1..p-1
  // on its planes (round p-1 on Main) a rank writes its copy of peer
  // (r + round)'s slice into one of that peer's slots, with inline reduce
  // onto the staged slice in the last round, so the p contributions lie in
  // p - 1 slots; the owner folds them on chip in a fixed order (the slots
  // above the largest power of two first, then halving), which keeps the
  // sum's order the same on every run. All-gather: every rank reads the
  // peers' reduced slices from their CCL_OUT, its own copied out on the last
  // plane. Main and the planes synchronise (fork, join, 0-byte copies)
  // around every phase, as the template does.
  void all_reduce_local_reduce() {
    const Handshake rs = new_handshake();
    const Handshake ag = new_handshake();
    const int planes = p_ - 1;
    // (Each loop leaves room for the slots' alignment: HCCL's loop is the
    // buffer, whose last slot may reach past it by less than p x 16 KiB.)
    for (const Span& loop : loops(spec_.count, local_reduce_loop(buffer_elements(), p_, esz_))) {
      const std::uint64_t n = loop.count;
      const std::uint64_t slot = local_reduce_slot(n, p_, esz_);
      auto sl = [&](int j) {
        const std::uint64_t first = std::min(n, slot * static_cast<std::uint64_t>(j));
        return Span{first, std::min(slot, n - first)};
      };
      auto base = [&](int j) { return j == p_ - 1 ? slot : 0; };
      // Which of `dst`'s slots the writer of round `round` fills.
      auto slot_of = [&](int dst, int round) -> std::uint64_t {
        int k = (dst + round) % (p_ - 1);
        if (dst == p_ - 1) k = (k + p_ - 2) % (p_ - 1);
        if (round == p_ - 1) k = dst == p_ - 1 ? dst - 1 : dst;
        return base(dst) + static_cast<std::uint64_t>(k) * slot;
      };
      for (int r = 0; r < p_; ++r) {
        move(main(r), input(r, loop.first + sl(r).first), ccl_out(r, sl(r).first), sl(r).count, false, "ReduceScatter local");
        fork(r, planes);
        for (int round = 1; round < p_; ++round) ack_pair(round_stream(r, round), r, (r + round) % p_, rs, "ReduceScatter");
        resync(r);
        for (int round = 1; round < p_; ++round) {
          const int dst = (r + round) % p_;
          move(round_stream(r, round), input(r, loop.first + sl(dst).first), ccl_out(dst, slot_of(dst, round)), sl(dst).count,
               round == p_ - 1, "ReduceScatter");
          data_pair(round_stream(r, round), r, dst, rs, "ReduceScatter");
        }
        placeholder_copy(r);
        join(r, planes);
        placeholder_copy(r);
        fold_slots(r, base(r), slot, sl(r).count);
      }
      for (int r = 0; r < p_; ++r) deterministic_gather(r, loop.first, sl, ag, true);
    }
  }

  // AllReduceMeshOneshotLoopExecutor (HCCL_DETERMINISTIC=true, op-base, one
  // server not of 8; template AllReduceChunkMesh). Per loop of the buffer:
  // every rank copies its whole input into CCL_OUT; after a handshake with
  // every peer, in rounds 1..p-1 each rank reads, with inline reduce, the
  // p-1 parts of its own slice (slices and parts 128 B aligned) from p-1
  // different peers' CCL_OUT, part k of round t from the peer at distance
  // (k + t - 1) wrapped into 1..p-1, so every part sums its contributions
  // in a fixed order; Main and the planes synchronise between rounds, the
  // peers only before the first and after the last. Then the all-gather of
  // the mid-count loop: every rank reads the peers' reduced slices, its own
  // copied out on the spare plane.
  void all_reduce_chunk_mesh() {
    const Handshake rs = new_handshake();
    const Handshake ag = new_handshake();
    const int planes = p_ - 1;
    const std::uint64_t align = std::max<std::uint64_t>(1, 128 / esz_);
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      auto sl = [&](int j) { return aligned_slice(loop.count, p_, j, align); };
      for (int r = 0; r < p_; ++r) {
        move(main(r), input(r, loop.first), ccl_out(r, 0), loop.count, false, "ReduceScatter stage");
        placeholder_copy(r);
        fork(r, planes);
        for (int round = 1; round < p_; ++round) ack_pair(round_stream(r, round), r, (r + round) % p_, rs, "ReduceScatter");
        placeholder_copy(r);
        const Span own = sl(r);
        for (int round = 1; round < p_; ++round) {
          resync(r);
          for (int k = 1; k < p_; ++k) {
            const int gap = k + round > p_ ? (k + round - 1) % (p_ - 1) : k + round - 1;
            const int src = (gap + r) % p_;
            const Span part = aligned_slice(own.count, p_ - 1, k - 1, align);
            const std::uint64_t at = own.first + part.first;
            move(round_stream(r, k), ccl_out(src, at), ccl_out(r, at), part.count, true, "ReduceScatter");
          }
        }
        for (int round = 1; round < p_; ++round) {
          const int gap = round == 1 ? p_ - 1 : round - 1;
          data_pair(round_stream(r, round), r, (r + gap) % p_, rs, "ReduceScatter");
        }
        placeholder_copy(r);
        join(r, planes);
        placeholder_copy(r);
      }
      for (int r = 0; r < p_; ++r) deterministic_gather(r, loop.first, sl, ag, false);
    }
  }

  // The all-gather both deterministic templates end with, on rank r: acks
  // with every peer (after a 0-byte copy on Main in AllReduceLocalReduce,
  // not in AllReduceChunkMesh), a sync, then reads of the peers' reduced
  // slices from their CCL_OUT while the spare plane copies the own one out.
  template <typename SliceOf>
  void deterministic_gather(int r, std::uint64_t first, SliceOf sl, const Handshake& ag, bool copy_before_acks) {
    const int planes = p_ - 1;
    placeholder_copy(r);
    fork(r, planes);
    if (copy_before_acks) placeholder_copy(r);
    for (int round = 1; round < p_; ++round) ack_pair(round_stream(r, round), r, backward(r, round - 1), ag, "AllGather");
    resync(r);
    move(slave(r, planes - 1), ccl_out(r, sl(r).first), output(r, first + sl(r).first), sl(r).count, false,
         "AllGather local");
    for (int round = 1; round < p_; ++round) {
      const int src = backward(r, round - 1);
      move(round_stream(r, round), ccl_out(src, sl(src).first), output(r, first + sl(src).first), sl(src).count, false, "AllGather");
      data_pair(round_stream(r, round), r, src, ag, "AllGather");
    }
    placeholder_copy(r);
    join(r, planes);
    placeholder_copy(r);
  }

  // The on-chip fold of AllReduceLocalReduce on Main: rank r's p - 1 slots
  // (from `first`, `slot` elements apart) into slot r. With 2^e the largest
  // power of two below p, the slots beyond 2^e fold first (into the low
  // ones for r < 2^e, the low ones into them otherwise), then the 2^e slots
  // around r halve e times, each time keeping r's half.
  void fold_slots(int r, std::uint64_t first, std::uint64_t slot, std::uint64_t count) {
    const int low = floor_pow2(p_ - 1);
    auto at = [&](std::uint64_t k) { return ccl_out(r, first + k * slot); };
    for (int i = 0; i < p_ - low - 1; ++i) {
      const std::uint64_t hi = static_cast<std::uint64_t>(low + i);
      const std::uint64_t lo = static_cast<std::uint64_t>(i);
      if (r < low) {
        move(main(r), at(hi), at(lo), count, true, "LocalReduce");
      } else {
        move(main(r), at(lo), at(hi), count, true, "LocalReduce");
      }
    }
    int center = std::min(r < low ? r : r - low + 1, low - 1);
    std::uint64_t offset = r < low ? 0 : static_cast<std::uint64_t>(p_ - low - 1);
    for (int half = low / 2; half >= 1; half /= 2) {
      for (int i = 0; i < half; ++i) {
        const std::uint64_t a = offset + static_cast<std::uint64_t>(i);
        const std::uint64_t b = offset + static_cast<std::uint64_t>(half + i);
        if (center < half) {
          move(main(r), at(b), at(a), count, true, "LocalReduce");
        } else {
          move(main(r), at(a), at(b), count, true, "LocalReduce");
        }
      }
      if (center >= half) {
        offset += static_cast<std::uint64_t>(half);
        center -= half;
      }
    }
  }

  // AllReduceMeshSmallCountExecutor on A2 (template AllReduceReduceBcast):
  // one shot, no loop. Rank 0 stages its input in CCL_OUT; every other rank
  // write-reduces its whole input into it; rank 0 copies the sum out and the
  // others read it from rank 0's CCL_OUT. Rank 0 serves peers 1..p-2 on
  // slave streams and peer p-1 on its main stream; the others use only main.
  void all_reduce_reduce_bcast() {
    const Handshake reduce_hs = new_handshake();
    const Handshake bcast_hs = new_handshake();
    const std::uint64_t n = spec_.count;
    const int fan = p_ - 2;
    auto root_stream = [&](int peer) { return peer == p_ - 1 ? main(0) : slave(0, peer - 1); };
    for (int step = 0; step < 2; ++step) {
      const Handshake& h = step == 0 ? reduce_hs : bcast_hs;
      const std::string name = step == 0 ? "Reduce" : "Broadcast";
      if (step == 0) {
        move(main(0), input(0, 0), ccl_out(0, 0), n, false, "Reduce local");
      } else {
        move(main(0), ccl_out(0, 0), output(0, 0), n, false, "Broadcast local");
      }
      fork(0, fan);
      for (int peer = 1; peer < p_; ++peer) {
        tx_ack(root_stream(peer), 0, peer, h, name);
        rx_data(root_stream(peer), peer, h, name);
      }
      join(0, fan);
      for (int r = 1; r < p_; ++r) {
        rx_ack(main(r), 0, h, name);
        if (step == 0) {
          move(main(r), input(r, 0), ccl_out(0, 0), n, true, name);
        } else {
          move(main(r), ccl_out(0, 0), output(r, 0), n, false, name);
        }
        tx_data(main(r), r, 0, h, name);
      }
    }
  }

  // AllGatherMeshOpbaseExecutor (template AllgatherMeshDirect): each rank
  // stages its input in CCL_OUT and every peer reads it from there into its
  // output; the rank's own slot is a local copy on the main stream, run
  // while the slaves read. A loop holds up to (CCL - 16 KiB) per rank.
  void all_gather_opbase() {
    const Handshake h = new_handshake();
    const int k_max = p_ - 1;
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t reserve = 16 * 1024 / esz_;
    const std::uint64_t per_loop = buffer_elements() > reserve ? buffer_elements() - reserve : buffer_elements();
    for (const Span& loop : loops(per_rank, per_loop)) {
      for (int r = 0; r < p_; ++r) {
        move(main(r), input(r, loop.first), ccl_out(r, 0), loop.count, false, "AllGather stage");
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) ack_pair(slave(r, k), r, backward(r, k), h, "AllGather");
        join(r, k_max);
        placeholder_copy(r);
        fork(r, k_max);
        move(main(r), ccl_out(r, 0), output(r, static_cast<std::uint64_t>(r) * per_rank + loop.first), loop.count,
             false, "AllGather local");
        for (int k = 0; k < k_max; ++k) {
          const int peer = backward(r, k);
          move(slave(r, k), ccl_out(peer, 0), output(r, static_cast<std::uint64_t>(peer) * per_rank + loop.first),
               loop.count, false, "AllGather");
          data_pair(slave(r, k), r, peer, h, "AllGather");
        }
        join(r, k_max);
        placeholder_copy(r);
      }
    }
  }

  // ReduceScatterMeshDmaEliminationExecutor (template ReduceScatterMeshDirect):
  // each rank stages its own block in CCL_IN, peers write-reduce their copy
  // of that block into it straight from their input, then the rank copies
  // the sum to its output. A loop holds CCL/dtype elements per rank.
  void reduce_scatter_dma_elimination() {
    const Handshake h = new_handshake();
    const int k_max = p_ - 1;
    const std::uint64_t per_rank = spec_.count;
    for (const Span& loop : loops(per_rank, buffer_elements())) {
      auto block = [&](int j) { return static_cast<std::uint64_t>(j) * per_rank + loop.first; };
      for (int r = 0; r < p_; ++r) {
        move(main(r), input(r, block(r)), ccl_in(r, 0), loop.count, false, "ReduceScatter local");
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) ack_pair(slave(r, k), r, forward(r, k), h, "ReduceScatter");
        join(r, k_max);
        placeholder_copy(r);
        fork(r, k_max);
        for (int k = 0; k < k_max; ++k) {
          const int peer = forward(r, k);
          move(slave(r, k), input(r, block(peer)), ccl_in(peer, 0), loop.count, true, "ReduceScatter");
          data_pair(slave(r, k), r, peer, h, "ReduceScatter");
        }
        join(r, k_max);
        move(main(r), ccl_in(r, 0), output(r, loop.first), loop.count, false, "ReduceScatter out");
      }
    }
  }

  // BroadCastMeshExecutor: per loop the root copies its data into CCL_IN;
  // scatter (ScatterMesh): the root, on its main stream, lets each peer in
  // turn read its slice; then all-gather (AllGatherMeshAtomic): every rank
  // reads every other rank's slice, one stream per peer; then every rank
  // copies CCL_IN to its output. Slices of ceil(n/p) rounded to 128 B.
  void broadcast_mesh() {
    const Handshake scatter = new_handshake();
    const Handshake gather = new_handshake();
    const int root = spec_.root;
    const int k_max = std::max(0, p_ - 2);
    const std::uint64_t align = std::max<std::uint64_t>(1, 128 / esz_);
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      auto sl = [&](int j) { return aligned_slice(loop.count, p_, j, align); };
      move(main(root), input(root, loop.first), ccl_in(root, 0), loop.count, false, "copy in");
      for (int d = 0; d < p_; ++d) {
        if (d == root) continue;
        rx_ack(main(root), d, scatter, "Scatter");
        tx_data(main(root), root, d, scatter, "Scatter");
        tx_ack(main(d), d, root, scatter, "Scatter");
        rx_data(main(d), root, scatter, "Scatter");
        move(main(d), ccl_in(root, sl(d).first), ccl_in(d, sl(d).first), sl(d).count, false, "Scatter");
      }
      gather_mesh(gather, k_max, [&](int j) { return sl(j); }, false);
      for (int r = 0; r < p_; ++r) move(main(r), ccl_in(r, 0), output(r, loop.first), loop.count, false, "copy out");
    }
  }

  // ReduceMeshExecutor: copy into CCL_IN, reduce-scatter by pulling
  // (ReduceScatterMeshAtomic: each rank reads its slice of every peer with
  // inline reduce), then the root reads every rank's reduced slice
  // (GatherMesh) and copies the result out. One stream per peer: main and
  // p-2 slaves.
  void reduce_mesh() {
    const Handshake rs = new_handshake();
    const Handshake gather = new_handshake();
    const int root = spec_.root;
    const int k_max = std::max(0, p_ - 2);
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      auto sl = [&](int j) { return chunk(loop.count, j); };
      for (int r = 0; r < p_; ++r) move(main(r), input(r, loop.first), ccl_in(r, 0), loop.count, false, "copy in");
      gather_mesh(rs, k_max, [&](int j) { return sl(j); }, true);
      for (int r = 0; r < p_; ++r) {
        move(main(r), ccl_in(r, sl(r).first), ccl_out(r, sl(r).first), sl(r).count, false, "ReduceScatter out");
      }
      fork(root, k_max);
      for (int i = 0; i + 1 < p_; ++i) {
        const int peer = backward(root, i);
        const ThreadId t = i < k_max ? slave(root, i) : main(root);
        tx_ack(t, root, peer, gather, "Gather");
        rx_data(t, peer, gather, "Gather");
        move(t, ccl_out(peer, sl(peer).first), ccl_out(root, sl(peer).first), sl(peer).count, false, "Gather");
        tx_data(t, root, peer, gather, "Gather");
        rx_ack(main(peer), root, gather, "Gather");
        tx_data(main(peer), peer, root, gather, "Gather");
        rx_data(main(peer), root, gather, "Gather");
      }
      join(root, k_max);
      move(main(root), ccl_out(root, 0), output(root, loop.first), loop.count, false, "copy out");
    }
  }

  // AllGatherMeshAtomic / ReduceScatterMeshAtomic: every rank reads (with
  // inline reduce when `reduce`) slice `slice_of(r)` of each peer's CCL_IN
  // into its own; peers on the main stream and `k_max` slaves. For
  // `reduce`, rank r pulls the peers' copies of its own slice; otherwise it
  // pulls each peer's own slice.
  template <typename SliceOf>
  void gather_mesh(const Handshake& h, int k_max, SliceOf slice_of, bool reduce) {
    for (int r = 0; r < p_; ++r) {
      fork(r, k_max);
      for (int i = 0; i + 1 < p_; ++i) {
        const int peer = backward(r, i);
        const ThreadId t = i < k_max ? slave(r, i) : main(r);
        const Span s = reduce ? slice_of(r) : slice_of(peer);
        ack_pair(t, r, peer, h, reduce ? "ReduceScatter" : "AllGather");
        move(t, ccl_in(peer, s.first), ccl_in(r, s.first), s.count, reduce, reduce ? "ReduceScatter" : "AllGather");
        data_pair(t, r, peer, h, reduce ? "ReduceScatter" : "AllGather");
      }
      join(r, k_max);
    }
  }
};

// Per-peer element offsets of an AlltoAll(V): send[r][j] where r's block
// for j starts in its input, recv[r][j] where j's block lands in r's output.
struct AlltoAllLayout {
  std::vector<std::vector<std::uint64_t>> send;
  std::vector<std::vector<std::uint64_t>> recv;
  std::uint64_t largest_pair = 0;
  std::uint64_t largest_total = 0;   // most elements a rank sends or receives
};
AlltoAllLayout alltoall_layout(const CollectiveSpec& spec) {
  AlltoAllLayout l;
  const int p = spec.ranks;
  l.send.assign(static_cast<std::size_t>(p), std::vector<std::uint64_t>(static_cast<std::size_t>(p), 0));
  l.recv = l.send;
  for (int r = 0; r < p; ++r) {
    std::uint64_t s = 0;
    std::uint64_t d = 0;
    for (int j = 0; j < p; ++j) {
      l.send[r][j] = s;
      l.recv[r][j] = d;
      s += spec.pair_count(r, j);
      d += spec.pair_count(j, r);
      l.largest_pair = std::max(l.largest_pair, spec.pair_count(r, j));
    }
    l.largest_total = std::max({l.largest_total, s, d});
  }
  return l;
}

class AlltoAllExec : public ExecBuilder {
 public:
  AlltoAllExec(const CollectiveSpec& spec, int slaves) : ExecBuilder(spec, slaves), layout_(alltoall_layout(spec)) {}
  TaskGraph take() { return std::move(graph_); }

  // RunAlltoAllVStaged, zero-copy form (everything fits CCL_IN): each rank
  // copies its whole send buffer into CCL_IN once; then per peer (main and
  // p-2 slaves) the receiver reads its block from the peer's CCL_IN straight
  // into its output.
  void staged() {
    const Handshake h = new_handshake();
    const int k_max = p_ - 2;
    for (int r = 0; r < p_; ++r) {
      std::uint64_t total = 0;
      for (int j = 0; j < p_; ++j) total += spec_.pair_count(r, j);
      move(main(r), input(r, 0), ccl_in(r, 0), total, false, "copy in");
      move(main(r), input(r, layout_.send[r][r]), output(r, layout_.recv[r][r]), spec_.pair_count(r, r), false,
           "local block");
      fork(r, k_max);
      for (int i = 0; i + 1 < p_; ++i) {
        const int peer = ((r - i - 1) % p_ + p_) % p_;
        const ThreadId t = i < k_max ? slave(r, i) : main(r);
        ack_pair(t, r, peer, h, "AlltoAll");
        move(t, ccl_in(peer, layout_.send[peer][r]), output(r, layout_.recv[r][peer]), spec_.pair_count(peer, r), false,
             "AlltoAll");
        data_pair(t, r, peer, h, "AlltoAll");
      }
      join(r, k_max);
    }
  }

  // RunAlltoAllDirectFullmesh: peers in rounds of up to 8 (4 pairs at
  // distances +-i), each on an SDMA stream of its own with a local-copy
  // stream beside it. CCL_IN holds one block per concurrent peer (two, used
  // in turn, for AlltoAllV or blocks over 1 MiB); per step the sender copies
  // the next piece into its block and the receiver reads it from there into
  // its output.
  void direct_fullmesh(bool alltoallv) {
    const DirectFullmeshPlan plan = direct_fullmesh_plan(spec_, layout_.largest_pair, alltoallv);
    const int concurrent = plan.concurrent;
    const int groups = plan.groups;
    const std::uint64_t block = plan.block;
    const DistanceRounds& rounds = plan.rounds;
    const Handshake ready = new_handshake();
    const Handshake done = new_handshake();
    const int copy_ready = notifies_.take(concurrent * groups);
    const int slot_free = notifies_.take(concurrent * groups);
    const std::uint64_t steps = plan.steps;
    std::vector<std::vector<int>> uses(static_cast<std::size_t>(p_), std::vector<int>(static_cast<std::size_t>(concurrent * groups), 0));
    for (int r = 0; r < p_; ++r) {
      move(main(r), input(r, layout_.send[r][r]), output(r, layout_.recv[r][r]), spec_.pair_count(r, r), false,
           "local block");
    }
    int use = 0;
    for (std::uint64_t step = 0; step < std::max<std::uint64_t>(steps, 1); ++step) {
      for (std::size_t k = 0; k < rounds.size(); ++k) {
        const DistanceRounds::Round distances = rounds[k];
        const int group = use++ % groups;
        for (int r = 0; r < p_; ++r) {
          for (std::size_t j = 0; j < distances.size(); ++j) {
            const int slot = group * concurrent + static_cast<int>(j);
            const int to = (r + distances[j]) % p_;
            const int from = ((r - distances[j]) % p_ + p_) % p_;
            const ThreadId sdma = slave(r, static_cast<int>(j));
            const ThreadId local = slave(r, concurrent + static_cast<int>(j));
            auto piece = [&](int a, int b) {
              const std::uint64_t total = spec_.pair_count(a, b);
              const std::uint64_t first = step * block;
              return Span{first, first >= total ? 0 : std::min(block, total - first)};
            };
            const Span out = piece(r, to);
            const Span in = piece(from, r);
            int& used = uses[static_cast<std::size_t>(r)][static_cast<std::size_t>(slot)];
            if (used++ > 0) graph_.wait(local, slot_free + slot, "block free");
            move(local, input(r, layout_.send[r][to] + out.first), ccl_in(r, static_cast<std::uint64_t>(slot) * block),
                 out.count, false, "AlltoAll stage");
            graph_.record(local, r, copy_ready + slot, "block staged");
            graph_.wait(sdma, copy_ready + slot, "block staged");
            tx_ack(sdma, r, to, ready, "AlltoAll");
            rx_ack(sdma, from, ready, "AlltoAll");
            move(sdma, ccl_in(from, static_cast<std::uint64_t>(slot) * block), output(r, layout_.recv[r][from] + in.first),
                 in.count, false, "AlltoAll");
            tx_data(sdma, r, from, done, "AlltoAll");
            rx_data(sdma, to, done, "AlltoAll");
            graph_.record(sdma, r, slot_free + slot, "block free");
          }
        }
      }
    }
    // The last "block free" records of each slot have no waiter: consume them
    // so that every record is matched (and the stream ends after its peers).
    for (int r = 0; r < p_; ++r) {
      for (int slot = 0; slot < concurrent * groups; ++slot) {
        if (uses[static_cast<std::size_t>(r)][static_cast<std::size_t>(slot)] > 0) {
          graph_.wait(slave(r, concurrent + slot % concurrent), slot_free + slot, "block free");
        }
      }
    }
  }

 private:
  AlltoAllLayout layout_;
};

bool single_server(const ExecContext& ctx) { return ctx.hierarchy.servers() == 1; }

std::string needs(bool ok, const std::string& why) { return ok ? std::string() : why; }

}  // namespace

DirectFullmeshPlan direct_fullmesh_plan(const CollectiveSpec& spec, std::uint64_t largest_pair, bool alltoallv) {
  const int p = spec.ranks;
  const std::uint64_t esz = data_type_size(spec.dtype);
  const std::uint64_t buffer = spec.buffer_bytes / esz;
  DirectFullmeshPlan plan;
  plan.concurrent = std::min(8, p - 1);
  const std::uint64_t big = (1024 * 1024) / esz;
  plan.groups = alltoallv || largest_pair > big ? 2 : 1;
  const std::uint64_t align = std::max<std::uint64_t>(1, 16 * 1024 / esz);
  const std::uint64_t slots = static_cast<std::uint64_t>(std::max(1, plan.concurrent * plan.groups));
  plan.block = buffer / slots / align * align;
  if (plan.block == 0) plan.block = std::max<std::uint64_t>(1, buffer / slots);
  // Rounds of distances: round k pairs +-(4k+1..4k+4). (Once every
  // distance is in, the rounds left are empty: the loop stops there, half
  // way on 99,840 dies, whose plan is built at every point of an estimate.)
  std::vector<char> seen(static_cast<std::size_t>(std::max(p, 1)), 0);
  const int distances = std::max(p - 1, 0);
  plan.rounds.reserve(static_cast<std::size_t>(distances), static_cast<std::size_t>(distances / 8 + 2));
  int added = 0;
  for (int base = 1; base < p && added < distances; base += 4) {
    for (int d = base; d < base + 4 && d < p; ++d) {
      for (int dist : {d, p - d}) {
        if (dist > 0 && dist < p && !seen[static_cast<std::size_t>(dist)]) {
          seen[static_cast<std::size_t>(dist)] = 1;
          plan.rounds.add(dist);
          ++added;
        }
      }
    }
    plan.rounds.end_round();
  }
  plan.steps = (largest_pair + plan.block - 1) / plan.block;
  return plan;
}

// Inline reduction (SDMA Reduce_Inline): fp32/fp16/bf16/int8/int16/int32 with
// sum/max/min on 910B and 910_93 (device_capacity.cc IsSupportSDMAReduce).
bool sdma_inline_reduce(DataType dtype, ReduceOp op) {
  const bool type_ok = dtype != DataType::Int64;
  return type_ok && op != ReduceOp::Prod;
}

void register_mesh_executors(std::vector<Executor>& out) {
  const std::string base = "hcomm src/legacy/ascend910/algorithm/";
  out.push_back(Executor{
      "AllReduceMeshOpbaseLoopExecutor",
      base + "impl/coll_executor/coll_all_reduce/coll_all_reduce_mesh_opbase_executor.cc, "
             "base/alg_template/temp_all_reduce/all_reduce_mesh_opbase.cc",
      "p-1 slave streams; no copy-in: slices staged in CCL_OUT, peers write-reduce into them from their input, "
      "then every rank reads the reduced slices into its output",
      [](const CollectiveSpec& s, const ExecContext& c) {
        return needs(s.op == CollOp::AllReduce && single_server(c) && sdma_inline_reduce(s.dtype, s.reduce_op),
                     "runs AllReduce inside one server with an inline-reducible dtype and op");
      },
      [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
        MeshExec b(s, s.ranks - 1);
        b.all_reduce_opbase_loop();
        return b.take();
      }});
  out.push_back(Executor{
      "AllReduceMeshMidCountLoopExecutor",
      base + "impl/coll_executor/coll_all_reduce/coll_all_reduce_mesh_mid_count_executor.cc, "
             "base/alg_template/temp_all_reduce/all_reduce_local_reduce.cc",
      "deterministic: p-1 slave streams; peers write their copies of a slice into the owner's CCL_OUT slots "
      "(the last with inline reduce), the owner folds the slots on chip in a fixed order, then every rank reads "
      "the reduced slices",
      [](const CollectiveSpec& s, const ExecContext& c) {
        // HCCL runs the template on 8 ranks only (DEVICE_EIGHT); its slot
        // arithmetic does not cover every other count.
        return needs(s.op == CollOp::AllReduce && single_server(c) && s.ranks == 8 &&
                         sdma_inline_reduce(s.dtype, s.reduce_op) && c.mode == WorkflowMode::OpBase,
                     "runs an op-base AllReduce of 8 ranks inside one server with an inline-reducible dtype and op");
      },
      [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
        MeshExec b(s, s.ranks - 1);
        b.all_reduce_local_reduce();
        return b.take();
      }});
  out.push_back(Executor{
      "AllReduceMeshOneshotLoopExecutor",
      base + "impl/coll_executor/coll_all_reduce/coll_all_reduce_mesh_oneshot_executor.cc, "
             "base/alg_template/temp_all_reduce/all_reduce_chunk_mesh.cc",
      "deterministic: p-1 slave streams; every rank stages its input in CCL_OUT, then in p-1 rounds reads the parts "
      "of its own slice from the peers with inline reduce, in a fixed order; then every rank reads the reduced slices",
      [](const CollectiveSpec& s, const ExecContext& c) {
        return needs(s.op == CollOp::AllReduce && single_server(c) && s.ranks >= 3 &&
                         sdma_inline_reduce(s.dtype, s.reduce_op) && c.mode == WorkflowMode::OpBase,
                     "runs an op-base AllReduce of 3 ranks or more inside one server with an inline-reducible dtype "
                     "and op (2 ranks: another template)");
      },
      [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
        MeshExec b(s, s.ranks - 1);
        b.all_reduce_chunk_mesh();
        return b.take();
      }});
  out.push_back(Executor{
      "AllReduceMeshSmallCountExecutor",
      base + "impl/coll_executor/coll_all_reduce/coll_all_reduce_mesh_small_count_executor.cc, "
             "base/alg_template/temp_all_reduce/all_reduce_reduce_broadcast.cc",
      "one shot: ranks write-reduce their whole input into rank 0's CCL_OUT, then read the sum back",
      [](const CollectiveSpec& s, const ExecContext& c) {
        // The A2 template goes through the HCCL buffer in one shot; on A3 the
        // executor runs HD_OPTIM (H-D_R here), which loops like any level-1 form.
        return needs(s.op == CollOp::AllReduce && single_server(c) && sdma_inline_reduce(s.dtype, s.reduce_op) &&
                         (c.hccl.small_count_all_reduce_hd || s.count * data_type_size(s.dtype) <= s.buffer_bytes),
                     "runs AllReduce inside one server, inline-reducible, with the data within the HCCL buffer "
                     "where it runs in one shot (npu.hccl_api.small_count_all_reduce)");
      },
      [](const CollectiveSpec& s, const ExecContext& c, const AlgoPlan& plan) {
        if (c.hccl.small_count_all_reduce_hd) {
          // 910_93 runs the HD_OPTIM template: recursive halving-doubling,
          // modelled by the H-D_R builder.
          (void)plan;
          return build_level1(s, Level1Algo::HalvingDoubling);
        }
        MeshExec b(s, std::max(0, s.ranks - 2));
        b.all_reduce_reduce_bcast();
        return b.take();
      }});
  out.push_back(Executor{
      "AllGatherMeshOpbaseExecutor",
      base + "impl/coll_executor/coll_all_gather/coll_all_gather_mesh_opbase_executor.cc, "
             "base/alg_template/temp_all_gather/all_gather_mesh_direct.cc",
      "p-1 slave streams; input staged in CCL_OUT, peers read it into their output",
      [](const CollectiveSpec& s, const ExecContext& c) {
        return needs(s.op == CollOp::AllGather && single_server(c), "runs AllGather inside one server");
      },
      [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
        MeshExec b(s, s.ranks - 1);
        b.all_gather_opbase();
        return b.take();
      }});
  out.push_back(Executor{
      "ReduceScatterMeshDmaEliminationExecutor",
      base + "impl/coll_executor/coll_reduce_scatter/coll_reduce_scatter_mesh_dma_elimination.cc, "
             "base/alg_template/temp_reduce_scatter/reduce_scatter_mesh_atomic_opbase.cc",
      "p-1 slave streams; own block staged in CCL_IN, peers write-reduce into it from their input",
      [](const CollectiveSpec& s, const ExecContext& c) {
        return needs(s.op == CollOp::ReduceScatter && single_server(c) && sdma_inline_reduce(s.dtype, s.reduce_op),
                     "runs ReduceScatter inside one server with an inline-reducible dtype and op");
      },
      [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
        MeshExec b(s, s.ranks - 1);
        b.reduce_scatter_dma_elimination();
        return b.take();
      }});
  out.push_back(Executor{
      "BroadCastMeshExecutor",
      base + "impl/coll_executor/coll_broadcast/coll_broadcast_mesh_executor.cc, base/alg_template/temp_scatter/"
             "scatter_mesh.cc, base/alg_template/temp_all_gather/all_gather_mesh_atomic.cc",
      "copy in; scatter (peers read their slice from the root in turn); mesh all-gather by reads; copy out",
      [](const CollectiveSpec& s, const ExecContext&) { return needs(s.op == CollOp::Broadcast, "runs Broadcast only"); },
      [](const CollectiveSpec& s, const ExecContext& c, const AlgoPlan& plan) {
        // Across servers: the root's rail at level 1, then every server.
        if (!single_server(c)) return build_hierarchical(s, c.hierarchy, plan);
        MeshExec b(s, std::max(0, s.ranks - 2));
        b.broadcast_mesh();
        return b.take();
      }});
  out.push_back(Executor{
      "ReduceMeshExecutor",
      base + "impl/coll_executor/coll_reduce/coll_reduce_mesh_executor.cc, base/alg_template/temp_reduce_scatter/"
             "reduce_scatter_mesh_atomic.cc, base/alg_template/temp_gather/gather_mesh.cc",
      "copy in; reduce-scatter by reads with inline reduce; the root reads every slice; copy out",
      [](const CollectiveSpec& s, const ExecContext&) { return needs(s.op == CollOp::Reduce, "runs Reduce only"); },
      [](const CollectiveSpec& s, const ExecContext& c, const AlgoPlan& plan) {
        // Across servers, or a reduction SDMA cannot do inline: the mesh-atomic composition.
        if (!single_server(c) || !sdma_inline_reduce(s.dtype, s.reduce_op)) return build_hierarchical(s, c.hierarchy, plan);
        MeshExec b(s, std::max(0, s.ranks - 2));
        b.reduce_mesh();
        return b.take();
      }});
  // RunAlltoAllVStaged's zero-copy form; the 2-rank RunAlltoAllVFullMesh
  // (whose own template was not read) is modelled with the same pattern.
  auto staged = [&](const std::string& name, const std::string& file, const std::string& summary) {
    return Executor{
        name, base + file, summary,
        [](const CollectiveSpec& s, const ExecContext& c) {
          const AlltoAllLayout l = alltoall_layout(s);
          return needs(s.op == CollOp::AlltoAll && single_server(c) && l.largest_total * data_type_size(s.dtype) <= s.buffer_bytes,
                       "runs AlltoAll inside one server when each rank's data fits the HCCL buffer");
        },
        [](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&) {
          AlltoAllExec b(s, std::max(0, s.ranks - 2));
          b.staged();
          return b.take();
        }};
  };
  out.push_back(staged("RunAlltoAllVStaged",
                       "impl/coll_executor/coll_all_to_all/coll_all_to_all_v_staged_executor.cc, "
                       "base/alg_template/temp_alltoallv/alltoallv_staged_mesh.cc",
                       "send buffer copied into CCL_IN once; every receiver reads its block from each peer's CCL_IN"));
  out.push_back(staged("RunAlltoAllVFullMesh", "impl/coll_executor/coll_all_to_all/coll_all_to_all_v_fullmesh_executor.cc",
                       "two ranks: each reads its block from the peer's CCL_IN (modelled with RunAlltoAllVStaged's "
                       "pattern; the executor's own template was not read)"));
  out.push_back(Executor{
      "RunAlltoAllDirectFullmesh",
      base + "impl/coll_executor/coll_all_to_all/coll_all_to_all_v_direct_fullmesh_executor.cc, "
             "base/alg_template/temp_alltoallv/alltoallv_direct_fullmesh.cc",
      "up to 8 peers at a time on SDMA streams with local-copy streams; pieces staged in CCL_IN blocks, "
      "receivers read them into their output",
      [](const CollectiveSpec& s, const ExecContext& c) {
        return needs(s.op == CollOp::AlltoAll && (c.hccl.alltoall_fullmesh_across_servers || single_server(c)),
                     "runs AlltoAll(V) inside one server, or across servers where the product's HCCL does "
                     "(npu.hccl_api.alltoall_fullmesh_across_servers)");
      },
      [](const CollectiveSpec& s, const ExecContext& c, const AlgoPlan&) {
        // Peers in other supernodes go by RDMA, one at a time: modelled as a
        // pairwise exchange over every rank.
        if (c.hierarchy.pods > 1) return build_level1(s, Level1Algo::Pairwise);
        AlltoAllExec b(s, 2 * std::min(8, s.ranks - 1));
        b.direct_fullmesh(!s.alltoallv_counts.empty());
        return b.take();
      }});
}

}  // namespace hcclsim

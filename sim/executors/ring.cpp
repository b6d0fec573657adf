// Level-0 rings as HCCL runs them on A3 (910_93): the single ring
// (AllReduceRingFor91093 and kin) and the double ring (FastDoubleRing /
// AlignedDoubleRing executors): two rings over the same ranks in opposite
// directions (0,1,...,p-1 and 0,p-1,...,1), each carrying half of every
// slice, both at once (hcomm topo_info_extractor.cc GetRingsOrderByTopoType;
// coll_comm_executor.cc MutliSegSlicePrepare splits slices in equal halves).
//
// Every ring step is a receiver-side read: the rank reads its previous
// rank's partial (with inline reduce in a reduce-scatter) into its own HCCL
// buffer, guarded by TxAck/RxAck before and TxDataSignal/RxDataSignal after.
// Zero copy in op-base: the first reduce-scatter step reads the previous
// rank's user input, and the rank's own contribution to each slice is copied
// into its buffer by a local-copy stream running ahead of the ring.
//
// Streams per rank: ring 0 on a slave stream, the last ring on the main
// stream, one local-copy stream per ring (op-base double ring: 4 streams).
//
// Forms: AllReduce, ReduceScatter and AllGather (also the hierarchical stage
// forms: chunked, and segments with a block stride), Broadcast (a pipelined
// chain from the root along each ring) and Reduce (reduce-scatter, then the
// root reads every slice). AlltoAll has no ring form.
#include <stdexcept>

#include "sim/executors/exec_builder.h"

namespace hcclsim {

namespace {

// One contiguous run of a slice: where it sits in the input, the HCCL
// buffer and the output (elements).
struct Part {
  std::uint64_t in;
  std::uint64_t ccl;
  std::uint64_t out;
  std::uint64_t count;
};
using Slice = std::vector<Part>;

class RingExec : public ExecBuilder {
 public:
  RingExec(const CollectiveSpec& spec, int rings) : ExecBuilder(spec, 2 * rings - 1), rings_(rings) {
    for (int k = 0; k < rings_; ++k) {
      std::vector<int> ord(static_cast<std::size_t>(p_));
      for (int i = 0; i < p_; ++i) ord[static_cast<std::size_t>(i)] = k == 0 ? i : (p_ - i) % p_;
      order_.push_back(ord);
      std::vector<int> pos(static_cast<std::size_t>(p_));
      for (int i = 0; i < p_; ++i) pos[static_cast<std::size_t>(ord[static_cast<std::size_t>(i)])] = i;
      pos_.push_back(pos);
      rs_.push_back(new_handshake());
      ag_.push_back(new_handshake());
      copied_.push_back(notifies_.take(p_));
      got_.push_back(notifies_.take(p_));
      chain_.push_back(notifies_.take(p_));
      done_.push_back(notifies_.take(1));
    }
  }

  TaskGraph build() {
    switch (spec_.op) {
      case CollOp::AllReduce: all_reduce(); break;
      case CollOp::ReduceScatter: reduce_scatter(); break;
      case CollOp::AllGather: all_gather(); break;
      case CollOp::Broadcast: broadcast(); break;
      case CollOp::Reduce: reduce(); break;
      case CollOp::AlltoAll:
        throw std::invalid_argument("alltoall has no ring algorithm in HCCL (it runs a full mesh); use level0:NA");
    }
    return std::move(graph_);
  }

 private:
  ThreadId ring_stream(int r, int k) const { return k == rings_ - 1 ? main(r) : slave(r, k); }
  ThreadId copy_stream(int r, int k) const { return slave(r, rings_ - 1 + k); }
  int at(int k, int pos) const { return order_[static_cast<std::size_t>(k)][static_cast<std::size_t>(((pos % p_) + p_) % p_)]; }
  int pos(int k, int r) const { return pos_[static_cast<std::size_t>(k)][static_cast<std::size_t>(r)]; }
  int prev(int k, int r) const { return at(k, pos(k, r) - 1); }
  int next(int k, int r) const { return at(k, pos(k, r) + 1); }
  // Ring k's half of every part of a slice.
  Slice half(const Slice& s, int k) const {
    Slice out;
    for (const Part& part : s) {
      const Span h = chunk_span(part.count, rings_, k);
      if (h.count > 0) out.push_back(Part{part.in + h.first, part.ccl + h.first, part.out + h.first, h.count});
    }
    return out;
  }
  void move_slice(ThreadId t, const Slice& s, int from, BufferKind from_kind, int to, BufferKind to_kind, bool reduce,
                  const std::string& label) {
    for (const Part& part : s) {
      auto ref = [&](int rank, BufferKind kind) {
        if (kind == BufferKind::Input) return input(rank, part.in);
        if (kind == BufferKind::Output) return output(rank, part.out);
        return ccl_in(rank, part.ccl);
      };
      move(t, ref(from, from_kind), ref(to, to_kind), part.count, reduce, label);
    }
  }

  void begin_loop() {
    for (int r = 0; r < p_; ++r) fork(r, slaves());
  }
  void end_loop() {
    for (int r = 0; r < p_; ++r) join(r, slaves());
  }

  // Reduce-scatter: afterwards rank r's buffer holds slice r fully reduced.
  // At step s the rank at ring position i reads slice order[i - s - 2] of
  // its previous rank, reduced into its own copy.
  // "<what> step s" for s in 0..p-2, built once per phase, not per rank.
  std::vector<std::string> step_labels(const std::string& what) const {
    std::vector<std::string> out;
    for (int s = 0; s + 1 < p_; ++s) out.push_back(what + " step " + std::to_string(s));
    return out;
  }

  void reduce_scatter_rings(const std::vector<Slice>& slices) {
    const std::vector<std::string> step_label = step_labels("ReduceScatter");
    for (int k = 0; k < rings_; ++k) {
      for (int r = 0; r < p_; ++r) {
        const int i = pos(k, r);
        for (int s = 0; s + 1 < p_; ++s) {
          const Slice mine = half(slices[static_cast<std::size_t>(at(k, i - s - 2))], k);
          move_slice(copy_stream(r, k), mine, r, BufferKind::Input, r, BufferKind::Scratch, false, "local copy");
          graph_.record(copy_stream(r, k), r, copied_[static_cast<std::size_t>(k)] + s, "copied");
        }
        const ThreadId t = ring_stream(r, k);
        const Handshake& h = rs_[static_cast<std::size_t>(k)];
        for (int s = 0; s + 1 < p_; ++s) {
          const Slice mine = half(slices[static_cast<std::size_t>(at(k, i - s - 2))], k);
          graph_.wait(t, copied_[static_cast<std::size_t>(k)] + s, "copied");
          // My partial for the next rank is ready; wait until the previous one's is.
          tx_ack(t, r, next(k, r), h, "ReduceScatter");
          rx_ack(t, prev(k, r), h, "ReduceScatter");
          move_slice(t, mine, prev(k, r), s == 0 ? BufferKind::Input : BufferKind::Scratch, r, BufferKind::Scratch, true,
                     step_label[static_cast<std::size_t>(s)]);
          // Done reading the previous rank; wait until the next one read mine.
          tx_data(t, r, prev(k, r), h, "ReduceScatter");
          rx_data(t, next(k, r), h, "ReduceScatter");
        }
      }
    }
  }

  // All-gather: rank r's buffer holds slice r; afterwards every slice, each
  // also copied to the output by the local-copy stream.
  void all_gather_rings(const std::vector<Slice>& slices, bool own_to_output) {
    const std::vector<std::string> step_label = step_labels("AllGather");
    for (int k = 0; k < rings_; ++k) {
      for (int r = 0; r < p_; ++r) {
        const int i = pos(k, r);
        const ThreadId t = ring_stream(r, k);
        const ThreadId c = copy_stream(r, k);
        const Handshake& h = ag_[static_cast<std::size_t>(k)];
        if (own_to_output) {
          // Once the ring holds this rank's final slice (after a reduce-scatter).
          graph_.record(t, r, done_[static_cast<std::size_t>(k)], "slice final");
          graph_.wait(c, done_[static_cast<std::size_t>(k)], "slice final");
          move_slice(c, half(slices[static_cast<std::size_t>(r)], k), r, BufferKind::Scratch, r, BufferKind::Output, false,
                     "AllGather local");
        }
        for (int s = 0; s + 1 < p_; ++s) {
          const Slice got = half(slices[static_cast<std::size_t>(at(k, i - s - 1))], k);
          tx_ack(t, r, next(k, r), h, "AllGather");
          rx_ack(t, prev(k, r), h, "AllGather");
          move_slice(t, got, prev(k, r), BufferKind::Scratch, r, BufferKind::Scratch, false,
                     step_label[static_cast<std::size_t>(s)]);
          tx_data(t, r, prev(k, r), h, "AllGather");
          rx_data(t, next(k, r), h, "AllGather");
          graph_.record(t, r, got_[static_cast<std::size_t>(k)] + s, "got");
          graph_.wait(c, got_[static_cast<std::size_t>(k)] + s, "got");
          move_slice(c, got, r, BufferKind::Scratch, r, BufferKind::Output, false, "AllGather out");
        }
      }
    }
  }

  std::vector<Slice> chunk_slices(std::uint64_t first, std::uint64_t n) const {
    std::vector<Slice> out;
    for (int j = 0; j < p_; ++j) {
      const Span c = chunk(n, j);
      out.push_back(Slice{Part{first + c.first, c.first, first + c.first, c.count}});
    }
    return out;
  }

  void all_reduce() {
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      const std::vector<Slice> slices = chunk_slices(loop.first, loop.count);
      begin_loop();
      reduce_scatter_rings(slices);
      all_gather_rings(slices, true);
      end_loop();
    }
  }

  void reduce_scatter() {
    if (spec_.chunked) {
      const std::vector<Slice> slices = chunk_slices(0, spec_.count);
      begin_loop();
      reduce_scatter_rings(slices);
      end_loop();
      for (int r = 0; r < p_; ++r) {
        move_slice(main(r), slices[static_cast<std::size_t>(r)], r, BufferKind::Scratch, r, BufferKind::Output, false, "copy out");
      }
      return;
    }
    const std::uint64_t segs = static_cast<std::uint64_t>(spec_.segments);
    const std::uint64_t p = static_cast<std::uint64_t>(p_);
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t stride = spec_.block_stride != 0 ? spec_.block_stride : per_rank;
    for (const Span& loop : loops(per_rank, buffer_elements() / (p * segs))) {
      const std::uint64_t n = loop.count;
      std::vector<Slice> slices;
      for (std::uint64_t j = 0; j < p; ++j) {
        Slice s;
        for (std::uint64_t t = 0; t < segs; ++t) s.push_back(Part{(t * p + j) * stride + loop.first, (j * segs + t) * n, t * per_rank + loop.first, n});
        slices.push_back(s);
      }
      begin_loop();
      reduce_scatter_rings(slices);
      end_loop();
      for (int r = 0; r < p_; ++r) {
        move_slice(main(r), slices[static_cast<std::size_t>(r)], r, BufferKind::Scratch, r, BufferKind::Output, false, "copy out");
      }
    }
  }

  void all_gather() {
    if (spec_.chunked) {
      const std::vector<Slice> slices = chunk_slices(0, spec_.count);
      for (int r = 0; r < p_; ++r) {
        move_slice(main(r), slices[static_cast<std::size_t>(r)], r, BufferKind::Input, r, BufferKind::Scratch, false, "copy in");
      }
      begin_loop();
      all_gather_rings(slices, true);
      end_loop();
      return;
    }
    const std::uint64_t segs = static_cast<std::uint64_t>(spec_.segments);
    const std::uint64_t p = static_cast<std::uint64_t>(p_);
    const std::uint64_t per_rank = spec_.count;
    const std::uint64_t stride = spec_.block_stride != 0 ? spec_.block_stride : per_rank;
    for (const Span& loop : loops(per_rank, buffer_elements() / (p * segs))) {
      const std::uint64_t n = loop.count;
      std::vector<Slice> slices;
      for (std::uint64_t j = 0; j < p; ++j) {
        Slice s;
        for (std::uint64_t t = 0; t < segs; ++t) s.push_back(Part{t * per_rank + loop.first, (j * segs + t) * n, (t * p + j) * stride + loop.first, n});
        slices.push_back(s);
      }
      for (int r = 0; r < p_; ++r) {
        move_slice(main(r), slices[static_cast<std::size_t>(r)], r, BufferKind::Input, r, BufferKind::Scratch, false, "copy in");
      }
      begin_loop();
      all_gather_rings(slices, true);
      end_loop();
    }
  }

  // A pipelined chain from the root along each ring: p chunks per ring; a
  // rank reads chunk q from its previous rank once that rank has it.
  void broadcast() {
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      const std::vector<Slice> slices = chunk_slices(loop.first, loop.count);
      move(main(root), input(root, loop.first), ccl_in(root, 0), loop.count, false, "copy in");
      begin_loop();
      for (int k = 0; k < rings_; ++k) {
        const int chain = chain_[static_cast<std::size_t>(k)];
        const Handshake& h = rs_[static_cast<std::size_t>(k)];
        for (int r = 0; r < p_; ++r) {
          const ThreadId t = ring_stream(r, k);
          const bool last = next(k, r) == root;
          for (int q = 0; q < p_; ++q) {
            const Slice piece = half(slices[static_cast<std::size_t>(q)], k);
            if (r != root) {
              graph_.wait(t, chain + q, "chunk ready");
              move_slice(t, piece, prev(k, r), BufferKind::Scratch, r, BufferKind::Scratch, false,
                         "Broadcast chunk " + std::to_string(q));
              tx_data(t, r, prev(k, r), h, "Broadcast");
            }
            if (!last) {
              graph_.record(t, next(k, r), chain + q, "chunk ready");
              rx_data(t, next(k, r), h, "Broadcast");
            }
          }
        }
      }
      end_loop();
      for (int r = 0; r < p_; ++r) move(main(r), ccl_in(r, 0), output(r, loop.first), loop.count, false, "copy out");
    }
  }

  void reduce() {
    const int root = spec_.root;
    const Handshake gather = new_handshake();
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      const std::vector<Slice> slices = chunk_slices(loop.first, loop.count);
      begin_loop();
      reduce_scatter_rings(slices);
      end_loop();
      for (int r = 0; r < p_; ++r) {
        if (r == root) continue;
        tx_ack(main(root), root, r, gather, "Gather");
        rx_data(main(root), r, gather, "Gather");
        move_slice(main(root), slices[static_cast<std::size_t>(r)], r, BufferKind::Scratch, root, BufferKind::Scratch, false, "Gather");
        rx_ack(main(r), root, gather, "Gather");
        tx_data(main(r), r, root, gather, "Gather");
      }
      move(main(root), ccl_in(root, 0), output(root, loop.first), loop.count, false, "copy out");
    }
  }

  int rings_;
  std::vector<std::vector<int>> order_;
  std::vector<std::vector<int>> pos_;
  std::vector<Handshake> rs_;
  std::vector<Handshake> ag_;
  std::vector<int> copied_;
  std::vector<int> got_;
  std::vector<int> chain_;
  std::vector<int> done_;
};

}  // namespace

TaskGraph build_ring(const CollectiveSpec& spec, int rings) { return RingExec(spec, rings).build(); }

int level0_notifies(int ranks, Level0Algo algo) {
  // The forms allocate their notifies up front: a one-element graph of every
  // op shows how many (the size of the data does not change them).
  int used = 0;
  for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::Broadcast, CollOp::Reduce,
                          CollOp::AlltoAll}) {
    if (op == CollOp::AlltoAll && algo != Level0Algo::Mesh) continue;
    CollectiveSpec spec;
    spec.op = op;
    spec.ranks = ranks;
    spec.count = 1;
    spec.buffer_bytes = 1 << 20;
    used = std::max(used, build_collective(spec, algo).notifies_used());
  }
  return used;
}

TaskGraph build_collective(const CollectiveSpec& spec, Level0Algo algo) {
  if (spec.ranks < 2) throw std::invalid_argument("a collective needs at least 2 ranks");
  if (spec.root < 0 || spec.root >= spec.ranks) throw std::invalid_argument("root outside the ranks");
  if (spec.buffer_bytes < data_type_size(spec.dtype) * static_cast<std::uint64_t>(spec.ranks)) {
    throw std::invalid_argument("the HCCL buffer must hold at least one element per rank");
  }
  switch (algo) {
    case Level0Algo::Mesh: return build_mesh(spec);
    case Level0Algo::Ring: return build_ring(spec, 1);
    case Level0Algo::DoubleRing: return build_ring(spec, 2);
  }
  return build_mesh(spec);
}

}  // namespace hcclsim

// Level-1 algorithms (see level1.h). Each algorithm is written as a list of
// steps per loop over the HCCL buffer; a step is a set of transfers, at most
// one out of and one into each rank, and one emitter turns steps into tasks
// with the same synchronisation for every algorithm:
//
//   receiver: Notify Record "ready" -> sender        (its area is free)
//   sender:   Notify Wait "ready"; Memcpy (RDMA write) into the receiver's
//             CCL_IN (copy) or CCL_OUT (reduction); Notify Record "done"
//   receiver: Notify Wait "done"; for a reduction Reduce_Inline CCL_OUT -> CCL_IN
//
// One stream ("Plane0") per rank runs, per step: its "ready" record, its send,
// then its receive. A rank records "ready" only after finishing every earlier
// step, so a write never lands on data not yet consumed, and never on a
// notify still set: the sender's "done" record follows the receiver's "ready",
// which follows the receiver's wait for the previous "done".
//
// Notifies (index on the rank that waits): step group g uses 2g ("ready",
// on the sender) and 2g+1 ("done", on the receiver). The logarithmic
// algorithms give each step of a loop its own group (at most 2 + 2 log2 p
// steps). The ring reuses group 0 for all steps: a rank only ever hears
// "ready" from its next rank and "done" from its previous one, and each
// record there follows the wait for the one before it, as shown above.
// Every loop repeats the same steps between the same pairs, so a register
// is reused by the next loop only after the same pair finished with it.
// Pairwise (AlltoAll) has its own emitter, described at all_to_all().
#include "sim/executors/level1.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "sim/executors/plan.h"

namespace hcclsim {

namespace {

struct Xfer {
  int from = -1;
  int to = -1;
  std::vector<Span> spans;  // element ranges of CCL_IN, at the same offsets on both ranks
  bool reduce = false;      // staged in the receiver's CCL_OUT at the same offsets, reduced there
};

struct Step {
  std::string name;
  std::vector<Xfer> xfers;
};

// Part j of n elements split in `parts` (plan.h's chunking rule).
Span share(std::uint64_t n, int parts, int j) { return chunk_span(n, parts, j); }

// Appends a span, merging it with the previous one when they touch.
void add_span(std::vector<Span>& spans, Span s) {
  if (s.count == 0) return;
  if (!spans.empty() && spans.back().first + spans.back().count == s.first) {
    spans.back().count += s.count;
  } else {
    spans.push_back(s);
  }
}


// Bits 0..k-1 of v reversed.
int bit_reverse(int v, int k) {
  int out = 0;
  for (int i = 0; i < k; ++i) out |= ((v >> i) & 1) << (k - 1 - i);
  return out;
}

// Where the p blocks of a loop sit in CCL_IN: block b at position pos[b]; the
// positions cover the loop's elements in order, position q being `at(q)`.
class Blocks {
 public:
  Blocks(std::vector<int> pos, std::function<Span(int)> at) : pos_(std::move(pos)), at_(std::move(at)) {}
  Span of(int block) const { return at_(pos_[static_cast<std::size_t>(block)]); }
  // The blocks' elements as few contiguous spans as their positions allow.
  // Positions are marked in a bitset and read back in order (a sort per
  // transfer was 8% of a 1 MiB AllReduce on 8192 A2 NPUs), and a run of
  // consecutive positions is one range of elements (they cover the
  // elements in order), so `at_` is asked only at its two ends. A block
  // listed twice takes the sorted path, which keeps both.
  std::vector<Span> spans(const std::vector<int>& blocks) const {
    std::vector<std::uint64_t> marked((pos_.size() + 63) / 64, 0);
    for (int b : blocks) {
      const auto q = static_cast<std::size_t>(pos_[static_cast<std::size_t>(b)]);
      const std::uint64_t bit = std::uint64_t{1} << (q % 64);
      if ((marked[q / 64] & bit) != 0) return sorted_spans(blocks);
      marked[q / 64] |= bit;
    }
    std::vector<Span> out;
    int run_first = -1;
    int run_last = -1;
    auto close_run = [&] {
      if (run_first < 0) return;
      const Span a = at_(run_first);
      const Span z = run_last == run_first ? a : at_(run_last);
      add_span(out, Span{a.first, z.first + z.count - a.first});
    };
    for (std::size_t word = 0; word < marked.size(); ++word) {
      for (std::uint64_t bits = marked[word]; bits != 0; bits &= bits - 1) {
        const int q = static_cast<int>(word * 64 + static_cast<std::size_t>(__builtin_ctzll(bits)));
        if (q != run_last + 1 || run_first < 0) {
          close_run();
          run_first = q;
        }
        run_last = q;
      }
    }
    close_run();
    return out;
  }

 private:
  std::vector<Span> sorted_spans(const std::vector<int>& blocks) const {
    std::vector<int> q;
    for (int b : blocks) q.push_back(pos_[static_cast<std::size_t>(b)]);
    std::sort(q.begin(), q.end());
    std::vector<Span> out;
    for (int x : q) add_span(out, at_(x));
    return out;
  }

  std::vector<int> pos_;
  std::function<Span(int)> at_;
};

// The power-of-two "block" of H-D_R: ranks 0..2r-1 pair up as (2i, 2i+1) and
// one of each pair (the one of parity `par`) stands for both; virtual rank v
// is the pair i = v for v < r, else real rank v + r.
struct Fold {
  int p = 0;
  int p2 = 0;   // largest power of two <= p
  int r = 0;    // pairs folded
  int par = 0;  // which rank of a pair takes part
  int real(int v) const { return v < r ? 2 * v + par : v + r; }
  int partner(int i) const { return 2 * i + 1 - par; }
  int virt(int x) const { return x < 2 * r ? (x % 2 == par ? x / 2 : -1) : x - r; }
  // First real block of virtual rank v (p for v = p2): its pair's blocks, or its own.
  int first_block(int v) const { return v >= p2 ? p : (v < r ? 2 * v : v + r); }
};

class Level1Builder : public PlanBuilder {
 public:
  Level1Builder(const CollectiveSpec& spec, Level1Algo algo) : PlanBuilder(spec), algo_(algo) {
    for (int r = 0; r < p_; ++r) stream_.push_back(graph_.add_thread(r, "Plane0"));
    const int k = ceil_log2(p_);
    std::vector<int> order(static_cast<std::size_t>(p_));
    for (int b = 0; b < p_; ++b) order[static_cast<std::size_t>(b)] = b;
    if (algo_ == Level1Algo::NHR) {
      // NHR renumbers the slices so that what a rank sends in one step is
      // contiguous: in bit-reversed order every step's set (a residue class
      // of the block index) is one range when p is a power of two.
      std::sort(order.begin(), order.end(), [&](int a, int b) { return bit_reverse(a, k) < bit_reverse(b, k); });
    }
    pos_.assign(static_cast<std::size_t>(p_), 0);
    for (int q = 0; q < p_; ++q) pos_[static_cast<std::size_t>(order[static_cast<std::size_t>(q)])] = q;
  }

  TaskGraph build() {
    if (p_ == 1) {
      single_rank();
      return std::move(graph_);
    }
    switch (spec_.op) {
      case CollOp::AllReduce: all_reduce(); break;
      case CollOp::ReduceScatter: reduce_scatter(); break;
      case CollOp::AllGather: all_gather(); break;
      case CollOp::Broadcast: broadcast(); break;
      case CollOp::Reduce: reduce(); break;
      case CollOp::AlltoAll: all_to_all(); break;
    }
    return std::move(graph_);
  }

 private:
  std::string title() const { return level1_algo_name(algo_) + " " + coll_op_title(spec_.op); }

  // ---- emitting -----------------------------------------------------------

  void emit(const std::vector<Step>& steps) {
    for (std::size_t i = 0; i < steps.size(); ++i) {
      emit(steps[i], algo_ == Level1Algo::Ring ? 0 : static_cast<int>(i));
    }
  }

  void emit(const Step& step, int group) {
    const int ready = 2 * group;
    const int done = 2 * group + 1;
    std::vector<int> in(static_cast<std::size_t>(p_), -1), out(static_cast<std::size_t>(p_), -1);
    for (std::size_t i = 0; i < step.xfers.size(); ++i) {
      const Xfer& x = step.xfers[i];
      if (x.from == x.to || out[static_cast<std::size_t>(x.from)] >= 0 || in[static_cast<std::size_t>(x.to)] >= 0) {
        throw std::logic_error(title() + " " + step.name + ": a rank sends or receives twice in one step");
      }
      out[static_cast<std::size_t>(x.from)] = static_cast<int>(i);
      in[static_cast<std::size_t>(x.to)] = static_cast<int>(i);
    }
    // The step's labels, built once (per rank they were a fifth of building a level-1 stage).
    const std::string name = title() + " " + step.name;
    const std::string ready_label = name + " ready";
    const std::string done_label = name + " done";
    for (int r = 0; r < p_; ++r) {
      if (in[static_cast<std::size_t>(r)] < 0) continue;
      graph_.record(stream_[r], step.xfers[static_cast<std::size_t>(in[static_cast<std::size_t>(r)])].from, ready,
                    ready_label);
    }
    for (int r = 0; r < p_; ++r) {
      if (out[static_cast<std::size_t>(r)] < 0) continue;
      const Xfer& x = step.xfers[static_cast<std::size_t>(out[static_cast<std::size_t>(r)])];
      graph_.wait(stream_[r], ready, ready_label);
      for (const Span& s : x.spans) {
        move(stream_[r], ccl_in(r, s.first), x.reduce ? ccl_out(x.to, s.first) : ccl_in(x.to, s.first), s.count, false,
             name);
      }
      graph_.record(stream_[r], x.to, done, done_label);
    }
    for (int r = 0; r < p_; ++r) {
      if (in[static_cast<std::size_t>(r)] < 0) continue;
      const Xfer& x = step.xfers[static_cast<std::size_t>(in[static_cast<std::size_t>(r)])];
      graph_.wait(stream_[r], done, done_label);
      if (!x.reduce) continue;
      for (const Span& s : x.spans) move(stream_[r], ccl_out(r, s.first), ccl_in(r, s.first), s.count, true, name);
    }
  }

  // ---- block layouts of one loop ------------------------------------------

  // n elements in p chunks (AllReduce, Broadcast, Reduce).
  Blocks chunks(std::uint64_t n) const {
    const int p = p_;
    return Blocks(pos_, [n, p](int q) { return share(n, p, q); });
  }
  // p blocks of n elements each (ReduceScatter, AllGather).
  Blocks per_rank(std::uint64_t n) const {
    return Blocks(pos_, [n](int q) { return Span{static_cast<std::uint64_t>(q) * n, n}; });
  }

  // ---- the ops: loops over the HCCL buffer ----------------------------------

  void all_reduce() {
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) move(stream_[r], input(r, loop.first), ccl_in(r, 0), n, false, "copy in");
      if (algo_ == Level1Algo::HalvingDoubling) {
        emit(hd_all_reduce(n));
      } else {
        const Blocks b = chunks(n);
        std::vector<Step> steps = reduce_scatter_steps(b);
        for (Step& s : all_gather_steps(b)) steps.push_back(std::move(s));
        emit(steps);
      }
      for (int r = 0; r < p_; ++r) move(stream_[r], ccl_in(r, 0), output(r, loop.first), n, false, "copy out");
    }
  }

  void reduce_scatter() {
    const std::uint64_t per_rank_count = spec_.count;
    for (const Span& loop : loops(per_rank_count, buffer_elements() / static_cast<std::uint64_t>(p_))) {
      const std::uint64_t n = loop.count;
      const Blocks b = per_rank(n);
      for (int r = 0; r < p_; ++r) {
        for (int j = 0; j < p_; ++j) {
          move(stream_[r], input(r, static_cast<std::uint64_t>(j) * per_rank_count + loop.first),
               ccl_in(r, b.of(j).first), n, false, "copy in");
        }
      }
      emit(algo_ == Level1Algo::HalvingDoubling ? hd_reduce_scatter(n) : reduce_scatter_steps(b));
      for (int r = 0; r < p_; ++r) move(stream_[r], ccl_in(r, b.of(r).first), output(r, loop.first), n, false, "copy out");
    }
  }

  void all_gather() {
    const std::uint64_t per_rank_count = spec_.count;
    for (const Span& loop : loops(per_rank_count, buffer_elements() / static_cast<std::uint64_t>(p_))) {
      const std::uint64_t n = loop.count;
      const Blocks b = per_rank(n);
      for (int r = 0; r < p_; ++r) move(stream_[r], input(r, loop.first), ccl_in(r, b.of(r).first), n, false, "copy in");
      emit(algo_ == Level1Algo::HalvingDoubling ? hd_all_gather(n) : all_gather_steps(b));
      for (int r = 0; r < p_; ++r) {
        for (int j = 0; j < p_; ++j) {
          move(stream_[r], ccl_in(r, b.of(j).first),
               output(r, static_cast<std::uint64_t>(j) * per_rank_count + loop.first), n, false, "copy out");
        }
      }
    }
  }

  void broadcast() {
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      const std::uint64_t n = loop.count;
      move(stream_[root], input(root, loop.first), ccl_in(root, 0), n, false, "copy in");
      if (algo_ == Level1Algo::HalvingDoubling) {
        emit(hd_broadcast(n));
      } else if (spec_.one_shot) {
        emit(tree_broadcast(n));
      } else {
        const Blocks b = chunks(n);
        std::vector<Step> steps = algo_ == Level1Algo::NHR ? nhr_scatter_steps(b) : nb_scatter_steps(b);
        for (Step& s : all_gather_steps(b)) steps.push_back(std::move(s));
        emit(steps);
      }
      for (int r = 0; r < p_; ++r) move(stream_[r], ccl_in(r, 0), output(r, loop.first), n, false, "copy out");
    }
  }

  void reduce() {
    const int root = spec_.root;
    for (const Span& loop : loops(spec_.count, buffer_elements())) {
      const std::uint64_t n = loop.count;
      for (int r = 0; r < p_; ++r) move(stream_[r], input(r, loop.first), ccl_in(r, 0), n, false, "copy in");
      if (algo_ == Level1Algo::HalvingDoubling) {
        emit(hd_reduce(n));
      } else {
        const Blocks b = chunks(n);
        std::vector<Step> steps = reduce_scatter_steps(b);
        for (Step& s : ring_gather_steps(b)) steps.push_back(std::move(s));
        emit(steps);
      }
      move(stream_[root], ccl_in(root, 0), output(root, loop.first), n, false, "copy out");
    }
  }

  void single_rank() {
    // One server: nothing crosses; the output is the input.
    const std::uint64_t n = spec_.op == CollOp::AlltoAll ? spec_.pair_count(0, 0) : spec_.count;
    const BufferRef in = input(0, 0);
    const BufferRef out = output(0, 0);
    if (in.buffer == out.buffer && in.offset() == out.offset()) return;
    move(stream_[0], in, out, n, false, "copy");
  }

  // ---- ring ---------------------------------------------------------------
  // p-1 steps per phase, every rank sends one block to the next rank
  // (HCCL's ring: reduce-scatter then all-gather; Reduce gathers to the root
  // along the ring).

  std::vector<Step> ring_phase(const std::string& phase, bool reduce, const Blocks& b,
                               const std::function<int(int, int)>& block_at) const {
    std::vector<Step> steps;
    for (int s = 0; s < p_ - 1; ++s) {
      Step st;
      st.name = phase + " step " + std::to_string(s);
      for (int x = 0; x < p_; ++x) {
        const int blk = block_at(x, s);
        if (blk < 0) continue;
        st.xfers.push_back(Xfer{x, mod(x + 1, p_), b.spans({blk}), reduce});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // Gather to the root along the ring after a ring reduce-scatter (rank q
  // owns block q): block c travels c -> c+1 -> ... -> root; at step s rank x
  // forwards block x-s while that block has not reached the root.
  std::vector<Step> ring_gather_steps(const Blocks& b) const {
    const int root = spec_.root;
    return ring_phase("Gather", false, b, [&](int x, int s) {
      if (x == root || s >= mod(root - x + s, p_)) return -1;
      return mod(x - s, p_);
    });
  }

  // ---- NHR and NB: the binary-stride schedule -------------------------------
  //
  // hicann/hccl docs (coll_algo_intro, hcclug "NHR", "NB"): both take
  // ceil(log2 p) steps for ReduceScatter and for AllGather at any p, without
  // the extra data H-D_R needs for non-powers of two; AllReduce is
  // ReduceScatter + AllGather, Broadcast is Scatter + AllGather. NB: in
  // ReduceScatter step i every rank sends to the rank 2^i further on; in
  // AllGather the stride shrinks while the volume grows. NHR: the largest
  // volume moves between the nearest ranks, and slices are renumbered so a
  // step's slices go as one piece (p a power of two) or nearly so.
  //
  // What is built here (written from those properties, k = ceil(log2 p)):
  //   ReduceScatter step i = 0..k-1: rank x sends to x + 2^i the partial sums
  //     of blocks x + m, m = 2^i (mod 2^(i+1)), m < p: ceil((p - 2^i) / 2^(i+1))
  //     blocks, p-1 in all (each contribution hops along the binary digits of
  //     its distance to its block, lowest first).
  //   AllGather, its transpose, i = k-1..0: rank y sends to y - 2^i the blocks
  //     y + m, m = 0 (mod 2^(i+1)), m + 2^i < p.
  //   NHR lays the blocks out in bit-reversed order (one piece per step when
  //   p is a power of two, a few pieces otherwise); NB keeps block order and
  //   sends each block as its own piece where they are not adjacent.
  //   Scatter (Broadcast): NHR splits by residue classes of the index relative
  //   to the root (contiguous in its layout), NB by halving index ranges.
  // With spec.one_shot the Broadcast is instead HCCL's whole-data tree
  // (tree_broadcast below).

  std::vector<Step> reduce_scatter_steps(const Blocks& b) const {
    if (algo_ == Level1Algo::Ring) {
      return ring_phase("ReduceScatter", true, b, [&](int x, int s) { return mod(x - s - 1, p_); });
    }
    std::vector<Step> steps;
    const int k = ceil_log2(p_);
    for (int i = 0; i < k; ++i) {
      const int d = 1 << i;
      Step st;
      st.name = "ReduceScatter step " + std::to_string(i);
      for (int x = 0; x < p_; ++x) {
        std::vector<int> blocks;
        for (int m = d; m < p_; m += 2 * d) blocks.push_back(mod(x + m, p_));
        st.xfers.push_back(Xfer{x, mod(x + d, p_), b.spans(blocks), true});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  std::vector<Step> all_gather_steps(const Blocks& b) const {
    if (algo_ == Level1Algo::Ring) {
      return ring_phase("AllGather", false, b, [&](int x, int s) { return mod(x - s, p_); });
    }
    std::vector<Step> steps;
    const int k = ceil_log2(p_);
    for (int i = k - 1; i >= 0; --i) {
      const int d = 1 << i;
      Step st;
      st.name = "AllGather step " + std::to_string(k - 1 - i);
      for (int y = 0; y < p_; ++y) {
        std::vector<int> blocks;
        for (int m = 0; m + d < p_; m += 2 * d) blocks.push_back(mod(y + m, p_));
        st.xfers.push_back(Xfer{y, mod(y - d, p_), b.spans(blocks), false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // Relative index u = block - root. Step s: every rank u < 2^s holds the
  // blocks u (mod 2^s) and passes those = u + 2^s (mod 2^(s+1)) to u + 2^s.
  std::vector<Step> nhr_scatter_steps(const Blocks& b) const {
    const int root = spec_.root;
    std::vector<Step> steps;
    const int k = ceil_log2(p_);
    for (int s = 0; s < k; ++s) {
      const int d = 1 << s;
      Step st;
      st.name = "Scatter step " + std::to_string(s);
      for (int u = 0; u < d && u + d < p_; ++u) {
        std::vector<int> blocks;
        for (int t = u + d; t < p_; t += 2 * d) blocks.push_back(mod(root + t, p_));
        st.xfers.push_back(Xfer{mod(root + u, p_), mod(root + u + d, p_), b.spans(blocks), false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // Relative index u = block - root. Step s, d = 2^(k-1-s): every holder u
  // (a multiple of 2d) keeps [u, u+d) and passes [u+d, u+2d) to u + d.
  std::vector<Step> nb_scatter_steps(const Blocks& b) const {
    const int root = spec_.root;
    std::vector<Step> steps;
    const int k = ceil_log2(p_);
    for (int s = 0; s < k; ++s) {
      const int d = 1 << (k - 1 - s);
      Step st;
      st.name = "Scatter step " + std::to_string(s);
      for (int u = 0; u + d < p_; u += 2 * d) {
        std::vector<int> blocks;
        for (int t = u + d; t < std::min(u + 2 * d, p_); ++t) blocks.push_back(mod(root + t, p_));
        st.xfers.push_back(Xfer{mod(root + u, p_), mod(root + u + d, p_), b.spans(blocks), false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // HCCL's small-data Broadcast templates: the whole data along a binomial
  // tree rooted at the root, for any p. Relative index u = rank - root; a
  // holder u sends to u + d when that is a rank. BroadcastNHROneshot
  // (NHR) halves the distance, d = 2^(k-1-s) with u a multiple of 2d;
  // BroadcastNBBinary (NB) doubles it, d = 2^s with u < d
  // (hcomm alg_template broadcast_nhr_oneshot.cc, broadcast_nb_binary.cc).
  std::vector<Step> tree_broadcast(std::uint64_t n) const {
    const int root = spec_.root;
    const int k = ceil_log2(p_);
    std::vector<Step> steps;
    for (int s = 0; s < k; ++s) {
      Step st;
      st.name = "Broadcast step " + std::to_string(s);
      const bool halving = algo_ == Level1Algo::NHR;
      const int d = halving ? 1 << (k - 1 - s) : 1 << s;
      for (int u = 0; u + d < p_; u += halving ? 2 * d : 1) {
        if (!halving && u >= d) break;
        st.xfers.push_back(Xfer{mod(root + u, p_), mod(root + u + d, p_), {Span{0, n}}, false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // ---- H-D_R ----------------------------------------------------------------
  //
  // hicann/hccl docs (hcclug "RHD"): for p not a power of two, split off
  // 2r = 2(p - 2^floor(log2 p)) ranks, fold them pairwise into r (one of each
  // pair sends all its data to the other), run halving-doubling on the
  // remaining power of two, and restore the folded ranks at the end.
  // ReduceScatter is vector halving with distance halving (keeps the scatter
  // order), AllGather the reverse (distance doubling), AllReduce both.
  // Broadcast: the pair member of the root's parity takes part; a binomial
  // tree of whole-data sends with halving distance inside the power of two,
  // then one send to the folded ranks. Reduce (not detailed in the docs):
  // fold, halving reduce-scatter, binomial gather to the root.

  Fold fold(bool rooted) const {
    Fold f;
    f.p = p_;
    f.p2 = floor_pow2(p_);
    f.r = p_ - f.p2;
    f.par = rooted && spec_.root < 2 * f.r ? spec_.root % 2 : 0;
    return f;
  }

  // Folds every pair into its taking-part rank; `whole` is what a pair sends.
  Step fold_step(const Fold& f, const std::vector<Span>& whole, bool reduce) const {
    Step st;
    st.name = "Fold";
    for (int i = 0; i < f.r; ++i) st.xfers.push_back(Xfer{f.partner(i), f.real(i), whole, reduce});
    return st;
  }

  // Reduce-scatter inside the power of two; `span` gives the elements of
  // virtual blocks [a, b). Virtual rank v ends with the reduced block v.
  std::vector<Step> hd_halving(const Fold& f, const std::function<Span(int, int)>& span) const {
    std::vector<Step> steps;
    for (int d = f.p2 / 2, j = 0; d >= 1; d /= 2, ++j) {
      Step st;
      st.name = "ReduceScatter step " + std::to_string(j);
      for (int v = 0; v < f.p2; ++v) {
        const int base = v & ~(2 * d - 1);
        const int give = (v & d) ? base : base + d;  // the half the partner keeps
        st.xfers.push_back(Xfer{f.real(v), f.real(v ^ d), {span(give, give + d)}, true});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // All-gather inside the power of two, from virtual block v at rank v.
  std::vector<Step> hd_doubling(const Fold& f, const std::function<Span(int, int)>& span) const {
    std::vector<Step> steps;
    for (int d = 1, j = 0; d < f.p2; d *= 2, ++j) {
      Step st;
      st.name = "AllGather step " + std::to_string(j);
      for (int v = 0; v < f.p2; ++v) {
        const int held = v & ~(d - 1);
        st.xfers.push_back(Xfer{f.real(v), f.real(v ^ d), {span(held, held + d)}, false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // Virtual blocks as p2 shares of n elements.
  static std::function<Span(int, int)> shares(std::uint64_t n, int p2) {
    return [n, p2](int a, int b) {
      const Span first = share(n, p2, a);
      const Span last = share(n, p2, b - 1);
      return Span{first.first, last.first + last.count - first.first};
    };
  }

  std::vector<Step> hd_all_reduce(std::uint64_t n) const {
    const Fold f = fold(false);
    std::vector<Step> steps;
    if (f.r > 0) steps.push_back(fold_step(f, {Span{0, n}}, true));
    for (Step& s : hd_halving(f, shares(n, f.p2))) steps.push_back(std::move(s));
    for (Step& s : hd_doubling(f, shares(n, f.p2))) steps.push_back(std::move(s));
    if (f.r > 0) {
      Step st;
      st.name = "Unfold";
      for (int i = 0; i < f.r; ++i) st.xfers.push_back(Xfer{f.real(i), f.partner(i), {Span{0, n}}, false});
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // Virtual blocks [a, b) of n elements each: a folded pair's two blocks count as one.
  static auto virtual_blocks(Fold f, std::uint64_t n) {
    return [f, n](int a, int b) {
      const std::uint64_t lo = static_cast<std::uint64_t>(f.first_block(a));
      const std::uint64_t hi = static_cast<std::uint64_t>(f.first_block(b));
      return Span{lo * n, (hi - lo) * n};
    };
  }

  // ReduceScatter: virtual block v is its pair's two blocks (or its own).
  std::vector<Step> hd_reduce_scatter(std::uint64_t n) const {
    const Fold f = fold(false);
    const auto span = virtual_blocks(f, n);
    std::vector<Step> steps;
    if (f.r > 0) steps.push_back(fold_step(f, {Span{0, static_cast<std::uint64_t>(p_) * n}}, true));
    for (Step& s : hd_halving(f, span)) steps.push_back(std::move(s));
    if (f.r > 0) {
      Step st;
      st.name = "Unfold";
      for (int i = 0; i < f.r; ++i) {
        const std::uint64_t blk = static_cast<std::uint64_t>(f.partner(i));
        st.xfers.push_back(Xfer{f.real(i), f.partner(i), {Span{blk * n, n}}, false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  std::vector<Step> hd_all_gather(std::uint64_t n) const {
    const Fold f = fold(false);
    const auto span = virtual_blocks(f, n);
    std::vector<Step> steps;
    if (f.r > 0) {
      Step st;
      st.name = "Fold";
      for (int i = 0; i < f.r; ++i) {
        const std::uint64_t blk = static_cast<std::uint64_t>(f.partner(i));
        st.xfers.push_back(Xfer{f.partner(i), f.real(i), {Span{blk * n, n}}, false});
      }
      steps.push_back(std::move(st));
    }
    for (Step& s : hd_doubling(f, span)) steps.push_back(std::move(s));
    if (f.r > 0) {
      Step st;
      st.name = "Unfold";
      for (int i = 0; i < f.r; ++i) {
        const std::uint64_t own = static_cast<std::uint64_t>(f.partner(i));
        std::vector<Span> rest;
        add_span(rest, Span{0, own * n});
        add_span(rest, Span{(own + 1) * n, (static_cast<std::uint64_t>(p_) - own - 1) * n});
        st.xfers.push_back(Xfer{f.real(i), f.partner(i), rest, false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  std::vector<Step> hd_broadcast(std::uint64_t n) const {
    const Fold f = fold(true);
    const int vroot = f.virt(spec_.root);
    std::vector<Step> steps;
    for (int d = f.p2 / 2, j = 0; d >= 1; d /= 2, ++j) {
      Step st;
      st.name = "Broadcast step " + std::to_string(j);
      for (int v = 0; v < f.p2; ++v) {
        if (((v ^ vroot) % (2 * d)) != 0) continue;
        st.xfers.push_back(Xfer{f.real(v), f.real(v ^ d), {Span{0, n}}, false});
      }
      steps.push_back(std::move(st));
    }
    if (f.r > 0) {
      Step st;
      st.name = "Unfold";
      for (int i = 0; i < f.r; ++i) st.xfers.push_back(Xfer{f.real(i), f.partner(i), {Span{0, n}}, false});
      steps.push_back(std::move(st));
    }
    return steps;
  }

  std::vector<Step> hd_reduce(std::uint64_t n) const {
    const Fold f = fold(true);
    const int vroot = f.virt(spec_.root);
    const auto span = shares(n, f.p2);
    std::vector<Step> steps;
    if (f.r > 0) steps.push_back(fold_step(f, {Span{0, n}}, true));
    for (Step& s : hd_halving(f, span)) steps.push_back(std::move(s));
    // Binomial gather: at distance d, ranks whose offset from the root is an
    // odd multiple of d pass the aligned d blocks they hold towards the root.
    for (int d = 1, j = 0; d < f.p2; d *= 2, ++j) {
      Step st;
      st.name = "Gather step " + std::to_string(j);
      for (int v = 0; v < f.p2; ++v) {
        if (((v ^ vroot) % (2 * d)) != d) continue;
        const int held = v & ~(d - 1);
        st.xfers.push_back(Xfer{f.real(v), f.real(v ^ d), {span(held, held + d)}, false});
      }
      steps.push_back(std::move(st));
    }
    return steps;
  }

  // ---- pairwise AlltoAll ----------------------------------------------------
  //
  // HCCL's pairwise: p-1 steps; in step s every rank sends its block for
  // rank x+s and receives the block of rank x-s, so no rank is written by two
  // peers at once. Per step, on the rank's one stream: copy the block from
  // the input into its CCL_IN, wait for the receiver's "ready", write into the
  // receiver's CCL_OUT, record "done"; then wait for its own sender's "done"
  // and copy CCL_OUT to the output. The whole HCCL buffer serves one peer at
  // a time, so a loop moves up to HCCL_BUFFSIZE per pair.
  //
  // Notifies: step s uses 2(s-1) ("ready", on the sender) and 2(s-1)+1
  // ("done", on the receiver); only the pair (x, x+s) ever uses them, once per
  // round. Peers change every step, so nothing orders a "ready" from x+s+1
  // after x consumed the one from x+s: registers cannot be shared between
  // steps of a round. Up to kOneRound steps fit in one round (p <= 121). For
  // larger p the steps go in rounds of kRound, and between rounds (and
  // loops) every rank passes a dissemination barrier (ceil(log2 p) steps,
  // record to x + 2^i, wait from x - 2^i) entered after all its waits of the
  // round: once any rank leaves it, every wait of the round is done, so the
  // next round's records land on consumed registers. Barriers alternate
  // between two register sets; barrier b+2 can only start after every rank
  // entered barrier b+1, hence after it left barrier b.

  // At most 2 x 120 notifies for one round, 2 x 100 + 2 x 2 x 10 (barriers) for p <= 1024.
  static constexpr int kOneRound = 120;
  static constexpr int kRound = 100;

 public:
  static int pairwise_round(int p) { return p - 1 <= kOneRound ? p - 1 : kRound; }

 private:

  void barrier(int set) {
    const int k = ceil_log2(p_);
    const int base = 2 * pairwise_round(p_) + set * k;
    for (int i = 0; i < k; ++i) {
      for (int x = 0; x < p_; ++x) graph_.record(stream_[x], mod(x + (1 << i), p_), base + i, "barrier");
      for (int x = 0; x < p_; ++x) graph_.wait(stream_[x], base + i, "barrier");
    }
  }

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
    const auto part = [&](const Span& loop, int from, int to) {
      const std::uint64_t total = spec_.pair_count(from, to);
      return total <= loop.first ? 0 : std::min(loop.count, total - loop.first);
    };
    const int window = pairwise_round(p_);
    int barriers = 0;
    bool first_round = true;
    const std::string name = title();
    for (const Span& loop : loops(largest, buffer_elements())) {
      for (int x = 0; x < p_; ++x) {
        move(stream_[x], input(x, send_displ[x][x] + loop.first), output(x, recv_displ[x][x] + loop.first),
             part(loop, x, x), false, "local block");
      }
      for (int s = 1; s < p_; ++s) {
        if ((s - 1) % window == 0 && window < p_ - 1) {
          if (!first_round) barrier(barriers++ % 2);
          first_round = false;
        }
        const int ready = 2 * ((s - 1) % window);
        const int done = ready + 1;
        const std::string step = name + " step " + std::to_string(s);
        for (int x = 0; x < p_; ++x) {
          const int from = mod(x - s, p_);
          if (part(loop, from, x) > 0) graph_.record(stream_[x], from, ready, step + " ready");
        }
        for (int x = 0; x < p_; ++x) {
          const int to = mod(x + s, p_);
          const std::uint64_t n = part(loop, x, to);
          if (n == 0) continue;
          move(stream_[x], input(x, send_displ[x][to] + loop.first), ccl_in(x, 0), n, false, step + " copy in");
          graph_.wait(stream_[x], ready, step + " ready");
          move(stream_[x], ccl_in(x, 0), ccl_out(to, 0), n, false, step);
          graph_.record(stream_[x], to, done, step + " done");
        }
        for (int x = 0; x < p_; ++x) {
          const int from = mod(x - s, p_);
          const std::uint64_t n = part(loop, from, x);
          if (n == 0) continue;
          graph_.wait(stream_[x], done, step + " done");
          move(stream_[x], ccl_out(x, 0), output(x, recv_displ[x][from] + loop.first), n, false, step + " copy out");
        }
      }
    }
  }

  Level1Algo algo_;
  std::vector<ThreadId> stream_;
  std::vector<int> pos_;  // block -> position in the loop's layout
};

bool supports_op(CollOp op, Level1Algo algo) {
  switch (algo) {
    case Level1Algo::Ring:
      return op == CollOp::AllReduce || op == CollOp::ReduceScatter || op == CollOp::AllGather || op == CollOp::Reduce;
    case Level1Algo::HalvingDoubling: return op != CollOp::AlltoAll;
    case Level1Algo::NHR:
    case Level1Algo::NB:
      return op == CollOp::AllReduce || op == CollOp::ReduceScatter || op == CollOp::AllGather ||
             op == CollOp::Broadcast;
    case Level1Algo::Pairwise: return op == CollOp::AlltoAll;
  }
  return false;
}

std::string names(const std::vector<Level1Algo>& algos) {
  std::string out;
  for (std::size_t i = 0; i < algos.size(); ++i) {
    if (i > 0) out += i + 1 == algos.size() ? " or " : ", ";
    out += level1_algo_name(algos[i]);
  }
  return out;
}

}  // namespace

const std::vector<Level1Algo>& level1_algos() {
  static const std::vector<Level1Algo> all{Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR,
                                           Level1Algo::NB, Level1Algo::Pairwise};
  return all;
}

std::string level1_algo_name(Level1Algo algo) {
  switch (algo) {
    case Level1Algo::Ring: return "ring";
    case Level1Algo::HalvingDoubling: return "H-D_R";
    case Level1Algo::NHR: return "NHR";
    case Level1Algo::NB: return "NB";
    case Level1Algo::Pairwise: return "pairwise";
  }
  return "?";
}

std::optional<Level1Algo> parse_level1_algo(const std::string& name) {
  for (const Level1Algo a : level1_algos()) {
    if (level1_algo_name(a) == name) return a;
  }
  return std::nullopt;
}

bool level1_supports(CollOp op, int ranks, Level1Algo algo) { return ranks >= 1 && supports_op(op, algo); }

std::vector<Level1Algo> level1_fallbacks(CollOp op, Level1Algo algo) {
  if (supports_op(op, algo)) return {};
  if (op == CollOp::AlltoAll) return {Level1Algo::Pairwise};
  std::vector<Level1Algo> order;
  switch (algo) {
    case Level1Algo::Ring: order = {Level1Algo::NHR, Level1Algo::HalvingDoubling}; break;
    case Level1Algo::HalvingDoubling: order = {Level1Algo::NHR, Level1Algo::Ring}; break;
    case Level1Algo::NHR: order = {Level1Algo::HalvingDoubling, Level1Algo::Ring}; break;
    case Level1Algo::NB: order = {Level1Algo::NHR, Level1Algo::HalvingDoubling, Level1Algo::Ring}; break;
    case Level1Algo::Pairwise: return {};
  }
  std::vector<Level1Algo> out;
  for (const Level1Algo a : order) {
    if (supports_op(op, a)) out.push_back(a);
  }
  return out;
}

int level1_notifies(int ranks, Level1Algo algo) {
  if (ranks <= 1) return 0;
  switch (algo) {
    case Level1Algo::Ring: return 2;
    case Level1Algo::HalvingDoubling: return 2 * (2 + 2 * ceil_log2(floor_pow2(ranks)));
    case Level1Algo::NHR:
    case Level1Algo::NB: return 2 * 2 * ceil_log2(ranks);
    case Level1Algo::Pairwise: {
      const int round = Level1Builder::pairwise_round(ranks);
      return 2 * round + (round < ranks - 1 ? 2 * ceil_log2(ranks) : 0);
    }
  }
  return 0;
}

TaskGraph build_level1(const CollectiveSpec& spec, Level1Algo algo) {
  const std::string what = "level1:" + level1_algo_name(algo) + " " + coll_op_title(spec.op);
  if (spec.ranks < 1) throw std::invalid_argument(what + ": needs at least one rank");
  if (!supports_op(spec.op, algo)) {
    std::string why;
    if (algo == Level1Algo::Pairwise) {
      why = "pairwise only runs AlltoAll, AlltoAllV and AlltoAllVC in HCCL";
    } else if (spec.op == CollOp::AlltoAll) {
      why = "HCCL runs AlltoAll between servers with pairwise only";
    } else {
      why = "HCCL's " + level1_algo_name(algo) + " has no " + coll_op_title(spec.op) +
            " (inter-server algorithm support list); HCCL switches to " + names(level1_fallbacks(spec.op, algo));
    }
    throw std::invalid_argument(what + " is not supported: " + why);
  }
  if (spec.root < 0 || spec.root >= spec.ranks) throw std::invalid_argument(what + ": root outside the ranks");
  if (spec.buffer_bytes < data_type_size(spec.dtype) * static_cast<std::uint64_t>(spec.ranks)) {
    throw std::invalid_argument(what + ": the HCCL buffer must hold at least one element per rank");
  }
  if (!spec.alltoallv_counts.empty()) {
    bool ok = spec.alltoallv_counts.size() == static_cast<std::size_t>(spec.ranks);
    for (const auto& row : spec.alltoallv_counts) ok = ok && row.size() == static_cast<std::size_t>(spec.ranks);
    if (!ok) throw std::invalid_argument(what + ": AlltoAllV counts must be ranks x ranks");
  }
  return Level1Builder(spec, algo).build();
}

}  // namespace hcclsim

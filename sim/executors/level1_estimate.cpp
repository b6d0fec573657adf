// Closed forms of the level-1 algorithms: per loop over the HCCL buffer,
// the local copies in and out on the rank's one stream, and each step as a
// guarded transfer (steps.h) of the largest part any rank sends in it,
// split into as many tasks as that part has pieces. Steps in which only
// some ranks take part (H-D_R's fold, a broadcast tree) cost what they cost
// the ranks on the critical path, which do take part in every one of them.
// Over RDMA (A2 rails) the Broadcast and the Reduce are followed write by
// write instead (RdmaRun), as their writes of different steps and loops
// are in flight together and share the NICs.
#include "sim/executors/level1_estimate.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <string>
#include <tuple>
#include <vector>

#include "sim/executors/plan.h"
#include "sim/estimate/steps.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

constexpr double kNoCap = 1e30;
// At most this many source NPUs' flows are counted for a step's shares: the
// fabrics are regular, so a window of this size (128 A2 servers) loads its
// channels as the whole cluster does, and counting stays well under 10 ms.
constexpr int kCountedSources = 1024;


// One step of a loop: the largest part a rank sends (elements), in how many
// tasks, whether it is reduced, and the peer pattern (x -> x + shift, or
// x -> x ^ mask) for counting the step's flows.
struct Step1 {
  double elems = 0;
  int pieces = 1;
  bool reduce = false;
  int shift = 0;
  int mask = 0;
  // A tree step (a broadcast's scatter, a reduce's gather): the sender
  // receives nothing in it and its receiver has long recorded "ready" and
  // reached its wait, so the step costs the sender's wait, write and record.
  bool tree = false;
  // A broadcast's tree step: a rank that has the data sends in every later
  // step of the run (see fanout_tree).
  bool fanout = false;
  // H-D_R's pairs: +1 the fold (2i+1 -> 2i for the first p - p2 pairs),
  // -1 the unfold (2i -> 2i+1); 0 with a mask: virtual ranks v -> v ^ mask.
  int fold = 0;
};

// What rank x sends in an H-D_R step of ReduceScatter or AllGather with
// per-rank blocks of `block` bytes: d virtual blocks, a virtual block being
// its folded pair's two blocks (v < r) or a rank's own. `elems` (the
// largest) for every other step.
double hd_bytes(const Step1& s, CollOp op, int p, double block, double largest, int x) {
  const int p2 = floor_pow2(p);
  const int r = p - p2;
  if (s.mask == 0 || r == 0 || (op != CollOp::ReduceScatter && op != CollOp::AllGather)) return largest;
  const int v = x < 2 * r ? (x % 2 == 0 ? x / 2 : -1) : x - r;
  if (v < 0) return largest;
  const int d = s.mask;
  int lo;
  if (op == CollOp::ReduceScatter) {
    const int base = v & ~(2 * d - 1);
    lo = (v & d) ? base : base + d;  // the half the partner keeps
  } else {
    lo = v & ~(d - 1);  // the blocks it holds
  }
  const int doubled = std::max(0, std::min(lo + d, r) - lo);
  return block * (d + doubled);
}

// Who each rank sends to in an H-D_R step (-1: nobody), on real ranks:
// virtual rank v is 2v for v < r (its pair folded into it), else v + r.
std::vector<int> hd_targets(const Step1& s, int p) {
  const int p2 = floor_pow2(p);
  const int r = p - p2;
  std::vector<int> to(static_cast<std::size_t>(p), -1);
  auto real = [r](int v) { return v < r ? 2 * v : v + r; };
  if (s.fold > 0) {
    for (int i = 0; i < r; ++i) to[static_cast<std::size_t>(2 * i + 1)] = 2 * i;
  } else if (s.fold < 0) {
    for (int i = 0; i < r; ++i) to[static_cast<std::size_t>(2 * i)] = 2 * i + 1;
  } else {
    for (int v = 0; v < p2; ++v) to[static_cast<std::size_t>(real(v))] = real(v ^ s.mask);
  }
  return to;
}

// A run of broadcast tree steps over RDMA, from when the first sender is
// free. A write is posted and the stream goes on, so a rank that has the
// data posts its sends of every later step at once and they share its NIC
// (equal shares: a flow finishes when the smaller ones have and it has
// had its share of the rest). The receiver of step j does the same with
// steps j+1.. once its data landed; the run ends when the last subtree has.
double fanout_tree(const StepCosts& c, const std::vector<double>& bytes, double rate, const PathCost& path) {
  const int k = static_cast<int>(bytes.size());
  const double post = c.dispatch + c.rdma_post;
  const double flight = c.rdma_notify_bytes / path.rate + path.latency;
  // span[j]: from the receiver of step j having its data to its subtree's end (j = -1: the root).
  std::vector<double> span(static_cast<std::size_t>(k + 1), 0.0);
  for (int j = k - 1; j >= -1; --j) {
    std::vector<int> later;
    for (int m = j + 1; m < k; ++m) later.push_back(m);
    std::sort(later.begin(), later.end(), [&](int a, int b) { return bytes[static_cast<std::size_t>(a)] < bytes[static_cast<std::size_t>(b)]; });
    double end = 0;
    double clock = 0;
    double done_bytes = 0;
    for (std::size_t i = 0; i < later.size(); ++i) {
      const int m = later[i];
      const double b = bytes[static_cast<std::size_t>(m)];
      clock += (b - done_bytes) * static_cast<double>(later.size() - i) / rate;
      done_bytes = b;
      // Its wait for "ready", the write's and the record's posts, in step order.
      const double fixed = c.dispatch + c.wait + 2 * post * static_cast<double>(m - j);
      const double landed = fixed + std::max(clock + path.latency, flight);
      end = std::max(end, landed + span[static_cast<std::size_t>(m + 1)]);
    }
    span[static_cast<std::size_t>(j + 1)] = end;
  }
  return span[0];
}

// A tree step on the sender's stream, free at `free`; returns when the
// receiver's wait ends (the data and the "done" record landed), from which
// the receiver goes on.
double tree_step(const StepCosts& c, double free, double bytes, double rate, const PathCost& path) {
  const double d = c.dispatch;
  const double ready = free + d + c.wait;
  if (path.rdma) {
    const double write_posted = ready + d + c.rdma_post;
    const double arrived = write_posted + bytes / rate + path.latency;
    const double done_posted = write_posted + d + c.rdma_post;
    return std::max(done_posted + c.rdma_notify_bytes / path.rate + path.latency, arrived);
  }
  const double written = sdma_task(c, ready, c.sdma_fixed + path.write_extra, bytes, rate, path.latency);
  return written + d + (path.same_chip ? c.record_local : c.record_remote);
}

// Pieces NHR's bit-reversed layout splits `blocks` (indices) into.
int nhr_pieces(const std::vector<int>& blocks, int p) {
  const int k = ceil_log2(p);
  auto rev = [k](int v) {
    int out = 0;
    for (int i = 0; i < k; ++i) out |= ((v >> i) & 1) << (k - 1 - i);
    return out;
  };
  // pos[b]: b's place when the blocks are ordered by their bit-reversed
  // index. Reversal is its own inverse, so that order is rev(0), rev(1),
  // ... over k bits, keeping the blocks below p.
  std::vector<int> pos(static_cast<std::size_t>(p));
  int place = 0;
  for (int v = 0; v < (1 << k); ++v) {
    const int b = rev(v);
    if (b < p) pos[static_cast<std::size_t>(b)] = place++;
  }
  std::vector<int> q;
  for (int b : blocks) q.push_back(pos[static_cast<std::size_t>(b)]);
  std::sort(q.begin(), q.end());
  int pieces = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (i == 0 || q[i] != q[i - 1] + 1) ++pieces;
  }
  return std::max(pieces, 1);
}

// nhr_pieces of stride step i's blocks, worked out once per (p, i,
// direction) on each thread: the bit-reversed layout costs O(2^k), and a
// sweep on 100,000 NPUs asks for every step at every loop and size.
int nhr_step_pieces(const std::vector<int>& blocks, int p, int i, bool reduce_scatter) {
  thread_local std::map<std::tuple<int, int, bool>, int> known;
  const auto key = std::make_tuple(p, i, reduce_scatter);
  const auto found = known.find(key);
  if (found != known.end()) return found->second;
  return known.emplace(key, nhr_pieces(blocks, p)).first->second;
}

// The binary-stride steps of NHR / NB (level1.cpp): ReduceScatter at stride
// 2^i sends ceil((p - 2^i) / 2^(i+1)) blocks to x + 2^i; AllGather the same
// counts back. Rank 0's blocks, for the piece count.
std::vector<Step1> stride_steps(Level1Algo algo, int p, double block, bool reduce_scatter) {
  std::vector<Step1> out;
  const int k = ceil_log2(p);
  for (int j = 0; j < k; ++j) {
    const int i = reduce_scatter ? j : k - 1 - j;
    const int d = 1 << i;
    std::vector<int> blocks;
    for (int m = reduce_scatter ? d : 0; reduce_scatter ? m < p : m + d < p; m += 2 * d) blocks.push_back(mod(m, p));
    Step1 s;
    s.elems = block * static_cast<double>(blocks.size());
    s.pieces = algo == Level1Algo::NHR ? nhr_step_pieces(blocks, p, i, reduce_scatter)
                                       : static_cast<int>(blocks.size());
    s.reduce = reduce_scatter;
    s.shift = reduce_scatter ? d : -d;
    out.push_back(s);
  }
  return out;
}

std::vector<Step1> ring_steps(int p, double block, bool reduce) {
  Step1 s;
  s.elems = block;
  s.reduce = reduce;
  s.shift = 1;
  return std::vector<Step1>(static_cast<std::size_t>(p - 1), s);
}

// H-D_R on n elements (AllReduce shares) or per-rank blocks of n (ReduceScatter / AllGather).
std::vector<Step1> hd_steps(CollOp op, int p, double n) {
  const int p2 = floor_pow2(p);
  const bool folded = p2 < p;
  std::vector<Step1> out;
  auto step = [&](double elems, bool reduce, int mask, int shift = 0) {
    Step1 s;
    s.elems = elems;
    s.reduce = reduce;
    s.mask = mask;
    s.shift = shift;
    // A fold sends towards the pair's lower rank, an unfold back (shift 1 counts their flows).
    if (mask == 0) s.fold = out.empty() ? 1 : -1;
    out.push_back(s);
  };
  const double vblock = folded ? 2 * n : n;  // a virtual block: a folded pair's two blocks
  switch (op) {
    case CollOp::AllReduce:
      if (folded) step(n, true, 0, 1);
      for (int d = p2 / 2; d >= 1; d /= 2) step(n * d / p2, true, d);
      for (int d = 1; d < p2; d *= 2) step(n * d / p2, false, d);
      if (folded) step(n, false, 0, 1);
      break;
    case CollOp::ReduceScatter:
      if (folded) step(p * n, true, 0, 1);
      for (int d = p2 / 2; d >= 1; d /= 2) step(vblock * d, true, d);
      if (folded) step(n, false, 0, 1);
      break;
    case CollOp::AllGather:
      if (folded) step(n, false, 0, 1);
      for (int d = 1; d < p2; d *= 2) step(vblock * d, false, d);
      if (folded) {
        step((p - 1) * n, false, 0, 1);
        out.back().pieces = 2;
      }
      break;
    case CollOp::Broadcast:
      for (int d = p2 / 2; d >= 1; d /= 2) {
        step(n, false, d);
        out.back().tree = out.back().fanout = true;
      }
      if (folded) {
        step(n, false, 0, 1);
        out.back().tree = out.back().fanout = true;
      }
      break;
    case CollOp::Reduce:
      if (folded) step(n, true, 0, 1);
      for (int d = p2 / 2; d >= 1; d /= 2) step(n * d / p2, true, d);
      // The binomial gather: a receiver records "ready" only once it has
      // taken the previous step's data, so every step is a full handshake.
      for (int d = 1; d < p2; d *= 2) step(n * d / p2, false, d);
      break;
    case CollOp::AlltoAll: break;
  }
  return out;
}

// A loop's steps; n = the loop's elements (AllReduce, Broadcast, Reduce) or
// per-rank block (ReduceScatter, AllGather).
std::vector<Step1> loop_steps(CollOp op, Level1Algo algo, int p, double n, bool one_shot = false) {
  if (algo == Level1Algo::HalvingDoubling) return hd_steps(op, p, n);
  if (op == CollOp::Broadcast && one_shot) {
    // The whole data along the binomial tree (NHR: halving distances; NB:
    // doubling), the root sending in every step.
    std::vector<Step1> out;
    const int k = ceil_log2(p);
    for (int s = 0; s < k; ++s) {
      Step1 st;
      st.elems = n;
      st.shift = algo == Level1Algo::NHR ? 1 << (k - 1 - s) : 1 << s;
      st.tree = st.fanout = true;
      out.push_back(st);
    }
    return out;
  }
  const double chunk = n / p;
  std::vector<Step1> out;
  auto add = [&](std::vector<Step1> s) { out.insert(out.end(), s.begin(), s.end()); };
  const bool ring = algo == Level1Algo::Ring;
  switch (op) {
    case CollOp::AllReduce:
      add(ring ? ring_steps(p, chunk, true) : stride_steps(algo, p, chunk, true));
      add(ring ? ring_steps(p, chunk, false) : stride_steps(algo, p, chunk, false));
      break;
    case CollOp::ReduceScatter: add(ring ? ring_steps(p, n, true) : stride_steps(algo, p, n, true)); break;
    case CollOp::AllGather: add(ring ? ring_steps(p, n, false) : stride_steps(algo, p, n, false)); break;
    case CollOp::Reduce:  // ring reduce-scatter, then the gather along the ring
      add(ring_steps(p, chunk, true));
      add(ring_steps(p, chunk, false));
      break;
    case CollOp::Broadcast: {
      // Scatter from the root (NHR: residue classes, the largest part first;
      // NB: halving ranges), then the all-gather.
      const int k = ceil_log2(p);
      for (int s = 0; s < k; ++s) {
        const int d = algo == Level1Algo::NHR ? 1 << s : 1 << (k - 1 - s);
        Step1 st;
        st.elems = algo == Level1Algo::NHR ? chunk * ((p - d + 2 * d - 1) / (2 * d)) : chunk * std::min(d, p - d);
        st.pieces = algo == Level1Algo::NHR ? 1 : std::min(d, p - d);
        st.shift = d;
        st.tree = st.fanout = true;
        out.push_back(st);
      }
      add(stride_steps(algo, p, chunk, false));
      break;
    }
    case CollOp::AlltoAll: break;
  }
  return out;
}

// The pairs of one step over every group (the first kCountedSources
// sources), for the kinds of path.
std::function<void(PairRuns&)> step_pairs(const GroupLayout& g, const Step1& s, int p) {
  // A binomial tree's step (distance d a power of two, from the ranks
  // holding the data, multiples of 2d or those below d, whose bit d is
  // clear): its pairs are among x <-> x ^ d below p, which are alike (x and
  // x ^ d differ in one bit), where a rotation x -> x + d would count pairs
  // that never send (on A3, dies of other chips for a step between the two
  // dies of one; below a power of two, the pairs wrapping past p - 1 to the
  // first server).
  const bool tree = s.tree && s.mask == 0 && s.shift > 0 && (s.shift & (s.shift - 1)) == 0;
  const int mask = tree ? s.shift : s.mask;
  return [g, s, p, mask](PairRuns& pairs) {
    for (int grp = 0; grp < g.groups; ++grp) {
      if (mask == 0) {
        if (mod(s.shift, p) != 0) pairs.add_rotation(g.npu(grp, 0), g.stride, p, mod(s.shift, p), kCountedSources);
        continue;
      }
      for (int x = 0; x < p; ++x) {
        if (static_cast<int>(pairs.pairs) >= kCountedSources) return;
        const int to = mask != 0 ? (x ^ mask) : mod(x + s.shift, p);
        if (to >= p || to == x) continue;
        pairs.add(g.npu(grp, x), g.npu(grp, to));
      }
    }
  };
}

// The same pairs as flows, for the shares.
std::function<void(std::vector<FlowPair>&)> step_flows(const GroupLayout& g, const Step1& s, int p) {
  return [g, s, p](std::vector<FlowPair>& flows) {
    PairRuns pairs;
    step_pairs(g, s, p)(pairs);
    // (Written in place: a push_back a flow is a check and a store more, at thousands of flows a step.)
    std::size_t at = flows.size();
    flows.resize(at + pairs.pairs);
    for (const PairRuns::Run& r : pairs.runs) {
      for (int k = 0; k < r.count; ++k, ++at) {
        flows[at].from = r.from + k * r.stride;
        flows[at].to = r.to + k * r.stride;
      }
    }
  };
}

std::string step_key(const GroupLayout& g, const Step1& s, int p) {
  return "l1/" + std::to_string(p) + "/" + std::to_string(g.stride) + "/" + std::to_string(g.groups) + "/" +
         std::to_string(g.group_step) + "/" + std::to_string(s.shift) + "/" + std::to_string(s.mask);
}

// The kinds of path a step's pairs take, each with its flows' rate, per
// peer pattern: a ring repeats one pattern p - 1 times, so it is looked up
// once. Beyond kSampledShifts distinct shifts (a pairwise AlltoAll over many
// ranks), a shift takes the counts of a sampled shift of the same residue
// (all of them far enough to leave the server): counting every one of
// 100,000 patterns would take minutes for what changes only with ECMP.
constexpr int kSampledShifts = 64;

class PatternKinds {
 public:
  PatternKinds(const EstimateFabric& fabric, const GroupLayout& g, int p) : fabric_(fabric), g_(g), p_(p) {}
  // The patterns of `steps` looked up at once: each step's kinds of path
  // and its flows listed in order, their shares found together
  // (EstimateFabric::shared_rates) and kept by the fabric, so that of()
  // finds them memoized.
  void prepare(const std::vector<Step1>& steps) const {
    std::vector<EstimateFabric::RateQuery> queries;
    std::set<std::pair<int, int>> seen;
    for (Step1 s : steps) {
      sample(s);
      const auto key = std::make_pair(s.shift, s.mask);
      if (memo_.count(key) > 0 || !seen.insert(key).second) continue;
      const std::string name = step_key(g_, s, p_);
      for (const PathCost& path : fabric_.path_kinds(name, step_pairs(g_, s, p_))) {
        queries.push_back(EstimateFabric::RateQuery{name, step_flows(g_, s, p_),
                                                    path.rdma ? kNoCap : fabric_.costs().copy_rate, !path.rdma});
      }
    }
    fabric_.shared_rates(queries);
  }
  // prepare() for the shifts 1..last (mask 0) of a pairwise exchange: those
  // up to twice kSampledShifts stand for all the others.
  void prepare_shifts(int last) const {
    if (!fabric_.first_time("pairwise-patterns/" + step_key(g_, Step1{}, p_) + "/" + std::to_string(last))) return;
    if (p_ > 2 * kSampledShifts) last = std::min(last, 2 * kSampledShifts);
    std::vector<Step1> steps(static_cast<std::size_t>(std::max(last, 0)));
    for (int s = 1; s <= last; ++s) steps[static_cast<std::size_t>(s - 1)].shift = s;
    prepare(steps);
  }
  const std::vector<std::pair<PathCost, double>>& of(Step1 s) {
    sample(s);
    // (A pairwise exchange asks once per step: 100,000 lookups a point.)
    const bool by_shift = s.mask == 0 && s.shift >= 0;
    const auto at = static_cast<std::size_t>(s.shift);
    if (by_shift && at < by_shift_.size() && by_shift_[at] != nullptr) return *by_shift_[at];
    const auto key = std::make_pair(s.shift, s.mask);
    const auto found = memo_.find(key);
    if (found != memo_.end()) return found->second;
    const auto flows = step_flows(g_, s, p_);
    const std::string name = step_key(g_, s, p_);
    std::vector<std::pair<PathCost, double>> kinds;
    for (const PathCost& path : fabric_.path_kinds(name, step_pairs(g_, s, p_))) {
      // (each kind under its own SDMA cap, not the least of every kind's)
      const double shared = fabric_.shared_rate(name, flows, path.rdma ? kNoCap : fabric_.costs().copy_rate, !path.rdma, false);
      kinds.emplace_back(path, path.rdma ? shared : std::min(shared, path.write_rate));
    }
    const auto& out = memo_.emplace(key, std::move(kinds)).first->second;
    if (by_shift) {
      if (at >= by_shift_.size()) by_shift_.resize(at + 1, nullptr);
      by_shift_[at] = &out;
    }
    return out;
  }

 private:
  const EstimateFabric& fabric_;
  GroupLayout g_;
  int p_;
  std::map<std::pair<int, int>, std::vector<std::pair<PathCost, double>>> memo_;
  std::vector<const std::vector<std::pair<PathCost, double>>*> by_shift_;  // memo_'s, by shift (mask 0)

  // Beyond kSampledShifts, a shift's stand-in: a sampled shift of the same residue.
  void sample(Step1& s) const {
    if (s.mask == 0 && s.shift > kSampledShifts && p_ > 2 * kSampledShifts) {
      s.shift = kSampledShifts + 1 + (s.shift % kSampledShifts);
    }
  }
};

// A step costs what its slowest kind of pair costs: `run(path, rate)`
// returns when the stream is free after the step over that kind of path.
template <typename Run>
double slowest_kind(PatternKinds& kinds, const Step1& s, Run run) {
  double end = 0;
  for (const auto& [path, rate] : kinds.of(s)) end = std::max(end, run(path, rate));
  return end;
}

// The pairwise AlltoAll (level1.cpp all_to_all): per step, copy in, the
// guarded write into the peer's CCL_OUT, copy out; rounds of 100 steps
// beyond 121 ranks, separated by a dissemination barrier.
// Forms are followed rank by rank (each pair's own path and share, a
// rank's late peer making it late) while a loop has at most this many
// (rank, step) pairs, so that a point stays within milliseconds: a ring up
// to 362 ranks, the logarithmic algorithms up to about 2^14. Beyond, every
// step costs its slowest kind of pair. The pairwise exchange keeps the
// per-rank form up to 1024 ranks (its first point 15-19 ms there, the
// others about 2 ms): its
// representative form is 12-30% off at 1024 A2 NPUs, where the per-rank one
// is within 7%.
constexpr double kPerRankBudget = 262144;
constexpr double kPairwiseBudget = 1024.0 * 1023.0;

double pairwise_per_rank(const EstimateFabric& fabric, const CollectiveSpec& spec, const GroupLayout& g, double free);

double pairwise(const EstimateFabric& fabric, const CollectiveSpec& spec, const GroupLayout& g, double free) {
  if (static_cast<double>(g.members) * (g.members - 1) <= kPairwiseBudget) return pairwise_per_rank(fabric, spec, g, free);
  const StepCosts& c = fabric.costs();
  const int p = g.members;
  const double esz = static_cast<double>(data_type_size(spec.dtype));
  const std::uint64_t per_loop = std::max<std::uint64_t>(1, spec.buffer_bytes / data_type_size(spec.dtype));
  const int window = p - 1 <= 120 ? p - 1 : 100;
  const PathCost far = fabric.path(g.npu(0, 0), g.npu(0, p / 2));
  PatternKinds kinds(fabric, g, p);
  kinds.prepare_shifts(p - 1);
  // Beyond 2 * kSampledShifts ranks, step s > kSampledShifts takes the
  // kinds and shares of the sampled shift of its residue (PatternKinds),
  // and a barrier follows every window-th step: from there on, the steps
  // repeat with the period of both. A period is a max-plus map of the
  // stream's free time (as a ring's slice, ring.cpp slices()): once two
  // periods in a row moved it on by the same amount, bit for bit, so would
  // the whole periods after them. All but the last of those are added at
  // once (100,000 A2 NPUs: 62 periods of 1,600 steps, each point of the
  // exchange following 100,000 steps before); the last whole period and
  // the steps after it are followed.
  const int period = p > 2 * kSampledShifts && window < p - 1 ? std::lcm(kSampledShifts, window) : 0;
  for (std::uint64_t first = 0; first < std::max<std::uint64_t>(spec.count, 1); first += per_loop) {
    const double bytes = static_cast<double>(std::min(per_loop, spec.count - first)) * esz;
    free = sdma_task(c, free, c.sdma_fixed, bytes, std::min(c.local_rate, c.copy_rate), c.local_latency);
    std::deque<std::vector<double>> after_periods;  // free after the latest periods (the first: before them), newest last
    for (int s = 1; s < p; ++s) {
      if ((s - 1) % window == 0 && window < p - 1 && s > 1) {
        const double record = far.rdma ? c.rdma_post : c.record_remote;
        for (int i = 0; i < ceil_log2(p); ++i) free = c.wait_end(free + c.dispatch + record + c.dispatch, free + c.dispatch + record + far.latency);
      }
      Step1 st;
      st.shift = s;
      // The copy in runs between the "ready" record and its wait.
      const double copy_in = c.dispatch + c.local_copy(bytes);
      const double at = free + copy_in;
      free = slowest_kind(kinds, st, [&](const PathCost& path, double rate) {
        return guarded_step(c, at, bytes, rate, path, false);
      });
      free = sdma_task(c, free, c.sdma_fixed, bytes, std::min(c.local_rate, c.copy_rate), c.local_latency);
      if (period == 0 || s < kSampledShifts || (s - kSampledShifts) % period != 0 || fabric.follows_every_slice()) continue;
      after_periods.push_back({free});
      if (after_periods.size() > 3) after_periods.pop_front();
      const int periods_left = (p - 1 - s) / period;
      const std::optional<double> moved = steady_step(after_periods, 1);
      if (!moved || periods_left < 2) continue;
      const int skipped = periods_left - 1;
      free += static_cast<double>(skipped) * *moved;
      s += skipped * period;
      fabric.count_slices_added_at_once(static_cast<std::uint64_t>(skipped));
      after_periods.assign(1, {free});
    }
    if (spec.count == 0) break;
  }
  return free;
}

// `pick ? a : b` without a branch: whether a rank's wait ends at the
// record's landing or a wait after it reached it varies from rank to rank
// without a pattern, and a mispredicted branch per rank step costs more
// than the step's arithmetic.
inline double either(bool pick, double a, double b) {
  std::uint64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  const std::uint64_t mask = 0 - static_cast<std::uint64_t>(pick);
  const std::uint64_t r = (x & mask) | (y & ~mask);
  double out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

// The same exchange, every rank with its own time (stream order per step:
// record "ready" to its sender, copy in, wait its receiver's "ready",
// write, record "done", wait its sender's "done", copy out).
// Guarded steps followed rank by rank (level1.cpp's emitter): every rank x
// sends to x + shift and receives from x - shift; per step it records
// "ready" to its sender, [copies in], waits for its receiver's "ready",
// writes (SDMA, or an RDMA post whose data and "done" land on their own),
// records "done", waits for its sender's "done", then [reduces or copies
// out]. Each pair has its own path and its own max-min share of the step.
class PerRankSteps {
 public:
  PerRankSteps(const EstimateFabric& fabric, const GroupLayout& g, int p)
      : f_(fabric), c_(fabric.costs()), g_(g), p_(p), ready_(static_cast<std::size_t>(p)),
        done_(ready_) {}

  // Every rank x sends to x + shift. `before_wait` / `after_done`: a local
  // copy's bytes (0: none) before the wait for "ready" and after "done";
  // `reduce`: the receiver reduces the bytes it got. The paths and rates
  // are the step's (shift_step) for a pattern repeated at every loop.
  void step(std::vector<double>& t, int shift, double bytes, int pieces, bool reduce, double before_wait,
            double after_done) {
    auto found = by_shift_.find(shift);
    if (found == by_shift_.end()) found = by_shift_.emplace(shift, shift_step(shift, {})).first;
    step(t, *found->second.paths, found->second.rate, 0, shift, bytes, pieces, reduce, before_wait, after_done);
  }

  // Rank x's path to x + shift, by pair from a table built once per shift
  // (a pairwise exchange visits p - 1 of them).
  // (Each kept here too: a point asks for them 9,000 times on 1024 NPUs,
  // and the fabric's memo is by a name built each time.)
  const EstimateFabric::PairTable& pairs(int shift) const {
    const int ahead = mod(shift, p_);
    if (tables_.empty()) tables_.resize(static_cast<std::size_t>(p_), nullptr);
    const EstimateFabric::PairTable*& table = tables_[static_cast<std::size_t>(ahead)];
    if (table == nullptr) {
      table = &f_.pair_table(
          "perrank/" + std::to_string(p_) + "/" + std::to_string(g_.stride) + "/" + std::to_string(g_.group_step) +
              "/" + std::to_string(ahead),
          [&](PairRuns& pairs) { pairs.add_rotation(g_.npu(0, 0), g_.stride, p_, ahead); });
    }
    return *table;
  }

  // The paths and shares of the step in which every rank x sends to
  // x + shift; `alongside`: the shifts of the steps whose RDMA writes are
  // in flight with this one's.
  struct ShiftStep {
    int shift = 0;
    std::vector<int> alongside;
  };
  EstimateFabric::RankStep shift_step(int shift, const std::vector<int>& alongside) const {
    bool asked = false;
    return std::move(shift_steps([&]() -> std::optional<ShiftStep> {
                       if (asked) return std::nullopt;
                       asked = true;
                       return ShiftStep{shift, alongside};
                     }).front());
  }

  // The same for several steps, each asked of `next` (none: no more) once
  // the last is listed; their solves with the steps alongside run at once
  // (EstimateFabric::SolveBatch), so that `next` may work out which step
  // comes next while the others are solved. Once they are listed,
  // ready(n, steps) is called each time the first n steps asked are
  // known (n rising to all of them; they may be moved from), while the
  // others are still solved.
  using StepsReady = std::function<void(std::size_t, std::vector<EstimateFabric::RankStep>&)>;
  std::vector<EstimateFabric::RankStep> shift_steps(const std::function<std::optional<ShiftStep>()>& next,
                                                    const StepsReady& ready = {}) const {
    constexpr std::size_t kNoJob = static_cast<std::size_t>(-1);
    struct Rates {
      const std::vector<double>* sdma = nullptr;
      const std::vector<double>* rdma = nullptr;
      std::size_t mixed = kNoJob;  // rdma's, when solved with the steps alongside: its job
    };
    std::vector<ShiftStep> wanted;
    std::vector<Rates> rates;
    std::vector<EstimateFabric::RankStep> out;
    EstimateFabric::SolveBatch batch(f_);  // each job solved while the next is listed and routed
    std::size_t jobs = 0;
    for (std::optional<ShiftStep> step = next(); step; step = next()) {
      const std::size_t i = wanted.size();
      wanted.push_back(std::move(*step));
      rates.emplace_back();
      out.emplace_back();
      const int shift = wanted[i].shift;
      const std::vector<int>& alongside = wanted[i].alongside;
      Step1 st;
      st.shift = shift;
      out[i].paths = &pairs(shift);
      const std::string key = step_key(g_, st, p_);
      const auto flows = step_flows(g_, st, p_);
      // Only the shares of the kinds of write some rank makes are solved (a
      // pairwise step leaves the server for all but a few shifts).
      const std::vector<PathCost>& kinds = out[i].paths->kinds;
      const bool some_sdma = std::any_of(kinds.begin(), kinds.end(), [](const PathCost& k) { return !k.rdma; });
      const bool some_rdma = std::any_of(kinds.begin(), kinds.end(), [](const PathCost& k) { return k.rdma; });
      if (some_sdma) rates[i].sdma = &f_.flow_rates(key, flows, c_.copy_rate, true);
      if (some_rdma && alongside.empty()) {
        rates[i].rdma = &f_.flow_rates(key, flows, kNoCap, false);
      } else if (some_rdma) {
        // The writes of the steps alongside share the channels with this
        // step's for part of its time: each step's flows count 1 / steps
        // (listed after this step's own, whose rates come first).
        // Solved here, not memoized: the step is kept by its caller, and
        // the neighbours' rates are read only for the slowest.
        EstimateFabric::SolveJob job;
        // Routed between the leaves when every step's flows are, alike.
        double edge = f_.routes_whole_paths() ? 0 : between_leaves(shift);
        for (const int q : alongside) {
          if (edge > 0 && between_leaves(q) != edge) edge = 0;
        }
        job.parts.push_back(&routed_shift(shift, edge > 0));
        for (const int q : alongside) job.parts.push_back(&routed_shift(q, edge > 0));
        job.edge_rate = edge;
        job.share = 1.0 / static_cast<double>(1 + alongside.size());
        job.cap = kNoCap;
        job.kept = job.parts.front()->size();  // this step's own flows
        rates[i].mixed = jobs++;
        batch.add(std::move(job));
      }
    }
    // Step i once its job (if any) is solved: each rank's share.
    auto known = [&](std::size_t i) {
      Rates& r = rates[i];
      std::vector<double>* solved = r.mixed != kNoJob ? &batch.rates_of(r.mixed) : nullptr;
      if (solved != nullptr) r.rdma = solved;
      const std::vector<PathCost>& kinds = out[i].paths->kinds;
      // Rank x's flow is the x-th listed; ranks beyond the counted flows take
      // the step's slowest share.
      const bool every_rdma = std::all_of(kinds.begin(), kinds.end(), [](const PathCost& k) { return k.rdma; });
      if (every_rdma && solved != nullptr && solved->size() == static_cast<std::size_t>(p_)) {
        out[i].rate = std::move(*solved);  // every rank's own share, as solved (most steps of an exchange)
        return;
      }
      const double sdma_slowest =
          r.sdma == nullptr || r.sdma->empty() ? c_.copy_rate : *std::min_element(r.sdma->begin(), r.sdma->end());
      const double rdma_slowest =
          r.rdma == nullptr || r.rdma->empty() ? kNoCap : *std::min_element(r.rdma->begin(), r.rdma->end());
      out[i].rate.resize(static_cast<std::size_t>(p_));
      for (std::size_t x = 0; x < out[i].rate.size(); ++x) {
        const bool over_rdma = kinds[out[i].paths->kind_of[x]].rdma;
        const std::vector<double>& each = over_rdma ? *r.rdma : *r.sdma;
        out[i].rate[x] = x < each.size() ? each[x] : (over_rdma ? rdma_slowest : sdma_slowest);
      }
    };
    // The steps in order, each as soon as the jobs up to its own are solved.
    std::size_t steps_known = 0;
    auto through = [&](std::size_t jobs_solved) {
      const std::size_t before = steps_known;
      while (steps_known < wanted.size() &&
             (rates[steps_known].mixed == kNoJob || rates[steps_known].mixed < jobs_solved)) {
        known(steps_known++);
      }
      if (ready && steps_known > before) ready(steps_known, out);
    };
    batch.finish(through);
    through(jobs);  // (the steps after the last job, or all of them when there was none)
    // A pairwise exchange asks for the shifts in order: a shift below the
    // last step's lower neighbour is not asked for again.
    if (!wanted.empty() && !wanted.back().alongside.empty()) {
      const std::vector<int>& last = wanted.back().alongside;
      const int lowest = std::min(wanted.back().shift, *std::min_element(last.begin(), last.end()));
      routed_by_shift_.erase(routed_by_shift_.begin(), routed_by_shift_.lower_bound(lowest));
    }
    return out;
  }

  // The step itself, every rank x sending to x + shift over `paths` at
  // rate[(x + turn) % p] (a shift_step's): step_to's rules as loops over
  // plain arrays, with what is the same for every rank (a kind of path's
  // record, a copy's duration) worked out once, by the same operations (a
  // pairwise exchange on 1024 NPUs runs a million of these rank steps a
  // point). A shift's pairing is a rotation: sender x's receiver is
  // x + shift, wrapped once, so each loop runs in two straight pieces.
  void step(std::vector<double>& t, const EstimateFabric::PairTable& paths, const std::vector<double>& rates,
            std::size_t turn, int shift, double bytes, int pieces, bool reduce, double before_wait, double after_done) {
    const double d = c_.dispatch;
    const double fixed = c_.sdma_fixed;
    const double wait = c_.wait;
    const double post = c_.rdma_post;
    const double local = std::min(c_.local_rate, c_.copy_rate);
    const double copy_in = before_wait / local + c_.local_latency;  // sdma_task's, for before_wait > 0
    const double copy_out = after_done / local + c_.local_latency;
    const double posts = pieces * (d + post);  // an RDMA write's posts
    const int ahead = mod(shift, p_);
    // Per kind of path: a record's cost (SDMA) or a notify's flight (RDMA).
    kinds_.clear();
    for (const PathCost& pc : paths.kinds) {
      kinds_.push_back(Kind{pc.rdma, pc.latency, pc.same_chip ? c_.record_local : c_.record_remote,
                            c_.rdma_notify_bytes / pc.rate, fixed + pc.write_extra});
    }
    const Kind* kinds = kinds_.data();
    const std::uint8_t* kind_of = paths.kind_of.data();
    const double* rate = rates.data();
    double* time = t.data();
    double* ready = ready_.data();
    double* done = done_.data();
    const bool every_rdma = std::all_of(kinds_.begin(), kinds_.end(), [](const Kind& k) { return k.rdma; });
    if (!kinds_.empty() && every_rdma && !reduce && !f_.uses_general_step_loops()) {
      // Every pair over RDMA (most steps of a pairwise exchange across
      // servers): the same rules in loops the compiler vectorizes, each
      // sender's notify flight and latency in arrays (a step whose pairs
      // take paths of two lengths, some under one leaf, is one in eight
      // of an exchange on 1024 A2 NPUs: rank by rank, they were half of
      // its steps' cost).
      notify_of_.resize(static_cast<std::size_t>(p_));
      latency_of_.resize(static_cast<std::size_t>(p_));
      const std::pair<double, double> alike{kinds_.front().notify, kinds_.front().latency};
      if (kinds_.size() > 1 || filled_alike_ != alike) {  // (one kind: as filled for the step before, mostly)
        for (std::size_t x = 0; x < notify_of_.size(); ++x) {
          const Kind& k = kinds[kind_of[x]];
          notify_of_[x] = k.notify;
          latency_of_[x] = k.latency;
        }
        filled_alike_ = kinds_.size() == 1 ? std::optional{alike} : std::nullopt;
      }
      const RdmaStepCosts rc{d,     fixed, wait, post, posts, copy_in, copy_out, notify_of_.data(), latency_of_.data(),
                             bytes, before_wait > 0, after_done > 0};
      rdma_records(rc, 0, p_ - ahead, ahead, time, ready);
      rdma_records(rc, p_ - ahead, p_, ahead - p_, time, ready);
      // Sender x's rate is rate[x + turn], wrapped once: each piece of
      // senders in at most two straight runs.
      const auto writes = [&](int from, int to, int offset) {
        const int wrap = p_ - static_cast<int>(turn);  // the first sender whose rate wraps
        if (from < wrap) rdma_writes(rc, from, std::min(to, wrap), offset, time, ready, done, rate + from + turn);
        if (to > wrap) {
          const int at = std::max(from, wrap);
          rdma_writes(rc, at, to, offset, time, ready, done, rate + (at - wrap));
        }
      };
      writes(0, p_ - ahead, ahead);
      writes(p_ - ahead, p_, ahead - p_);
      rdma_receivers(rc, p_, time, done);
      return;
    }
    if (turn != 0) {  // (the loops below read rate[x])
      rotated_.resize(rates.size());
      std::rotate_copy(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(turn), rates.end(), rotated_.begin());
      rate = rotated_.data();
    }
    // Receiver x of `sender` records "ready" to it, [copies in].
    auto record_ready = [&](int sender, int x) {
      const Kind& k = kinds[kind_of[sender]];
      double at;
      if (k.rdma) {
        at = time[x] + d + post;
        ready[sender] = at + k.notify + k.latency;
      } else {
        at = time[x] + d + k.record;
        ready[sender] = at;
      }
      time[x] = before_wait > 0 ? at + d + fixed + copy_in : at;
    };
    // Sender x waits for "ready", writes to y, records "done".
    auto write = [&](int x, int y) {
      const Kind& k = kinds[kind_of[x]];
      const double reach = time[x] + d;
      double u = either(ready[x] > reach, ready[x], reach + wait);
      if (k.rdma) {
        u += posts;
        const double arrived = u + bytes / rate[x] + k.latency;
        const double posted = u + d + post;
        time[x] = posted;
        done[y] = std::max(posted + k.notify + k.latency, arrived);
      } else {
        u = sdma_task(c_, u, k.write_fixed, bytes, rate[x], k.latency) + (pieces - 1) * (d + k.write_fixed + k.latency);
        const double recorded = u + d + k.record;
        time[x] = recorded;
        done[y] = std::max(recorded, u);
      }
    };
    for (int x = 0; x < p_ - ahead; ++x) record_ready(x, x + ahead);
    for (int x = p_ - ahead; x < p_; ++x) record_ready(x, x + ahead - p_);
    for (int x = 0; x < p_ - ahead; ++x) write(x, x + ahead);
    for (int x = p_ - ahead; x < p_; ++x) write(x, x + ahead - p_);
    for (int x = 0; x < p_; ++x) {  // receivers wait for "done", reduce [, copy out]
      const double reach = time[x] + d;
      double u = either(done[x] > reach, done[x], reach + wait);
      if (reduce && bytes > 0) {
        u = sdma_task(c_, u, fixed, bytes, std::min(c_.local_rate, c_.reduce_rate), c_.local_latency) +
            (pieces - 1) * (d + fixed + c_.local_latency);
      }
      if (after_done > 0) u = u + d + fixed + copy_out;
      time[x] = u;
    }
  }

  // step()'s constants for steps whose pairs all go over RDMA.
  struct RdmaStepCosts {
    double d, fixed, wait, post, posts, copy_in, copy_out;
    const double* notify;   // per sender: its notify's bytes over its path's rate
    const double* latency;  // per sender: its path's latency
    double bytes;
    bool copy_before, copy_after;
  };
  // step()'s loops for senders [from, to), each sending to x + offset: per
  // element the same operations in the same order, so the times are the
  // same to the bit. The receiver x + offset records "ready" to x, [copies in].
  static void rdma_records(const RdmaStepCosts& c, int from, int to, int offset, double* __restrict time,
                           double* __restrict ready) {
    const double* __restrict notify = c.notify;
    const double* __restrict latency = c.latency;
    for (int x = from; x < to; ++x) {
      double& receiver = time[x + offset];
      const double at = receiver + c.d + c.post;
      ready[x] = at + notify[x] + latency[x];
      receiver = c.copy_before ? at + c.d + c.fixed + c.copy_in : at;
    }
  }
  // Sender x waits for "ready", posts its write and "done"; `rate` is
  // sender `from`'s.
  static void rdma_writes(const RdmaStepCosts& c, int from, int to, int offset, double* __restrict time,
                          const double* __restrict ready, double* __restrict done, const double* __restrict rate) {
    const double* __restrict notify = c.notify;
    const double* __restrict latency = c.latency;
    for (int x = from; x < to; ++x) {
      const double reach = time[x] + c.d;
      const double landed = ready[x];
      const double waited = reach + c.wait;
      const double u = (landed > reach ? landed : waited) + c.posts;
      const double arrived = u + c.bytes / rate[x - from] + latency[x];
      const double posted = u + c.d + c.post;
      const double noticed = posted + notify[x] + latency[x];
      time[x] = posted;
      done[x + offset] = noticed < arrived ? arrived : noticed;  // std::max(noticed, arrived)
    }
  }
  // Then every receiver waits for "done" [, copies out].
  static void rdma_receivers(const RdmaStepCosts& c, int ranks, double* __restrict time, const double* __restrict done) {
    if (c.copy_after) {
      receivers_then(ranks, time, done, c.d, c.wait, [&c](double u) { return u + c.d + c.fixed + c.copy_out; });
    } else {
      receivers_then(ranks, time, done, c.d, c.wait, [](double u) { return u; });
    }
  }
  template <class Then>
  static void receivers_then(int ranks, double* __restrict time, const double* __restrict done, double d, double wait,
                             const Then& then) {
    for (int x = 0; x < ranks; ++x) {
      const double reach = time[x] + d;
      const double landed = done[x];
      const double waited = reach + wait;
      time[x] = then(landed > reach ? landed : waited);
    }
  }

  // The same for any pairing: rank x sends to to[x] (-1: it sends nothing
  // in this step), at most one sender per receiver, bytes_of(x) bytes;
  // `key` names the pattern. No copy before the wait or after "done".
  template <class BytesOf>
  void step_to(std::vector<double>& t, const std::vector<int>& to, const std::string& key, const BytesOf& bytes_of,
               int pieces, bool reduce) {
    const double d = c_.dispatch;
    auto path_of = [this](int x, int y) { return f_.path(g_.npu(0, x), g_.npu(0, y)); };
    std::vector<int>& from = from_;
    from.assign(static_cast<std::size_t>(p_), -1);
    std::vector<std::size_t>& flow_of = flow_of_;
    flow_of.assign(static_cast<std::size_t>(p_), 0);
    auto flows = [&](std::vector<FlowPair>& out) {
      for (int grp = 0; grp < g_.groups; ++grp) {
        for (int x = 0; x < p_; ++x) {
          if (static_cast<int>(out.size()) >= kCountedSources) return;
          if (to[static_cast<std::size_t>(x)] >= 0) out.push_back(FlowPair{g_.npu(grp, x), g_.npu(grp, to[static_cast<std::size_t>(x)])});
        }
      }
    };
    std::size_t listed = 0;
    for (int x = 0; x < p_; ++x) {
      const int y = to[static_cast<std::size_t>(x)];
      if (y < 0) continue;
      from[static_cast<std::size_t>(y)] = x;
      flow_of[static_cast<std::size_t>(x)] = listed++;
    }
    const std::vector<double>& sdma_rates = f_.flow_rates(key, flows, c_.copy_rate, true);
    const std::vector<double>& rdma_rates = f_.flow_rates(key, flows, kNoCap, false);
    // Ranks beyond the counted flows take the step's slowest share.
    const double sdma_slowest = sdma_rates.empty() ? c_.copy_rate : *std::min_element(sdma_rates.begin(), sdma_rates.end());
    const double rdma_slowest = rdma_rates.empty() ? kNoCap : *std::min_element(rdma_rates.begin(), rdma_rates.end());
    for (int x = 0; x < p_; ++x) {  // receivers record "ready" to their sender
      const int sender = from[static_cast<std::size_t>(x)];
      if (sender < 0) continue;
      const auto [at, lands] = record(t[static_cast<std::size_t>(x)], path_of(sender, x));
      ready_[static_cast<std::size_t>(sender)] = lands;
      t[static_cast<std::size_t>(x)] = at;
    }
    for (int x = 0; x < p_; ++x) {  // senders wait, write, record "done"
      const int y = to[static_cast<std::size_t>(x)];
      if (y < 0) continue;
      const PathCost pc = path_of(x, y);
      const std::vector<double>& rates = pc.rdma ? rdma_rates : sdma_rates;
      const std::size_t i = flow_of[static_cast<std::size_t>(x)];
      const double rate = i < rates.size() ? rates[i] : (pc.rdma ? rdma_slowest : sdma_slowest);
      const double bytes = bytes_of(x);
      double u = c_.wait_end(t[static_cast<std::size_t>(x)] + d, ready_[static_cast<std::size_t>(x)]);
      double arrived;
      if (pc.rdma) {
        u += pieces * (d + c_.rdma_post);
        arrived = u + bytes / rate + pc.latency;
      } else {
        u = sdma_task(c_, u, c_.sdma_fixed + pc.write_extra, bytes, rate, pc.latency) +
            (pieces - 1) * (d + c_.sdma_fixed + pc.write_extra + pc.latency);
        arrived = u;
      }
      const auto [at, lands] = record(u, pc);
      t[static_cast<std::size_t>(x)] = at;
      done_[static_cast<std::size_t>(y)] = std::max(lands, arrived);
    }
    for (int x = 0; x < p_; ++x) {  // receivers wait for "done" [, reduce]
      if (from[static_cast<std::size_t>(x)] < 0) continue;
      const double bytes = bytes_of(from[static_cast<std::size_t>(x)]);
      double u = c_.wait_end(t[static_cast<std::size_t>(x)] + d, done_[static_cast<std::size_t>(x)]);
      if (reduce && bytes > 0) {
        u = sdma_task(c_, u, c_.sdma_fixed, bytes, std::min(c_.local_rate, c_.reduce_rate), c_.local_latency) +
            (pieces - 1) * (d + c_.sdma_fixed + c_.local_latency);
      }
      t[static_cast<std::size_t>(x)] = u;
    }
  }

  // A record from x over `pc`: when x's stream is free again and when it lands.
  std::pair<double, double> record(double at, const PathCost& pc) const {
    if (pc.rdma) {
      const double posted = at + c_.dispatch + c_.rdma_post;
      return {posted, posted + c_.rdma_notify_bytes / pc.rate + pc.latency};
    }
    const double end = at + c_.dispatch + (pc.same_chip ? c_.record_local : c_.record_remote);
    return {end, end};
  }

 private:
  const EstimateFabric& f_;
  const StepCosts& c_;
  GroupLayout g_;
  int p_;
  // The routes of step_flows(shift), kept for the neighbouring steps'
  // solves: each way once, when first wanted, every hop or only those
  // between the leaves (EstimateFabric::route_between_leaves).
  struct RoutedShift {
    RoutedFlows whole, middles;
    bool whole_routed = false, middles_tried = false;
    double edge = 0;  // route_between_leaves' rate, 0 when it could not
  };
  // The edge rate of step `shift`'s flows routed between the leaves (0: they cannot be).
  double between_leaves(int shift) const {
    RoutedShift& r = routed_by_shift_[shift];
    if (!r.middles_tried) r.edge = f_.route_between_leaves(flow_list(shift), r.middles);
    r.middles_tried = true;
    return r.edge;
  }
  const RoutedFlows& routed_shift(int shift, bool middles_only) const {
    RoutedShift& r = routed_by_shift_[shift];
    if (middles_only) return r.middles;
    if (!r.whole_routed) f_.route_flows(flow_list(shift), r.whole);
    r.whole_routed = true;
    return r.whole;
  }
  const std::vector<FlowPair>& flow_list(int shift) const {
    Step1 st;
    st.shift = shift;
    listed_.clear();
    step_flows(g_, st, p_)(listed_);
    return listed_;
  }

  std::vector<double> ready_, done_;
  mutable std::vector<const EstimateFabric::PairTable*> tables_;  // pairs()' by shift mod p (the fabric's, kept there)
  mutable std::map<int, RoutedShift> routed_by_shift_;
  mutable std::vector<FlowPair> listed_;  // flow_list()'s
  struct Kind {  // step()'s, per kind of path
    bool rdma;
    double latency;
    double record;  // SDMA: a record's duration
    double notify;  // RDMA: a notify's bytes over the path's rate
    double write_fixed;  // SDMA: a write's set-up (the product's and the path's extra)
  };
  std::vector<Kind> kinds_;
  std::vector<int> from_;  // reused by every step
  std::vector<std::size_t> flow_of_;
  std::map<int, EstimateFabric::RankStep> by_shift_;  // step(t, shift, ...)'s, per shift
  std::vector<double> rotated_;  // step()'s rates in rank order, for a step that takes another's rotated
  std::vector<double> notify_of_, latency_of_;  // step()'s, per sender (RdmaStepCosts')
  std::optional<std::pair<double, double>> filled_alike_;  // their one (notify, latency), when alike
};

// Guarded RDMA steps followed rank by rank, every write a flow of its own
// (level1.cpp's emitter: per step a rank records "ready" to its sender,
// [waits for its receiver's "ready", posts its writes and "done"], [waits
// for its sender's "done"]). A post costs the stream its dispatch and post
// and the stream goes on, so a rank's writes of later steps (a broadcast
// root's scatter writes, then its all-gather writes) are in flight
// together: every write in flight shares the channels it crosses with all
// the others (max-min, solved again whenever one starts or drains), and a
// "done" record lands once the writes posted before it to the same peer
// have arrived. Several loops in one program overlap as in the detailed
// model: a rank done with a loop starts the next one while others are
// still in it (a reduce's gathered ranks, sharing their NICs with the
// gather still going on). Returns when the last stream is free, rank x's
// being free at free[x] before; a negative time if the steps cannot all run.
struct RankXfer {
  int from = 0;
  int to = 0;
  double bytes = 0;
  int pieces = 1;
  bool reduce = false;  // the receiver reduces what it got (one task per piece)
};

// A step of RdmaRun: transfers, or (`local` not empty) local copies, rank
// r copying local[r] bytes (none if 0), or (`phase` not empty) work of
// another level, rank r busy for phase[r] once every rank of its `sync[r]`
// group (>= 0; a server's NPUs) has reached the step. `mark` >= 0:
// RdmaRun::mark(mark) is when the last of the copying (busy) ranks ended
// this step.
struct RunStep {
  std::vector<RankXfer> xfers;
  std::vector<double> local;
  int mark = -1;
  std::vector<double> phase;
  std::vector<int> sync;
};

class RdmaRun {
 public:
  RdmaRun(const EstimateFabric& fabric, const GroupLayout& g, int p, const std::vector<RunStep>& steps)
      : f_(fabric), c_(fabric.costs()), g_(g), p_(p) {
    build(steps);
  }

  double run(const std::vector<double>& free) {
    if (!rdma_) return -1;  // SDMA writes hold their stream: not this form
    for (Pair& q : pairs_) {
      q.arrival.clear();
      q.latest.clear();
      q.known = 0;
      q.deferred.clear();
    }
    landed_.assign(static_cast<std::size_t>(p_ * registers_), -1.0);
    marks_.assign(marks_.size(), 0.0);
    for (Barrier& b : barriers_) {
      b.reached = 0;
      b.at = 0;
      b.waiting.clear();
    }
    flows_.clear();
    drains_ = {};
    activated_ = 0;
    starts_ = {};
    streams_.assign(static_cast<std::size_t>(p_), Stream{});
    for (int r = 0; r < p_; ++r) advance(r, free[static_cast<std::size_t>(r)]);
    double now = *std::min_element(free.begin(), free.end());
    on_channel_.assign(capacity_.size(), {});
    std::vector<int> changed;  // channels whose writes changed since the shares were solved
    for (;;) {
      share(changed, now);
      // A flow's drain time is kept in the heap from when its rate was last
      // set (entries of an older rate are skipped): only the flows whose
      // shares changed are touched at an event.
      while (!drains_.empty() && !current(drains_.top())) drains_.pop();
      const double drain = drains_.empty() ? kNever : drains_.top().at;
      const double start = starts_.empty() ? kNever : starts_.top().first;
      const double next = std::min(drain, start);
      if (next >= kNever) break;
      now = next;
      if (drain <= start) {
        // Every flow drained within a femtosecond of now, in the order the
        // flows started.
        drained_.clear();
        while (!drains_.empty() && (!current(drains_.top()) || drains_.top().at <= now + 1e-3)) {
          if (current(drains_.top())) drained_.push_back(drains_.top().flow);
          drains_.pop();
        }
        std::sort(drained_.begin(), drained_.end(), [this](int a, int b) {
          return flows_[static_cast<std::size_t>(a)].order < flows_[static_cast<std::size_t>(b)].order;
        });
        for (const int i : drained_) {
          Flow& fl = flows_[static_cast<std::size_t>(i)];
          fl.live = false;
          for (const int ch : pairs_[fl.pair].channels) {
            std::vector<int>& on = on_channel_[static_cast<std::size_t>(ch)];
            on.erase(std::find(on.begin(), on.end(), i));
            changed.push_back(ch);
          }
          arrived(i, now + pairs_[fl.pair].path.latency);
        }
      } else {
        while (!starts_.empty() && starts_.top().first <= now) {
          const int i = starts_.top().second;
          starts_.pop();
          Flow& fl = flows_[static_cast<std::size_t>(i)];
          fl.live = true;
          fl.order = activated_++;
          fl.since = now;
          set_rate(i, pairs_[fl.pair].path.rate, now);  // alone, or on channels it cannot fill
          for (const int ch : pairs_[fl.pair].channels) {
            on_channel_[static_cast<std::size_t>(ch)].push_back(i);
            changed.push_back(ch);
          }
        }
      }
    }
    double end = now;
    for (std::size_t r = 0; r < streams_.size(); ++r) {
      if (streams_[r].pc < program_[r].size()) return -1;
      end = std::max(end, streams_[r].free);
    }
    return end;
  }
  double mark(int m) const { return marks_[static_cast<std::size_t>(m)]; }
  // After run(): when rank r's stream was free.
  double free_of(int r) const { return streams_[static_cast<std::size_t>(r)].free; }

 private:
  static constexpr double kNever = 1e300;
  enum class Kind { Write, Record, Wait, Copy, Reduce, Barrier, Busy };
  struct Op {
    Kind kind;
    int pair = -1;     // Write, Record: the queue pair
    double bytes = 0;  // Write, Copy, Reduce; Busy: the time
    int notify = 0;    // Record: the peer's register; Wait: this rank's; Copy, Busy: its mark (-1: none); Barrier: its index
  };
  struct Barrier {  // a sync group's meeting before a phase step
    int members = 0;
    int reached = 0;
    double at = 0;             // the latest arrival so far
    std::vector<int> waiting;  // the ranks blocked on it
  };
  struct Pair {  // a queue pair, from -> to
    int to = 0;
    PathCost path;
    std::vector<int> channels;  // dense indices into capacity_
    std::vector<double> arrival;  // per write posted on it, -1 until it arrived
    std::size_t known = 0;        // writes [0, known) have arrived
    std::vector<double> latest;   // latest[k]: the last arrival of writes [0, k]
    std::vector<std::pair<std::size_t, std::pair<double, int>>> deferred;  // (writes before it, (earliest landing, register))
  };
  struct Flow {
    std::size_t pair = 0;
    std::size_t seq = 0;
    double left = 0;   // bytes left at `since`
    double since = 0;
    double rate = 0;
    std::uint32_t version = 0;  // of its rate: drains_ entries of other versions are stale
    std::uint64_t order = 0;    // when it started, among the run's flows
    bool live = false;          // started and not drained
    bool grouped = false;  // share(): already in the group being solved
  };
  struct Drain {
    double at = 0;
    int flow = 0;
    std::uint32_t version = 0;
    bool operator>(const Drain& o) const { return at != o.at ? at > o.at : flow > o.flow; }
  };
  bool current(const Drain& d) const {
    const Flow& fl = flows_[static_cast<std::size_t>(d.flow)];
    return fl.live && fl.version == d.version;
  }
  // Flow i goes on at `rate` from `now`: what it moved at its old rate is
  // taken off, and its drain time is queued anew (a flow starts at rate 0).
  void set_rate(int i, double rate, double now) {
    Flow& fl = flows_[static_cast<std::size_t>(i)];
    if (rate == fl.rate) return;  // (most of a re-solved group keep theirs)
    fl.left -= fl.rate * (now - fl.since);
    fl.since = now;
    fl.rate = rate;
    ++fl.version;
    drains_.push(Drain{now + fl.left / fl.rate, i, fl.version});
  }
  struct Stream {
    std::size_t pc = 0;
    double free = 0;
    bool blocked = false;
    double reach = 0;  // when its blocked wait was reached
  };

  // Solves the shares again for the writes joined through channels to the
  // `changed` ones (max-min shares of separate groups do not affect each
  // other), each held to its path's narrowest channel.
  void share(std::vector<int>& changed, double now) {
    if (changed.empty()) return;
    seen_.resize(capacity_.size(), 0);
    group_.clear();
    visited_.clear();
    for (const int ch : changed) {
      if (!seen_[static_cast<std::size_t>(ch)]) {
        seen_[static_cast<std::size_t>(ch)] = 1;
        visited_.push_back(ch);
      }
    }
    changed.clear();
    for (std::size_t k = 0; k < visited_.size(); ++k) {  // visited_ grows as the group does
      for (const int i : on_channel_[static_cast<std::size_t>(visited_[k])]) {
        Flow& fl = flows_[static_cast<std::size_t>(i)];
        if (fl.grouped) continue;
        fl.grouped = true;
        group_.push_back(i);
        for (const int next : pairs_[fl.pair].channels) {
          if (!seen_[static_cast<std::size_t>(next)]) {
            seen_[static_cast<std::size_t>(next)] = 1;
            visited_.push_back(next);
          }
        }
      }
    }
    for (const int ch : visited_) seen_[static_cast<std::size_t>(ch)] = 0;
    std::sort(group_.begin(), group_.end());  // solved in a fixed order
    paths_.clear();
    limits_.clear();
    for (const int i : group_) {
      Flow& fl = flows_[static_cast<std::size_t>(i)];
      fl.grouped = false;
      paths_.push_back(&pairs_[fl.pair].channels);
      limits_.push_back(pairs_[fl.pair].path.rate);
    }
    if (group_.size() == 1) {  // alone on its channels: its path's rate
      set_rate(group_[0], limits_[0], now);
      return;
    }
    const std::vector<double>& rates = solver_.solve(paths_, limits_, capacity_);
    for (std::size_t k = 0; k < group_.size(); ++k) set_rate(group_[k], rates[k], now);
  }

  void build(const std::vector<RunStep>& steps) {
    program_.assign(static_cast<std::size_t>(p_), {});
    pairs_.clear();
    std::unordered_map<std::int64_t, int> pair_of;
    std::map<int, int> dense;
    capacity_.clear();
    auto pair = [&](int x, int y) {
      const std::int64_t key = static_cast<std::int64_t>(x) * p_ + y;
      const auto found = pair_of.find(key);
      if (found != pair_of.end()) return found->second;
      Pair q;
      q.to = y;
      q.path = f_.path(g_.npu(0, x), g_.npu(0, y));
      rdma_ = rdma_ && q.path.rdma;
      for (const int ch : f_.route(g_.npu(0, x), g_.npu(0, y))) {
        auto [it, added] = dense.emplace(ch, static_cast<int>(capacity_.size()));
        if (added) capacity_.push_back(f_.channel_rate(ch));
        q.channels.push_back(it->second);
      }
      pairs_.push_back(std::move(q));
      return pair_of.emplace(key, static_cast<int>(pairs_.size() - 1)).first->second;
    };
    rdma_ = true;
    registers_ = 2 * static_cast<int>(steps.size());
    barriers_.clear();
    int marks = 0;
    for (std::size_t j = 0; j < steps.size(); ++j) {
      const int ready = 2 * static_cast<int>(j);
      marks = std::max(marks, steps[j].mark + 1);
      if (!steps[j].phase.empty()) {
        std::map<int, int> barrier_of;  // sync group -> barrier index
        for (int r = 0; r < p_; ++r) {
          const int group = steps[j].sync[static_cast<std::size_t>(r)];
          if (group < 0) continue;
          auto [it, added] = barrier_of.emplace(group, static_cast<int>(barriers_.size()));
          if (added) barriers_.emplace_back();
          ++barriers_[static_cast<std::size_t>(it->second)].members;
          program_[static_cast<std::size_t>(r)].push_back(Op{Kind::Barrier, -1, 0, it->second});
        }
        for (int r = 0; r < p_; ++r) {
          const double busy = steps[j].phase[static_cast<std::size_t>(r)];
          if (busy > 0) program_[static_cast<std::size_t>(r)].push_back(Op{Kind::Busy, -1, busy, steps[j].mark});
        }
        continue;
      }
      for (std::size_t r = 0; r < steps[j].local.size(); ++r) {
        if (steps[j].local[r] > 0) program_[r].push_back(Op{Kind::Copy, -1, steps[j].local[r], steps[j].mark});
      }
      std::vector<const RankXfer*> in(static_cast<std::size_t>(p_), nullptr), out(in);
      for (const RankXfer& x : steps[j].xfers) {
        out[static_cast<std::size_t>(x.from)] = &x;
        in[static_cast<std::size_t>(x.to)] = &x;
      }
      for (int r = 0; r < p_; ++r) {
        auto& prog = program_[static_cast<std::size_t>(r)];
        if (const RankXfer* x = in[static_cast<std::size_t>(r)]) prog.push_back(Op{Kind::Record, pair(r, x->from), 0, ready});
        if (const RankXfer* x = out[static_cast<std::size_t>(r)]) {
          prog.push_back(Op{Kind::Wait, -1, 0, ready});
          for (int k = 0; k < x->pieces; ++k) prog.push_back(Op{Kind::Write, pair(r, x->to), x->bytes / x->pieces, 0});
          prog.push_back(Op{Kind::Record, pair(r, x->to), 0, ready + 1});
        }
        if (const RankXfer* x = in[static_cast<std::size_t>(r)]) {
          prog.push_back(Op{Kind::Wait, -1, 0, ready + 1});
          for (int k = 0; k < (x->reduce ? x->pieces : 0); ++k) prog.push_back(Op{Kind::Reduce, -1, x->bytes / x->pieces, -1});
        }
      }
    }
    marks_.assign(static_cast<std::size_t>(marks), 0.0);
    // A channel whose writes, all at once each at its path's rate, would
    // not fill it never limits anyone: left out of the shares (the same
    // rates, solved over fewer channels).
    std::vector<double> demand(capacity_.size(), 0.0);
    for (const auto& prog : program_) {
      for (const Op& op : prog) {
        if (op.kind != Kind::Write) continue;
        const Pair& q = pairs_[static_cast<std::size_t>(op.pair)];
        for (const int ch : q.channels) demand[static_cast<std::size_t>(ch)] += q.path.rate;
      }
    }
    std::vector<int> kept(capacity_.size(), -1);
    std::vector<double> capacity;
    for (Pair& q : pairs_) {
      std::vector<int> channels;
      for (const int ch : q.channels) {
        const auto c = static_cast<std::size_t>(ch);
        if (demand[c] <= capacity_[c]) continue;
        if (kept[c] < 0) {
          kept[c] = static_cast<int>(capacity.size());
          capacity.push_back(capacity_[c]);
        }
        channels.push_back(kept[c]);
      }
      q.channels.swap(channels);
    }
    capacity_.swap(capacity);
  }

  double& landed(int r, int notify) { return landed_[static_cast<std::size_t>(r * registers_ + notify)]; }

  // Runs rank r's stream from `t` until it ends or waits for a record not yet landed.
  void advance(int r, double t) {
    std::vector<std::pair<int, double>>& work = advancing_;  // (advance never runs inside another)
    work.assign(1, {r, t});
    while (!work.empty()) {
      const auto [x, at] = work.back();
      work.pop_back();
      Stream& s = streams_[static_cast<std::size_t>(x)];
      const auto& prog = program_[static_cast<std::size_t>(x)];
      double u = at;
      for (; s.pc < prog.size(); ++s.pc) {
        const Op& op = prog[s.pc];
        if (op.kind == Kind::Wait) {
          const double l = landed(x, op.notify);
          if (l < 0) {
            s.blocked = true;
            s.reach = u + c_.dispatch;
            break;
          }
          u = c_.wait_end(u + c_.dispatch, l);
          continue;
        }
        if (op.kind == Kind::Barrier) {
          Barrier& b = barriers_[static_cast<std::size_t>(op.notify)];
          ++b.reached;
          b.at = std::max(b.at, u);
          if (b.reached < b.members) {
            s.blocked = true;
            s.reach = u;
            b.waiting.push_back(x);
            break;
          }
          for (const int w : b.waiting) {  // the last to arrive releases the others
            Stream& other = streams_[static_cast<std::size_t>(w)];
            other.blocked = false;
            ++other.pc;
            work.emplace_back(w, b.at);
          }
          u = b.at;
          continue;
        }
        if (op.kind == Kind::Busy) {
          u += op.bytes;
          if (op.notify >= 0) marks_[static_cast<std::size_t>(op.notify)] = std::max(marks_[static_cast<std::size_t>(op.notify)], u);
          continue;
        }
        if (op.kind == Kind::Copy || op.kind == Kind::Reduce) {
          // On the NPU's own memory, which the model leaves unshared here.
          const bool reduce = op.kind == Kind::Reduce;
          u = sdma_task(c_, u, c_.sdma_fixed, op.bytes, std::min(c_.local_rate, c_.sdma_cap(reduce)), c_.local_latency);
          if (!reduce && op.notify >= 0) marks_[static_cast<std::size_t>(op.notify)] = std::max(marks_[static_cast<std::size_t>(op.notify)], u);
          continue;
        }
        u += c_.dispatch + c_.rdma_post;
        Pair& q = pairs_[static_cast<std::size_t>(op.pair)];
        if (op.kind == Kind::Write) {
          Flow fl;
          fl.pair = static_cast<std::size_t>(op.pair);
          fl.seq = q.arrival.size();
          fl.left = op.bytes;
          flows_.push_back(fl);
          q.arrival.push_back(-1);
          starts_.emplace(u, static_cast<int>(flows_.size() - 1));
        } else {
          const double earliest = u + c_.rdma_notify_bytes / q.path.rate + q.path.latency;
          if (q.known == q.arrival.size()) {
            land(q.to, op.notify, std::max(earliest, q.latest.empty() ? 0.0 : q.latest.back()), work);
          } else {
            q.deferred.push_back({q.arrival.size(), {earliest, op.notify}});
          }
        }
      }
      s.free = u;
    }
  }

  void land(int r, int notify, double at, std::vector<std::pair<int, double>>& work) {
    landed(r, notify) = at;
    Stream& s = streams_[static_cast<std::size_t>(r)];
    const auto& prog = program_[static_cast<std::size_t>(r)];
    if (s.blocked && prog[s.pc].kind == Kind::Wait && prog[s.pc].notify == notify) {
      const double u = c_.wait_end(s.reach, at);
      s.blocked = false;
      ++s.pc;
      work.emplace_back(r, u);
    }
  }

  // Write i's last byte arrived at `at`: records behind it on its queue pair may land.
  void arrived(int i, double at) {
    Pair& q = pairs_[flows_[static_cast<std::size_t>(i)].pair];
    q.arrival[flows_[static_cast<std::size_t>(i)].seq] = at;
    for (; q.known < q.arrival.size() && q.arrival[q.known] >= 0; ++q.known) {
      q.latest.push_back(std::max(q.latest.empty() ? 0.0 : q.latest.back(), q.arrival[q.known]));
    }
    std::vector<std::pair<int, double>>& work = released_;
    work.clear();
    std::vector<std::pair<std::size_t, std::pair<double, int>>>& wait = still_deferred_;
    wait.clear();
    for (const auto& [before, rec] : q.deferred) {
      if (before <= q.known) {
        land(q.to, rec.second, std::max(rec.first, before == 0 ? 0.0 : q.latest[before - 1]), work);
      } else {
        wait.push_back({before, rec});
      }
    }
    q.deferred.swap(wait);
    for (const auto& [r, t] : work) advance(r, t);
  }

  const EstimateFabric& f_;
  const StepCosts& c_;
  GroupLayout g_;
  int p_;
  int registers_ = 0;
  bool rdma_ = true;
  std::vector<std::vector<Op>> program_;
  std::vector<Pair> pairs_;
  std::vector<double> capacity_;
  std::vector<std::vector<int>> on_channel_;  // writes in flight over each channel
  // advance()'s streams to run on, arrived()'s streams released and records still deferred.
  std::vector<std::pair<int, double>> advancing_, released_;
  std::vector<std::pair<std::size_t, std::pair<double, int>>> still_deferred_;
  // share()'s and run()'s working space, kept between calls.
  std::vector<char> seen_;
  std::vector<int> group_, visited_;
  std::vector<const std::vector<int>*> paths_;
  MaxMinShares solver_;  // share()'s, kept from solve to solve
  std::vector<double> limits_;
  std::vector<double> landed_;
  std::vector<double> marks_;
  std::vector<Barrier> barriers_;
  std::vector<Stream> streams_;
  std::vector<Flow> flows_;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> starts_;
  std::priority_queue<Drain, std::vector<Drain>, std::greater<>> drains_;
  std::vector<int> drained_;
  std::uint64_t activated_ = 0;
};

// H-D_R's fold of a rooted op (level1.cpp's Fold): ranks 0..2r-1 pair up,
// the one of the root's parity taking part; virtual rank v is real(v).
struct HdFold {
  int p2 = 1;
  int r = 0;
  int par = 0;
  HdFold(int p, int root) : p2(floor_pow2(p)), r(p - p2), par(root < 2 * r ? root % 2 : 0) {}
  int real(int v) const { return v < r ? 2 * v + par : v + r; }
  int partner(int i) const { return 2 * i + 1 - par; }
  int virt(int x) const { return x < 2 * r ? x / 2 : x - r; }  // of a rank taking part
};

// A broadcast from `root`, transfer by transfer, for RdmaRun; `chunk` the
// bytes of one of the p blocks. The scatter (NHR: residue classes of the
// index relative to the root; NB and ring: halving ranges), then the
// all-gather; H-D_R: a binomial tree of whole sends, then the unfold.
std::vector<RunStep> broadcast_xfers(Level1Algo algo, int p, int root, double chunk, bool one_shot) {
  std::vector<RunStep> out;
  if (one_shot && algo != Level1Algo::HalvingDoubling) {
    // The whole data along the binomial tree (level1.cpp tree_broadcast).
    const int k = ceil_log2(p);
    const bool halving = algo == Level1Algo::NHR;
    for (int s = 0; s < k; ++s) {
      const int d = halving ? 1 << (k - 1 - s) : 1 << s;
      std::vector<RankXfer> step;
      for (int u = 0; u + d < p && (halving || u < d); u += halving ? 2 * d : 1) {
        step.push_back(RankXfer{mod(root + u, p), mod(root + u + d, p), chunk * p, 1, false});
      }
      out.push_back(RunStep{std::move(step), {}, -1});
    }
    return out;
  }
  if (algo == Level1Algo::HalvingDoubling) {
    const HdFold f(p, root);
    const int vroot = f.virt(root);
    for (int d = f.p2 / 2; d >= 1; d /= 2) {
      std::vector<RankXfer> step;
      for (int v = 0; v < f.p2; ++v) {
        if (((v ^ vroot) % (2 * d)) == 0) step.push_back(RankXfer{f.real(v), f.real(v ^ d), chunk * p, 1, false});
      }
      out.push_back(RunStep{std::move(step), {}, -1});
    }
    std::vector<RankXfer> unfold;
    for (int i = 0; i < f.r; ++i) unfold.push_back(RankXfer{f.real(i), f.partner(i), chunk * p, 1, false});
    if (!unfold.empty()) out.push_back(RunStep{std::move(unfold), {}, -1});
    return out;
  }
  const int k = ceil_log2(p);
  for (int s = 0; s < k; ++s) {
    std::vector<RankXfer> step;
    if (algo == Level1Algo::NHR) {
      const int d = 1 << s;
      for (int u = 0; u < d && u + d < p; ++u) {
        step.push_back(RankXfer{mod(root + u, p), mod(root + u + d, p), chunk * ((p - u - d + 2 * d - 1) / (2 * d)), 1, false});
      }
    } else {
      const int d = 1 << (k - 1 - s);
      for (int u = 0; u + d < p; u += 2 * d) {
        const int last = std::min(u + 2 * d, p) - 1;  // blocks root + u + d .. root + last, two pieces if they wrap
        const bool wraps = mod(root + u + d, p) > mod(root + last, p);
        step.push_back(RankXfer{mod(root + u, p), mod(root + u + d, p), chunk * (last - u - d + 1), wraps ? 2 : 1, false});
      }
    }
    out.push_back(RunStep{std::move(step), {}, -1});
  }
  for (const Step1& st : algo == Level1Algo::Ring ? ring_steps(p, chunk, false) : stride_steps(algo, p, chunk, false)) {
    std::vector<RankXfer> step;
    for (int y = 0; y < p; ++y) step.push_back(RankXfer{y, mod(y + st.shift, p), st.elems, st.pieces, false});
    out.push_back(RunStep{std::move(step), {}, -1});
  }
  return out;
}

// A Broadcast's or a Reduce's loops over the HCCL buffer (`loops`: each
// loop's bytes), transfer by transfer, for RdmaRun. Per loop a Broadcast:
// the root copies in, broadcast_xfers, every rank copies out; a Reduce:
// every rank copies in, the reduce-scatter (H-D_R: the fold, then halving;
// else the ring or the binary strides), the gather to the root (H-D_R:
// binomial; else along the ring), the root copies out. The copy out is
// marked with the loop's index.
std::vector<RunStep> rooted_steps(CollOp op, Level1Algo algo, int p, int root, const std::vector<double>& loops,
                                  bool one_shot) {
  std::vector<RunStep> out;
  auto step = [&out](std::vector<RankXfer> xfers) { out.push_back(RunStep{std::move(xfers), {}, -1}); };
  const HdFold f(p, root);
  const int vroot = f.virt(root);
  const bool broadcast = op == CollOp::Broadcast;
  for (std::size_t l = 0; l < loops.size(); ++l) {
    const double b = loops[l];
    std::vector<double> at_root(static_cast<std::size_t>(p), 0.0);
    at_root[static_cast<std::size_t>(root)] = b;
    const std::vector<double> everyone(static_cast<std::size_t>(p), b);
    out.push_back(RunStep{{}, broadcast ? at_root : everyone, -1});
    if (broadcast) {
      for (RunStep& st : broadcast_xfers(algo, p, root, b / p, one_shot)) out.push_back(std::move(st));
    } else if (algo == Level1Algo::HalvingDoubling) {
      std::vector<RankXfer> fold;
      for (int i = 0; i < f.r; ++i) fold.push_back(RankXfer{f.partner(i), f.real(i), b, 1, true});
      if (f.r > 0) step(fold);
      for (int d = f.p2 / 2; d >= 1; d /= 2) {
        std::vector<RankXfer> xs;
        for (int v = 0; v < f.p2; ++v) xs.push_back(RankXfer{f.real(v), f.real(v ^ d), b * d / f.p2, 1, true});
        step(xs);
      }
      for (int d = 1; d < f.p2; d *= 2) {
        std::vector<RankXfer> xs;
        for (int v = 0; v < f.p2; ++v) {
          if (((v ^ vroot) % (2 * d)) == d) xs.push_back(RankXfer{f.real(v), f.real(v ^ d), b * d / f.p2, 1, false});
        }
        step(xs);
      }
    } else {
      const std::vector<Step1> scatter =
          algo == Level1Algo::Ring ? ring_steps(p, b / p, true) : stride_steps(algo, p, b / p, true);
      for (const Step1& st : scatter) {
        std::vector<RankXfer> xs;
        for (int x = 0; x < p; ++x) xs.push_back(RankXfer{x, mod(x + st.shift, p), st.elems, st.pieces, true});
        step(xs);
      }
      for (int st = 0; st + 1 < p; ++st) {  // block x - st moves on from x until it reached the root
        std::vector<RankXfer> xs;
        for (int x = 0; x < p; ++x) {
          if (x != root && st < mod(root - x + st, p)) xs.push_back(RankXfer{x, mod(x + 1, p), b / p, 1, false});
        }
        step(xs);
      }
    }
    out.push_back(RunStep{{}, broadcast ? everyone : at_root, static_cast<int>(l)});
  }
  return out;
}

// Several rails at once (a Broadcast's or Reduce's planes, one per NPU
// index of a server) are followed together when they tile the NPUs (member
// x of rail q is NPU x * groups + q), count at most kCountedSources ranks
// and write over RDMA: their writes share the fabric. Member x of rail q is
// then rank x * groups + q of one run.
bool rails_followed_together(const EstimateFabric& fabric, const GroupLayout& g) {
  const bool tiled = g.groups == 1 || (g.group_step == 1 && g.stride == g.groups);
  return tiled && g.members * g.groups <= kCountedSources && fabric.path(g.npu(0, 0), g.npu(0, 1)).rdma;
}

// One rail's step (members 0..p-1) on every rail of `groups`, its mark kept.
RunStep on_every_rail(const RunStep& st, int groups) {
  if (groups == 1) return st;
  RunStep all;
  all.mark = st.mark;
  all.local.assign(st.local.size() * static_cast<std::size_t>(groups), 0.0);
  for (int q = 0; q < groups; ++q) {
    for (RankXfer x : st.xfers) {
      x.from = x.from * groups + q;
      x.to = x.to * groups + q;
      all.xfers.push_back(x);
    }
    for (std::size_t r = 0; r < st.local.size(); ++r) all.local[r * static_cast<std::size_t>(groups) + static_cast<std::size_t>(q)] = st.local[r];
  }
  return all;
}

// The layout of one run over every rail of `g`.
GroupLayout every_rail(const GroupLayout& g) {
  if (g.groups == 1) return g;
  GroupLayout all = g;
  all.members = g.members * g.groups;
  all.stride = 1;
  all.groups = 1;
  return all;
}

// A Broadcast's or a Reduce's loops followed by RdmaRun (the loops
// overlap: a rank done with one starts the next), or a negative time where
// it does not apply. Beyond kRunLoops full loops the others take the
// period between the two before the last followed (the overlap is steady
// by then; the last one is shortened by the smaller loop after it).
constexpr int kRunLoops = 3;
static_assert(kRunLoops >= 3, "the period is taken between the loops before the last followed");
double rooted_run(const EstimateFabric& fabric, const CollectiveSpec& spec, Level1Algo algo, const GroupLayout& g,
                  std::uint64_t per_loop, double free) {
  if (!rails_followed_together(fabric, g)) return -1;
  const int p = g.members;
  const int ranks = p * g.groups;
  const double esz = static_cast<double>(data_type_size(spec.dtype));
  const std::uint64_t full = spec.count / per_loop;
  const std::uint64_t rest = spec.count % per_loop;
  std::vector<double> loops(static_cast<std::size_t>(std::min<std::uint64_t>(full, kRunLoops)), static_cast<double>(per_loop) * esz);
  if (rest > 0 || loops.empty()) loops.push_back(static_cast<double>(rest) * esz);
  std::vector<RunStep> steps;
  for (const RunStep& st : rooted_steps(spec.op, algo, p, spec.root, loops, spec.one_shot)) steps.push_back(on_every_rail(st, g.groups));
  const GroupLayout all = every_rail(g);
  RdmaRun run(fabric, all, ranks, steps);
  double end = run.run(std::vector<double>(static_cast<std::size_t>(ranks), free));
  if (end >= 0 && full > kRunLoops) end += static_cast<double>(full - kRunLoops) * (run.mark(kRunLoops - 2) - run.mark(kRunLoops - 3));
  return end;
}

// A rooted op's rails (`g`: one group per NPU index of a server, tiled)
// over several slices, each with the other level's phases around it:
// before its rail every NPU is busy slice.alone[index], waits for its
// server's NPUs and is busy slice.pre[index]; after it the root server's NPUs wait for each other and
// are busy slice.post[index]. Followed together in one RdmaRun, so the
// servers that have no phase after the rail start the next slice while the
// root's server is still in its phase. Beyond kFollowedSlices full slices
// the others take the period between the two before the last followed, as
// in rooted_run. A negative time where RdmaRun does not apply.
static_assert(kFollowedSlices >= 3, "the period is taken between the slices before the last followed");
double follow_rails(const EstimateFabric& fabric, const CollectiveSpec& rail, Level1Algo algo, const GroupLayout& g,
                    const RailSlices& slices, double free) {
  if (!rails_followed_together(fabric, g) || slices.followed.empty()) return -1;
  const int p = g.members;
  const int groups = g.groups;
  const int ranks = p * groups;
  const double esz = static_cast<double>(data_type_size(rail.dtype));
  const std::uint64_t per_loop = std::max<std::uint64_t>(1, rail.buffer_bytes / data_type_size(rail.dtype));
  std::vector<RunStep> steps;
  for (std::size_t k = 0; k < slices.followed.size(); ++k) {
    const RailSlices::Slice& slice = slices.followed[k];
    RunStep alone;
    alone.phase.assign(static_cast<std::size_t>(ranks), 0.0);
    alone.sync.assign(static_cast<std::size_t>(ranks), -1);
    for (int r = 0; r < ranks; ++r) alone.phase[static_cast<std::size_t>(r)] = slice.alone[static_cast<std::size_t>(r % groups)];
    steps.push_back(std::move(alone));
    RunStep pre;
    pre.phase.assign(static_cast<std::size_t>(ranks), 0.0);
    pre.sync.assign(static_cast<std::size_t>(ranks), 0);
    for (int x = 0; x < p; ++x) {
      for (int q = 0; q < groups; ++q) {
        pre.phase[static_cast<std::size_t>(x * groups + q)] = slice.pre[static_cast<std::size_t>(q)];
        pre.sync[static_cast<std::size_t>(x * groups + q)] = x;
      }
    }
    steps.push_back(std::move(pre));
    std::vector<double> loops(static_cast<std::size_t>(slice.count / per_loop), static_cast<double>(per_loop) * esz);
    if (slice.count % per_loop > 0 || loops.empty()) loops.push_back(static_cast<double>(slice.count % per_loop) * esz);
    for (const RunStep& st : rooted_steps(rail.op, algo, p, rail.root, loops, rail.one_shot)) {
      steps.push_back(on_every_rail(st, groups));
      steps.back().mark = -1;  // (the slices are marked, not the rail's loops)
    }
    RunStep post;
    post.phase.assign(static_cast<std::size_t>(ranks), 0.0);
    post.sync.assign(static_cast<std::size_t>(ranks), -1);
    for (int q = 0; q < groups; ++q) {
      post.phase[static_cast<std::size_t>(rail.root * groups + q)] = slice.post[static_cast<std::size_t>(q)];
      post.sync[static_cast<std::size_t>(rail.root * groups + q)] = 0;
    }
    post.mark = static_cast<int>(k);
    steps.push_back(std::move(post));
  }
  RdmaRun run(fabric, every_rail(g), ranks, steps);
  double end = run.run(std::vector<double>(static_cast<std::size_t>(ranks), free));
  if (end >= 0 && slices.full > kFollowedSlices) {
    end += static_cast<double>(slices.full - kFollowedSlices) * (run.mark(kFollowedSlices - 2) - run.mark(kFollowedSlices - 3));
  }
  return end;
}

// A pairwise step whose pairs, and its neighbours', all take one kind of
// path through the spines has shares that only ECMP decides: which pairs'
// hashes land on the same spine. The hash is a fixed mix of (src, dst), so
// such a step's collisions are a draw like any other's. Beyond
// 2 * kDrawnSteps of them, kDrawnSteps evenly spread are solved and each
// of the others takes the shares of the solved one before it, rotated over
// the ranks by an amount scattered with the shift (drawn_turn), so that
// the slow ranks differ from use to use: a thousand max-min solves of
// 3,000 flows become about 160 on 1024 A2 NPUs. The steps near the ends
// (pairs inside a server or under one leaf) are solved each. Rotating by
// the shifts' difference instead moved a slow share by one rank per step,
// in step with the ranks' waits on x - s and x + s, and made the exchange
// 6-13% slower than solving every step (1024 A2 NPUs, 64M..4G); scattered,
// it is within 0.6% (docs/estimate.md).
constexpr int kDrawnSteps = 32;

// How far step `shift` rotates the shares it takes: a multiplicative hash.
std::size_t drawn_turn(int shift, std::size_t ranks) {
  return static_cast<std::size_t>((static_cast<std::uint64_t>(shift) * 0x9E3779B97F4A7C15ull) >> 40) % ranks;
}

// Which steps of a pairwise exchange are solved, found shift by shift so
// that the steps near the ends (solved each) are solved while the shifts
// further on are classified: on 1024 A2 NPUs classifying the 1023 shifts
// took a tenth of the first point, every other thread idle until it ended.
class StepDrawing {
 public:
  StepDrawing(const EstimateFabric& fabric, const PerRankSteps& steps, int p)
      : fabric_(fabric), steps_(steps), p_(p), one_kind_(static_cast<std::size_t>(std::max(p, 1)), 0),
        stand_in_(static_cast<std::size_t>(std::max(p, 1))) {
    for (int s = 0; s < p; ++s) stand_in_[static_cast<std::size_t>(s)] = s;
  }

  // The next shift to solve, 0 once there is none: every step that is not
  // alike in order, then the alike ones solved (all of them, or the first
  // of each of kDrawnSteps blocks).
  int next_solved() {
    while (candidate_ < p_) {
      const int s = candidate_++;
      if (fabric_.solves_every_step()) return s;
      classify_through(std::min(s + 1, p_ - 1));
      if (!alike(s)) return s;
      alike_.push_back(s);
    }
    if (!drawn_) draw();
    return queued_ < solved_alike_.size() ? solved_alike_[queued_++] : 0;
  }

  // Once next_solved() has returned 0: per shift s (1..p-1), the shift whose
  // solved shares step s takes (s itself when solved).
  const std::vector<int>& stand_ins() const { return stand_in_; }

 private:
  const EstimateFabric& fabric_;
  const PerRankSteps& steps_;
  int p_;
  std::vector<char> one_kind_;  // per shift: every pair through the spines, by one kind of path
  int classified_ = 0;          // one_kind_ is known for shifts 1..classified_
  int candidate_ = 1;
  std::vector<int> alike_;  // shifts that, with both neighbours, take one kind of path
  bool drawn_ = false;
  std::vector<int> solved_alike_;
  std::size_t queued_ = 0;
  std::vector<int> stand_in_;

  void classify_through(int last) {
    for (; classified_ < last; ++classified_) {
      const EstimateFabric::PairTable& t = steps_.pairs(classified_ + 1);
      one_kind_[static_cast<std::size_t>(classified_ + 1)] = t.kinds.size() == 1 && t.kinds.front().rdma ? 1 : 0;
    }
  }
  bool alike(int s) const {
    return s >= 2 && s + 1 < p_ && one_kind_[static_cast<std::size_t>(s - 1)] &&
           one_kind_[static_cast<std::size_t>(s)] && one_kind_[static_cast<std::size_t>(s + 1)];
  }
  void draw() {
    drawn_ = true;
    const std::size_t n = alike_.size();
    if (n <= 2 * static_cast<std::size_t>(kDrawnSteps)) {
      solved_alike_ = alike_;
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t block = i * kDrawnSteps / n;  // the solved one: the block's first
      const std::size_t first = (block * n + kDrawnSteps - 1) / kDrawnSteps;
      stand_in_[static_cast<std::size_t>(alike_[i])] = alike_[first];
      if (first == i) solved_alike_.push_back(alike_[i]);
    }
    fabric_.count_steps_drawn(n - kDrawnSteps);
  }
};

double pairwise_per_rank(const EstimateFabric& fabric, const CollectiveSpec& spec, const GroupLayout& g, double free) {
  const StepCosts& c = fabric.costs();
  const double d = c.dispatch;
  const int p = g.members;
  const double esz = static_cast<double>(data_type_size(spec.dtype));
  const std::uint64_t per_loop = std::max<std::uint64_t>(1, spec.buffer_bytes / data_type_size(spec.dtype));
  const int window = p - 1 <= 120 ? p - 1 : 100;
  const double local = std::min(c.local_rate, c.copy_rate);
  PerRankSteps steps(fabric, g, p);
  std::vector<double> t(static_cast<std::size_t>(p), free), ready(t);
  // A loop over the buffer: every rank's copy in, then the steps in order.
  double bytes = 0;
  auto loop_start = [&](std::uint64_t first) {
    bytes = static_cast<double>(std::min(per_loop, spec.count - std::min(spec.count, first))) * esz;
    for (double& x : t) x = sdma_task(c, x, c.sdma_fixed, bytes, local, c.local_latency);
  };
  auto run_step = [&](const std::vector<EstimateFabric::RankStep>& exchange, int s) {
    if ((s - 1) % window == 0 && window < p - 1 && s > 1) {
      // The dissemination barrier between rounds: record to x + 2^i, wait
      // from x - 2^i (the pairs of step 2^i, whose paths are known).
      for (int i = 0; i < ceil_log2(p); ++i) {
        const int ahead = 1 << i;
        const EstimateFabric::PairTable& pairs = steps.pairs(ahead);
        for (int x = 0; x < p; ++x) {
          const auto [at, lands] =
              steps.record(t[static_cast<std::size_t>(x)], pairs.kinds[pairs.kind_of[static_cast<std::size_t>(x)]]);
          t[static_cast<std::size_t>(x)] = at;
          ready[static_cast<std::size_t>(x + ahead < p ? x + ahead : x + ahead - p)] = lands;
        }
        for (int x = 0; x < p; ++x) {
          t[static_cast<std::size_t>(x)] = c.wait_end(t[static_cast<std::size_t>(x)] + d, ready[static_cast<std::size_t>(x)]);
        }
      }
    }
    const EstimateFabric::RankStep& st = exchange[static_cast<std::size_t>(s)];
    const std::vector<double>& rate = st.shares_of != 0 ? exchange[st.shares_of].rate : st.rate;
    steps.step(t, *st.paths, rate, st.turn, s, bytes, 1, false, bytes, bytes);
  };
  loop_start(0);
  int next_step = 1;  // of the first loop
  // Step s's paths and shares (index s; 0 unused), solved at the first size
  // only; meanwhile the first loop runs each step as soon as its shares
  // are known, while the later steps are solved.
  const std::vector<EstimateFabric::RankStep>& exchange = fabric.rank_steps(
      "pairwise/" + std::to_string(p) + "/" + std::to_string(g.stride) + "/" + std::to_string(g.groups) + "/" +
          std::to_string(g.group_step),
      [&] {
        std::vector<EstimateFabric::RankStep> out(static_cast<std::size_t>(p));
        std::vector<char> known(static_cast<std::size_t>(p), 0);
        StepDrawing drawing(fabric, steps, p);
        // A rank posts its write and goes on once its sender's write has
        // landed, not its own: its write of step s is still in flight in
        // step s + 1, as its sender's of step s - 1 was in step s. So a
        // step's writes share the NICs and spines with those of both
        // neighbours (an ECMP collision of one step is spread over three).
        std::vector<int> solved;
        // Step s, once known: a solved step's own shares, or those of the
        // solved step it stands in for, rotated onto its ranks (read in
        // place: copies of them were 7 MiB of fresh pages a point).
        auto take_stand_in = [&](int s) {
          const int drawn = drawing.stand_ins()[static_cast<std::size_t>(s)];
          if (drawn == s || known[static_cast<std::size_t>(s)] != 0 || known[static_cast<std::size_t>(drawn)] == 0) return;
          EstimateFabric::RankStep& step = out[static_cast<std::size_t>(s)];
          step.paths = &steps.pairs(s);
          step.shares_of = static_cast<std::size_t>(drawn);
          step.turn = drawn_turn(s, out[static_cast<std::size_t>(drawn)].rate.size());
          known[static_cast<std::size_t>(s)] = 1;
        };
        std::size_t moved = 0;
        auto take_solved = [&](std::size_t n, std::vector<EstimateFabric::RankStep>& listed) {
          for (; moved < n; ++moved) {
            out[static_cast<std::size_t>(solved[moved])] = std::move(listed[moved]);
            known[static_cast<std::size_t>(solved[moved])] = 1;
          }
          for (; next_step < p; ++next_step) {
            take_stand_in(next_step);
            if (known[static_cast<std::size_t>(next_step)] == 0) break;
            run_step(out, next_step);
          }
        };
        std::vector<EstimateFabric::RankStep> listed = steps.shift_steps(
            [&]() -> std::optional<PerRankSteps::ShiftStep> {
              const int s = drawing.next_solved();
              if (s == 0) return std::nullopt;
              solved.push_back(s);
              PerRankSteps::ShiftStep step{s, {}};
              for (const int q : {s - 1, s + 1}) {
                if (q >= 1 && q < p) step.alongside.push_back(q);
              }
              return step;
            },
            take_solved);
        take_solved(listed.size(), listed);
        for (int s = 1; s < p; ++s) take_stand_in(s);
        return out;
      });
  for (; next_step < p; ++next_step) run_step(exchange, next_step);  // (kept from an earlier size: all known)
  for (std::uint64_t first = per_loop; first < spec.count; first += per_loop) {  // the later loops
    loop_start(first);
    for (int s = 1; s < p; ++s) run_step(exchange, s);
  }
  return *std::max_element(t.begin(), t.end());
}

}  // namespace

double level1_estimate(const EstimateFabric& fabric, const CollectiveSpec& spec, Level1Algo algo,
                       const GroupLayout& g, double free) {
  const StepCosts& c = fabric.costs();
  const int p = g.members;
  const double esz = static_cast<double>(data_type_size(spec.dtype));
  const double local = std::min(c.local_rate, c.copy_rate);
  auto copy = [&](double t, double elems) { return elems > 0 ? sdma_task(c, t, c.sdma_fixed, elems * esz, local, c.local_latency) : t; };
  if (p == 1) return copy(free, static_cast<double>(spec.count));
  if (spec.op == CollOp::AlltoAll) return pairwise(fabric, spec, g, free);
  PatternKinds kinds(fabric, g, p);
  const std::uint64_t buffer = std::max<std::uint64_t>(1, spec.buffer_bytes / data_type_size(spec.dtype));
  const bool per_rank = spec.op == CollOp::ReduceScatter || spec.op == CollOp::AllGather;
  const std::uint64_t per_loop = per_rank ? std::max<std::uint64_t>(1, buffer / static_cast<std::uint64_t>(p)) : buffer;
  const std::uint64_t count = spec.count;
  // A loop's tasks follow one another from the stream's free time, so a
  // loop of n elements takes the same time wherever it starts: computed
  // once per distinct n (every loop but the last is full).
  std::map<std::uint64_t, double> loop_time;
  // The steps of AllReduce, ReduceScatter and AllGather (every rank
  // sending and receiving alike) are followed rank by rank within the
  // budget: a slow pair then delays its own ranks only, as in the detailed
  // model, instead of every rank at every step.
  const double steps_per_loop = static_cast<double>(loop_steps(spec.op, algo, p, 1.0, spec.one_shot).size());
  const bool by_rank = p <= kCountedSources && steps_per_loop * p <= kPerRankBudget &&
                       (spec.op == CollOp::AllReduce || spec.op == CollOp::ReduceScatter || spec.op == CollOp::AllGather);
  if (spec.op == CollOp::Broadcast || spec.op == CollOp::Reduce) {
    const double end = rooted_run(fabric, spec, algo, g, per_loop, free);
    if (end >= 0) return end;
  }
  std::optional<PerRankSteps> ranks;
  if (by_rank) ranks.emplace(fabric, g, p);
  auto loop = [&](double n) {
    double free = 0;
    switch (spec.op) {  // copy in
      case CollOp::ReduceScatter:
        free += p * (copy(0.0, n));  // p copies back to back
        break;
      case CollOp::Broadcast: free = copy(free, n); break;  // the root's copy in starts the tree
      default: free = copy(free, n);
    }
    const std::vector<Step1> steps = loop_steps(spec.op, algo, p, n, spec.one_shot);
    if (by_rank) {
      std::vector<double> t(static_cast<std::size_t>(p), free);
      for (const Step1& st : steps) {
        if (algo == Level1Algo::HalvingDoubling) {
          const std::string key = "hd/" + step_key(g, st, p) + "/" + std::to_string(st.fold);
          const double block = n * esz;  // per-rank blocks (ReduceScatter, AllGather)
          const double largest = st.elems * esz;
          ranks->step_to(t, hd_targets(st, p), key,
                         [&](int x) { return hd_bytes(st, spec.op, p, block, largest, x); }, st.pieces, st.reduce);
        } else {
          ranks->step(t, st.shift, st.elems * esz, st.pieces, st.reduce, 0, 0);
        }
      }
      free = *std::max_element(t.begin(), t.end());
    }
    for (std::size_t i = 0; i < (by_rank ? 0 : steps.size()); ++i) {
      const Step1& s = steps[i];
      if (s.fanout) {
        std::vector<double> bytes;
        std::size_t last = i;
        for (; last < steps.size() && steps[last].fanout; ++last) bytes.push_back(steps[last].elems * esz);
        const double at = free;
        bool rdma = false;
        for (const auto& kind : kinds.of(s)) rdma = rdma || kind.first.rdma;
        if (rdma) {
          free = slowest_kind(kinds, s, [&](const PathCost& path, double rate) {
            if (path.rdma) return at + fanout_tree(c, bytes, rate, path);
            double t = at;
            for (const double b : bytes) t = tree_step(c, t, b, rate, path);
            return t;
          });
        } else {
          // Over SDMA each tree step on its own kinds of path (on A3 the
          // near steps cross SIO, the far ones the server's switch).
          for (std::size_t j = i; j < last; ++j) {
            const double from = free;
            free = slowest_kind(kinds, steps[j], [&](const PathCost& path, double rate) {
              return tree_step(c, from, bytes[j - i], rate, path);
            });
          }
        }
        i = last - 1;
        continue;
      }
      const double part = s.elems * esz / s.pieces;
      const double at = free;
      free = slowest_kind(kinds, s, [&](const PathCost& path, double rate) {
        if (s.tree) return tree_step(c, at, s.elems * esz, rate, path);
        double t = guarded_step(c, at, part, rate, path, s.reduce);
        // Further pieces go on the same stream between the same records.
        for (int i = 1; i < s.pieces; ++i) {
          t = path.rdma ? t + c.dispatch + c.rdma_post : sdma_task(c, t, c.sdma_fixed + path.write_extra, part, rate, path.latency);
          if (s.reduce) t = sdma_task(c, t, c.sdma_fixed, part, std::min(c.local_rate, c.reduce_rate), c.local_latency);
        }
        return t;
      });
    }
    switch (spec.op) {  // copy out
      case CollOp::AllGather:
        free += p * (copy(0.0, n));
        break;
      default: free = copy(free, n);
    }
    return free;
  };
  for (std::uint64_t first = 0; first == 0 || first < count; first += per_loop) {
    const std::uint64_t elems = std::min(per_loop, count - first);
    auto found = loop_time.find(elems);
    if (found == loop_time.end()) found = loop_time.emplace(elems, loop(static_cast<double>(elems))).first;
    free += found->second;
    if (count == 0) break;
  }
  return free;
}

void register_level1_estimates(std::map<std::string, EstimateFn>& out) {
  const EstimateFn flat = [](const CollectiveSpec& spec, const ExecContext&, const AlgoPlan& plan,
                             const EstimateFabric& fabric) {
    GroupLayout g;
    g.members = spec.ranks;
    g.group_step = spec.ranks;
    const StepCosts& c = fabric.costs();
    CollectiveSpec one = spec;
    one.one_shot = plan.one_shot;
    return level1_estimate(fabric, one, plan.level1, g, c.launch - c.dispatch);
  };
  for (const char* name : {"AllReduceComm", "AllGatherComm", "ReduceScatterComm", "BroadCastComm",
                           "AllReduceMidCountFor91093Executor", "AllGatherMidCountFor91093Executor",
                           "AllGatherSmallCount", "ReduceScatterDeterExecutor", "BroadCastSmallCountExecutor"}) {
    out[name] = flat;
  }
}

double rooted_rails_run(const EstimateFabric& fabric, const CollectiveSpec& rail, Level1Algo algo,
                        const GroupLayout& layout, const RailSlices& slices, double free) {
  return follow_rails(fabric, rail, algo, layout, slices, free);
}

std::vector<double> rooted_rails_once(const EstimateFabric& fabric, const CollectiveSpec& rail, Level1Algo algo,
                                      const GroupLayout& g, const std::vector<double>& free) {
  if (!rails_followed_together(fabric, g)) return {};
  const int ranks = g.members * g.groups;
  const double esz = static_cast<double>(data_type_size(rail.dtype));
  const std::uint64_t per_loop = std::max<std::uint64_t>(1, rail.buffer_bytes / data_type_size(rail.dtype));
  if (rail.count > per_loop) return {};  // one loop over the buffer only
  std::vector<RunStep> steps;
  for (const RunStep& st : rooted_steps(rail.op, algo, g.members, rail.root, {static_cast<double>(rail.count) * esz}, rail.one_shot)) {
    steps.push_back(on_every_rail(st, g.groups));
  }
  RdmaRun run(fabric, every_rail(g), ranks, steps);
  if (run.run(free) < 0) return {};
  std::vector<double> ends(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) ends[static_cast<std::size_t>(r)] = run.free_of(r);
  return ends;
}

}  // namespace hcclsim

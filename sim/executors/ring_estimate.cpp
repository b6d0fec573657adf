// Closed forms of the ring executors (sim/executors/ring_a3.cpp): the A3
// single and double rings inside a server (sim/executors/ring.cpp), and
// across servers the stages of sim/executors/hierarchy.cpp, levels 1 and
// 2 by level1_estimate. The A2 level0:ring executors run the same forms.
//
// Unlike the other forms, level 0 is followed rank by rank over ONE server
// (at most 16 ranks, so the cost does not grow with the cluster; every
// server runs alike). Its ranks are not alike: a record to the other die of
// the same chip is local, to the next chip remote, so a ring's handshakes
// alternate between the two, and the stage forms let rank 0 skip copies
// whose source and destination coincide; each handshake ties a rank to both
// of its ring neighbours, so the ring runs at the pace of its slowest pair.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "sim/executors/plan.h"
#include "sim/executors/level1_estimate.h"
#include "sim/estimate/steps.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

// The flows of at most one supernode (and this many source NPUs, as
// level1.cpp) are counted for a ring step's shares: level-0 flows stay
// inside their server, so a window of servers loads the channels as the
// whole cluster does, and counting stays well under 10 ms at any size.
constexpr int kCountedSources = 1024;


// The slices of one loop of a ring form: slice j is `parts` runs of
// `elems[j]` elements each (segments of a stage form, else one run).
struct Slices {
  int parts = 1;
  std::vector<std::uint64_t> elems;
};

Slices chunk_slices(std::uint64_t n, int p) {
  Slices s;
  for (int j = 0; j < p; ++j) s.elems.push_back(chunk_span(n, p, j).count);
  return s;
}

Slices segment_slices(std::uint64_t n, int p, int segments) {
  Slices s;
  s.parts = segments;
  s.elems.assign(static_cast<std::size_t>(p), n);
  return s;
}

// The level-0 ring of one server (RingExec) on its p ranks: per rank, when
// each stream is free (0 = Main, then the slaves). Streams persist from
// stage to stage as the composition reuses them.
class RingLevel0 {
 public:
  // `first_npu`: the server's first NPU; `servers`: servers whose flows are counted.
  RingLevel0(const EstimateFabric& fabric, DataType dtype, int p, int rings, int first_npu, int servers)
      : f_(fabric),
        c_(fabric.costs()),
        p_(p),
        rings_(rings),
        first_(first_npu),
        esz_(static_cast<double>(data_type_size(dtype))),
        free_(static_cast<std::size_t>(p), std::vector<double>(static_cast<std::size_t>(2 * rings), c_.launch - c_.dispatch)) {
    const int window = std::max(1, std::min(servers, kCountedSources / std::max(1, p)));
    const std::string key = "ring0/" + std::to_string(first_npu) + "/" + std::to_string(p) + "/" +
                            std::to_string(rings) + "/" + std::to_string(window);
    // Every rank reads from its previous rank on each ring at once.
    auto flows = [&](std::vector<FlowPair>& out) {
      for (int srv = 0; srv < window; ++srv) {
        for (int k = 0; k < rings_; ++k) {
          for (int r = 0; r < p_; ++r) out.push_back(FlowPair{npu(prev(k, r)) + srv * p_, npu(r) + srv * p_});
        }
      }
    };
    // (the links' SDMA caps per pair below, not the least of the ring's)
    read_rate_[0] = f_.shared_rate(key, flows, c_.copy_rate, false, false);
    read_latency_.assign(static_cast<std::size_t>(rings), std::vector<double>(static_cast<std::size_t>(p)));
    read_cap_.assign(static_cast<std::size_t>(rings), std::vector<double>(static_cast<std::size_t>(p)));
    for (int k = 0; k < rings_; ++k) {
      for (int r = 0; r < p_; ++r) {
        // (an SDMA read's extra set-up on the path, per task as the latency: folded in)
        const PathCost from_prev = f_.path(npu(prev(k, r)), npu(r));
        read_latency_[idx(k)][idx(r)] = from_prev.latency + from_prev.read_extra;
        read_cap_[idx(k)][idx(r)] = from_prev.rate;
      }
    }
    read_rate_[1] = f_.shared_rate(key, flows, c_.reduce_rate, false, false);
    // The copy streams of the rings copy at once through the rank's memory.
    ring_copy_rate_ = std::min(c_.copy_rate, c_.local_rate / rings_);
    main_copy_rate_ = std::min(c_.copy_rate, c_.local_rate);
  }

  double main(int r) const { return at_stream(r, 0); }
  double end() const {
    double out = 0;
    for (int r = 0; r < p_; ++r) out = std::max(out, main(r));
    return out;
  }
  // Every stream's free time, rank by rank (Hierarchical::slices).
  void append_state(std::vector<double>& out) const {
    for (const std::vector<double>& streams : free_) out.insert(out.end(), streams.begin(), streams.end());
  }
  // Moves every stream's free time on by `by`.
  void shift(double by) {
    for (std::vector<double>& streams : free_) {
      for (double& t : streams) t += by;
    }
  }

  // A stage starts on rank r once the previous one ended there (`ended[r]`).
  void start(const std::vector<double>& ended) {
    for (int r = 0; r < p_; ++r) {
      for (double& t : free_[static_cast<std::size_t>(r)]) t = std::max(t, ended[static_cast<std::size_t>(r)] - c_.dispatch);
    }
  }

  // Main releases the slaves; afterwards it waits for them.
  void fork() {
    for (int r = 0; r < p_; ++r) {
      double& m = stream(r, 0);
      for (int i = 1; i < 2 * rings_; ++i) {
        m += c_.dispatch + c_.record_local;
        stream(r, i) = c_.wait_end(stream(r, i) + c_.dispatch, m);
      }
    }
  }
  void join() {
    for (int r = 0; r < p_; ++r) {
      double& m = stream(r, 0);
      for (int i = 1; i < 2 * rings_; ++i) {
        stream(r, i) += c_.dispatch + c_.record_local;
        m = c_.wait_end(m + c_.dispatch, stream(r, i));
      }
    }
  }
  // A copy on Main of rank r's slice (`moved` of its `parts` runs; the
  // others have the same source and destination).
  void main_copy(int r, int moved, std::uint64_t elems) { stream(r, 0) = copy(stream(r, 0), moved, elems, main_copy_rate_); }

  // Afterwards rank r holds slice r reduced (RingExec::reduce_scatter_rings).
  void reduce_scatter(const Slices& s) {
    const double d = c_.dispatch;
    std::vector<std::vector<double>> copied(static_cast<std::size_t>(p_), std::vector<double>(static_cast<std::size_t>(p_)));
    for (int k = 0; k < rings_; ++k) {
      // The local-copy stream runs ahead: copy my part of the next slice, record.
      for (int r = 0; r < p_; ++r) {
        double& cs = stream(r, copy_stream(k));
        for (int st = 0; st + 1 < p_; ++st) {
          cs = copy(cs, s.parts, half(s.elems[idx(at(k, pos(k, r) - st - 2))], k), ring_copy_rate_);
          cs += d + c_.record_local;
          copied[static_cast<std::size_t>(r)][static_cast<std::size_t>(st)] = cs;
        }
      }
      for (int st = 0; st + 1 < p_; ++st) {
        std::vector<double> t(static_cast<std::size_t>(p_));
        for (int r = 0; r < p_; ++r) {
          t[idx(r)] = c_.wait_end(stream(r, ring_stream(k)) + d, copied[idx(r)][idx(st)]);
        }
        ring_step(k, t, [&](int r) { return half(s.elems[idx(at(k, pos(k, r) - st - 2))], k); }, s.parts, true);
      }
    }
  }

  // Afterwards every rank holds every slice, each also copied to the output
  // by the local-copy stream (RingExec::all_gather_rings).
  void all_gather(const Slices& s) {
    const double d = c_.dispatch;
    for (int k = 0; k < rings_; ++k) {
      for (int r = 0; r < p_; ++r) {
        double& ring = stream(r, ring_stream(k));
        double& cs = stream(r, copy_stream(k));
        ring += d + c_.record_local;
        cs = copy(c_.wait_end(cs + d, ring), s.parts, half(s.elems[idx(r)], k), ring_copy_rate_);
      }
      for (int st = 0; st + 1 < p_; ++st) {
        std::vector<double> t(static_cast<std::size_t>(p_));
        for (int r = 0; r < p_; ++r) t[idx(r)] = stream(r, ring_stream(k));
        auto elems = [&](int r) { return half(s.elems[idx(at(k, pos(k, r) - st - 1))], k); };
        ring_step(k, t, elems, s.parts, false);
        for (int r = 0; r < p_; ++r) {
          double& ring = stream(r, ring_stream(k));
          double& cs = stream(r, copy_stream(k));
          ring += d + c_.record_local;
          cs = copy(c_.wait_end(cs + d, ring), s.parts, elems(r), ring_copy_rate_);
        }
      }
    }
  }

  // A pipelined chain from the root along each ring, p chunks of the loop's
  // n elements (RingExec::broadcast, between its fork and join).
  void broadcast_chain(int root, std::uint64_t n) {
    const double d = c_.dispatch;
    std::vector<double> chain(static_cast<std::size_t>(p_));
    std::vector<double> data(static_cast<std::size_t>(p_));
    for (int k = 0; k < rings_; ++k) {
      const int root_pos = pos(k, root);
      auto rank_at = [&](int j) { return at(k, root_pos + j); };
      for (int q = 0; q < p_; ++q) {
        const std::uint64_t elems = half(chunk_span(n, p_, q).count, k);
        for (int j = 0; j < p_; ++j) {
          const int r = rank_at(j);
          double& t = stream(r, ring_stream(k));
          if (j > 0) {
            t = c_.wait_end(t + d, chain[idx(j - 1)]);
            t = read(t, 1, elems, false, k, r);
            t += d + record(r, prev(k, r));
            data[idx(j)] = t;
          }
          if (j + 1 < p_) {
            t += d + record(r, next(k, r));
            chain[idx(j)] = t;
          }
        }
        for (int j = 0; j + 1 < p_; ++j) {
          double& t = stream(rank_at(j), ring_stream(k));
          t = c_.wait_end(t + d, data[idx(j + 1)]);
        }
      }
    }
  }

  // After a reduce-scatter, the root reads every other rank's slice in turn
  // on Main, each behind a handshake with that rank's Main (RingExec::reduce).
  // A rank's Main goes on once its handshake is done: with a `following`
  // loop it forks it at once, and a rank gathered before it whose previous rank
  // on a ring it is reads its first part of that loop from it while the
  // root still reads its slice; where the two reads cross the same link
  // they share it (max-min) until the shorter ends.
  void gather(int root, const Slices& s, const Slices* following = nullptr) {
    const double d = c_.dispatch;
    double& t = stream(root, 0);
    for (int r = 0; r < p_; ++r) {
      if (r == root) continue;
      t += d + record(root, r);
      double& peer = stream(r, 0);
      peer = c_.wait_end(peer + d, t);
      peer += d + record(r, root);
      t = c_.wait_end(t + d, peer);
      // Alone, one read at a time: the path's own rate.
      const PathCost path = f_.path(npu(r), npu(root));
      const double rate = std::min(path.rate, c_.copy_rate);
      const double bytes = static_cast<double>(s.elems[idx(r)]) * esz_;
      if (bytes == 0) continue;
      const double begin = t + d + c_.sdma_read_fixed + path.read_extra;  // its first byte
      double end = begin + bytes / rate;
      for (int k = 0; following != nullptr && k < rings_; ++k) {
        const int reader = next(k, r);
        if (reader == root || reader > r) continue;  // not gathered yet: still in this loop
        const auto [shared, reader_shared] = gather_shares(r, root, reader);
        if (shared >= rate) continue;
        // When the reader's first read of r starts (fork(), reduce_scatter()):
        // r's Main releases its streams, the copy stream copies the first
        // part, the ring stream records the ack the reader waits for.
        auto released = [&](int i) { return peer + static_cast<double>(i) * (d + c_.record_local); };
        const std::uint64_t part = half(following->elems[idx(at(k, pos(k, r) - 2))], k);
        const double copied = copy(released(copy_stream(k)), following->parts, part, ring_copy_rate_) + d + c_.record_local;
        const double ring_free = released(ring_stream(k) == 0 ? 2 * rings_ - 1 : ring_stream(k));
        const double ack = c_.wait_end(ring_free + d, copied) + d + record(r, reader);
        const double other = ack + d + c_.sdma_read_fixed + f_.path(npu(r), npu(reader)).read_extra;
        const double other_bytes = static_cast<double>(following->parts) *
                                   static_cast<double>(half(following->elems[idx(at(k, pos(k, reader) - 2))], k)) * esz_;
        if (other >= end || other_bytes == 0) continue;
        const double left = bytes - (other - begin) * rate;
        const double together = std::min(left / shared, other_bytes / reader_shared);
        end = other + together + (left - together * shared) / rate;
      }
      t = end + path.latency;
    }
  }

 private:
  static std::size_t idx(int i) { return static_cast<std::size_t>(i); }
  double& stream(int r, int i) { return free_[idx(r)][idx(i)]; }
  double at_stream(int r, int i) const { return free_[idx(r)][idx(i)]; }
  int ring_stream(int k) const { return k == rings_ - 1 ? 0 : 1 + k; }
  int copy_stream(int k) const { return rings_ + k; }
  int npu(int r) const { return first_ + r; }
  // Ring 0 runs 0,1,..,p-1; ring 1 the other way round.
  int at(int k, int position) const { return k == 0 ? mod(position, p_) : mod(p_ - mod(position, p_), p_); }
  int pos(int k, int r) const { return k == 0 ? r : mod(p_ - r, p_); }
  int prev(int k, int r) const { return at(k, pos(k, r) - 1); }
  int next(int k, int r) const { return at(k, pos(k, r) + 1); }
  // Ring k's half of a run.
  std::uint64_t half(std::uint64_t elems, int k) const { return chunk_span(elems, rings_, k).count; }
  // The rates of the root's read of r and of `reader`'s read of r at once.
  std::pair<double, double> gather_shares(int r, int root, int reader) const {
    const auto key = std::make_tuple(r, root, reader);
    const auto found = gather_shares_.find(key);
    if (found != gather_shares_.end()) return found->second;
    std::vector<std::vector<int>> routes{f_.route(npu(r), npu(root)), f_.route(npu(r), npu(reader))};
    std::vector<int> dense;
    std::vector<double> capacity;
    for (std::vector<int>& route : routes) {
      for (int& ch : route) {
        const auto at_ = std::find(dense.begin(), dense.end(), ch);
        const int i = static_cast<int>(at_ - dense.begin());
        if (at_ == dense.end()) {
          dense.push_back(ch);
          capacity.push_back(f_.channel_rate(ch));
        }
        ch = i;
      }
    }
    const std::vector<double> rates =
        max_min_shares({&routes[0], &routes[1]}, {c_.copy_rate, c_.reduce_rate}, capacity);
    return gather_shares_.emplace(key, std::make_pair(rates[0], rates[1])).first->second;
  }
  double record(int from, int to) const {
    const int chip = std::max(1, f_.spec().npus_per_chip);
    return npu(from) / chip == npu(to) / chip ? c_.record_local : c_.record_remote;
  }
  // `tasks` SDMA tasks of `elems` elements each, back to back from `free`.
  double transfer(double free, double fixed, int tasks, std::uint64_t elems, double rate, double latency) const {
    if (elems == 0 || tasks <= 0) return free;
    return free + tasks * (c_.dispatch + fixed + static_cast<double>(elems) * esz_ / rate + latency);
  }
  double copy(double free, int tasks, std::uint64_t elems, double rate) const {
    return transfer(free, c_.sdma_fixed, tasks, elems, rate, c_.local_latency);
  }
  // Ring k's read by rank r of its previous rank.
  double read(double free, int tasks, std::uint64_t elems, bool reduce, int k, int r) const {
    return transfer(free, c_.sdma_read_fixed, tasks, elems, std::min(read_rate_[reduce ? 1 : 0], read_cap_[idx(k)][idx(r)]),
                    read_latency_[idx(k)][idx(r)]);
  }

  // One ring step on every rank, `t` being when each rank's ring stream
  // reaches it: TxAck to the next rank, RxAck from the previous one, read
  // the previous rank's part, TxDataSignal back, RxDataSignal from the next.
  template <typename Elems>
  void ring_step(int k, const std::vector<double>& t, const Elems& elems, int parts, bool reduce) {
    const double d = c_.dispatch;
    std::vector<double> ack(static_cast<std::size_t>(p_));
    std::vector<double> data(static_cast<std::size_t>(p_));
    for (int r = 0; r < p_; ++r) ack[idx(r)] = t[idx(r)] + d + record(r, next(k, r));
    for (int r = 0; r < p_; ++r) {
      double u = c_.wait_end(ack[idx(r)] + d, ack[idx(prev(k, r))]);
      u = read(u, parts, elems(r), reduce, k, r);
      data[idx(r)] = u + d + record(r, prev(k, r));
    }
    for (int r = 0; r < p_; ++r) stream(r, ring_stream(k)) = c_.wait_end(data[idx(r)] + d, data[idx(next(k, r))]);
  }

  const EstimateFabric& f_;
  const StepCosts& c_;
  int p_;
  int rings_;
  int first_;
  double esz_;
  std::vector<std::vector<double>> free_;
  double read_rate_[2] = {0, 0};  // a ring read: copy, reduce
  std::vector<std::vector<double>> read_latency_;  // [ring][rank]: from the previous rank (with the SDMA read extra)
  std::vector<std::vector<double>> read_cap_;      // [ring][rank]: that path's rate for one SDMA read
  double ring_copy_rate_ = 0;
  double main_copy_rate_ = 0;
  mutable std::map<std::tuple<int, int, int>, std::pair<double, double>> gather_shares_;
};

// Runs of a stage form's slice that `move` does copy: the run t sits at
// `a + t * da` on one side and `b + t * db` on the other (elements, the same
// buffer); equal places are skipped.
int runs_moved(int runs, std::int64_t a, std::int64_t da, std::int64_t b, std::int64_t db) {
  const std::int64_t gap = a - b;
  const std::int64_t slope = da - db;
  if (slope == 0) return gap == 0 ? 0 : runs;
  if (gap % slope != 0) return runs;
  const std::int64_t t = -gap / slope;
  return t >= 0 && t < runs ? runs - 1 : runs;
}

// One server, every rank in the ring (RingExec::build).
double one_server(const CollectiveSpec& spec, const EstimateFabric& fabric, int rings) {
  const int p = spec.ranks;
  const std::uint64_t buffer = spec.buffer_bytes / data_type_size(spec.dtype);
  RingLevel0 ring(fabric, spec.dtype, p, rings, 0, 1);
  auto loops = [](std::uint64_t count, std::uint64_t per_loop, const auto& body) {
    per_loop = std::max<std::uint64_t>(per_loop, 1);
    for (std::uint64_t first = 0; first == 0 || first < count; first += per_loop) {
      body(std::min(per_loop, count - first));
      if (count == 0) break;
    }
  };
  switch (spec.op) {
    case CollOp::AllReduce:
      loops(spec.count, buffer, [&](std::uint64_t n) {
        const Slices s = chunk_slices(n, p);
        ring.fork();
        ring.reduce_scatter(s);
        ring.all_gather(s);
        ring.join();
      });
      break;
    case CollOp::ReduceScatter:
      loops(spec.count, buffer / static_cast<std::uint64_t>(p), [&](std::uint64_t n) {
        const Slices s = segment_slices(n, p, 1);
        ring.fork();
        ring.reduce_scatter(s);
        ring.join();
        for (int r = 0; r < p; ++r) ring.main_copy(r, 1, n);
      });
      break;
    case CollOp::AllGather:
      loops(spec.count, buffer / static_cast<std::uint64_t>(p), [&](std::uint64_t n) {
        const Slices s = segment_slices(n, p, 1);
        for (int r = 0; r < p; ++r) ring.main_copy(r, 1, n);
        ring.fork();
        ring.all_gather(s);
        ring.join();
      });
      break;
    case CollOp::Broadcast:
      loops(spec.count, buffer, [&](std::uint64_t n) {
        ring.main_copy(spec.root, 1, n);
        ring.fork();
        ring.broadcast_chain(spec.root, n);
        ring.join();
        for (int r = 0; r < p; ++r) ring.main_copy(r, 1, n);
      });
      break;
    case CollOp::Reduce: {
      std::uint64_t first = 0;
      loops(spec.count, buffer, [&](std::uint64_t n) {
        const Slices s = chunk_slices(n, p);
        first += n;
        const Slices next = chunk_slices(std::min<std::uint64_t>(std::max<std::uint64_t>(buffer, 1), spec.count - first), p);
        ring.fork();
        ring.reduce_scatter(s);
        ring.join();
        ring.gather(spec.root, s, first < spec.count ? &next : nullptr);
        ring.main_copy(spec.root, 1, n);
      });
      break;
    }
    case CollOp::AlltoAll: break;
  }
  return ring.end();
}

// Several servers (HierarchyBuilder): level-0 rings in every server, level
// 1 on each rail (the ranks of one index in every server), and for an
// AllReduce over several supernodes level 2 between them.
class Hierarchical {
 public:
  Hierarchical(const CollectiveSpec& spec, const Hierarchy& h, const AlgoPlan& plan, const EstimateFabric& fabric, int rings)
      : spec_(spec),
        h_(h),
        plan_(plan),
        f_(fabric),
        d_(fabric.costs().dispatch),
        esz_(data_type_size(spec.dtype)),
        ring_(fabric, spec.dtype, h.per_server, rings, 0, h.servers_per_pod),
        ended_(static_cast<std::size_t>(h.per_server), 0.0) {}

  double run() {
    switch (spec_.op) {
      case CollOp::AllReduce: all_reduce(); break;
      case CollOp::ReduceScatter: reduce_scatter(); break;
      case CollOp::AllGather: all_gather(); break;
      case CollOp::Broadcast: broadcast(); break;
      case CollOp::Reduce: reduce(); break;
      case CollOp::AlltoAll: break;
    }
    return *std::max_element(ended_.begin(), ended_.end());
  }

 private:
  std::uint64_t half() const { return spec_.buffer_bytes / 2; }
  int g0() const { return h_.per_server; }

  CollectiveSpec stage(CollOp op, int ranks, std::uint64_t count, std::uint64_t buffer_bytes) const {
    return stage_spec(spec_, op, ranks, count, buffer_bytes);
  }
  // Member x of rail i (every server, or the servers of one supernode);
  // `all_rails`: every rail runs the stage at once, else only one.
  GroupLayout rail(int members, bool all_rails = true) const {
    GroupLayout g;
    g.members = members;
    g.stride = g0();
    g.groups = all_rails ? g0() : 1;
    g.group_step = 1;
    return g;
  }
  // Rank i's stage of level 1 or 2 on its rail, after its previous stage
  // (its streams' first tasks no earlier than the launch). The closed form
  // only adds and takes maxima of times from its start, so its duration is
  // worked out once per stage shape and reused by every rail and slice.
  void level1(int i, const CollectiveSpec& s, Level1Algo algo, const GroupLayout& g) {
    const auto key = std::make_tuple(static_cast<int>(s.op), s.ranks, s.count, s.root, s.buffer_bytes,
                                     static_cast<int>(algo), g.stride, g.groups);
    auto found = level1_.find(key);
    if (found == level1_.end()) found = level1_.emplace(key, level1_estimate(f_, s, algo, g, 0.0)).first;
    double& t = ended_[static_cast<std::size_t>(i)];
    t = std::max(t, f_.costs().launch) - d_ + found->second;
  }
  void level0_start() { ring_.start(ended_); }
  void level0_end() {
    for (int i = 0; i < g0(); ++i) ended_[static_cast<std::size_t>(i)] = ring_.main(i);
  }
  // Slices of `count`, `per_slice` elements each but the last: body(first, n).
  //
  // A full slice is the same map of every stream's free time, built of
  // sums and maxima (a max-plus map: moving every time on by c moves its
  // result on by c). So once the full slices repeat, every time moving on
  // by the same amount, bit for bit, over one slice twice in a row (or
  // over two slices twice in a row: a Broadcast's chains alternate), the
  // full slices after them would too. All but the last of them are added
  // at once instead of followed (a 128 GiB AllReduce on CloudMatrix384 is
  // some 1,300 slices); the last full slice (whose body may see that a
  // partial one follows) and the partial one are followed as before.
  // Added at once, a time can differ from the one followed slice by slice
  // in its last bits (rounding): by at most 2e-12 of it, and only from
  // 8 GiB up, over every ring op on three A3 topologies, 1 MiB..128 GiB,
  // fp16/fp32/int8. `ended_moves`: the stages' ends (ended_) change in a
  // slice too, else only the level-0 streams do.
  template <typename Body>
  void slices(std::uint64_t count, std::uint64_t per_slice, bool ended_moves, const Body& body) {
    per_slice = std::max<std::uint64_t>(per_slice, 1);
    constexpr std::size_t kLongestPeriod = 2;
    std::deque<std::vector<double>> history;  // states after the latest full slices, newest last
    for (std::uint64_t first = 0; first < count || first == 0; first += per_slice) {
      const bool full = count - first >= per_slice;
      if (full && history.empty()) history.push_back(state(ended_moves));
      body(first, std::min(per_slice, count - first));
      if (count == 0) break;
      if (!full) continue;
      history.push_back(state(ended_moves));
      if (history.size() > 2 * kLongestPeriod + 1) history.pop_front();
      if (f_.follows_every_slice()) continue;
      const std::uint64_t full_after = (count - first - per_slice) / per_slice;
      for (std::size_t period = 1; period <= kLongestPeriod; ++period) {
        const std::optional<double> step = steady_step(history, period);
        if (!step) continue;
        const std::uint64_t skipped = full_after == 0 ? 0 : (full_after - 1) / period * period;
        if (skipped == 0) break;
        const double by = static_cast<double>(skipped / period) * *step;
        if (ended_moves) {
          for (double& t : ended_) t += by;
        }
        ring_.shift(by);
        first += skipped * per_slice;
        f_.count_slices_added_at_once(skipped);
        history.clear();  // the states in it are no longer the latest
        history.push_back(state(ended_moves));
        break;
      }
    }
  }
  std::vector<double> state(bool ended_moves) const {
    std::vector<double> out;
    if (ended_moves) out.assign(ended_.begin(), ended_.end());
    ring_.append_state(out);
    return out;
  }

  void all_reduce() {
    const std::uint64_t g1 = static_cast<std::uint64_t>(h_.servers_per_pod);
    const bool three_levels = h_.pods > 1 && h_.servers_per_pod > 1;
    const std::uint64_t unit = static_cast<std::uint64_t>(g0()) * (three_levels ? g1 : 1);
    slices(spec_.count, half() / esz_ / unit * unit, true, [&](std::uint64_t, std::uint64_t n) {
      // Level 0 keeps each rank's chunk in place: no copy out.
      level0_start();
      ring_.fork();
      ring_.reduce_scatter(chunk_slices(n, g0()));
      ring_.join();
      level0_end();
      for (int i = 0; i < g0(); ++i) {
        const Span c = chunk_span(n, g0(), i);
        if (c.count == 0) continue;
        if (three_levels && c.count % g1 == 0) {
          const std::uint64_t blk = c.count / g1;
          level1(i, stage(CollOp::ReduceScatter, h_.servers_per_pod, blk, half() / 2), plan_.level1, rail(h_.servers_per_pod));
          GroupLayout pods;
          pods.members = h_.pods;
          pods.stride = h_.servers_per_pod * g0();
          pods.groups = h_.servers_per_pod * g0();
          pods.group_step = 1;
          level1(i, stage(CollOp::AllReduce, h_.pods, blk, half() / 2), plan_.level2, pods);
          level1(i, stage(CollOp::AllGather, h_.servers_per_pod, blk, half() / 2), plan_.level1, rail(h_.servers_per_pod));
        } else {
          level1(i, stage(CollOp::AllReduce, h_.servers(), c.count, half() / 2), plan_.level1, rail(h_.servers()));
        }
      }
      // Level 0 gathers from the buffer: no copy in.
      level0_start();
      ring_.fork();
      ring_.all_gather(chunk_slices(n, g0()));
      ring_.join();
      level0_end();
    });
  }

  // Where run t of rank r's slice sits in the HCCL buffer (the segments
  // form's layout) against where the level-1 stage keeps it: rank 0's match.
  int runs_moved_of(int r, std::uint64_t n) const {
    const int segs = h_.servers();
    const auto sn = static_cast<std::int64_t>(n);
    return runs_moved(segs, static_cast<std::int64_t>(r) * segs * sn, sn, 0, sn);
  }

  void reduce_scatter() {
    const int segs = h_.servers();
    const std::uint64_t per_slice = half() / esz_ / (static_cast<std::uint64_t>(g0()) * static_cast<std::uint64_t>(segs));
    slices(spec_.count, per_slice, true, [&](std::uint64_t, std::uint64_t n) {
      level0_start();
      ring_.fork();
      ring_.reduce_scatter(segment_slices(n, g0(), segs));
      ring_.join();
      for (int r = 0; r < g0(); ++r) ring_.main_copy(r, runs_moved_of(r, n), n);
      level0_end();
      for (int i = 0; i < g0(); ++i) {
        level1(i, stage(CollOp::ReduceScatter, segs, n, half() / 2), plan_.level1, rail(segs));
      }
    });
  }

  void all_gather() {
    const int segs = h_.servers();
    const std::uint64_t per_slice = half() / esz_ / (static_cast<std::uint64_t>(g0()) * static_cast<std::uint64_t>(segs));
    slices(spec_.count, per_slice, true, [&](std::uint64_t, std::uint64_t n) {
      for (int i = 0; i < g0(); ++i) {
        level1(i, stage(CollOp::AllGather, segs, n, half() / 2), plan_.level1, rail(segs));
      }
      level0_start();
      for (int r = 0; r < g0(); ++r) ring_.main_copy(r, runs_moved_of(r, n), n);
      ring_.fork();
      ring_.all_gather(segment_slices(n, g0(), segs));
      ring_.join();
      level0_end();
    });
  }

  // The level-0 forms of one server with the whole count (their own loops).
  void broadcast() {
    const int root_index = spec_.root % g0();
    CollectiveSpec b1 = spec_;
    b1.ranks = h_.servers();
    b1.root = spec_.root / g0();
    level1(root_index, b1, plan_.level1, rail(h_.servers(), false));
    level0_start();
    slices(spec_.count, spec_.buffer_bytes / esz_, false, [&](std::uint64_t, std::uint64_t n) {
      ring_.main_copy(root_index, 1, n);
      ring_.fork();
      ring_.broadcast_chain(root_index, n);
      ring_.join();
      for (int r = 0; r < g0(); ++r) ring_.main_copy(r, 1, n);
    });
    level0_end();
  }

  void reduce() {
    const int root_index = spec_.root % g0();
    level0_start();
    const std::uint64_t buffer = spec_.buffer_bytes / esz_;
    slices(spec_.count, buffer, false, [&](std::uint64_t first, std::uint64_t n) {
      const Slices s = chunk_slices(n, g0());
      const std::uint64_t after = first + n;
      const Slices next = chunk_slices(std::min(buffer, spec_.count - std::min(after, spec_.count)), g0());
      ring_.fork();
      ring_.reduce_scatter(s);
      ring_.join();
      ring_.gather(root_index, s, after < spec_.count ? &next : nullptr);
      ring_.main_copy(root_index, 1, n);
    });
    level0_end();
    CollectiveSpec r1 = spec_;
    r1.ranks = h_.servers();
    r1.root = spec_.root / g0();
    level1(root_index, r1, plan_.level1, rail(h_.servers(), false));
  }

  const CollectiveSpec& spec_;
  const Hierarchy& h_;
  const AlgoPlan& plan_;
  const EstimateFabric& f_;
  double d_;
  std::uint64_t esz_;
  RingLevel0 ring_;
  std::vector<double> ended_;  // per rank of a server: when its last stage ended
  std::map<std::tuple<int, int, std::uint64_t, int, std::uint64_t, int, int, int>, double> level1_;
};

EstimateFn ring_estimate(int rings) {
  return [rings](const CollectiveSpec& spec, const ExecContext& ctx, const AlgoPlan& plan, const EstimateFabric& fabric) {
    const Hierarchy& h = ctx.hierarchy;
    if (h.servers() <= 1) return one_server(spec, fabric, rings);
    if (plan.pipeline) {
      // A2 clusters' level-1 Pipeline overlaps the stages of successive slices.
      throw std::invalid_argument("--model estimate has no closed form for the level-1 pipeline; use --model detailed");
    }
    if (h.per_server == 1) {
      // No level 0: one level-1 graph over every rank.
      GroupLayout g;
      g.members = spec.ranks;
      g.group_step = spec.ranks;
      const StepCosts& c = fabric.costs();
      return level1_estimate(fabric, spec, plan.level1, g, c.launch - c.dispatch);
    }
    return Hierarchical(spec, h, plan, fabric, rings).run();
  };
}

}  // namespace

void register_ring_estimates(std::map<std::string, EstimateFn>& out) {
  for (const char* name : {"AllReduceFastDoubleRingFor91093Executor", "AlignedAllGatherDoubleRingFor91093Executor",
                           "ReduceScatterFastDoubleRingFor91093Executor", "BroadCastRingFor91093Executor",
                           "ReduceRingFor91093Executor"}) {
    out[name] = ring_estimate(2);
  }
  for (const char* name : {"AllReduceRingFor91093Executor", "AllGatherRingFor91093Executor",
                           "ReduceScatterRingFor91093Executor", "AllReduceRingExecutor", "AllGatherRingExecutor",
                           "ReduceScatterRingExecutor", "BroadCastRingExecutor", "ReduceRingPlusHd"}) {
    out[name] = ring_estimate(1);
  }
}

}  // namespace hcclsim

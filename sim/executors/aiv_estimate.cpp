// Closed forms of the AIV-mode executors (sim/executors/aiv.cpp): one
// server, every rank's cores followed in their task order. Each core is a
// stream of its own: a task starts one dispatch gap after the previous one
// ends (op_launch before the first); a move pays aiv.copy_fixed, then its
// bytes at its rate plus the path latency; a FlagSet lands flag_write after
// it starts; a FlagWait ends flag_poll after its flag reaches the count (or
// after it starts, if reached). A flag's count is reached when the last of
// the sets it needs lands. The phases of a kernel (stage, pull-reduce,
// gather, barrier) are evaluated in order over all ranks: a phase's waits
// only read flags of earlier phases, so each rank's own slice sizes count.
// Rates: every pull of a phase runs while every rank pulls from every peer
// (all pulls of a kernel phase start together, the ranks being symmetric),
// a pull's rate its max-min share of that pattern (and of the NPUs' AIV
// ports, when the profile has them); the local copies of a rank share its
// memory channel.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim/executors/plan.h"
#include "sim/estimate/steps.h"
#include "sim/executors/aiv.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

// The rates and latencies of one server's AIV moves, and the core streams'
// rules.
class AivForm {
 public:
  AivForm(const CollectiveSpec& s, const EstimateFabric& f, int cores, int local_copies)
      : c_(f.costs()), p_(s.ranks), esz_(static_cast<double>(data_type_size(s.dtype))) {
    const auto up = static_cast<std::size_t>(p_);
    auto pulls = [this](std::vector<FlowPair>& flows) {
      for (int r = 0; r < p_; ++r)
        for (int q = 0; q < p_; ++q)
          if (q != r) flows.push_back(FlowPair{q, r});
    };
    const std::vector<double>& rates = f.flow_rates("aiv-pull/" + std::to_string(p_), pulls, c_.aiv_rate, false, false);
    pull_rate_.assign(up * up, 0.0);
    latency_.assign(up * up, 0.0);
    std::size_t k = 0;
    for (int r = 0; r < p_; ++r) {
      for (int q = 0; q < p_; ++q) {
        if (q == r) continue;
        // Each NPU's AIV port (aiv.remote_bandwidth) carries its p - 1
        // pulls in and p - 1 out: a pull gets at most 1 / (p - 1) of it.
        pull_rate_[index(q, r)] = std::min(rates[k++], c_.aiv_port / static_cast<double>(p_ - 1));
        latency_[index(q, r)] = f.path(q, r).latency;
      }
    }
    // A rank's local copies running together on its memory channel.
    auto local = [local_copies](std::vector<FlowPair>& flows) {
      flows.assign(static_cast<std::size_t>(local_copies), FlowPair{0, 0});
    };
    local_rate_ = f.shared_rate("aiv-local/" + std::to_string(local_copies), local, c_.aiv_rate, false, false);
    free_.assign(up, std::vector<double>(static_cast<std::size_t>(cores), c_.launch - c_.dispatch));
  }

  // When core `i` of rank `r` is free (its previous task ended).
  double& free(int r, int i) { return free_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]; }

  // A move of `elems` by core i of rank r from rank `from` into r (local if
  // from == r).
  void move(int r, int i, int from, double elems) {
    if (elems <= 0) return;  // the builder skips empty moves
    const bool local = from == r;
    free(r, i) = sdma_task(c_, free(r, i), c_.aiv_fixed, elems * esz_, local ? local_rate_ : pull_rate_[index(from, r)],
                           local ? c_.local_latency : latency_[index(from, r)]);
  }
  // A FlagSet: returns when the flag lands.
  double set(int r, int i) { return free(r, i) += c_.dispatch + c_.flag_write; }
  // A FlagWait for a count reached at `reach`.
  void wait(int r, int i, double reach) { free(r, i) = std::max(free(r, i) + c_.dispatch, reach) + c_.flag_poll; }
  // All `cores` cores of every rank meet on a flag each sets once.
  void barrier(int cores) {
    for (int r = 0; r < p_; ++r) {
      double reach = 0;
      for (int i = 0; i < cores; ++i) reach = std::max(reach, set(r, i));
      for (int i = 0; i < cores; ++i) wait(r, i, reach);
    }
  }
  double end() const {
    double out = 0;
    for (const auto& rank : free_)
      for (const double t : rank) out = std::max(out, t);
    return out;
  }

 private:
  std::size_t index(int from, int to) const {
    return static_cast<std::size_t>(from) * static_cast<std::size_t>(p_) + static_cast<std::size_t>(to);
  }

  const StepCosts& c_;
  int p_;
  double esz_;
  std::vector<double> pull_rate_, latency_;  // by (from, to)
  double local_rate_ = 0;
  std::vector<std::vector<double>> free_;  // by rank, core
};

// Spans as PlanBuilder::loops: at most `per` elements each, at least one.
std::vector<Span> spans(std::uint64_t count, std::uint64_t per) {
  if (count == 0) return {Span{0, 0}};
  per = std::max<std::uint64_t>(per, 1);
  std::vector<Span> out;
  for (std::uint64_t first = 0; first < count; first += per) out.push_back(Span{first, std::min(per, count - first)});
  return out;
}

std::uint64_t tile_elems(const CollectiveSpec& s) {
  return std::max<std::uint64_t>(1, kAivTileBytes / data_type_size(s.dtype));
}
double elems(const Span& s) { return static_cast<double>(s.count); }
using Times = std::vector<std::vector<double>>;  // by rank, then index
Times by_rank(int p) { return Times(static_cast<std::size_t>(p)); }
double at(const Times& t, int r, std::size_t k) { return t[static_cast<std::size_t>(r)][k]; }

// AllReduce one shot: the own core stages the input and initialises the
// output (a flag after each); the core for peer i waits for both flags and
// pull-reduces i's whole input.
double all_reduce_one_shot(const CollectiveSpec& s, const EstimateFabric& f) {
  const int p = s.ranks;
  AivForm a(s, f, p, 1);
  const double n = static_cast<double>(s.count);
  std::vector<double> ready(static_cast<std::size_t>(p)), out_init(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    a.move(r, r, r, n);
    ready[static_cast<std::size_t>(r)] = a.set(r, r);
    a.move(r, r, r, n);
    out_init[static_cast<std::size_t>(r)] = a.set(r, r);
  }
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < p; ++i) {
      if (i == r) continue;
      a.wait(r, i, ready[static_cast<std::size_t>(i)]);
      a.wait(r, i, out_init[static_cast<std::size_t>(r)]);
      a.move(r, i, i, n);
    }
  }
  return a.end();
}

// AllReduce two shot (big: 2p cores, tiles chasing progress flags, loops
// over the HCCL buffer, a barrier per loop): copy-in core j stages slice j;
// the pull-reduce core for peer i adds i's copy of the own slice tile by
// tile; copy-in core i then pulls i's reduced slice into the output.
double all_reduce_two_shot(const CollectiveSpec& s, const EstimateFabric& f, bool big) {
  const int p = s.ranks;
  const int cores = big ? 2 * p : p;
  AivForm a(s, f, cores, p);
  const std::uint64_t per_loop = big ? s.buffer_bytes / data_type_size(s.dtype) : s.count;
  const std::uint64_t tile = tile_elems(s);
  for (const Span& loop : spans(s.count, per_loop)) {
    std::vector<std::vector<Span>> tiles(static_cast<std::size_t>(p));
    for (int j = 0; j < p; ++j) {
      const Span sl = chunk_span(loop.count, p, j);
      tiles[static_cast<std::size_t>(j)] = spans(sl.count, big ? tile : sl.count);
    }
    // copied[r][j * T + t]: tile t of slice j staged on rank r.
    std::vector<Times> copied(static_cast<std::size_t>(p), by_rank(p));
    for (int r = 0; r < p; ++r) {
      for (int j = 0; j < p; ++j) {
        for (const Span& t : tiles[static_cast<std::size_t>(j)]) {
          a.move(r, j, r, elems(t));
          copied[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)].push_back(a.set(r, j));
        }
      }
    }
    std::vector<double> reduced(static_cast<std::size_t>(p),
                                0.0);  // p - 1 sets landed
    for (int r = 0; r < p; ++r) {
      const auto& mine = tiles[static_cast<std::size_t>(r)];
      for (int i = 0; i < p; ++i) {
        if (i == r) continue;
        const int core = big ? p + i : i;
        for (std::size_t t = 0; t < mine.size(); ++t) {
          a.wait(r, core, at(copied[static_cast<std::size_t>(r)], r, t));
          a.wait(r, core, at(copied[static_cast<std::size_t>(i)], r, t));
          a.move(r, core, i, elems(mine[t]));
        }
        reduced[static_cast<std::size_t>(r)] = std::max(reduced[static_cast<std::size_t>(r)], a.set(r, core));
      }
    }
    for (int r = 0; r < p; ++r) {
      for (int i = 0; i < p; ++i) {
        a.wait(r, i, reduced[static_cast<std::size_t>(i)]);
        a.move(r, i, i, static_cast<double>(chunk_span(loop.count, p, i).count));
      }
    }
    if (big) a.barrier(cores);
  }
  return a.end();
}

// AllGather (big: r+1 cores, tiles with progress, loops over the AIV
// buffer): the own core stages, the core for peer i pulls behind i's
// progress and tells i; the own core waits for every peer's pull.
double all_gather(const CollectiveSpec& s, const EstimateFabric& f, bool big) {
  const int p = s.ranks;
  const int cores = big ? p + 1 : p;
  AivForm a(s, f, cores, big ? 2 : 1);
  const std::uint64_t per_loop = big ? std::max<std::uint64_t>(1, kAivBufferBytes / data_type_size(s.dtype)) : s.count;
  for (const Span& loop : spans(s.count, per_loop)) {
    const std::vector<Span> tiles = spans(loop.count, big ? tile_elems(s) : loop.count);
    Times staged = by_rank(p);
    for (int r = 0; r < p; ++r) {
      for (const Span& t : tiles) {
        a.move(r, r, r, elems(t));
        staged[static_cast<std::size_t>(r)].push_back(a.set(r, r));
      }
      a.move(r, big ? p : r, r, elems(loop));  // the own slot
    }
    std::vector<double> pulled(static_cast<std::size_t>(p), 0.0);
    for (int r = 0; r < p; ++r) {
      for (int i = 0; i < p; ++i) {
        if (i == r) continue;
        for (std::size_t t = 0; t < tiles.size(); ++t) {
          a.wait(r, i, at(staged, i, t));
          a.move(r, i, i, elems(tiles[t]));
        }
        pulled[static_cast<std::size_t>(i)] = std::max(pulled[static_cast<std::size_t>(i)], a.set(r, i));
      }
    }
    for (int r = 0; r < p; ++r) a.wait(r, r, pulled[static_cast<std::size_t>(r)]);
  }
  return a.end();
}

// ReduceScatter (tiled above 190 KiB or big, loops over the HCCL buffer):
// the own core initialises the output; the core for peer i stages the
// block for i, then pull-reduces i's copy of the own block behind i's
// progress and the output's; the own core frees the buffer once every
// peer pulled.
double reduce_scatter(const CollectiveSpec& s, const EstimateFabric& f, bool tiled) {
  const int p = s.ranks;
  AivForm a(s, f, p, p);
  const std::uint64_t per_loop =
      std::max<std::uint64_t>(1, s.buffer_bytes / data_type_size(s.dtype) / static_cast<std::uint64_t>(p));
  std::vector<double> loop_done;  // by rank: the previous loop's "buffer free"
                                  // landed (none before the first)
  for (const Span& loop : spans(s.count, per_loop)) {
    const std::vector<Span> tiles = spans(loop.count, tiled ? tile_elems(s) : loop.count);
    Times out_init = by_rank(p);
    // staged[r][i]: rank r's block for i, by tile (set by r's core i).
    std::vector<Times> staged(static_cast<std::size_t>(p), by_rank(p));
    for (int r = 0; r < p; ++r) {
      for (const Span& t : tiles) {
        a.move(r, r, r, elems(t));
        out_init[static_cast<std::size_t>(r)].push_back(a.set(r, r));
      }
      for (int i = 0; i < p; ++i) {
        if (i == r) continue;
        if (!loop_done.empty()) a.wait(r, i, loop_done[static_cast<std::size_t>(r)]);
        for (const Span& t : tiles) {
          a.move(r, i, r, elems(t));
          staged[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)].push_back(a.set(r, i));
        }
      }
    }
    std::vector<double> pulled(static_cast<std::size_t>(p), 0.0);
    for (int r = 0; r < p; ++r) {
      for (int i = 0; i < p; ++i) {
        if (i == r) continue;
        for (std::size_t t = 0; t < tiles.size(); ++t) {
          a.wait(r, i, at(staged[static_cast<std::size_t>(i)], r, t));
          a.wait(r, i, at(out_init, r, t));
          a.move(r, i, i, elems(tiles[t]));
        }
        pulled[static_cast<std::size_t>(i)] = std::max(pulled[static_cast<std::size_t>(i)], a.set(r, i));
      }
    }
    loop_done.assign(static_cast<std::size_t>(p), 0.0);
    for (int r = 0; r < p; ++r) {
      a.wait(r, r, pulled[static_cast<std::size_t>(r)]);
      loop_done[static_cast<std::size_t>(r)] = a.set(r, r);
    }
  }
  return a.end();
}

// AlltoAll small: the own core copies the own block; the core for peer i
// stages i's block, tells i, waits for i's, pulls it, acknowledges, waits
// for i's acknowledgement.
double alltoall_small(const CollectiveSpec& s, const EstimateFabric& f) {
  const int p = s.ranks;
  AivForm a(s, f, p, p);
  const double n = static_cast<double>(s.count);
  Times ready = by_rank(p),
        done = by_rank(p);  // [r][i]: set by rank r's core i on i
  for (int r = 0; r < p; ++r) {
    a.move(r, r, r, n);
    ready[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(p), 0.0);
    done[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(p), 0.0);
    for (int i = 0; i < p; ++i) {
      if (i == r) continue;
      a.move(r, i, r, n);
      ready[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = a.set(r, i);
    }
  }
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < p; ++i) {
      if (i == r) continue;
      a.wait(r, i, at(ready, i, static_cast<std::size_t>(r)));
      a.move(r, i, i, n);
      done[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] = a.set(r, i);
    }
  }
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < p; ++i)
      if (i != r) a.wait(r, i, at(done, i, static_cast<std::size_t>(r)));
  return a.end();
}

std::uint64_t bytes_of(const CollectiveSpec& s) { return s.count * data_type_size(s.dtype); }

}  // namespace

void register_aiv_estimates(std::map<std::string, EstimateFn>& out) {
  auto form = [](double (*fn)(const CollectiveSpec&, const EstimateFabric&)) {
    return [fn](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&, const EstimateFabric& f) {
      return fn(s, f);
    };
  };
  // The same size splits as the builder's (sim/executors/aiv.cpp).
  out["AllReduceMeshAivSmallCountExecutor"] = form([](const CollectiveSpec& s, const EstimateFabric& f) {
    return bytes_of(s) <= kAivOneShotMax ? all_reduce_one_shot(s, f) : all_reduce_two_shot(s, f, false);
  });
  out["AllReduceMeshAivExecutor"] =
      form([](const CollectiveSpec& s, const EstimateFabric& f) { return all_reduce_two_shot(s, f, true); });
  out["AllGatherMeshAivSmallCountExecutor"] =
      form([](const CollectiveSpec& s, const EstimateFabric& f) { return all_gather(s, f, false); });
  out["AllGatherMeshAivExecutor"] =
      form([](const CollectiveSpec& s, const EstimateFabric& f) { return all_gather(s, f, true); });
  out["ReduceScatterMeshAivSmallCountExecutor"] = form([](const CollectiveSpec& s, const EstimateFabric& f) {
    return reduce_scatter(s, f, bytes_of(s) > kAivTiledAbove);
  });
  out["ReduceScatterMeshAivExecutor"] =
      form([](const CollectiveSpec& s, const EstimateFabric& f) { return reduce_scatter(s, f, true); });
  out["AlltoAllMeshAivExecutor"] = form(alltoall_small);
}

}  // namespace hcclsim

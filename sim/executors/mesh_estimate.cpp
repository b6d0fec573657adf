// Closed forms of the single-server A2 mesh executors (sim/executors/
// mesh_a2.cpp), in the order of their tasks on a representative rank; the
// formulas of tests/unit/test_executor_times.cpp extended to the loops over
// the HCCL buffer. Every peer link carries one flow per direction in a
// phase (a full mesh), so a transfer's rate is its link's, capped.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "sim/executors/plan.h"
#include "sim/executors/level1_estimate.h"
#include "sim/estimate/steps.h"
#include "sim/executors/executor.h"

namespace hcclsim {

namespace {

constexpr std::uint64_t kSliceAlign = 16 * 1024;  // HCCL_MIN_SLICE_ALIGN_910B, as mesh_a2.cpp

// The rates of one server's mesh phase: every rank moving data with every
// peer at once, as writes or reads.
struct MeshRates {
  double write, read, write_reduce, read_reduce;
  double latency;  // one peer hop
  double record;   // a handshake record
  // SDMA set-up on a peer path: the product's plus the slowest peer's
  // links' extra (A3's switch ports; 0 on A2)
  double write_fixed, read_fixed;
};

MeshRates mesh_rates(const EstimateFabric& f, int p) {
  const StepCosts& c = f.costs();
  auto all_pairs = [p](std::vector<FlowPair>& flows) { mesh_pairs(p, flows); };
  const std::string key = "mesh/" + std::to_string(p);
  const PathCost path = f.path(0, 1);
  double write_extra = 0, read_extra = 0;
  for (int q = 1; q < p; ++q) {
    const PathCost peer = f.path(0, q);
    write_extra = std::max(write_extra, peer.write_extra);
    read_extra = std::max(read_extra, peer.read_extra);
  }
  return MeshRates{f.shared_rate(key, all_pairs, c.copy_rate, true), f.shared_rate(key, all_pairs, c.copy_rate, false),
                   f.shared_rate(key, all_pairs, c.reduce_rate, true), f.shared_rate(key, all_pairs, c.reduce_rate, false),
                   path.latency, path.same_chip ? c.record_local : c.record_remote,
                   c.sdma_fixed + write_extra, c.sdma_read_fixed + read_extra};
}

// Stream i of a rank serves peer r + i + 1 (forward) or r - i - 1
// (backward); that peer serves it on its stream p - 2 - i.
MeshPhase phase(int k, int p, double record) {
  MeshPhase ph;
  ph.k = k;
  ph.record = record;
  ph.partner = [p](int i) { return p - 2 - i; };
  return ph;
}

double copy_task(const StepCosts& c, double free, double bytes) {
  return sdma_task(c, free, c.sdma_fixed, bytes, std::min(c.local_rate, c.copy_rate), c.local_latency);
}

// Loops of at most `per_loop` elements over `count` (at least one).
template <typename Body>
double over_loops(std::uint64_t count, std::uint64_t per_loop, double free, Body body) {
  per_loop = std::max<std::uint64_t>(per_loop, 1);
  std::uint64_t first = 0;
  do {
    free = body(free, static_cast<double>(std::min(per_loop, count - first)));
    first += per_loop;
  } while (first < count);
  return free;
}

double start(const StepCosts& c) { return c.launch - c.dispatch; }

// AllReduceMeshOpbaseLoopExecutor: own slice staged, handshake, 0-byte copy,
// write-reduces to every peer; copy out, handshake, 0-byte copy, reads.
double all_reduce_opbase_loop(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  const std::uint64_t align = std::max<std::uint64_t>(1, std::min(kSliceAlign / data_type_size(s.dtype), s.buffer_bytes / data_type_size(s.dtype)));
  const std::uint64_t capacity = s.buffer_bytes / data_type_size(s.dtype) / align * align;
  return over_loops(s.count, capacity * static_cast<std::uint64_t>(p), start(c), [&](double t, double n) {
    const double slice = std::ceil(n / p / align) * align * esz;  // the largest slice sets the pace
    t = copy_task(c, t, slice);
    MeshPhase hs = phase(p - 1, p, m.record);
    hs.ack = true;
    hs.body = [](int, double free) { return free; };
    t = sdma_task(c, mesh_phase(c, hs, t), c.sdma_fixed, 0, 1, 0);
    MeshPhase rs = phase(p - 1, p, m.record);
    rs.data = true;
    rs.body = [&](int, double free) { return sdma_task(c, free, m.write_fixed, slice, m.write_reduce, m.latency); };
    t = copy_task(c, mesh_phase(c, rs, t), slice);
    t = sdma_task(c, mesh_phase(c, hs, t), c.sdma_fixed, 0, 1, 0);
    MeshPhase ag = phase(p - 1, p, m.record);
    ag.data = true;
    ag.body = [&](int, double free) { return sdma_task(c, free, m.read_fixed, slice, m.read, m.latency); };
    return mesh_phase(c, ag, t);
  });
}

// One phase of the deterministic templates (mesh_a2.cpp
// all_reduce_local_reduce, all_reduce_chunk_mesh) on a representative
// rank: Main records to its p-1 planes (the last a spare: idle, or the own
// slice's copy out), runs `main_before`, its own round as stream p-2; the
// handshakes pair stream i with the peer's stream `partner(i)` (p-2-i
// unless set); then the bodies, `main_after` on Main, and Main waits for
// every plane in order.
struct LocalReducePhase {
  bool ack = false;
  bool data = false;
  std::function<int(int)> partner;
  std::function<double(int, double)> body = [](int, double free) { return free; };
  std::function<double(double)> spare = [](double free) { return free; };
  std::function<double(double)> main_before = [](double free) { return free; };
  std::function<double(double)> main_after = [](double free) { return free; };
};

double local_reduce_phase(const StepCosts& c, int p, double record, double free, const LocalReducePhase& ph) {
  const double d = c.dispatch;
  const int k = p - 2;  // active slaves; Main is stream k
  std::vector<double> t(static_cast<std::size_t>(k + 1));
  double main_free = free;
  for (int i = 0; i < k; ++i) t[static_cast<std::size_t>(i)] = main_free += d + c.record_local;
  const double spare_start = main_free += d + c.record_local;
  t[static_cast<std::size_t>(k)] = ph.main_before(main_free);
  auto handshake = [&]() {
    std::vector<double> landed(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) landed[i] = t[i] + d + record;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::size_t j = ph.partner ? static_cast<std::size_t>(ph.partner(static_cast<int>(i))) : t.size() - 1 - i;
      t[i] = c.wait_end(landed[i] + d, landed[j]);
    }
  };
  if (ph.ack) handshake();
  for (int i = 0; i <= k; ++i) t[static_cast<std::size_t>(i)] = ph.body(i, t[static_cast<std::size_t>(i)]);
  if (ph.data) handshake();
  double main_t = ph.main_after(t[static_cast<std::size_t>(k)]);
  for (int i = 0; i < k; ++i) main_t = c.wait_end(main_t + d, t[static_cast<std::size_t>(i)] + d + c.record_local);
  return c.wait_end(main_t + d, ph.spare(spare_start) + d + c.record_local);
}

// The all-gather both deterministic templates end with: acks (after a
// 0-byte copy on Main in AllReduceLocalReduce, not in AllReduceChunkMesh),
// a sync, then reads of the reduced slices (`x` bytes) while the spare
// plane copies the own slice out.
double deterministic_gather(const StepCosts& c, const MeshRates& m, int p, double t, double x, bool copy_before_acks) {
  auto placeholder = [&](double at) { return sdma_task(c, at, c.sdma_fixed, 0, 1, 0); };
  LocalReducePhase acks;
  acks.ack = true;
  if (copy_before_acks) acks.main_before = placeholder;
  acks.main_after = placeholder;
  t = placeholder(local_reduce_phase(c, p, m.record, placeholder(t), acks));
  LocalReducePhase reads;
  reads.data = true;
  reads.main_before = placeholder;
  reads.main_after = placeholder;
  reads.spare = [&](double free) { return copy_task(c, free, x); };
  reads.body = [&](int, double free) { return sdma_task(c, free, m.read_fixed, x, m.read, m.latency); };
  return placeholder(local_reduce_phase(c, p, m.record, t, reads));
}

// AllReduceMeshMidCountLoopExecutor (template AllReduceLocalReduce): per
// loop, stage the own slice; acks; writes of the peers' slices (the last,
// on Main, with inline reduce); p-2 on-chip folds; acks; reads of the
// reduced slices while the spare plane copies the own one out. The slot
// size (the largest slice) sets the pace, as in the builder.
double all_reduce_local_reduce(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const std::uint64_t esz = data_type_size(s.dtype);
  const MeshRates m = mesh_rates(f, p);
  auto placeholder = [&](double t) { return sdma_task(c, t, c.sdma_fixed, 0, 1, 0); };
  const std::uint64_t per_loop = local_reduce_loop(s.buffer_bytes / esz, p, esz);
  return over_loops(s.count, per_loop, start(c), [&](double t, double count) {
    const std::uint64_t n = static_cast<std::uint64_t>(count);
    const std::uint64_t slot = local_reduce_slot(n, p, esz);
    const double x = static_cast<double>(std::min(slot, n) * esz);
    t = copy_task(c, t, x);
    LocalReducePhase acks;
    acks.ack = true;
    acks.main_after = placeholder;
    t = placeholder(local_reduce_phase(c, p, m.record, t, acks));
    LocalReducePhase writes;
    writes.data = true;
    writes.main_before = placeholder;
    writes.main_after = placeholder;
    writes.body = [&](int i, double free) {
      return i == p - 2 ? sdma_task(c, free, m.write_fixed, x, m.write_reduce, m.latency)
                        : sdma_task(c, free, m.write_fixed, x, m.write, m.latency);
    };
    t = placeholder(local_reduce_phase(c, p, m.record, t, writes));
    for (int i = 0; i < p - 2; ++i) {
      t = sdma_task(c, t, c.sdma_fixed, x, std::min(c.local_rate, c.reduce_rate), c.local_latency);
    }
    return deterministic_gather(c, m, p, t, x, true);
  });
}

// AllReduceMeshOneshotLoopExecutor (template AllReduceChunkMesh): per loop,
// stage the whole input; acks; p-1 rounds of reads with inline reduce of
// the own slice's parts, Main and the planes synchronised between rounds,
// the data signals after the last (plane i answers the peer at distance
// p-1 for i = 0, i otherwise, whose stream is i's partner: 0 <-> 1,
// i <-> p-i); then the all-gather. The largest slice and part set the pace.
double all_reduce_chunk_mesh(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const std::uint64_t esz = data_type_size(s.dtype);
  const MeshRates m = mesh_rates(f, p);
  const std::uint64_t align = std::max<std::uint64_t>(1, 128 / esz);
  auto placeholder = [&](double t) { return sdma_task(c, t, c.sdma_fixed, 0, 1, 0); };
  auto aligned = [&](std::uint64_t n, int parts) {
    const std::uint64_t q = static_cast<std::uint64_t>(parts);
    return std::min(n, ((n + q - 1) / q + align - 1) / align * align);
  };
  return over_loops(s.count, std::max<std::uint64_t>(1, s.buffer_bytes / esz), start(c), [&](double t, double count) {
    const std::uint64_t n = static_cast<std::uint64_t>(count);
    const std::uint64_t slice = aligned(n, p);
    const double x = static_cast<double>(slice * esz);
    const double part = static_cast<double>(aligned(slice, p - 1) * esz);
    t = placeholder(copy_task(c, t, static_cast<double>(n * esz)));
    LocalReducePhase acks;
    acks.ack = true;
    acks.main_after = [&](double at) { return placeholder(placeholder(at)); };
    t = placeholder(local_reduce_phase(c, p, m.record, t, acks));
    for (int round = 1; round < p; ++round) {
      LocalReducePhase reads;
      reads.data = round == p - 1;
      reads.partner = [p](int i) { return i == 0 ? 1 : i == 1 ? 0 : p - i; };
      reads.main_before = placeholder;
      reads.main_after = placeholder;
      reads.body = [&](int, double free) { return sdma_task(c, free, m.read_fixed, part, m.read_reduce, m.latency); };
      t = placeholder(local_reduce_phase(c, p, m.record, t, reads));
    }
    return deterministic_gather(c, m, p, t, x, false);
  });
}

// AllGatherMeshOpbaseExecutor: stage, handshake, 0-byte copy, reads while
// Main copies its own slot, 0-byte copy.
double all_gather_opbase(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  const std::uint64_t buffer = s.buffer_bytes / data_type_size(s.dtype);
  const std::uint64_t reserve = kSliceAlign / data_type_size(s.dtype);
  return over_loops(s.count, buffer > reserve ? buffer - reserve : buffer, start(c), [&](double t, double n) {
    const double x = n * esz;
    t = copy_task(c, t, x);
    MeshPhase hs = phase(p - 1, p, m.record);
    hs.ack = true;
    hs.body = [](int, double free) { return free; };
    t = sdma_task(c, mesh_phase(c, hs, t), c.sdma_fixed, 0, 1, 0);
    MeshPhase data = phase(p - 1, p, m.record);
    data.data = true;
    data.body = [&](int, double free) { return sdma_task(c, free, m.read_fixed, x, m.read, m.latency); };
    data.main_work = [&](double free) { return copy_task(c, free, x); };
    return sdma_task(c, mesh_phase(c, data, t), c.sdma_fixed, 0, 1, 0);
  });
}

// ReduceScatterMeshDmaEliminationExecutor: stage own block, handshake,
// 0-byte copy, write-reduces to every peer, copy out.
double reduce_scatter_dma_elimination(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  return over_loops(s.count, s.buffer_bytes / data_type_size(s.dtype), start(c), [&](double t, double n) {
    const double x = n * esz;
    t = copy_task(c, t, x);
    MeshPhase hs = phase(p - 1, p, m.record);
    hs.ack = true;
    hs.body = [](int, double free) { return free; };
    t = sdma_task(c, mesh_phase(c, hs, t), c.sdma_fixed, 0, 1, 0);
    MeshPhase data = phase(p - 1, p, m.record);
    data.data = true;
    data.body = [&](int, double free) { return sdma_task(c, free, m.write_fixed, x, m.write_reduce, m.latency); };
    return copy_task(c, mesh_phase(c, data, t), x);
  });
}

// AllReduceMeshSmallCountExecutor on A2 (reduce to rank 0, broadcast from
// it): rank 0's streams serve the peers; each peer's Main waits rank 0's
// TxAck, moves the whole input, records TxData. Rank 0 is the critical path.
double all_reduce_reduce_bcast(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double n = static_cast<double>(s.count * data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  // Rank 0 reads from / is written by every peer at once: its links each carry one flow.
  const int fan = p - 2;
  double root = copy_task(c, start(c), n);
  std::vector<double> peer(static_cast<std::size_t>(p), start(c));
  double end = 0;
  for (int step = 0; step < 2; ++step) {
    if (step == 1) root = copy_task(c, root, n);
    std::vector<double> rx(static_cast<std::size_t>(p)), fin(static_cast<std::size_t>(p));
    for (int j = 1; j < p; ++j) {
      const double freed = root + std::min(j, fan) * (c.dispatch + c.record_local);
      const double ack = freed + c.dispatch + m.record;
      const double got = c.wait_end(peer[static_cast<std::size_t>(j)] + c.dispatch, ack);
      const double moved = step == 0 ? sdma_task(c, got, m.write_fixed, n, m.write_reduce, m.latency)
                                     : sdma_task(c, got, m.read_fixed, n, m.read, m.latency);
      peer[static_cast<std::size_t>(j)] = moved + c.dispatch + m.record;
      rx[static_cast<std::size_t>(j)] = c.wait_end(ack + c.dispatch, peer[static_cast<std::size_t>(j)]);
      fin[static_cast<std::size_t>(j)] = rx[static_cast<std::size_t>(j)] + c.dispatch + c.record_local;
      end = std::max(end, peer[static_cast<std::size_t>(j)]);
    }
    double t = rx[static_cast<std::size_t>(p - 1)];
    for (int j = 1; j <= fan; ++j) t = c.wait_end(t + c.dispatch, fin[static_cast<std::size_t>(j)]);
    root = t;
  }
  return std::max(end, root);
}

// The mesh gather of the atomic templates (reads of every peer's slice on
// p-2 slaves and Main, both handshakes), as BroadCastMesh and ReduceMesh use it.
double gather_phase(const StepCosts& c, const MeshRates& m, int p, double free, double slice, bool reduce) {
  MeshPhase ph = phase(p - 2, p, m.record);
  ph.main_takes_part = true;
  ph.ack = ph.data = true;
  ph.body = [&](int, double t) { return sdma_task(c, t, m.read_fixed, slice, reduce ? m.read_reduce : m.read, m.latency); };
  return mesh_phase(c, ph, free);
}

// BroadCastMeshExecutor, one server: root copies in, lets each peer read its
// slice in turn (the last peer is the latest), mesh all-gather, copy out.
double broadcast_mesh(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  return over_loops(s.count, s.buffer_bytes / data_type_size(s.dtype), start(c), [&](double t, double n) {
    const double x = n * esz;
    const double slice = std::ceil(x / p / 128) * 128;
    double root = copy_task(c, t, x);
    double latest = 0;
    const double peer_ack = t + c.dispatch + m.record;  // each peer's TxAck, its first task
    for (int j = 1; j < p; ++j) {
      root = c.wait_end(root + c.dispatch, peer_ack) + c.dispatch + m.record;
      const double got = c.wait_end(peer_ack + c.dispatch, root);
      latest = sdma_task(c, got, m.read_fixed, slice, m.read, m.latency);
    }
    const double gathered = gather_phase(c, m, p, std::max(latest, root), slice, false);
    return copy_task(c, gathered, x);
  });
}

// ReduceMeshExecutor, one server: copy in, reduce-scatter by reads with
// inline reduce, chunk to CCL_OUT, the root reads every chunk in turn on
// its streams, copy out.
double reduce_mesh(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double esz = static_cast<double>(data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  return over_loops(s.count, s.buffer_bytes / data_type_size(s.dtype), start(c), [&](double t, double n) {
    const double x = n * esz;
    const double chunk = std::ceil(n / p) * esz;
    t = copy_task(c, copy_task(c, gather_phase(c, m, p, copy_task(c, t, x), chunk, true), chunk), 0) - c.dispatch - c.sdma_fixed;
    // The root's gather: stream i (fork releases it) acks peer i, the peer
    // answers, the stream reads its chunk and signals back.
    const int k = p - 2;
    double main_t = t;
    std::vector<double> fin(static_cast<std::size_t>(std::max(k, 0)));
    for (int i = 0; i + 1 < p; ++i) {
      const double freed = t + std::min(i + 1, k) * (c.dispatch + c.record_local);
      const double ack = freed + c.dispatch + m.record;
      const double peer_tx = c.wait_end(t + c.dispatch, ack) + c.dispatch + m.record;
      const double got = c.wait_end(ack + c.dispatch, peer_tx);
      const double tx = sdma_task(c, got, m.read_fixed, chunk, m.read, m.latency) + c.dispatch + m.record;
      if (i < k) {
        fin[static_cast<std::size_t>(i)] = tx + c.dispatch + c.record_local;
      } else {
        main_t = tx;
      }
    }
    for (int i = 0; i < k; ++i) main_t = c.wait_end(main_t + c.dispatch, fin[static_cast<std::size_t>(i)]);
    return copy_task(c, main_t, x);
  });
}

// RunAlltoAllVStaged: the send buffer into CCL_IN, the own block to the
// output, then every peer's block read on p-2 slaves and Main.
double alltoall_staged(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const double x = static_cast<double>(s.count * data_type_size(s.dtype));
  const MeshRates m = mesh_rates(f, p);
  const double t = copy_task(c, copy_task(c, start(c), p * x), x);
  return gather_phase(c, m, p, t, x, false);
}

// RunAlltoAllDirectFullmesh (mesh_a2.cpp direct_fullmesh): rounds of up to
// 8 peer distances, each on an SDMA stream with a local-copy stream beside
// it; per step and round the local stream stages the next piece in its CCL
// block (once the block's previous reader freed it), the SDMA stream waits
// for it, handshakes, reads the peer's piece, handshakes and frees the
// block. The round's reads share the links (counted, with those of the
// neighbouring rounds), its local copies the memory channel. A round costs
// what its slowest kind of pair costs.
double alltoall_direct_fullmesh(const CollectiveSpec& s, const EstimateFabric& f) {
  const StepCosts& c = f.costs();
  const int p = s.ranks;
  const std::uint64_t esz = data_type_size(s.dtype);
  if (p < 2) return copy_task(c, start(c), static_cast<double>(s.count * esz));
  const DirectFullmeshPlan plan = direct_fullmesh_plan(s, s.count, !s.alltoallv_counts.empty());
  const int concurrent = plan.concurrent;
  const int groups = plan.groups;
  const std::uint64_t block = plan.block;
  const DistanceRounds& rounds = plan.rounds;
  const std::uint64_t steps = std::max<std::uint64_t>(1, plan.steps);
  const double d = c.dispatch;
  // The own block, on Main, while the rest runs; local copies go at the memory's rate / copies at once.
  const double own = copy_task(c, start(c), static_cast<double>(s.count * esz));
  // Up to kPerRank ranks (p^2 pairs a step, milliseconds a point) every rank
  // is followed with its own times (each pair's share and path, a rank
  // waiting for its own peers); beyond, one representative per slot at its
  // distance's slowest share and path.
  constexpr int kPerRank = 512;
  const int ranks = p <= kPerRank ? p : 1;
  const EstimateFabric::PairTable* table =
      p <= kPerRank ? &f.pair_table("a2a-pairs/" + std::to_string(p),
                                    [p](PairRuns& pairs) {  // row x - 1: (r, r + x)
                                      for (int x = 1; x < p; ++x) pairs.add_rotation(0, 1, p, x);
                                    })
                    : nullptr;
  // Per rank and slot j of a round (its SDMA and local-copy streams): when each is free.
  const std::size_t slots = static_cast<std::size_t>(concurrent);
  auto at = [slots](std::vector<double>& v, int r, std::size_t j) -> double& {
    return v[static_cast<std::size_t>(r) * slots + j];
  };
  std::vector<double> sdma_free(static_cast<std::size_t>(ranks) * slots, start(c)), local_free(sdma_free);
  struct RoundSlots {
    std::vector<double> rate;    // per slot: the slowest share of its distance
    std::vector<PathCost> path;  // per slot: the slowest kind of path (representative form)
  };
  // Per sampled round (its index), once worked out (an empty rate: not
  // yet). (A map's lookup per round was a tenth of a point on 99,840 dies:
  // 12,480 rounds a step.)
  std::vector<RoundSlots> round_slots(std::min<std::size_t>(rounds.size(), 32));  // (sample_of's range)
  struct SampleShares {
    const std::vector<double>* rates = nullptr;  // each flow's share (the fabric keeps it)
    std::size_t own = 0;                         // the round's own flows, first in rates
  };
  std::vector<SampleShares> sample_shares(rounds.size());
  // Per round, its flows' routes: (r - x, r) rank-major, x its distances,
  // for the first ranks up to kListedReads reads (a sample at 99,840 dies).
  constexpr std::size_t kListedReads = 8192;
  auto listed_ranks = [p](std::size_t distances) {  // the ranks whose reads a round lists
    const std::size_t wanted = (kListedReads + distances - 1) / distances;
    return std::min(static_cast<std::size_t>(p), wanted);
  };
  std::map<std::size_t, RoutedFlows> routed;
  std::map<std::size_t, CountedPart> counted;  // per routed round, for the solves by slots
  // Per round, the solves its flows take part in: its part's counts and
  // crossings are freed after the last (a count too high, a solve kept
  // from an earlier point, keeps them).
  std::map<std::size_t, int> round_users;
  auto routed_round = [&](std::size_t q) -> const RoutedFlows& {
    auto found = routed.find(q);
    if (found == routed.end()) {
      // (Written in place, r - x wrapped by a test rather than a division
      // a flow: 99,840 dies' first point 9.7 -> 8.8 ms, medians of 14
      // alternated runs.)
      const DistanceRounds::Round dist = rounds[q];
      const std::size_t listed = listed_ranks(dist.size());
      std::vector<FlowPair> list(listed * dist.size());
      FlowPair* at = list.data();
      for (int r = 0; r < static_cast<int>(listed); ++r) {
        for (const int x : dist) {
          const int from = r - x;  // (|x| < p)
          at->from = from < 0 ? from + p : from >= p ? from - p : from;
          at->to = r;
          ++at;
        }
      }
      found = routed.emplace(q, RoutedFlows{}).first;
      f.route_flows(list, found->second);
      if (table == nullptr) {
        counted.emplace(std::piecewise_construct, std::forward_as_tuple(q),
                        std::forward_as_tuple(found->second, round_users.at(q)));
      }
    }
    return found->second;
  };
  // The rounds whose shares the others take: beyond 32 rounds (hundreds of
  // ranks) a round takes the shares of one of 16 sampled far rounds: all
  // of them leave the server alike, and solving every round's thousands of
  // flows would take seconds.
  auto sample_of = [&rounds](std::size_t ri) { return rounds.size() > 32 && ri >= 16 ? 16 + ri % 16 : ri; };
  // The kinds of path of the reads at distance x (the representative form
  // takes each slot's slowest), from its first kListedReads pairs.
  auto distance_kinds = [&](int x) -> const std::vector<PathCost>& {
    auto pairs = [&](PairRuns& out) {  // (r - x, r) for the first kListedReads r, wrapped once
      const int listed = std::min(p, static_cast<int>(kListedReads));
      out.add_run(p - x, 0, 1, std::min(x, listed));
      out.add_run(0, x, 1, listed - x);
    };
    return f.path_kinds("a2a-d/" + std::to_string(p) + "/" + std::to_string(x), pairs);
  };
  {
    // After the first round the slots drift apart (each waits only for its
    // own block and peers; the slots whose first peer is on the same chip
    // get a round ahead), so a link carries the reads of the neighbouring
    // rounds too: each of those rounds' flows counts 1 / rounds. The first
    // round's reads all start together. Solved once per sampled round and
    // kept for every step (a round's key and count, built per round, took
    // most of a point on 99,840 dies: 12,480 rounds a step), all of them
    // at once (EstimateFabric::kept_rates_each).
    // (The first 32 rounds are the samples, each its own: sample_of maps
    // every later round onto rounds 16..31.) Listed far rounds first: their
    // solves go on for more rounds (99,840 dies: several times a near
    // round's), so the other threads start on them while the near rounds
    // are still being routed, instead of waiting for them at the end.
    std::vector<std::size_t> samples;
    for (std::size_t ri = 0; ri < std::min<std::size_t>(rounds.size(), 32); ++ri) samples.push_back(sample_of(ri));
    std::reverse(samples.begin(), samples.end());
    // Round 0's solve first (it needs no round alongside): the other
    // threads start on it after one round is routed instead of three
    // (99,840 dies: 0.2 against 0.4 ms into the routing).
    if (samples.size() > 2) std::rotate(samples.begin(), samples.end() - 1, samples.end());
    auto in_flight = [&rounds](std::size_t sample) {
      std::vector<std::size_t> out{sample};
      if (sample >= 1) {
        for (const std::size_t q : {sample - 1, sample + 1}) {
          if (q >= 1 && q < rounds.size()) out.push_back(q);
        }
      }
      return out;
    };
    std::vector<std::string> keys;
    for (const std::size_t sample : samples) {
      for (const std::size_t q : in_flight(sample)) ++round_users[q];
      std::string key = "a2a/" + std::to_string(p);
      for (const std::size_t q : in_flight(sample)) key += "/" + std::to_string(q);
      keys.push_back(key);
      // (Counted, not routed: the rates are kept across the sweep's points, the routes are not.)
      sample_shares[sample].own = listed_ranks(rounds[sample].size()) * rounds[sample].size();
    }
    // The round's flows, listed rank-major, one per distance (then those
    // of the rounds alongside), each round routed once for the three
    // solves it takes part in.
    const std::vector<const std::vector<double>*> solved = f.kept_rates_each(keys, [&](std::size_t i) {
      const std::size_t sample = samples[i];
      EstimateFabric::SolveJob job;
      for (const std::size_t q : in_flight(sample)) job.parts.push_back(&routed_round(q));
      // These solves end within a few rounds (each slot's slowest share
      // known; most in their first): the rounds' channel counts find them
      // without listing every flow's slots (EstimateFabric::fill_groups_by_counts).
      for (const std::size_t q : in_flight(sample)) {
        const auto part = counted.find(q);
        job.counts.push_back(part == counted.end() ? nullptr : &part->second);
      }
      job.share = 1.0 / static_cast<double>(job.parts.size());
      job.cap = c.copy_rate;
      job.kept = sample_shares[sample].own;  // the round's own reads, first
      // Followed by one representative, a slot takes its slowest read's
      // share alone: the solve stops once each slot's is known.
      if (table == nullptr) job.only = SlowestOfGroups{sample_shares[sample].own, rounds[sample].size()};
      return job;
    }, [&] {  // while they are solved: the sampled distances' kinds of path (memoized by the fabric)
      if (table != nullptr) return;
      for (const std::size_t sample : samples) {
        for (const int x : rounds[sample]) distance_kinds(x);
      }
    });
    for (std::size_t i = 0; i < samples.size(); ++i) sample_shares[samples[i]].rates = solved[i];
  }
  // Each sampled round's slots: their slowest share and path.
  for (std::size_t sample = 0; sample < round_slots.size(); ++sample) {
    const DistanceRounds::Round dist = rounds[sample];
    const std::vector<double>& rates = *sample_shares[sample].rates;
    const std::size_t own = sample_shares[sample].own;  // the round's flows, first in `rates`
    RoundSlots& rs = round_slots[sample];
    rs.rate.assign(dist.size(), 1e300);
    // (Rank by rank, a read per slot: the flows are listed rank-major.
    // A division per flow to find its slot was most of a later point on
    // 99,840 dies.)
    for (std::size_t first = 0; first < own; first += dist.size()) {
      const std::size_t n = std::min(dist.size(), own - first);
      for (std::size_t j = 0; j < n; ++j) rs.rate[j] = std::min(rs.rate[j], rates[first + j]);
    }
    rs.path.resize(dist.size());
    if (table == nullptr) {
      for (std::size_t j = 0; j < dist.size(); ++j) {
        for (const PathCost& k : distance_kinds(dist[j])) {
          if (k.latency >= rs.path[j].latency) rs.path[j] = k;
        }
      }
    }
  }
  // A round's local copies: the first use of the blocks stages all of them
  // at once, sharing the memory channel; later ones wait each for its own
  // block's reader, which spreads them out (one at a time, roughly).
  auto local_rate = [&](int use, std::size_t distances) {
    const double sharing = use <= groups ? static_cast<double>(distances) : 1.0;
    return std::min(c.local_rate / sharing, c.copy_rate);
  };
  if (table == nullptr) {
    // The representative form: one rank a slot, its chain of tasks in a
    // line (as the loops below would run it for one rank, at the slot's
    // slowest share and path; a later point on 99,840 dies, 12,480 rounds
    // a step, went 1.03 -> 0.72 ms). A slot's chain reads only its own
    // streams and blocks: a long loop's slots are split over the solve
    // threads, each with its own copy of its slots' times (99,840 dies:
    // first points 10.1 -> 9.4 ms, later ones 0.73 -> 0.63 ms; waking the
    // other thread for CloudMatrix384's 96 rounds a step made its later
    // points 0.15 -> 0.26 ms).
    constexpr double kSplitRounds = 4096;  // rounds x steps
    const auto each_slots = [&](const std::function<void(std::size_t, std::size_t)>& run) {
      if (static_cast<double>(rounds.size()) * static_cast<double>(steps) < kSplitRounds) return run(0, 1);
      f.on_solve_threads(run);
    };
    each_slots([&](std::size_t thread, std::size_t threads) {
      const std::size_t from = slots * thread / threads;
      const std::size_t to = slots * (thread + 1) / threads;
      const std::size_t mine = to - from;
      if (mine == 0) return;
      std::vector<double> local(local_free.begin() + static_cast<std::ptrdiff_t>(from),
                                local_free.begin() + static_cast<std::ptrdiff_t>(to));
      std::vector<double> sdma(sdma_free.begin() + static_cast<std::ptrdiff_t>(from),
                               sdma_free.begin() + static_cast<std::ptrdiff_t>(to));
      std::vector<double> freed_of(static_cast<std::size_t>(groups) * mine, start(c));  // per group, per slot
      int use = 0;
      for (std::uint64_t step = 0; step < steps; ++step) {
        const double piece = static_cast<double>(std::min(block, s.count - std::min(s.count, step * block)) * esz);
        for (std::size_t ri = 0; ri < rounds.size(); ++ri) {
          const int group = use++ % groups;
          const RoundSlots& cached = round_slots[sample_of(ri)];
          const std::size_t distances = cached.rate.size();
          const double copy_rate = local_rate(use, distances);
          double* const freed = freed_of.data() + static_cast<std::size_t>(group) * mine;
          const bool waits = use > groups;
          for (std::size_t j = from; j < std::min(to, distances); ++j) {
            const std::size_t k = j - from;
            const PathCost& in = cached.path[j];
            const double record_in = in.same_chip ? c.record_local : c.record_remote;
            double t = local[k];
            if (waits) t = c.wait_end(t + d, freed[k]);
            t = sdma_task(c, t, c.sdma_fixed, piece, copy_rate, c.local_latency);
            local[k] = t + d + c.record_local;
            const double acked = c.wait_end(sdma[k] + d, local[k]) + d + record_in;
            t = sdma_task(c, c.wait_end(acked + d, acked), c.sdma_read_fixed + in.read_extra, piece, std::min(cached.rate[j], in.rate), in.latency);
            const double signalled = t + d + record_in;
            sdma[k] = freed[k] = c.wait_end(signalled + d, signalled) + d + c.record_local;
          }
        }
      }
      std::copy(sdma.begin(), sdma.end(), sdma_free.begin() + static_cast<std::ptrdiff_t>(from));
    });
  } else {
    // Every rank followed, each pair at its own share and path. Per group,
    // rank and slot: when the group's block was last freed by its reader;
    // per rank, this slot's ack and data signal.
    std::vector<std::vector<double>> slot_freed(static_cast<std::size_t>(groups), sdma_free);
    std::vector<double> ack(static_cast<std::size_t>(ranks)), signal(ack);
    int use = 0;
    for (std::uint64_t step = 0; step < steps; ++step) {
      const double piece = static_cast<double>(std::min(block, s.count - std::min(s.count, step * block)) * esz);
      for (std::size_t ri = 0; ri < rounds.size(); ++ri) {
        const int group = use++ % groups;
        const std::size_t sample = sample_of(ri);
        const DistanceRounds::Round dist = rounds[sample];
        const std::vector<double>& rates = *sample_shares[sample].rates;
        const std::size_t own = sample_shares[sample].own;  // this round's flows, first in `rates`
        const std::vector<double>& slot_rate = round_slots[sample].rate;
        const double copy_rate = local_rate(use, dist.size());
        for (std::size_t j = 0; j < dist.size(); ++j) {
          const int x = dist[j];
          auto path_of = [&](int r) -> const PathCost& {  // of the pair (r, r + x), from the table
            return table->kinds[table->kind_of[static_cast<std::size_t>(x - 1) * static_cast<std::size_t>(p) +
                                               static_cast<std::size_t>(r)]];
          };
          auto record = [&](const PathCost& pc) { return pc.same_chip ? c.record_local : c.record_remote; };
          for (int r = 0; r < ranks; ++r) {
            // The local stream: wait for the block to be free (its last reader), copy, record "staged".
            double t = at(local_free, r, j);
            if (use > groups) t = c.wait_end(t + d, at(slot_freed[static_cast<std::size_t>(group)], r, j));
            t = sdma_task(c, t, c.sdma_fixed, piece, copy_rate, c.local_latency);
            at(local_free, r, j) = t + d + c.record_local;
            // The SDMA stream: wait for it, TxAck to r + x.
            ack[static_cast<std::size_t>(r)] = c.wait_end(at(sdma_free, r, j) + d, at(local_free, r, j)) + d + record(path_of(r));
          }
          for (int r = 0; r < ranks; ++r) {
            // RxAck from r - x, read its piece, TxDataSignal back to it.
            const int from = (r + p - x) % p;
            const PathCost& in = path_of(from);
            const std::size_t flow = static_cast<std::size_t>(r) * dist.size() + j;
            // (its share, held to one SDMA read's cap on its path)
            const double rate = std::min(flow < own ? rates[flow] : slot_rate[j], in.rate);
            double t = c.wait_end(ack[static_cast<std::size_t>(r)] + d, ack[static_cast<std::size_t>(from)]);
            t = sdma_task(c, t, c.sdma_read_fixed + in.read_extra, piece, rate, in.latency);
            signal[static_cast<std::size_t>(r)] = t + d + record(in);
          }
          for (int r = 0; r < ranks; ++r) {
            // RxDataSignal from r + x (it has read r's piece), then free the block.
            const int to = (r + x) % p;
            const double t = c.wait_end(signal[static_cast<std::size_t>(r)] + d, signal[static_cast<std::size_t>(to)]);
            at(sdma_free, r, j) = at(slot_freed[static_cast<std::size_t>(group)], r, j) = t + d + c.record_local;
          }
        }
      }
    }
  }
  const double sdma_end = *std::max_element(sdma_free.begin(), sdma_free.end());
  return std::max(own, sdma_end);
}

}  // namespace

void register_mesh_estimates(std::map<std::string, EstimateFn>& out) {
  auto one = [](double (*fn)(const CollectiveSpec&, const EstimateFabric&)) {
    return [fn](const CollectiveSpec& s, const ExecContext&, const AlgoPlan&, const EstimateFabric& f) { return fn(s, f); };
  };
  out["AllReduceMeshOpbaseLoopExecutor"] = one(all_reduce_opbase_loop);
  out["AllReduceMeshMidCountLoopExecutor"] = one(all_reduce_local_reduce);
  out["AllReduceMeshOneshotLoopExecutor"] = one(all_reduce_chunk_mesh);
  out["AllGatherMeshOpbaseExecutor"] = one(all_gather_opbase);
  out["ReduceScatterMeshDmaEliminationExecutor"] = one(reduce_scatter_dma_elimination);
  out["RunAlltoAllVStaged"] = one(alltoall_staged);
  out["RunAlltoAllVFullMesh"] = one(alltoall_staged);
  out["RunAlltoAllDirectFullmesh"] = one(alltoall_direct_fullmesh);
  // The one-shot small-count AllReduce; where the profile says HD_OPTIM, the flat H-D_R form.
  out["AllReduceMeshSmallCountExecutor"] = [](const CollectiveSpec& s, const ExecContext& ctx, const AlgoPlan& plan,
                                              const EstimateFabric& f) {
    (void)plan;
    if (ctx.hccl.small_count_all_reduce_hd) {  // HD_OPTIM, built by the H-D_R builder (mesh_a2.cpp)
      GroupLayout g;
      g.members = g.group_step = s.ranks;
      return level1_estimate(f, s, Level1Algo::HalvingDoubling, g, start(f.costs()));
    }
    return all_reduce_reduce_bcast(s, f);
  };
  out["BroadCastMeshExecutor"] = one(broadcast_mesh);
  out["ReduceMeshExecutor"] = one(reduce_mesh);
}

}  // namespace hcclsim

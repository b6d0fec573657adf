// Unit tests for the level-1 (between servers) algorithms of
// sim/executors/level1.h on a RoCE cluster of one-NPU servers, so that
// every transfer is an RDMA write and every cross-rank notify an RDMA
// record: each algorithm x op x rank count (powers of two and not) x size
// (small, odd, several loops over a small HCCL buffer) passes the data
// check and is never faster than the NIC-bandwidth bound; refusals; roots,
// placement offsets, AlltoAllV; the alpha-beta shape (ring's steps grow
// linearly with p, the others' logarithmically); composition on NPUs of
// 8-NPU servers through TaskGraph::append. One Platform per TEST_CASE.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/executors/level1.h"
#include "sim/data_check.h"
#include "sim/perf/perf.h"
#include "sim/scheduler.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;

namespace {

std::string a2_profile() { return std::string(HCCLSIM_SOURCE_DIR) + "/configs/profiles/a2-910b.json"; }

// `servers` A2 servers of `devices` NPUs each, joined by RoCE.
TopologySpec cluster(int servers, int devices = 1) {
  ClusterLayout layout;
  layout.name = "level1-test";
  layout.kind = "a2";
  for (int s = 0; s < servers; ++s) layout.servers.push_back(ServerLayout{"s" + std::to_string(s), devices, 0});
  return make_cluster(layout, load_profile(a2_profile()));
}

double roce_bytes_per_s() {
  return static_cast<double>(load_profile(a2_profile()).links.at("roce").bandwidth.bytes_per_s);
}

struct Outcome {
  std::string check;   // "" when every output is right
  Time time;
  std::size_t tasks = 0;
  int notifies = 0;
};

// What rank `rank` must hold, with origins moved by the input offset.
std::vector<Piece> expected_at(const CollectiveSpec& spec, int rank) {
  std::vector<Piece> e = expected_output(spec, rank);
  for (Piece& piece : e) piece.origin += spec.input_offset;
  return e;
}

Outcome run(Scheduler& sched, const TaskGraph& graph, const CollectiveSpec& spec) {
  const BufferSizes sizes = buffer_sizes(spec);
  const bool idempotent = spec.reduce_op == ReduceOp::Max || spec.reduce_op == ReduceOp::Min;
  DataTracker tracker(spec.ranks, spec.input_offset + sizes.input, spec.output_offset + sizes.output,
                      spec.scratch_offset + 2 * spec.buffer_bytes, idempotent);
  const RunResult r = sched.run(graph, &tracker);
  REQUIRE(r.failure.empty());
  Outcome out;
  out.time = r.elapsed();
  out.tasks = graph.tasks().size();
  out.notifies = graph.notifies_used();
  out.check = r.check_error;
  for (int rank = 0; rank < spec.ranks && out.check.empty(); ++rank) {
    if (spec.op == CollOp::Reduce && rank != spec.root) continue;
    std::uint64_t length = sizes.output;  // AlltoAllV: this rank's own output
    if (!spec.alltoallv_counts.empty()) {
      length = 0;
      for (int j = 0; j < spec.ranks; ++j) length += spec.pair_count(j, rank) * data_type_size(spec.dtype);
    }
    const std::string diff = compare_pieces(
        tracker.buffer(rank, spec.output_buffer).normalized(spec.output_offset, length), expected_at(spec, rank));
    if (!diff.empty()) out.check = "rank " + std::to_string(rank) + " output " + diff;
  }
  return out;
}

Outcome run(Platform& platform, const CollectiveSpec& spec, Level1Algo algo) {
  Scheduler sched(platform);
  return run(sched, build_level1(spec, algo), spec);
}

CollectiveSpec make_spec(CollOp op, int ranks, std::uint64_t count, std::uint64_t buffer_bytes) {
  CollectiveSpec spec;
  spec.op = op;
  spec.ranks = ranks;
  spec.dtype = DataType::Fp16;
  spec.count = count;
  spec.buffer_bytes = buffer_bytes;
  return spec;
}

int floor_pow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}
int ceil_log2(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

// Lower bound in seconds: bytes one NIC must carry in one direction, one
// after the other, at the RoCE rate. N is the row's data_size (hccl_test's),
// p the ranks, p2 the largest power of two <= p.
//   AllReduce   ring, NHR, NB, H-D_R on 2^k: each rank sends 2(p-1)/p N
//               (reduce-scatter + all-gather). H-D_R otherwise: a folding
//               rank's partner receives N, then sends 2(p2-1)/p2 N in the
//               power of two and N back: (1 + 2(p2-1)/p2) N.
//   ReduceScatter  each rank sends (p-1)/p N; H-D_R not on 2^k: a folded
//               rank first sends its whole input N.
//   AllGather   each rank receives (p-1)/p N.
//   Broadcast   each non-root receives N; H-D_R: the root sends the whole N
//               to log2(p2) children one after the other.
//   Reduce      ring: root-1 sends (p-1)/p N in the reduce-scatter and
//               forwards (p-1)/p N to the root; H-D_R: the root receives
//               2(p2-1)/p2 N (halving + gather).
//   AlltoAll    each rank sends (p-1)/p N.
double lower_bound_s(CollOp op, Level1Algo algo, int p, std::uint64_t data_size) {
  const double n = static_cast<double>(data_size);
  const double q = p;
  const double p2 = floor_pow2(p);
  const bool hd = algo == Level1Algo::HalvingDoubling;
  const bool folded = hd && p2 != q;
  double bytes = 0;
  switch (op) {
    case CollOp::AllReduce: bytes = folded ? (1 + 2 * (p2 - 1) / p2) * n : 2 * (q - 1) / q * n; break;
    case CollOp::ReduceScatter: bytes = folded ? n : (q - 1) / q * n; break;
    case CollOp::AllGather:
    case CollOp::AlltoAll: bytes = (q - 1) / q * n; break;
    case CollOp::Broadcast: bytes = hd ? std::log2(p2) * n : n; break;
    case CollOp::Reduce: bytes = hd ? 2 * (p2 - 1) / p2 * n : 2 * (q - 1) / q * n; break;
  }
  return bytes / roce_bytes_per_s();
}

const std::vector<int> kRanks{2, 3, 4, 5, 6, 7, 8, 16};

// Every rank count for one algorithm and op: an 8 KiB row, an odd count
// (unequal blocks), and a count several times a 64 KiB HCCL buffer.
void sweep(Level1Algo algo, CollOp op) {
  Platform platform(cluster(16));
  const DataType dtype = DataType::Fp16;
  const std::uint64_t esz = data_type_size(dtype);
  const std::uint64_t big_buffer = 4 * 1024 * 1024;
  const std::uint64_t small_buffer = 64 * 1024;
  // Elements per loop: ReduceScatter and AllGather split the buffer between
  // the ranks' blocks; pairwise gives it to one peer at a time.
  const bool blocks = op == CollOp::ReduceScatter || op == CollOp::AllGather;
  for (const int p : kRanks) {
    const std::uint64_t loop_count =
        (blocks ? 3 * small_buffer / (esz * static_cast<std::uint64_t>(p)) : 3 * small_buffer / esz) + 7;
    struct Row {
      const char* what;
      std::uint64_t count;
      std::uint64_t buffer;
    };
    const Row rows[] = {{"8K", std::max<std::uint64_t>(1, count_for_size(op, p, dtype, 8 * 1024)), big_buffer},
                        {"odd", 1001 + static_cast<std::uint64_t>(2 * p), big_buffer},
                        {"one loop", loop_count, big_buffer},
                        {"loops", loop_count, small_buffer}};
    std::vector<Outcome> got;
    for (const Row& row : rows) {
      CollectiveSpec spec = make_spec(op, p, row.count, row.buffer);
      spec.root = p > 2 ? 1 : 0;
      const std::uint64_t data_size = data_size_of(op, p, dtype, row.count);
      INFO(level1_algo_name(algo) << " " << coll_op_name(op) << " on " << p << " ranks, " << row.what << " ("
                                  << data_size << " bytes, buffer " << row.buffer << ")");
      const Outcome o = run(platform, spec, algo);
      INFO("time " << format_us(o.time) << " us, " << o.tasks << " tasks, " << o.notifies << " notifies");
      CHECK(o.check.empty());
      INFO(o.check);
      const double bound = lower_bound_s(op, algo, p, data_size);
      INFO("bandwidth lower bound " << bound * 1e6 << " us");
      CHECK(static_cast<double>(o.time.ps) / 1e12 >= bound);
      CHECK(o.notifies <= level1_notifies(p, algo));
      got.push_back(o);
    }
    // The same data through a 64 KiB buffer takes several loops (not
    // necessarily longer: loops pipeline copy-out with the next transfer).
    CHECK(got[3].tasks > 2 * got[2].tasks);
  }
}

// Latency-bound AllReduce time on p ranks.
Time small_all_reduce(Platform& platform, Level1Algo algo, int p) {
  const CollectiveSpec spec = make_spec(CollOp::AllReduce, p, 4 * static_cast<std::uint64_t>(p), 1024 * 1024);
  const Outcome o = run(platform, spec, algo);
  REQUIRE(o.check.empty());
  return o.time;
}

// Memcpy tasks of one step name ("... ReduceScatter step 0") on rank `rank`.
std::size_t memcpys(const TaskGraph& g, int rank, const std::string& step) {
  std::size_t n = 0;
  for (TaskId id = 0; id < g.tasks().size(); ++id) {
    const Task& t = g.task(id);
    const std::string& label = g.label(t);
    if (t.kind == TaskKind::Memcpy && g.rank_of(id) == rank && label.size() >= step.size() &&
        label.compare(label.size() - step.size(), step.size(), step) == 0) {
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("level1 names round-trip with HCCL_ALGO spellings", "[level1]") {
  CHECK(level1_algo_name(Level1Algo::Ring) == "ring");
  CHECK(level1_algo_name(Level1Algo::HalvingDoubling) == "H-D_R");
  CHECK(level1_algo_name(Level1Algo::NHR) == "NHR");
  CHECK(level1_algo_name(Level1Algo::NB) == "NB");
  CHECK(level1_algo_name(Level1Algo::Pairwise) == "pairwise");
  for (const Level1Algo a : level1_algos()) CHECK(parse_level1_algo(level1_algo_name(a)) == a);
  CHECK_FALSE(parse_level1_algo("nhr").has_value());
  CHECK_FALSE(parse_level1_algo("NHR_V1").has_value());
  CHECK_FALSE(parse_level1_algo("pipeline").has_value());
}

TEST_CASE("level1 refuses what HCCL's support list lacks and names the replacement", "[level1]") {
  const CollOp all_ops[] = {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter,
                            CollOp::AlltoAll,  CollOp::Broadcast, CollOp::Reduce};
  int refused = 0;
  for (const Level1Algo algo : level1_algos()) {
    for (const CollOp op : all_ops) {
      INFO(level1_algo_name(algo) << " " << coll_op_name(op));
      CollectiveSpec spec = make_spec(op, 4, 64, 1024 * 1024);
      if (level1_supports(op, 4, algo)) {
        CHECK_NOTHROW(build_level1(spec, algo));
        CHECK(level1_fallbacks(op, algo).empty());
        continue;
      }
      ++refused;
      CHECK_THROWS_AS(build_level1(spec, algo), std::invalid_argument);
      for (const Level1Algo f : level1_fallbacks(op, algo)) CHECK(level1_supports(op, 4, f));
    }
  }
  CHECK(refused == 5 * 6 - 18);  // 4 + 5 + 4 + 4 + 1 supported pairs
  CHECK_FALSE(level1_supports(CollOp::Broadcast, 4, Level1Algo::Ring));
  CHECK_FALSE(level1_supports(CollOp::Reduce, 4, Level1Algo::NHR));
  CHECK_FALSE(level1_supports(CollOp::Reduce, 4, Level1Algo::NB));
  CHECK_FALSE(level1_supports(CollOp::AlltoAll, 4, Level1Algo::HalvingDoubling));
  CHECK_FALSE(level1_supports(CollOp::AllReduce, 4, Level1Algo::Pairwise));
  CHECK_FALSE(level1_supports(CollOp::AllReduce, 0, Level1Algo::Ring));
  CHECK(level1_fallbacks(CollOp::Broadcast, Level1Algo::Ring) ==
        std::vector<Level1Algo>{Level1Algo::NHR, Level1Algo::HalvingDoubling});
  CHECK(level1_fallbacks(CollOp::Reduce, Level1Algo::NHR) ==
        std::vector<Level1Algo>{Level1Algo::HalvingDoubling, Level1Algo::Ring});
  CHECK(level1_fallbacks(CollOp::Reduce, Level1Algo::NB) ==
        std::vector<Level1Algo>{Level1Algo::HalvingDoubling, Level1Algo::Ring});
  CHECK(level1_fallbacks(CollOp::AlltoAll, Level1Algo::NHR) == std::vector<Level1Algo>{Level1Algo::Pairwise});

  // The message says why.
  try {
    build_level1(make_spec(CollOp::Broadcast, 4, 64, 1024 * 1024), Level1Algo::Ring);
    FAIL("ring broadcast was built");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("ring") != std::string::npos);
    CHECK(what.find("NHR or H-D_R") != std::string::npos);
  }
  // Bad specs.
  CollectiveSpec bad_root = make_spec(CollOp::Broadcast, 4, 64, 1024 * 1024);
  bad_root.root = 4;
  CHECK_THROWS_AS(build_level1(bad_root, Level1Algo::NHR), std::invalid_argument);
  CHECK_THROWS_AS(build_level1(make_spec(CollOp::AllReduce, 4, 64, 4), Level1Algo::NHR), std::invalid_argument);
  CollectiveSpec bad_v = make_spec(CollOp::AlltoAll, 3, 0, 1024 * 1024);
  bad_v.alltoallv_counts = {{1, 2}, {3, 4}};
  CHECK_THROWS_AS(build_level1(bad_v, Level1Algo::Pairwise), std::invalid_argument);
}

TEST_CASE("level1 notify counts stay small up to 1024 ranks", "[level1]") {
  for (const Level1Algo algo : level1_algos()) {
    for (const int p : {2, 3, 16, 100, 121, 122, 129, 1000, 1024}) {
      INFO(level1_algo_name(algo) << " on " << p << " ranks");
      CHECK(level1_notifies(p, algo) < 256);
    }
  }
  // The bound holds for built graphs (AllReduce and AlltoAll have the most steps).
  for (const int p : {2, 3, 5, 8, 13, 33}) {
    for (const Level1Algo algo : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
      CHECK(build_level1(make_spec(CollOp::AllReduce, p, 1000, 1 << 20), algo).notifies_used() <=
            level1_notifies(p, algo));
    }
    CHECK(build_level1(make_spec(CollOp::AlltoAll, p, 100, 1 << 20), Level1Algo::Pairwise).notifies_used() ==
          level1_notifies(p, Level1Algo::Pairwise));
  }
  CHECK(build_level1(make_spec(CollOp::AlltoAll, 130, 1, 1 << 20), Level1Algo::Pairwise).notifies_used() <=
        level1_notifies(130, Level1Algo::Pairwise));
}

TEST_CASE("level1 step structure: NHR sends one piece per step on 2^k ranks and NB one per block",
          "[level1]") {
  const int p = 8;
  const CollectiveSpec spec = make_spec(CollOp::AllReduce, p, 8000, 1 << 20);
  const TaskGraph nhr = build_level1(spec, Level1Algo::NHR);
  const TaskGraph nb = build_level1(spec, Level1Algo::NB);
  for (int r = 0; r < p; ++r) {
    for (int s = 0; s < 3; ++s) {
      CHECK(memcpys(nhr, r, "ReduceScatter step " + std::to_string(s)) == 1);
      CHECK(memcpys(nhr, r, "AllGather step " + std::to_string(s)) == 1);
    }
    // NB: blocks 2^i apart go one by one: 4 + 2 + 1 per phase.
    CHECK(memcpys(nb, r, "ReduceScatter step 0") == 4);
    CHECK(memcpys(nb, r, "ReduceScatter step 1") == 2);
    CHECK(memcpys(nb, r, "ReduceScatter step 2") == 1);
    CHECK(memcpys(nb, r, "AllGather step 2") == 4);
  }
  // Steps: 2 ceil(log2 p) for NHR/NB, 2(p-1) for the ring, 2 log2 p (+2 when folding) for H-D_R.
  auto done_records = [](const TaskGraph& g, int rank) {
    std::size_t n = 0;
    for (TaskId id = 0; id < g.tasks().size(); ++id) {
      const Task& t = g.task(id);
      if (t.kind == TaskKind::NotifyWait && g.rank_of(id) == rank && g.label(t).find(" done") != std::string::npos) ++n;
    }
    return n;
  };
  for (const int q : {5, 8, 12}) {
    const CollectiveSpec s = make_spec(CollOp::AllReduce, q, 8000, 1 << 20);
    const std::size_t k = static_cast<std::size_t>(ceil_log2(q));
    CHECK(done_records(build_level1(s, Level1Algo::NHR), q - 1) == 2 * k);
    CHECK(done_records(build_level1(s, Level1Algo::NB), q - 1) == 2 * k);
    CHECK(done_records(build_level1(s, Level1Algo::Ring), q - 1) == 2 * static_cast<std::size_t>(q - 1));
    // Rank q-1 is never folded; it takes part in 2 log2(p2) exchanges.
    CHECK(done_records(build_level1(s, Level1Algo::HalvingDoubling), q - 1) ==
          2 * static_cast<std::size_t>(ceil_log2(floor_pow2(q))));
    // Rank 1 is folded when p is not a power of two: it only receives the result.
    if (floor_pow2(q) != q) CHECK(done_records(build_level1(s, Level1Algo::HalvingDoubling), 1) == 1);
  }
}

TEST_CASE("level1 ring all_reduce checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::Ring, CollOp::AllReduce);
}
TEST_CASE("level1 ring reduce_scatter checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::Ring, CollOp::ReduceScatter);
}
TEST_CASE("level1 ring all_gather checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::Ring, CollOp::AllGather);
}
TEST_CASE("level1 ring reduce checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::Ring, CollOp::Reduce);
}
TEST_CASE("level1 H-D_R all_reduce checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::HalvingDoubling, CollOp::AllReduce);
}
TEST_CASE("level1 H-D_R reduce_scatter checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::HalvingDoubling, CollOp::ReduceScatter);
}
TEST_CASE("level1 H-D_R all_gather checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::HalvingDoubling, CollOp::AllGather);
}
TEST_CASE("level1 H-D_R broadcast checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::HalvingDoubling, CollOp::Broadcast);
}
TEST_CASE("level1 H-D_R reduce checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::HalvingDoubling, CollOp::Reduce);
}
TEST_CASE("level1 NHR all_reduce checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NHR, CollOp::AllReduce);
}
TEST_CASE("level1 NHR reduce_scatter checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NHR, CollOp::ReduceScatter);
}
TEST_CASE("level1 NHR all_gather checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NHR, CollOp::AllGather);
}
TEST_CASE("level1 NHR broadcast checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NHR, CollOp::Broadcast);
}
TEST_CASE("level1 NB all_reduce checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NB, CollOp::AllReduce);
}
TEST_CASE("level1 NB reduce_scatter checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NB, CollOp::ReduceScatter);
}
TEST_CASE("level1 NB all_gather checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NB, CollOp::AllGather);
}
TEST_CASE("level1 NB broadcast checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::NB, CollOp::Broadcast);
}
TEST_CASE("level1 pairwise alltoall checks on every rank count and size", "[level1][sweep]") {
  sweep(Level1Algo::Pairwise, CollOp::AlltoAll);
}

TEST_CASE("level1 broadcast and reduce check with every root", "[level1][root]") {
  Platform platform(cluster(8));
  for (const int p : {2, 3, 5, 6, 8}) {
    for (int root = 0; root < p; ++root) {
      for (const Level1Algo algo : level1_algos()) {
        for (const CollOp op : {CollOp::Broadcast, CollOp::Reduce}) {
          if (!level1_supports(op, p, algo)) continue;
          CollectiveSpec spec = make_spec(op, p, 3001, 4096);  // 2 loops
          spec.root = root;
          INFO(level1_algo_name(algo) << " " << coll_op_name(op) << " on " << p << " ranks, root " << root);
          const Outcome o = run(platform, spec, algo);
          INFO(o.check);
          CHECK(o.check.empty());
        }
      }
    }
  }
}

TEST_CASE("level1 reductions other than sum and other data types check", "[level1][reduce_op]") {
  Platform platform(cluster(7));
  for (const Level1Algo algo : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
    for (const CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::Reduce}) {
      if (!level1_supports(op, 7, algo)) continue;
      for (const ReduceOp rop : {ReduceOp::Max, ReduceOp::Prod}) {
        for (const DataType dtype : {DataType::Int8, DataType::Fp32, DataType::Int64}) {
          CollectiveSpec spec = make_spec(op, 7, 12345, 64 * 1024);
          spec.reduce_op = rop;
          spec.dtype = dtype;
          spec.root = 3;
          INFO(level1_algo_name(algo) << " " << coll_op_name(op) << " " << reduce_op_name(rop) << " "
                                      << data_type_name(dtype));
          const Outcome o = run(platform, spec, algo);
          INFO(o.check);
          CHECK(o.check.empty());
        }
      }
    }
  }
}

TEST_CASE("level1 honours input output and HCCL buffer placement", "[level1][placement]") {
  Platform platform(cluster(5));
  for (const Level1Algo algo : level1_algos()) {
    for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::AlltoAll,
                            CollOp::Broadcast, CollOp::Reduce}) {
      if (!level1_supports(op, 5, algo)) continue;
      CollectiveSpec spec = make_spec(op, 5, 2001, 8192);
      spec.root = 2;
      spec.input_offset = 4096 + 6;
      spec.output_offset = 100;
      spec.scratch_offset = 8192 * 3;
      INFO(level1_algo_name(algo) << " " << coll_op_name(op));
      const TaskGraph g = build_level1(spec, algo);
      // Nothing below the offsets is touched.
      for (const Task& t : g.tasks()) {
        for (const BufferRef* ref : {&t.src, &t.dst}) {
          if (t.kind != TaskKind::Memcpy && t.kind != TaskKind::ReduceInline) continue;
          if (ref->buffer == BufferKind::Scratch) CHECK(ref->offset() >= spec.scratch_offset);
          if (ref->buffer == BufferKind::Input) CHECK(ref->offset() >= spec.input_offset);
          if (ref->buffer == BufferKind::Output) CHECK(ref->offset() >= spec.output_offset);
        }
      }
      Scheduler sched(platform);
      const Outcome o = run(sched, g, spec);
      INFO(o.check);
      CHECK(o.check.empty());
    }
  }
}

TEST_CASE("level1 pairwise alltoallv with uneven and empty blocks checks", "[level1][alltoallv]") {
  Platform platform(cluster(6));
  for (const int p : {2, 3, 6}) {
    CollectiveSpec spec = make_spec(CollOp::AlltoAll, p, 0, 4096);
    spec.alltoallv_counts.assign(static_cast<std::size_t>(p), std::vector<std::uint64_t>(static_cast<std::size_t>(p)));
    for (int r = 0; r < p; ++r) {
      for (int j = 0; j < p; ++j) {
        // Some empty, some several loops of a 4 KiB buffer (2048 fp16).
        spec.alltoallv_counts[r][j] = static_cast<std::uint64_t>(((r * 7 + j * 3) % 5) * 1500);
      }
    }
    INFO("alltoallv on " << p << " ranks");
    const Outcome o = run(platform, spec, Level1Algo::Pairwise);
    INFO(o.check);
    CHECK(o.check.empty());
  }
}

TEST_CASE("level1 pairwise on 130 ranks passes its round barriers", "[level1][alltoall]") {
  Platform platform(cluster(130));
  // One loop (2 rounds of steps), then 3 loops of 130 elements per pair.
  for (const std::uint64_t buffer : {64 * 1024, 130 * 2}) {
    const CollectiveSpec spec = make_spec(CollOp::AlltoAll, 130, 301, buffer);
    const Outcome o = run(platform, spec, Level1Algo::Pairwise);
    INFO("buffer " << buffer << ": " << o.check);
    CHECK(o.check.empty());
    CHECK(o.notifies < 256);
  }
}

TEST_CASE("level1 one rank is a local copy", "[level1]") {
  Platform platform(cluster(1));
  for (const Level1Algo algo : level1_algos()) {
    for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::AlltoAll,
                            CollOp::Broadcast, CollOp::Reduce}) {
      if (!level1_supports(op, 1, algo)) continue;
      INFO(level1_algo_name(algo) << " " << coll_op_name(op));
      const Outcome o = run(platform, make_spec(op, 1, 1000, 4096), algo);
      CHECK(o.check.empty());
      CHECK(o.notifies == 0);
    }
  }
}

TEST_CASE("level1 alpha-beta shape: ring steps grow linearly with p and the others logarithmically",
          "[level1][alpha_beta]") {
  Platform platform(cluster(16));
  const Time ring4 = small_all_reduce(platform, Level1Algo::Ring, 4);
  const Time ring16 = small_all_reduce(platform, Level1Algo::Ring, 16);
  const double ring_ratio = static_cast<double>(ring16.ps) / static_cast<double>(ring4.ps);
  for (const Level1Algo algo : {Level1Algo::NHR, Level1Algo::NB, Level1Algo::HalvingDoubling}) {
    const Time t4 = small_all_reduce(platform, algo, 4);
    const Time t16 = small_all_reduce(platform, algo, 16);
    const double ratio = static_cast<double>(t16.ps) / static_cast<double>(t4.ps);
    INFO(level1_algo_name(algo) << ": " << format_us(t4) << " -> " << format_us(t16) << " us (x" << ratio
                                << "); ring " << format_us(ring4) << " -> " << format_us(ring16) << " us (x"
                                << ring_ratio << ")");
    CHECK(t16 < ring16);
    if (algo == Level1Algo::NB) {
      // NB also posts one write per slice (4 + 2 + 1 per phase on 16 ranks
      // against 1 + 1 on 4), so it grows faster than NHR, still well below the ring.
      CHECK(ring_ratio > 1.3 * ratio);
    } else {
      CHECK(ratio < 2.2);               // steps 4 -> 8
      CHECK(ring_ratio > 1.6 * ratio);  // steps 6 -> 30
    }
  }
  // NHR at 5 ranks takes the steps of 8 ranks, no more (no folding).
  const Time nhr5 = small_all_reduce(platform, Level1Algo::NHR, 5);
  const Time nhr8 = small_all_reduce(platform, Level1Algo::NHR, 8);
  const Time hd5 = small_all_reduce(platform, Level1Algo::HalvingDoubling, 5);
  INFO("NHR 5: " << format_us(nhr5) << " us, NHR 8: " << format_us(nhr8) << " us, H-D_R 5: " << format_us(hd5));
  CHECK(static_cast<double>(nhr5.ps) <= 1.1 * static_cast<double>(nhr8.ps));
}

TEST_CASE("level1 composes onto one NPU per 8-NPU server through TaskGraph::append", "[level1][compose]") {
  const int servers = 3;
  Platform platform(cluster(servers, 8));
  Scheduler sched(platform);
  const int npus = servers * 8;
  for (const Level1Algo algo : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
    const CollectiveSpec spec = make_spec(CollOp::AllReduce, servers, 10001, 16 * 1024);
    const TaskGraph part = build_level1(spec, algo);
    for (const int index : {0, 5}) {  // the NPUs of index 0 or 5 in each server
      std::vector<int> map;
      for (int s = 0; s < servers; ++s) map.push_back(s * 8 + index);
      TaskGraph whole;
      whole.append(part, map, 40, "L1/");
      const BufferSizes sizes = buffer_sizes(spec);
      DataTracker tracker(npus, sizes.input, sizes.output, 2 * spec.buffer_bytes, false);
      const RunResult r = sched.run(whole, &tracker);
      REQUIRE(r.failure.empty());
      CHECK(r.check_error.empty());
      RankSet contributors;
      for (const int npu : map) contributors.add(npu);
      for (const int npu : map) {
        INFO(level1_algo_name(algo) << " NPU " << npu);
        CHECK(compare_pieces(tracker.buffer(npu, BufferKind::Output).normalized(0, sizes.output),
                             {Piece::value(sizes.output, 0, contributors)}) == "");
      }
    }
  }
}

TEST_CASE("level1 data check catches a missing reduction", "[level1][data_check]") {
  Platform platform(cluster(5));
  Scheduler sched(platform);
  const CollectiveSpec spec = make_spec(CollOp::AllReduce, 5, 4000, 1 << 20);
  for (const Level1Algo algo : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
    const TaskGraph graph = build_level1(spec, algo);
    CHECK(run(sched, graph, spec).check.empty());  // the control
    TaskGraph broken;
    for (const Thread& th : graph.threads()) broken.add_thread(th.rank, th.name);
    bool dropped = false;
    for (const Task& t : graph.tasks()) {
      if (!dropped && t.kind == TaskKind::ReduceInline) {
        dropped = true;
        continue;
      }
      Task c = t;
      c.label = broken.intern(graph.label(t));
      broken.add(c);
    }
    REQUIRE(dropped);
    INFO(level1_algo_name(algo));
    CHECK_FALSE(run(sched, broken, spec).check.empty());
  }
}

TEST_CASE("level1 without its ready handshake a late rank gets overwritten", "[level1][data_check]") {
  Platform platform(cluster(4));
  Scheduler sched(platform);
  const CollectiveSpec spec = make_spec(CollOp::AllReduce, 4, 12000, 8192);  // 3 loops
  const BufferSizes sizes = buffer_sizes(spec);
  for (const Level1Algo algo : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
    const TaskGraph graph = build_level1(spec, algo);
    // Rank 2 starts 200 us late; `keep_ready` false drops every "ready" wait.
    auto variant = [&](bool keep_ready) {
      TaskGraph g;
      for (const Thread& th : graph.threads()) {
        const ThreadId t = g.add_thread(th.rank, th.name);
        if (th.rank == 2) {
          Task d;
          d.kind = TaskKind::Delay;
          d.thread = t;
          d.duration = Time::from_us(200);
          d.label = g.intern("late start");
          g.add(d);
        }
      }
      std::size_t dropped = 0;
      for (const Task& t : graph.tasks()) {
        const std::string& label = graph.label(t);
        if (!keep_ready && t.kind == TaskKind::NotifyWait && label.size() > 6 &&
            label.compare(label.size() - 6, 6, " ready") == 0) {
          ++dropped;
          continue;
        }
        Task c = t;
        c.label = g.intern(label);
        g.add(c);
      }
      CHECK((dropped > 0) == !keep_ready);
      return g;
    };
    INFO(level1_algo_name(algo));
    CHECK(run(sched, variant(true), spec).check.empty());  // the control
    // Without the handshake either data lands too early (wrong output) or a
    // record lands on a notify still set and is lost (the run cannot finish).
    DataTracker tracker(spec.ranks, sizes.input, sizes.output, 2 * spec.buffer_bytes, false);
    const RunResult r = sched.run(variant(false), &tracker);
    bool wrong = !r.failure.empty() || !r.check_error.empty();
    for (int rank = 0; rank < spec.ranks && !wrong; ++rank) {
      wrong = !compare_pieces(tracker.buffer(rank, BufferKind::Output).normalized(0, sizes.output),
                              expected_output(spec, rank))
                   .empty();
    }
    INFO((r.failure.empty() ? std::string("finished") : "did not finish: " + r.failure.substr(0, 200)));
    CHECK(wrong);
  }
}

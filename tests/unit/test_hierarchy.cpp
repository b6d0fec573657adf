// Unit tests for the hierarchical collectives (sim/executors/hierarchy.h):
// level 0 (mesh) inside a server, level 1 on the rails between servers,
// level 2 between A3 supernodes, run through run_perf as `hcclsim perf`
// runs them. Every op x level-1 algorithm x server count (2..5, non-powers
// of two included) x size (8 KiB, odd element counts, several slices of a
// 1 MiB HCCL buffer) passes the data check and is never faster than the NIC
// bandwidth bound; A3 three levels; HCCL's algorithm choice and HCCL_ALGO
// requests; the alpha-beta shape across servers; hierarchy_of; a rank table
// run end to end.
//
// One Platform per TEST_CASE (SystemC elaborates once per process;
// catch_discover_tests runs each TEST_CASE in its own process), no SECTIONs
// in a TEST_CASE that builds one.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/executors/hccl_algo.h"
#include "sim/executors/hierarchy.h"
#include "sim/executors/level1.h"
#include "sim/perf/perf.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/platform.h"
#include "topologies/rank_table.h"

using namespace hcclsim;

namespace {

using hcclsim::testing::source_file;
using hcclsim::testing::a2_cluster_layout;
using hcclsim::testing::cloudmatrix_layout;
std::string a2_profile() { return source_file("configs/profiles/a2-910b.json"); }
std::string a3_profile() { return source_file("configs/profiles/a3-910c.json"); }

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * 1024;

const std::vector<CollOp> kAllOps{CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter,
                                  CollOp::AlltoAll,  CollOp::Broadcast, CollOp::Reduce};

double link_bytes_per_s(const std::string& profile, const std::string& kind) {
  return static_cast<double>(load_profile(profile).links.at(kind).bandwidth.bytes_per_s);
}

double seconds(Time t) { return static_cast<double>(t.ps) / 1e12; }

// Lower bound in seconds from the RoCE NICs alone, for `groups` groups of
// `per_group` NPUs (A2: the servers; A3: the supernodes) that can only
// exchange data through their NPUs' NICs, each sending and receiving at
// `nic` bytes/s. N is the row's data_size (per rank, as hccl_test counts it:
// docs/user-guide.md / perf.h). Counting, per element, the transfers that must cross a
// group boundary (each crossing leaves through one NIC and enters through
// one NIC; a group has per_group NICs; there are K = groups groups):
//   AllReduce      every group starts with a partial sum of each element and
//                  must end with the full sum: spreading information among K
//                  parties with one-way messages takes at least 2(K-1)
//                  messages (the gossip bound), so 2(K-1) N bytes cross in
//                  all, through K x per_group NICs:
//                  T >= 2(K-1)/K x N / (per_group x nic). On S A2 servers:
//                  on average each NPU sends 2(S-1)/S x (N/8) bytes through
//                  its NIC.
//   ReduceScatter  N is the input of a rank; each element of the result
//                  needs the K group partials merged in one place: K-1
//                  crossings per element, N elements' bytes in all:
//                  T >= (K-1)/K x N / (per_group x nic).
//   AllGather      N is the output of a rank; each group must receive the
//                  (K-1)/K x N bytes the other groups' ranks own:
//                  T >= (K-1)/K x N / (per_group x nic).
//   AlltoAll       N is the send buffer of a rank; it sends N/P to each of
//                  the P ranks, (K-1)/K of them outside its group, so a
//                  group's ranks send per_group x (K-1)/K x N bytes out of
//                  it, through its per_group NICs (relayed or not):
//                  T >= (K-1)/K x N / nic.
//   Broadcast      each group other than the root's must receive all N
//                  bytes: T >= N / (per_group x nic).
//   Reduce         the root's group must receive, per element, at least one
//                  crossing carrying the other groups' contributions:
//                  T >= N / (per_group x nic).
// Fixed costs (launch, SDMA set-up, notifies, RDMA posts) only add to it.
double nic_bound_s(CollOp op, int groups, int per_group, std::uint64_t data_size, double nic) {
  const double n = static_cast<double>(data_size);
  const double k = groups;
  const double d = per_group;
  switch (op) {
    case CollOp::AllReduce: return 2 * (k - 1) / k * n / (d * nic);
    case CollOp::ReduceScatter:
    case CollOp::AllGather: return (k - 1) / k * n / (d * nic);
    case CollOp::AlltoAll: return (k - 1) / k * n / nic;
    case CollOp::Broadcast:
    case CollOp::Reduce: return n / (d * nic);
  }
  return 0;
}

// Bound particular to the composition in hierarchy.cpp (A2, two levels):
// Broadcast and Reduce cross servers only on the root's rail (one NPU per
// server), so a non-root server's rail member receives all N bytes through
// its one NIC (Broadcast), and the root receives the other servers' partial
// sums through its one NIC (Reduce): T >= N / nic either way.
double rail_bound_s(CollOp op, std::uint64_t data_size, double nic) {
  if (op != CollOp::Broadcast && op != CollOp::Reduce) return 0;
  return static_cast<double>(data_size) / nic;
}

std::string expected_algo(CollOp op, Level1Algo level1) {
  if (op == CollOp::AlltoAll) return "level1:pairwise";
  return "level0:fullmesh;level1:" + level1_algo_name(level1);
}

// The element count of a row that loops over a `buffer`-byte HCCL buffer
// about three times (plus a few odd elements) on S servers of 8 NPUs:
// AllReduce slices take half the buffer; ReduceScatter and AllGather split
// it between the 8 x S blocks; Broadcast and Reduce loop inside their
// level-1 and level-0 stages over the whole buffer; AlltoAll's pairwise gives
// the buffer to one peer at a time.
std::uint64_t looping_count(CollOp op, int servers, std::uint64_t buffer) {
  const std::uint64_t esz = 2;  // fp16
  const std::uint64_t ranks = 8 * static_cast<std::uint64_t>(servers);
  switch (op) {
    case CollOp::AllReduce: return 3 * (buffer / 2 / esz) + 7;
    case CollOp::ReduceScatter:
    case CollOp::AllGather: return 3 * (buffer / 2 / esz / ranks) + 7;
    case CollOp::Broadcast:
    case CollOp::Reduce:
    case CollOp::AlltoAll: return 3 * (buffer / esz) + 7;
  }
  return 0;
}

// One op, every level-1 algorithm that supports it, 2 to 5 A2 servers, three
// sizes, each row checked and held to the NIC bounds; roots in the second
// server (not at index 0) and on the last rank for Broadcast and Reduce.
void hierarchical_sweep(CollOp op) {
  Platform platform(make_cluster(a2_cluster_layout(5), load_profile(a2_profile())));
  const double roce = link_bytes_per_s(a2_profile(), "roce");
  const DataType dtype = DataType::Fp16;
  const bool rooted = op == CollOp::Broadcast || op == CollOp::Reduce;
  int runs = 0;
  for (const Level1Algo algo : level1_algos()) {
    if (!level1_supports(op, 2, algo)) continue;
    for (const int servers : {2, 3, 4, 5}) {
      const int ranks = 8 * servers;
      // AlltoAll's pairwise buffer goes to one peer at a time: a small one
      // keeps the looping row small.
      const std::uint64_t buffer = op == CollOp::AlltoAll ? 16 * KiB : 1 * MiB;
      const std::vector<std::uint64_t> counts{
          count_for_size(op, ranks, dtype, 8 * KiB),                   // 8 KiB, one slice
          1001 + 2 * static_cast<std::uint64_t>(servers),              // odd: unequal chunks and blocks
          looping_count(op, servers, buffer)};                         // several slices / loops
      std::vector<int> roots{0};
      if (rooted) roots = {8 + 3, ranks - 1};
      for (const int root : roots) {
        PerfRequest req;
        req.op = op;
        req.ranks = ranks;
        req.dtype = dtype;
        req.root = root;
        req.buffer_bytes = buffer;
        req.algo.level1 = algo;
        for (const std::uint64_t c : counts) req.sizes.push_back(data_size_of(op, ranks, dtype, c));
        INFO(coll_op_name(op) << " level1:" << level1_algo_name(algo) << " on " << servers << " servers, root "
                              << root << ", buffer " << buffer);
        const std::vector<PerfRow> rows = run_perf(platform, req);
        REQUIRE(rows.size() == counts.size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const PerfRow& row = rows[i];
          INFO("count " << row.count << ", data_size " << row.data_size << ", time " << format_us(row.time)
                        << " us, " << row.tasks << " tasks");
          CHECK(row.count == counts[i]);
          CHECK(row.check == "success");
          CHECK(row.algo == expected_algo(op, algo));
          const double bound = std::max(nic_bound_s(op, servers, 8, row.data_size, roce),
                                        rail_bound_s(op, row.data_size, roce));
          INFO("NIC bandwidth lower bound " << bound * 1e6 << " us");
          CHECK(seconds(row.time) >= bound);
          ++runs;
        }
        // The looping row takes several slices of the buffer: many more tasks.
        CHECK(rows[2].tasks > 2 * rows[0].tasks);
      }
    }
  }
  CHECK(runs > 0);
}

}  // namespace

// ------------------------------------------------------------ 1. every op x algorithm x server count on A2

TEST_CASE("hierarchy all_reduce checks on 2 to 5 A2 servers with every level-1 algorithm", "[hierarchy][sweep]") {
  hierarchical_sweep(CollOp::AllReduce);
}
TEST_CASE("hierarchy all_gather checks on 2 to 5 A2 servers with every level-1 algorithm", "[hierarchy][sweep]") {
  hierarchical_sweep(CollOp::AllGather);
}
TEST_CASE("hierarchy reduce_scatter checks on 2 to 5 A2 servers with every level-1 algorithm",
          "[hierarchy][sweep]") {
  hierarchical_sweep(CollOp::ReduceScatter);
}
TEST_CASE("hierarchy alltoall checks on 2 to 5 A2 servers with pairwise", "[hierarchy][sweep]") {
  hierarchical_sweep(CollOp::AlltoAll);
}
TEST_CASE("hierarchy broadcast checks on 2 to 5 A2 servers with roots outside server 0", "[hierarchy][sweep]") {
  hierarchical_sweep(CollOp::Broadcast);
}
TEST_CASE("hierarchy reduce checks on 2 to 5 A2 servers with roots outside server 0", "[hierarchy][sweep]") {
  hierarchical_sweep(CollOp::Reduce);
}

TEST_CASE("hierarchy: other reductions and data types check across servers, on the mesh and the ring",
          "[hierarchy][reduce_op]") {
  Platform platform(make_cluster(a2_cluster_layout(3), load_profile(a2_profile())));
  for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::Broadcast,
                          CollOp::Reduce}) {
    for (const Level0Algo level0 : {Level0Algo::Mesh, Level0Algo::Ring}) {
      for (const ReduceOp rop : {ReduceOp::Max, ReduceOp::Prod}) {
        for (const DataType dtype : {DataType::Int8, DataType::Fp32}) {
          PerfRequest req;
          req.op = op;
          req.ranks = 24;
          req.dtype = dtype;
          req.reduce_op = rop;
          req.root = 13;
          req.buffer_bytes = 256 * KiB;
          req.algo.level0 = level0;
          req.algo.level1 = op == CollOp::Reduce ? Level1Algo::HalvingDoubling : Level1Algo::NHR;
          req.sizes = std::vector<std::uint64_t>{data_size_of(op, 24, dtype, 12345)};
          INFO(coll_op_name(op) << " level0:" << level0_algo_name(level0) << " " << reduce_op_name(rop) << " "
                                << data_type_name(dtype));
          // The level-0 ring has the stage forms of a composition (chunked,
          // and blocks with a stride), as A3's ring executors need.
          const PerfRow row = run_perf(platform, req).front();
          CHECK(row.check == "success");
          CHECK(row.algo.rfind(std::string("level0:") + (level0 == Level0Algo::Mesh ? "fullmesh" : "ring") + ";", 0) ==
                0);
        }
      }
    }
  }
}

// ------------------------------------------------------------ 2. A3: three levels

TEST_CASE("hierarchy A3 all_reduce on 2 supernodes x 2 servers uses level 2 and checks", "[hierarchy][a3]") {
  const RankTable table = load_rank_table(source_file("configs/ranktables/a3_2superpods_4servers_64dies.json"),
                                          hcclsim::testing::shipped_profile(HcclRules::A3).npu.traits);
  Platform platform(make_cluster(table.layout, load_profile(a3_profile())));
  REQUIRE(platform.npus() == 64);
  const Hierarchy h = hierarchy_of(platform, 64);
  REQUIRE(h.per_server == 16);
  REQUIRE(h.servers_per_pod == 2);
  REQUIRE(h.pods == 2);
  const double roce = link_bytes_per_s(a3_profile(), "roce");
  const DataType dtype = DataType::Fp16;

  // HCCL's own choice (SelectAlgfor91093): 8 KiB over two supernodes is the
  // mid-count executor (one NHR over every rank here); 4 MiB the double ring
  // with NHR at level 1 (4 servers) and level 2 (the default).
  {
    PerfRequest req;
    req.ranks = 64;
    req.buffer_bytes = 1 * MiB;
    req.sizes = std::vector<std::uint64_t>{8 * KiB, 4 * MiB};
    const std::vector<PerfRow> rows = run_perf(platform, req);
    for (const PerfRow& row : rows) {
      INFO("data_size " << row.data_size);
      CHECK(row.check == "success");
    }
    CHECK(rows[0].executor == "AllReduceMidCountFor91093Executor");
    CHECK(rows[0].algo == "flat:NHR");
    CHECK(rows[1].executor == "AllReduceFastDoubleRingFor91093Executor");
    CHECK(rows[1].algo == "level0:double_ring;level1:NHR;level2:NHR");
  }

  // Every level-1 x level-2 algorithm, with a 256 KiB HCCL buffer (a slice:
  // half of it, 65,536 fp16, a multiple of 16 dies x 2 servers), on 1001
  // elements (chunks of 63 and 62: the odd ones do not split across the 2
  // servers of a supernode and take the two-level path, the others three
  // levels). For four pairs that take every algorithm once at each level,
  // also 8 KiB, one slice plus 17 (the second slice's chunks mix both paths)
  // and two slices plus 1001 (a third, even-numbered slice mixing both
  // paths). (Each slice of 64 ranks in three levels costs about 30 ms.)
  const std::uint64_t buffer = 256 * KiB;
  const std::uint64_t slice = buffer / 2 / 2;
  const std::vector<Level1Algo> algos{Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB};
  for (std::size_t i1 = 0; i1 < algos.size(); ++i1) {
    for (std::size_t i2 = 0; i2 < algos.size(); ++i2) {
      const Level1Algo l1 = algos[i1];
      const Level1Algo l2 = algos[i2];
      std::vector<std::uint64_t> counts{1001};
      if ((i1 + i2) % algos.size() == 0) {  // ring-ring, H-D_R-NB, NHR-NHR, NB-H-D_R
        counts.push_back(4096);
        counts.push_back(slice + 17);
        counts.push_back(2 * slice + 1001);
      }
      PerfRequest req;
      req.ranks = 64;
      req.dtype = dtype;
      req.buffer_bytes = buffer;
      req.algo.level1 = l1;
      req.algo.level2 = l2;
      // The composition itself, whatever HCCL would pick for small data.
      req.executor = "AllReduceFastDoubleRingFor91093Executor";
      for (const std::uint64_t c : counts) req.sizes.push_back(data_size_of(CollOp::AllReduce, 64, dtype, c));
      INFO("level1:" << level1_algo_name(l1) << " level2:" << level1_algo_name(l2));
      const std::vector<PerfRow> rows = run_perf(platform, req);
      for (const PerfRow& row : rows) {
        INFO("count " << row.count << ", time " << format_us(row.time) << " us");
        CHECK(row.check == "success");
        // 910_93 runs NHR where H-D_R is asked for (AlgConfigurator).
        auto a3_name = [](Level1Algo a) { return level1_algo_name(a == Level1Algo::HalvingDoubling ? Level1Algo::NHR : a); };
        CHECK(row.algo == "level0:double_ring;level1:" + a3_name(l1) + ";level2:" + a3_name(l2));
        // RoCE only joins the supernodes: 2 groups of 32 dies.
        CHECK(seconds(row.time) >= nic_bound_s(CollOp::AllReduce, 2, 32, row.data_size, roce));
      }
    }
  }
}

TEST_CASE("hierarchy A3: every other op checks on 2 supernodes x 2 servers", "[hierarchy][a3]") {
  Platform platform(make_cluster(cloudmatrix_layout(2, 2), load_profile(a3_profile())));
  REQUIRE(platform.npus() == 64);
  const double roce = link_bytes_per_s(a3_profile(), "roce");
  const DataType dtype = DataType::Fp16;
  for (const CollOp op : {CollOp::AllGather, CollOp::ReduceScatter, CollOp::AlltoAll, CollOp::Broadcast,
                          CollOp::Reduce}) {
    // Broadcast and Reduce from 37: the second supernode, its first server (server 2), die 5.
    for (const int root : {op == CollOp::Broadcast || op == CollOp::Reduce ? 37 : 0}) {
      PerfRequest req;
      req.op = op;
      req.ranks = 64;
      req.dtype = dtype;
      req.root = root;
      req.buffer_bytes = op == CollOp::AlltoAll ? 16 * KiB : 1 * MiB;
      req.sizes = std::vector<std::uint64_t>{data_size_of(op, 64, dtype, 1),  // one element per rank
                   data_size_of(op, 64, dtype, 1001),
                   data_size_of(op, 64, dtype, op == CollOp::AlltoAll ? 3 * 8192 + 7
                                               : (op == CollOp::AllGather || op == CollOp::ReduceScatter)
                                                   ? 3 * (1 * MiB / 2 / 2 / 64) + 7
                                                   : 3 * (1 * MiB / 2) + 7)};
      // The compositions themselves (HCCL picks flat forms for small data).
      switch (op) {
        case CollOp::AllGather: req.executor = "AlignedAllGatherDoubleRingFor91093Executor"; break;
        case CollOp::ReduceScatter: req.executor = "ReduceScatterFastDoubleRingFor91093Executor"; break;
        case CollOp::Broadcast: req.executor = "BroadCastRingFor91093Executor"; break;
        case CollOp::Reduce: req.executor = "ReduceRingFor91093Executor"; break;
        default: break;
      }
      const std::vector<PerfRow> rows = run_perf(platform, req);
      for (const PerfRow& row : rows) {
        INFO(coll_op_name(op) << " root " << root << ", count " << row.count << ", algo " << row.algo << ", time "
                              << format_us(row.time) << " us");
        CHECK(row.check == "success");
        CHECK(row.algo.find("level1:") != std::string::npos);
        CHECK(row.algo.find("level2") == std::string::npos);  // only AllReduce takes level 2
        CHECK(seconds(row.time) >= nic_bound_s(op, 2, 32, row.data_size, roce));
      }
    }
  }
}

// ------------------------------------------------------------ 3. bandwidth bounds

// AllReduce with power-of-two sizes (every chunk and block equal), against
// two bounds:
//  - the NIC bound above: 2(S-1)/S x (N/8) bytes through each NIC;
//  - the stages of one rank, which hierarchy.h runs one after the other
//    ("on every rank a stage starts after the previous one ended"): the
//    level-0 mesh reduce-scatter writes the 7 other chunks of N/8 bytes over
//    7 HCCS links, N/8 per link (N/8 / hccs); the level-1 all-reduce of the
//    rank's N/8 chunk sends 2(S-1)/S x N/8 through its NIC (every algorithm
//    here: S is a power of two, so H-D_R does not fold); the level-0 mesh
//    all-gather writes its N/8 chunk to the 7 others, N/8 per link. Summed
//    over the slices of the buffer the same totals:
//    T >= 2 (N/8) / hccs + 2(S-1)/S (N/8) / roce.
// The stage bound would have to change if stages of consecutive slices were
// ever allowed to overlap on a rank.
TEST_CASE("hierarchy all_reduce time is never below the NIC and stage bandwidth bounds", "[hierarchy][bound]") {
  Platform platform(make_cluster(a2_cluster_layout(4), load_profile(a2_profile())));
  const double roce = link_bytes_per_s(a2_profile(), "roce");
  const double hccs = link_bytes_per_s(a2_profile(), "hccs");
  for (const int servers : {2, 4}) {
    for (const Level1Algo algo : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
      for (const std::uint64_t buffer : {1 * MiB, 200 * MiB}) {
        PerfRequest req;
        req.ranks = 8 * servers;
        req.buffer_bytes = buffer;
        req.algo.level1 = algo;
        req.sizes = std::vector<std::uint64_t>{64 * KiB, 1 * MiB, 4 * MiB};
        if (buffer == 200 * MiB) req.sizes.push_back(16 * MiB);  // 32 slices of a 1 MiB buffer: slow to simulate
        for (const PerfRow& row : run_perf(platform, req)) {
          const double n = static_cast<double>(row.data_size);
          const double s = servers;
          const double nic = 2 * (s - 1) / s * (n / 8) / roce;
          const double stages = 2 * (n / 8) / hccs + nic;
          INFO(servers << " servers, level1:" << level1_algo_name(algo) << ", buffer " << buffer << ", "
                       << row.data_size << " bytes: " << format_us(row.time) << " us; NIC bound " << nic * 1e6
                       << " us, stage bound " << stages * 1e6 << " us");
          CHECK(row.check == "success");
          CHECK(seconds(row.time) >= nic);
          CHECK(seconds(row.time) >= stages);
          // And not absurdly slow either: in one slice a 16 MiB row stays
          // within 3x the stage bound (fixed costs are small against 2 MiB
          // per NIC). In slices of a 1 MiB buffer, each with its own fixed
          // costs, no such figure holds.
          if (row.data_size == 16 * MiB) CHECK(seconds(row.time) < 3 * stages);
        }
      }
    }
  }
}

// ------------------------------------------------------------ 4. algorithm choice and HCCL_ALGO

TEST_CASE("choose_algorithm: HCCL's alpha-beta choice and tie order across servers", "[hierarchy][choice]") {
  const Bandwidth roce{static_cast<std::uint64_t>(link_bytes_per_s(a2_profile(), "roce"))};
  auto a2 = [](int servers) {
    Hierarchy h;
    h.per_server = 8;
    h.servers_per_pod = servers;
    h.pods = 1;
    return h;
  };
  const std::vector<std::uint64_t> sizes{8 * KiB, 64 * MiB, 1024 * MiB};
  for (const std::uint64_t size : sizes) {
    INFO(size << " bytes");
    // alpha = 60 us per step dominates: the step counts decide.
    // 2 servers: ring 2(p-1) = 2 steps, NHR 2 ceil(log2 p) = 2 steps: a tie, Ring first.
    CHECK(choose_algorithm(CollOp::AllReduce, a2(2), size, roce, {}).level1 == Level1Algo::Ring);
    // 3 servers: ring 4 steps, NHR 4 steps: a tie again, Ring first.
    CHECK(choose_algorithm(CollOp::AllReduce, a2(3), size, roce, {}).level1 == Level1Algo::Ring);
    // 4+ servers: NHR's 2 ceil(log2 p) steps beat the ring's 2(p-1); H-D_R
    // ties with NHR on powers of two but comes after it, and folds otherwise.
    for (const int s : {4, 5, 6, 8, 16, 100}) {
      INFO(s << " servers");
      CHECK(choose_algorithm(CollOp::AllReduce, a2(s), size, roce, {}).level1 == Level1Algo::NHR);
      CHECK(choose_algorithm(CollOp::AllGather, a2(s), size, roce, {}).level1 == Level1Algo::NHR);
      CHECK(choose_algorithm(CollOp::ReduceScatter, a2(s), size, roce, {}).level1 == Level1Algo::NHR);
      CHECK(choose_algorithm(CollOp::Broadcast, a2(s), size, roce, {}).level1 == Level1Algo::NHR);
    }
    // Broadcast has no ring: NHR before H-D_R even on 2 servers.
    CHECK(choose_algorithm(CollOp::Broadcast, a2(2), size, roce, {}).level1 == Level1Algo::NHR);
    // Reduce has no NHR: ring (p-1 steps) against H-D_R (log2 p steps, +2
    // and the data once more when it folds).
    CHECK(choose_algorithm(CollOp::Reduce, a2(2), size, roce, {}).level1 == Level1Algo::Ring);
    CHECK(choose_algorithm(CollOp::Reduce, a2(4), size, roce, {}).level1 == Level1Algo::HalvingDoubling);
    CHECK(choose_algorithm(CollOp::Reduce, a2(5), size, roce, {}).level1 == Level1Algo::Ring);
    CHECK(choose_algorithm(CollOp::Reduce, a2(8), size, roce, {}).level1 == Level1Algo::HalvingDoubling);
    // AlltoAll: pairwise, whatever the size.
    for (const int s : {2, 3, 16}) CHECK(choose_algorithm(CollOp::AlltoAll, a2(s), size, roce, {}).level1 == Level1Algo::Pairwise);
  }
  // Level 0 is the op's default unless asked.
  for (const CollOp op : kAllOps) CHECK(choose_algorithm(op, a2(4), 8 * KiB, roce, {}).level0 == default_level0(op));

  // A3: level 1 among the servers of a supernode, level 2 among supernodes.
  Hierarchy a3;
  a3.per_server = 16;
  a3.servers_per_pod = 2;
  a3.pods = 2;
  AlgoPlan plan = choose_algorithm(CollOp::AllReduce, a3, 8 * KiB, roce, {});
  CHECK(plan.level1 == Level1Algo::Ring);
  CHECK(plan.level2 == Level1Algo::Ring);
  a3.servers_per_pod = 8;
  a3.pods = 4;
  plan = choose_algorithm(CollOp::AllReduce, a3, 8 * KiB, roce, {});
  CHECK(plan.level1 == Level1Algo::NHR);
  CHECK(plan.level2 == Level1Algo::NHR);
  a3.servers_per_pod = 2;
  CHECK(choose_algorithm(CollOp::AllReduce, a3, 8 * KiB, roce, {}).level1 == Level1Algo::Ring);
  CHECK(choose_algorithm(CollOp::AllReduce, a3, 8 * KiB, roce, {}).level2 == Level1Algo::NHR);

  // A request is honoured when the algorithm has the op.
  for (const Level1Algo asked : {Level1Algo::Ring, Level1Algo::HalvingDoubling, Level1Algo::NHR, Level1Algo::NB}) {
    AlgoRequest req;
    req.level1 = asked;
    req.level2 = asked;
    req.level0 = Level0Algo::Ring;
    INFO("asked " << level1_algo_name(asked));
    for (const int s : {2, 5, 16}) {
      const AlgoPlan p = choose_algorithm(CollOp::AllReduce, a2(s), 64 * MiB, roce, req);
      CHECK(p.level1 == asked);
      CHECK(p.level0 == Level0Algo::Ring);
    }
    const AlgoPlan p3 = choose_algorithm(CollOp::AllReduce, a3, 64 * MiB, roce, req);
    CHECK(p3.level1 == asked);
    CHECK(p3.level2 == asked);
  }
  // A requested algorithm that lacks the op is replaced by HCCL's documented
  // replacement (level1_fallbacks: the first of its list).
  auto asked_for = [&](CollOp op, Level1Algo asked, int servers) {
    AlgoRequest req;
    req.level1 = asked;
    return choose_algorithm(op, a2(servers), 8 * KiB, roce, req).level1;
  };
  CHECK(level1_fallbacks(CollOp::Broadcast, Level1Algo::Ring).front() == Level1Algo::NHR);
  CHECK(asked_for(CollOp::Broadcast, Level1Algo::Ring, 4) == Level1Algo::NHR);
  CHECK(asked_for(CollOp::Reduce, Level1Algo::NHR, 4) == Level1Algo::HalvingDoubling);
  CHECK(asked_for(CollOp::Reduce, Level1Algo::NB, 3) == Level1Algo::HalvingDoubling);
  CHECK(asked_for(CollOp::AlltoAll, Level1Algo::HalvingDoubling, 4) == Level1Algo::Pairwise);
  CHECK(asked_for(CollOp::AlltoAll, Level1Algo::Ring, 2) == Level1Algo::Pairwise);
  for (const CollOp op : kAllOps) {
    for (const Level1Algo asked : level1_algos()) {
      const std::vector<Level1Algo> instead = level1_fallbacks(op, asked);
      if (instead.empty()) continue;
      INFO(coll_op_name(op) << " asked " << level1_algo_name(asked));
      const Level1Algo got = asked_for(op, asked, 4);
      CHECK(got == instead.front());
      CHECK(level1_supports(op, 4, got));
    }
  }
}

TEST_CASE("AlgoPlan::describe names the levels that take part", "[hierarchy][choice]") {
  AlgoPlan plan;
  plan.level0 = Level0Algo::Mesh;
  plan.level1 = Level1Algo::NHR;
  plan.level2 = Level1Algo::HalvingDoubling;
  Hierarchy one;
  one.per_server = 8;
  Hierarchy a2;
  a2.per_server = 8;
  a2.servers_per_pod = 4;
  Hierarchy a3;
  a3.per_server = 16;
  a3.servers_per_pod = 2;
  a3.pods = 2;
  CHECK(plan.describe(one, CollOp::AllReduce) == "level0:fullmesh");
  CHECK(plan.describe(one, CollOp::AlltoAll) == "level0:fullmesh");
  CHECK(plan.describe(a2, CollOp::AllReduce) == "level0:fullmesh;level1:NHR");
  CHECK(plan.describe(a2, CollOp::AlltoAll) == "level1:pairwise");
  CHECK(plan.describe(a3, CollOp::AllReduce) == "level0:fullmesh;level1:NHR;level2:H-D_R");
  CHECK(plan.describe(a3, CollOp::AllGather) == "level0:fullmesh;level1:NHR");
  plan.level0 = Level0Algo::Ring;
  CHECK(plan.describe(a2, CollOp::Broadcast) == "level0:ring;level1:NHR");
}

TEST_CASE("HCCL_ALGO strings: per-op entries and refusals of unmodelled or unknown names", "[hierarchy][hccl_algo]") {
  const std::string per_op = "allreduce=level1:H-D_R/allgather=level1:ring";
  const AlgoRequest ar = parse_hccl_algo(per_op, CollOp::AllReduce);
  CHECK(ar.level1 == Level1Algo::HalvingDoubling);
  CHECK_FALSE(ar.level0.has_value());
  CHECK_FALSE(ar.level2.has_value());
  CHECK(parse_hccl_algo(per_op, CollOp::AllGather).level1 == Level1Algo::Ring);
  // No entry for the op: HCCL's own choice.
  CHECK_FALSE(parse_hccl_algo(per_op, CollOp::Broadcast).level1.has_value());
  CHECK_FALSE(parse_hccl_algo(per_op, CollOp::ReduceScatter).level1.has_value());

  const AlgoRequest all = parse_hccl_algo("level0:NA;level1:NHR", CollOp::Reduce);
  CHECK_FALSE(all.level0.has_value());
  CHECK(all.level1 == Level1Algo::NHR);
  const AlgoRequest three = parse_hccl_algo("level0:ring;level1:NB;level2:H-D_R", CollOp::AllReduce);
  CHECK(three.level0 == Level0Algo::Ring);
  CHECK(three.level1 == Level1Algo::NB);
  CHECK(three.level2 == Level1Algo::HalvingDoubling);
  CHECK(parse_hccl_algo("level0:fullmesh", CollOp::AllReduce).level0 == Level0Algo::Mesh);
  CHECK(parse_hccl_algo("level1:pairwise", CollOp::AlltoAll).level1 == Level1Algo::Pairwise);
  CHECK_FALSE(parse_hccl_algo("", CollOp::AllReduce).level1.has_value());
  CHECK_FALSE(parse_hccl_algo("level1:NA", CollOp::AllReduce).level1.has_value());

  // HCCL names hcclsim does not build: refused, saying so.
  for (const std::string name : {"AHC", "AHC_BROKE", "star", "NHR_V1"}) {
    INFO(name);
    CHECK_THROWS_AS(parse_hccl_algo("level1:" + name, CollOp::AllReduce), std::invalid_argument);
    CHECK_THROWS_WITH(parse_hccl_algo("level1:" + name, CollOp::AllReduce),
                      Catch::Contains(name) && Catch::Contains("not modelled"));
    CHECK_THROWS_WITH(parse_hccl_algo("allreduce=level0:NA;level1:" + name, CollOp::AllReduce),
                      Catch::Contains("not modelled"));
    // Even in another op's entry: the whole string is read.
    CHECK_THROWS_WITH(parse_hccl_algo("allgather=level1:" + name, CollOp::AllReduce),
                      Catch::Contains("not modelled"));
  }
  CHECK_THROWS_WITH(parse_hccl_algo("level1:bogus", CollOp::AllReduce),
                    Catch::Contains("'bogus'") && Catch::Contains("not known") && Catch::Contains("NHR"));
  CHECK_THROWS_WITH(parse_hccl_algo("level1:nhr", CollOp::AllReduce), Catch::Contains("not known"));
  CHECK_THROWS_WITH(parse_hccl_algo("level0:tree", CollOp::AllReduce), Catch::Contains("'tree'"));
  CHECK_THROWS_WITH(parse_hccl_algo("level3:ring", CollOp::AllReduce), Catch::Contains("not a level"));
  CHECK_THROWS_WITH(parse_hccl_algo("level1ring", CollOp::AllReduce), Catch::Contains("levelN:ALGO"));
  CHECK_THROWS_WITH(parse_hccl_algo("all_reduce=level1:ring", CollOp::AllReduce),
                    Catch::Contains("'all_reduce'") && Catch::Contains("allreduce"));
  CHECK_THROWS_AS(parse_hccl_algo("allreduce=level1:ring/level1:NHR", CollOp::AllReduce), std::invalid_argument);
}

// ------------------------------------------------------------ 5. alpha-beta shape on clusters

// At 8 KiB the level-1 stage is latency bound: a ring all-reduce takes
// 2(S-1) steps (2 -> 10 from 2 to 6 servers), NHR 2 ceil(log2 S) (2 -> 6), so
// the ring's time grows more. The level-0 stages cost the same in both.
// The same platform also runs per-op HCCL_ALGO requests through run_perf.
TEST_CASE("hierarchy alpha-beta shape: from 2 to 6 servers ring grows more than NHR at 8 KiB",
          "[hierarchy][alpha_beta]") {
  Platform platform(make_cluster(a2_cluster_layout(6), load_profile(a2_profile())));
  auto time_of = [&](Level1Algo algo, int servers) {
    PerfRequest req;
    req.ranks = 8 * servers;
    req.buffer_bytes = 200 * MiB;
    req.algo.level1 = algo;
    req.sizes = std::vector<std::uint64_t>{8 * KiB};
    const PerfRow row = run_perf(platform, req).front();
    REQUIRE(row.check == "success");
    return row.time;
  };
  const Time ring2 = time_of(Level1Algo::Ring, 2);
  const Time ring6 = time_of(Level1Algo::Ring, 6);
  const Time nhr2 = time_of(Level1Algo::NHR, 2);
  const Time nhr6 = time_of(Level1Algo::NHR, 6);
  const double ring_ratio = seconds(ring6) / seconds(ring2);
  const double nhr_ratio = seconds(nhr6) / seconds(nhr2);
  INFO("ring " << format_us(ring2) << " -> " << format_us(ring6) << " us (x" << ring_ratio << "); NHR "
               << format_us(nhr2) << " -> " << format_us(nhr6) << " us (x" << nhr_ratio << ")");
  CHECK(ring6 > nhr6);
  CHECK(ring_ratio > nhr_ratio);
  // The level-1 part alone (the time beyond the 2-server run, whose single
  // level-1 step each costs the same): ring adds 8 steps, NHR 4.
  CHECK(seconds(ring6 - ring2) > 1.5 * seconds(nhr6 - nhr2));
  // On 2 servers both take 2 steps: close to each other.
  CHECK(seconds(ring2) == Approx(seconds(nhr2)).epsilon(0.15));

  // HCCL_ALGO per op through run_perf: the op's entry, or HCCL's choice.
  const std::string text = "allreduce=level1:H-D_R/allgather=level1:ring";
  for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::Broadcast}) {
    PerfRequest req;
    req.op = op;
    req.ranks = 40;  // 5 servers: HCCL itself would take NHR
    req.buffer_bytes = 1 * MiB;
    req.algo = parse_hccl_algo(text, op);
    req.sizes = std::vector<std::uint64_t>{data_size_of(op, 40, DataType::Fp16, 777)};
    const PerfRow row = run_perf(platform, req).front();
    INFO(coll_op_name(op) << ": " << row.algo);
    CHECK(row.check == "success");
    const std::string want = op == CollOp::AllReduce ? "H-D_R" : op == CollOp::AllGather ? "ring" : "NHR";
    CHECK(row.algo == "level0:fullmesh;level1:" + want);
  }
  // A requested ring broadcast runs as HCCL's replacement.
  PerfRequest bcast;
  bcast.op = CollOp::Broadcast;
  bcast.ranks = 32;
  bcast.root = 20;
  bcast.buffer_bytes = 1 * MiB;
  bcast.algo.level1 = Level1Algo::Ring;
  bcast.sizes = std::vector<std::uint64_t>{64 * KiB};
  const PerfRow row = run_perf(platform, bcast).front();
  CHECK(row.check == "success");
  CHECK(row.algo == "level0:fullmesh;level1:NHR");
}

// ------------------------------------------------------------ 6. hierarchy_of

TEST_CASE("hierarchy_of: 16 A2 servers are one level-1 group and --ranks must keep servers whole",
          "[hierarchy][hierarchy_of]") {
  Platform platform(make_cluster(a2_cluster_layout(16), load_profile(a2_profile())));
  REQUIRE(platform.npus() == 128);
  const Hierarchy all = hierarchy_of(platform, 128);
  CHECK(all.per_server == 8);
  CHECK(all.servers_per_pod == 16);
  CHECK(all.pods == 1);
  CHECK(all.ranks() == 128);
  CHECK(all.servers() == 16);
  const Hierarchy two = hierarchy_of(platform, 16);
  CHECK(two.per_server == 8);
  CHECK(two.servers_per_pod == 2);
  CHECK(two.pods == 1);
  // Inside one server: a single level.
  const Hierarchy part = hierarchy_of(platform, 4);
  CHECK(part.per_server == 4);
  CHECK(part.servers() == 1);
  CHECK(hierarchy_of(platform, 8).servers() == 1);
  // Ranks that cut a server in two.
  for (const int ranks : {12, 20, 127}) {
    INFO(ranks << " ranks");
    CHECK_THROWS_AS(hierarchy_of(platform, ranks), std::invalid_argument);
    CHECK_THROWS_WITH(hierarchy_of(platform, ranks), Catch::Contains(std::to_string(ranks)) &&
                                                         Catch::Contains("whole servers of 8"));
  }
  PerfRequest req;
  req.ranks = 12;
  req.sizes = std::vector<std::uint64_t>{8 * KiB};
  CHECK_THROWS_AS(run_perf(platform, req), std::invalid_argument);
}

TEST_CASE("hierarchy_of: an A3 layout of 2 supernodes x 2 servers has three levels", "[hierarchy][hierarchy_of]") {
  Platform platform(make_cluster(cloudmatrix_layout(2, 2), load_profile(a3_profile())));
  REQUIRE(platform.npus() == 64);
  const Hierarchy h = hierarchy_of(platform, 64);
  CHECK(h.per_server == 16);
  CHECK(h.servers_per_pod == 2);
  CHECK(h.pods == 2);
  CHECK(h.servers() == 4);
  // One supernode: two levels.
  const Hierarchy pod = hierarchy_of(platform, 32);
  CHECK(pod.per_server == 16);
  CHECK(pod.servers_per_pod == 2);
  CHECK(pod.pods == 1);
  CHECK(hierarchy_of(platform, 16).servers() == 1);
  // A server cut in two, and three servers that leave a supernode half used.
  CHECK_THROWS_WITH(hierarchy_of(platform, 24), Catch::Contains("whole servers of 16"));
  CHECK_THROWS_WITH(hierarchy_of(platform, 48), Catch::Contains("whole supernodes of 2"));
}

TEST_CASE("hierarchy: one NPU per server runs every op as one level-1 collective", "[hierarchy][one_npu]") {
  // As a rank table listing one device per server gives it.
  ClusterLayout layout;
  layout.name = "one-npu-servers";
  layout.kind = "a2";
  for (int s = 0; s < 5; ++s) layout.servers.push_back(ServerLayout{"s" + std::to_string(s), 1, 0});
  Platform platform(make_cluster(layout, load_profile(a2_profile())));
  const Hierarchy h = hierarchy_of(platform, 5);
  CHECK(h.per_server == 1);
  CHECK(h.servers() == 5);
  const double roce = link_bytes_per_s(a2_profile(), "roce");
  for (const CollOp op : kAllOps) {
    for (const int ranks : {2, 3, 5}) {
      PerfRequest req;
      req.op = op;
      req.ranks = ranks;
      req.root = ranks - 1;
      req.buffer_bytes = 16 * KiB;
      req.sizes = std::vector<std::uint64_t>{data_size_of(op, ranks, DataType::Fp16, 1001), 64 * KiB * ranks};
      const std::vector<PerfRow> rows = run_perf(platform, req);
      for (const PerfRow& row : rows) {
        INFO(coll_op_name(op) << " on " << ranks << " one-NPU servers, " << row.data_size << " bytes: " << row.algo);
        CHECK(row.check == "success");
        // Level 0 does not take part.
        CHECK(row.algo.rfind("level1:", 0) == 0);
        CHECK(seconds(row.time) >= nic_bound_s(op, ranks, 1, row.data_size, roce));
      }
    }
  }
}

TEST_CASE("hierarchy_of refuses servers of different sizes", "[hierarchy][hierarchy_of]") {
  ClusterLayout layout;
  layout.name = "uneven";
  layout.kind = "a2";
  for (const int devices : {2, 2, 4}) {
    layout.servers.push_back(ServerLayout{"s" + std::to_string(layout.servers.size()), devices, 0});
  }
  Platform platform(make_cluster(layout, load_profile(a2_profile())));
  REQUIRE(platform.npus() == 8);
  // The first two servers are equal: fine.
  const Hierarchy h = hierarchy_of(platform, 4);
  CHECK(h.per_server == 2);
  CHECK(h.servers() == 2);
  // All 8 would make ranks 6 and 7 a fourth "server" inside the third one.
  CHECK_THROWS_AS(hierarchy_of(platform, 8), std::invalid_argument);
  CHECK_THROWS_WITH(hierarchy_of(platform, 8), Catch::Contains("equal size") && Catch::Contains("rank 6"));
}

// ------------------------------------------------------------ 7. rank table -> cluster -> perf

TEST_CASE("hierarchy: the documented A2 rank table runs every collective with the data check",
          "[hierarchy][rank_table]") {
  const RankTable table = load_rank_table(source_file("configs/ranktables/a2_doc_example.json"),
                                          hcclsim::testing::shipped_profile(HcclRules::A2).npu.traits);
  Platform platform(make_cluster(table.layout, load_profile(a2_profile())));
  REQUIRE(platform.npus() == 4);
  const Hierarchy h = hierarchy_of(platform, 4);
  CHECK(h.per_server == 2);
  CHECK(h.servers() == 2);
  const double roce = link_bytes_per_s(a2_profile(), "roce");
  for (const CollOp op : kAllOps) {
    PerfRequest req;
    req.op = op;
    req.ranks = 4;
    req.root = 3;
    req.buffer_bytes = 64 * KiB;
    req.sizes = std::vector<std::uint64_t>{data_size_of(op, 4, DataType::Fp16, 1001), 8 * KiB, 1 * MiB};
    const std::vector<PerfRow> rows = run_perf(platform, req);
    for (const PerfRow& row : rows) {
      INFO(coll_op_name(op) << " " << row.data_size << " bytes: " << row.algo << ", " << format_us(row.time) << " us");
      CHECK(row.check == "success");
      CHECK(row.algo.find("level1:") != std::string::npos);
      CHECK(seconds(row.time) >= nic_bound_s(op, 2, 2, row.data_size, roce));
    }
    if (op == CollOp::AllReduce) CHECK(rows.front().algo == "level0:fullmesh;level1:ring");
  }
}

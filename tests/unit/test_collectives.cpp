// Unit tests for the level-0 collectives (sim/executors) on the real A2
// server topology: every op, rank count and algorithm passes the data check
// and is never faster than the link-bandwidth lower bound of its algorithm;
// other data types, reduction ops and roots; and a deliberately broken
// algorithm fails the data check.
#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/data_check.h"
#include "sim/perf/perf.h"
#include "sim/scheduler.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;

namespace {

std::string a2_server() { return std::string(HCCLSIM_SOURCE_DIR) + "/configs/topologies/a2-server.json"; }

Bandwidth hccs_bandwidth(const Platform& platform) {
  for (const LinkSpec& l : platform.spec().links) {
    if (l.kind == "hccs") return l.params.bandwidth;
  }
  FAIL("the topology has no HCCS link");
  return {};
}

// Lower bound on the time of one collective, in seconds, from the bytes that
// have to cross links and the links that can carry them at once. n is the
// row's data_size (per rank, as hccl_test counts it), p the ranks, bw one
// HCCS direction. Fixed costs (launch, SDMA set-up, notifies) only add to it.
//
// Mesh (every rank talks to its p-1 peers over p-1 links at once):
//   AllReduce      reduce-scatter + all-gather: each rank sends 2(p-1)/p n
//                  over its p-1 links.
//   AllGather, ReduceScatter, AlltoAll
//                  each rank sends (p-1) blocks of n/p over its p-1 links.
//   Broadcast      each non-root must receive all n bytes, over p-1 links.
//   Reduce         the root must receive at least n bytes of others' data,
//                  over p-1 links.
// Ring (every rank sends only to the next rank, over one link):
//   AllReduce      2(p-1)/p n through one link.
//   AllGather, ReduceScatter
//                  (p-1)/p n through one link.
//   Broadcast      each non-root receives all n bytes from its ring neighbour.
//   Reduce         its reduce-scatter phase alone pushes (p-1)/p n through
//                  each rank's one ring link.
//   AlltoAll       no ring form (refused).
double lower_bound_s(CollOp op, Level0Algo algo, int ranks, std::uint64_t data_size, Bandwidth bw) {
  const double n = static_cast<double>(data_size);
  const double p = ranks;
  const double link = static_cast<double>(bw.bytes_per_s);
  const bool mesh = algo == Level0Algo::Mesh;
  const double links = mesh ? p - 1 : 1;
  double bytes = 0;
  switch (op) {
    case CollOp::AllReduce: bytes = 2 * (p - 1) / p * n; break;
    case CollOp::AllGather:
    case CollOp::ReduceScatter:
    case CollOp::AlltoAll: bytes = (p - 1) / p * n; break;
    case CollOp::Broadcast: bytes = n; break;
    case CollOp::Reduce: bytes = mesh ? n : (p - 1) / p * n; break;
  }
  return bytes / (links * link);
}

// data_size of a row holding `count` elements per rank (see count_for_size).
std::uint64_t size_of_count(CollOp op, int ranks, DataType dtype, std::uint64_t count) {
  return data_size_of(op, ranks, dtype, count);
}

// Every rank count and algorithm for one op: 8K, 1 MiB plus a few odd
// elements (chunks of unequal size), and a size several times a small
// (64 KiB) HCCL buffer so that the algorithm loops.
void sweep_op(CollOp op) {
  Platform platform(load_topology(a2_server()));
  const Bandwidth bw = hccs_bandwidth(platform);
  const Time op_launch = platform.spec().npu.stream.op_launch;
  // Small enough that every executor loops on the last size (the op-base
  // AllReduce keeps 1/p of a loop per rank, the AllGather 16 KiB less).
  const std::uint64_t small_buffer = 20 * 1024;
  for (const int p : {2, 4, 8}) {
    for (const Level0Algo algo : {Level0Algo::Mesh, Level0Algo::Ring}) {
      PerfRequest req;
      req.op = op;
      req.ranks = p;
      req.dtype = DataType::Fp16;
      req.algo.level0 = algo;
      req.buffer_bytes = platform.spec().npu.hccl_buffer_bytes;
      const std::uint64_t odd_count = count_for_size(op, p, req.dtype, 1024 * 1024) + 3;
      const std::uint64_t loop_count = count_for_size(op, p, req.dtype, 200 * 1024) + 5;
      req.sizes = {8 * 1024, size_of_count(op, p, req.dtype, odd_count), size_of_count(op, p, req.dtype, loop_count)};
      INFO(coll_op_name(op) << " on " << p << " ranks, level0:" << level0_algo_name(algo));

      if (op == CollOp::AlltoAll && algo == Level0Algo::Ring) {
        CHECK_THROWS_AS(run_perf(platform, req), std::invalid_argument);
        continue;
      }
      std::vector<PerfRow> rows = run_perf(platform, req);
      PerfRequest looping = req;
      looping.buffer_bytes = small_buffer;
      looping.sizes = {req.sizes.back()};
      rows.push_back(run_perf(platform, looping).front());
      REQUIRE(rows.size() == 4);
      // The same size in a 20 KiB buffer takes several loops, hence more tasks.
      CHECK(rows[3].tasks > rows[2].tasks);
      CHECK(rows[3].data_size == rows[2].data_size);

      for (const PerfRow& row : rows) {
        INFO("data_size " << row.data_size << ", time " << format_us(row.time) << " us");
        CHECK(row.check == "success");
        CHECK(row.algo == std::string("level0:") + (algo == Level0Algo::Mesh ? "fullmesh" : "ring"));
        const double bound = lower_bound_s(op, algo, p, row.data_size, bw);
        const double seconds = static_cast<double>(row.time.ps) / 1e12;
        INFO("bandwidth lower bound " << bound * 1e6 << " us");
        CHECK(seconds >= bound);
        CHECK(row.time > op_launch);
      }
    }
  }
}

// A mesh AllReduce graph rebuilt with a Delay at the head of rank `late`'s
// Main stream and without the tasks `drop` selects. Returns the new graph.
template <typename Drop>
TaskGraph rebuilt(const TaskGraph& original, int late, Time lateness, Drop drop) {
  TaskGraph g;
  for (const Thread& th : original.threads()) g.add_thread(th.rank, th.name);
  for (ThreadId t = 0; t < original.threads().size(); ++t) {
    if (original.thread(t).rank == late && original.thread(t).name == "Main") {
      Task d;
      d.kind = TaskKind::Delay;
      d.thread = t;
      d.duration = lateness;
      d.label = g.intern("late start");
      g.add(d);
    }
  }
  std::vector<std::int64_t> new_id(original.tasks().size(), -1);
  for (TaskId id = 0; id < original.tasks().size(); ++id) {
    if (drop(original, id)) continue;
    Task t = original.task(id);
    t.label = g.intern(original.label(t));
    new_id[id] = g.add(t);
  }
  for (const auto& [before, after] : original.dependencies()) {
    if (new_id[before] >= 0 && new_id[after] >= 0) {
      g.add_dependency(static_cast<TaskId>(new_id[before]), static_cast<TaskId>(new_id[after]));
    }
  }
  return g;
}

// Runs `graph` for `spec` with a data tracker; returns the first rank's
// output difference, or "" when every output is what the collective must give.
std::string data_check(Scheduler& sched, const TaskGraph& graph, const CollectiveSpec& spec) {
  const BufferSizes sizes = buffer_sizes(spec);
  DataTracker tracker(spec.ranks, sizes.input, sizes.output, 2 * spec.buffer_bytes, false);
  const RunResult r = sched.run(graph, &tracker);
  REQUIRE(r.failure.empty());
  if (!r.check_error.empty()) return r.check_error;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    const std::string diff =
        compare_pieces(tracker.buffer(rank, BufferKind::Output).normalized(0, sizes.output), expected_output(spec, rank));
    if (!diff.empty()) return "rank " + std::to_string(rank) + " output " + diff;
  }
  return {};
}

CollectiveSpec small_all_reduce() {
  CollectiveSpec spec;
  spec.op = CollOp::AllReduce;
  spec.ranks = 4;
  spec.dtype = DataType::Fp16;
  spec.count = 64 * 1024;
  spec.buffer_bytes = 1024 * 1024;
  return spec;
}

}  // namespace

TEST_CASE("all_reduce: every rank count and algorithm checks and respects the bandwidth bound",
          "[collectives][sweep]") {
  sweep_op(CollOp::AllReduce);
}
TEST_CASE("all_gather: every rank count and algorithm checks and respects the bandwidth bound",
          "[collectives][sweep]") {
  sweep_op(CollOp::AllGather);
}
TEST_CASE("reduce_scatter: every rank count and algorithm checks and respects the bandwidth bound",
          "[collectives][sweep]") {
  sweep_op(CollOp::ReduceScatter);
}
TEST_CASE("alltoall: mesh checks and respects the bandwidth bound; ring is refused", "[collectives][sweep]") {
  sweep_op(CollOp::AlltoAll);
}
TEST_CASE("broadcast: every rank count and algorithm checks and respects the bandwidth bound",
          "[collectives][sweep]") {
  sweep_op(CollOp::Broadcast);
}
TEST_CASE("reduce: every rank count and algorithm checks and respects the bandwidth bound",
          "[collectives][sweep]") {
  sweep_op(CollOp::Reduce);
}

TEST_CASE("alltoall has no ring algorithm", "[collectives]") {
  CollectiveSpec spec;
  spec.op = CollOp::AlltoAll;
  spec.ranks = 4;
  spec.count = 1024;
  spec.buffer_bytes = 1024 * 1024;
  CHECK_THROWS_AS(build_collective(spec, Level0Algo::Ring), std::invalid_argument);
  CHECK_NOTHROW(build_collective(spec, Level0Algo::Mesh));
}

TEST_CASE("other data types check on both algorithms", "[collectives][dtype]") {
  Platform platform(load_topology(a2_server()));
  for (const DataType dtype : {DataType::Int8, DataType::Int64, DataType::Bf16}) {
    for (const CollOp op : {CollOp::AllReduce, CollOp::AllGather, CollOp::ReduceScatter, CollOp::Reduce}) {
      for (const Level0Algo algo : {Level0Algo::Mesh, Level0Algo::Ring}) {
        PerfRequest req;
        req.op = op;
        req.ranks = 8;
        req.dtype = dtype;
        req.algo.level0 = algo;
        req.buffer_bytes = 64 * 1024;  // loops for the larger size
        const std::uint64_t odd = data_size_of(op, 8, dtype, 12345);
        req.sizes = {8 * 1024, odd};
        INFO(coll_op_name(op) << " " << data_type_name(dtype) << " level0:" << level0_algo_name(algo));
        const std::vector<PerfRow> rows = run_perf(platform, req);
        REQUIRE(rows.size() == 2);
        for (const PerfRow& row : rows) {
          INFO("data_size " << row.data_size);
          CHECK(row.check == "success");
          CHECK(row.dtype == dtype);
        }
        CHECK(rows[1].count == 12345);
      }
    }
  }
}

TEST_CASE("max, min and prod reductions check on both algorithms", "[collectives][reduce_op]") {
  Platform platform(load_topology(a2_server()));
  for (const ReduceOp rop : {ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod}) {
    for (const CollOp op : {CollOp::AllReduce, CollOp::ReduceScatter, CollOp::Reduce}) {
      for (const Level0Algo algo : {Level0Algo::Mesh, Level0Algo::Ring}) {
        PerfRequest req;
        req.op = op;
        req.ranks = 4;
        req.dtype = DataType::Fp32;
        req.reduce_op = rop;
        req.algo.level0 = algo;
        req.buffer_bytes = 64 * 1024;
        req.sizes = {8 * 1024, data_size_of(op, 4, req.dtype, 40001)};
        INFO(coll_op_name(op) << " " << reduce_op_name(rop) << " level0:" << level0_algo_name(algo));
        for (const PerfRow& row : run_perf(platform, req)) {
          INFO("data_size " << row.data_size);
          CHECK(row.check == "success");
          CHECK(row.reduce_op == rop);
        }
      }
    }
  }
}

TEST_CASE("broadcast and reduce with a root other than 0 check on both algorithms", "[collectives][root]") {
  Platform platform(load_topology(a2_server()));
  for (const CollOp op : {CollOp::Broadcast, CollOp::Reduce}) {
    for (const int ranks : {2, 5, 8}) {
      for (const int root : {1, ranks - 1}) {
        for (const Level0Algo algo : {Level0Algo::Mesh, Level0Algo::Ring}) {
          PerfRequest req;
          req.op = op;
          req.ranks = ranks;
          req.root = root;
          req.algo.level0 = algo;
          req.buffer_bytes = 64 * 1024;
          req.sizes = {8 * 1024, data_size_of(op, ranks, req.dtype, 70001)};
          INFO(coll_op_name(op) << " on " << ranks << " ranks, root " << root << ", level0:"
                                << level0_algo_name(algo));
          for (const PerfRow& row : run_perf(platform, req)) {
            INFO("data_size " << row.data_size);
            CHECK(row.check == "success");
          }
        }
      }
    }
  }
}

TEST_CASE("a mesh all_reduce without its pairwise synchronisation fails the data check",
          "[collectives][data_check]") {
  Platform platform(load_topology(a2_server()));
  Scheduler sched(platform);
  const CollectiveSpec spec = small_all_reduce();
  const TaskGraph graph = build_collective(spec, Level0Algo::Mesh);
  const Time lateness = Time::from_us(50);  // rank 1 copies its input in late

  // Control: with every notify wait kept, the late rank is waited for.
  const TaskGraph intact = rebuilt(graph, 1, lateness, [](const TaskGraph&, TaskId) { return false; });
  CHECK(data_check(sched, intact, spec).empty());

  // Broken: the Plane streams no longer wait for their peers (pre- and
  // post-sync), so the peers write into rank 1's buffer before it has copied
  // its own input in, and read chunks before they are reduced.
  std::size_t dropped = 0;
  const TaskGraph broken = rebuilt(graph, 1, lateness, [&](const TaskGraph& g, TaskId id) {
    const Task& t = g.task(id);
    const bool plane = g.thread(t.thread).name.rfind("Plane", 0) == 0;
    const bool sync = g.label(t).find("sync") != std::string::npos;
    const bool drop = t.kind == TaskKind::NotifyWait && plane && sync;
    dropped += drop ? 1 : 0;
    return drop;
  });
  REQUIRE(dropped > 0);
  const std::string diff = data_check(sched, broken, spec);
  INFO(diff);
  CHECK_FALSE(diff.empty());
}

TEST_CASE("a mesh all_reduce missing one Reduce_Inline fails the data check", "[collectives][data_check]") {
  Platform platform(load_topology(a2_server()));
  Scheduler sched(platform);
  const CollectiveSpec spec = small_all_reduce();
  const TaskGraph graph = build_collective(spec, Level0Algo::Mesh);

  CHECK(data_check(sched, graph, spec).empty());  // the control

  bool dropped = false;
  const TaskGraph broken = rebuilt(graph, -1, Time{}, [&](const TaskGraph& g, TaskId id) {
    if (dropped || g.task(id).kind != TaskKind::ReduceInline) return false;
    dropped = true;
    return true;
  });
  REQUIRE(dropped);
  const std::string diff = data_check(sched, broken, spec);
  INFO(diff);
  CHECK_FALSE(diff.empty());
  CHECK(diff.find("rank ") == 0);
}

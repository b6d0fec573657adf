// Scenarios (topologies/scenario.h, sim/scenario/scenario_run.h): the
// reader's errors, what apply_scenario changes, and runs on small hand-made
// platforms whose expected slowdowns follow from their round parameters: a
// halved link doubles the bytes' time of a transfer alone on it, a link
// down in a mesh fails the operation, a lost spine (plane) moves the
// traffic to the other one, a slow rank's delay and compute factor add
// exactly, and the draws repeat for a seed.
// SystemC elaborates once per process: one Platform per TEST_CASE.
#include <catch2/catch.hpp>

#include "fixtures.h"

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json_reader.h"
#include "models/link/channel.h"
#include "sim/scenario/scenario_run.h"
#include "sim/scheduler.h"
#include "sim/task_graph.h"
#include "topologies/platform.h"
#include "topologies/scenario.h"

using namespace hcclsim;
using Catch::Matchers::Contains;

namespace {

Scenario scenario_of(const std::string& text) { return read_scenario(nlohmann::json::parse(text), "s.json"); }

ScenarioSetup setup_of(const TopologySpec& healthy, const std::string& text, int samples = 1, std::uint64_t seed = 1) {
  const Scenario s = scenario_of(text);
  ScenarioSetup setup;
  setup.file = "s.json";
  setup.healthy = healthy;
  setup.applied = apply_scenario(s, healthy);
  setup.random = s.random();
  setup.samples = samples;
  setup.seed = seed;
  return setup;
}

TaskId memcpy_task(TaskGraph& g, ThreadId thread, int from, int to, std::uint64_t bytes) {
  Task t;
  t.kind = TaskKind::Memcpy;
  t.thread = thread;
  t.src = BufferRef(from, BufferKind::Input, 0);
  t.dst = BufferRef(to, BufferKind::Output, 0);
  t.bytes = bytes;
  return g.add(std::move(t));
}

TaskId timed_task(TaskGraph& g, ThreadId thread, TaskKind kind, Time d) {
  Task t;
  t.kind = kind;
  t.thread = thread;
  t.core_kind = CoreKind::Aiv;
  t.cores = 1;
  t.duration = d;
  return g.add(std::move(t));
}

// Runs `graph` once per point of the scenario.
ScenarioOutcome run_graph(Platform& platform, const ScenarioSetup& setup, const TaskGraph& graph) {
  Scheduler scheduler(platform);
  return run_scenario(platform, setup, [&] {
    const RunResult r = scheduler.run(graph);
    REQUIRE(r.failure.empty());
    return ScenarioPoint{r.elapsed(), ""};
  });
}

// testing::two_npus elaborated, with a graph whose rank 0 runs `delays`
// delays of 1 us on its thread `main`.
struct TwoNpus {
  TopologySpec healthy = testing::two_npus(testing::small_npu(1));
  Platform platform{healthy};
  TaskGraph graph;
  ThreadId main = graph.add_thread(0, "main");
  explicit TwoNpus(int delays) {
    for (int i = 0; i < delays; ++i) timed_task(graph, main, TaskKind::Delay, Time::from_us(1));
  }
};

// Two NPUs, each under a leaf of its own (nodes 2, 3), both leaves linked
// to two spines (4, 5): a "ub" fabric of two planes.
TopologySpec two_planes() {
  TopologySpec spec;
  spec.name = "two-planes";
  spec.npus = 2;
  spec.npus_per_server = 1;
  spec.switches = 4;
  spec.npu = testing::small_npu(2);
  const ChannelParams& link = testing::kLink;
  spec.links = {LinkSpec{0, 2, "hccs", link}, LinkSpec{1, 3, "hccs", link}, LinkSpec{2, 4, "ub", link},
                LinkSpec{2, 5, "ub", link},   LinkSpec{3, 4, "ub", link},   LinkSpec{3, 5, "ub", link}};
  FabricSpec ub;
  ub.kind = "ub";
  ub.leaf_of = {2, 3};
  ub.spines_of.resize(6);
  ub.spines_of[2] = {4, 5};
  ub.spines_of[3] = {4, 5};
  spec.fabrics.push_back(ub);
  return spec;
}

}  // namespace

TEST_CASE("a scenario file's errors name the file and the JSON path", "[scenario][reader]") {
  const auto refused = [](const std::string& text, const std::string& where, const std::string& what) {
    try {
      scenario_of(text);
      FAIL("accepted: " + text);
    } catch (const InputError& e) {
      CHECK_THAT(std::string(e.what()), Contains("s.json at " + where) && Contains(what));
    }
  };
  refused(R"({"links": [{"kind": "hccs", "down": true, "bandwidth_factor": 0.5}]})", "$.links[0]", "down");
  refused(R"({"links": [{"down": true}]})", "$.links[0]", "selector");
  refused(R"({"links": [{"kind": "nvlink", "down": true}]})", "$.links[0].kind", "hccs");
  refused(R"({"links": [{"kind": "hccs", "bandwidth_factor": 0}]})", "$.links[0].bandwidth_factor", "above 0");
  refused(R"({"links": [{"kind": "hccs", "bandwidth_factor": 65}]})", "$.links[0].bandwidth_factor", "[0, 64]");
  refused(R"({"links": [{"kind": "hccs"}]})", "$.links[0]", "what happens");
  refused(R"({"links": [{"kind": "hccs", "extra_latency": "2s"}]})", "$.links[0].extra_latency", "at most 1s");
  refused(R"({"slow_ranks": [{"rank": 1}]})", "$.slow_ranks[0]", "compute_factor");
  refused(R"({"slow_ranks": [{"rank": 1, "extra_delay": "1us"}, {"rank": 1, "compute_factor": 2}]})",
          "$.slow_ranks[1].rank", "twice");
  refused(R"({"jitter": {"distribution": "cauchy"}})", "$.jitter.distribution", "lognormal");
  refused(R"({"jitter": {"distribution": "uniform", "low": 1.2, "high": 1.1}})", "$.jitter.high", "high >= low");
  refused(R"({"jitter": {"distribution": "lognormal", "sigma": 0.1, "scale": 2}})", "$.jitter", "scale");
  refused(R"({"nics_down": [3, 3]})", "$.nics_down[1]", "twice");
  refused(R"({"planes": [1]})", "$", "planes");
}

TEST_CASE("applying a scenario refuses a rank or link the topology does not have", "[scenario][reader]") {
  const TopologySpec spec = testing::two_npus(testing::small_npu(1));
  const auto refused = [&](const std::string& text, const std::string& where, const std::string& what) {
    try {
      apply_scenario(scenario_of(text), spec);
      FAIL("accepted: " + text);
    } catch (const InputError& e) {
      CHECK_THAT(std::string(e.what()), Contains("s.json at " + where) && Contains(what));
    }
  };
  refused(R"({"links": [{"kind": "sio", "down": true}]})", "$.links[0]", "matches no link");
  refused(R"({"links": [{"between": [0, 5], "down": true}]})", "$.links[0].between", "rank 5 is beyond");
  refused(R"({"planes_lost": [0]})", "$.planes_lost[0]", "no UB planes");
  refused(R"({"nics_down": [1]})", "$.nics_down[0]", "no RoCE NIC");
  refused(R"({"slow_ranks": [{"rank": 2, "extra_delay": "1us"}]})", "$.slow_ranks[0].rank", "beyond");
}

TEST_CASE("a degraded link scales every rate of the link and adds its latency", "[scenario]") {
  TopologySpec spec = testing::two_npus(testing::small_npu(1));
  spec.links[0].params.write_bandwidth = Bandwidth{800'000'000};
  spec.links[0].params.sdma_read_rate = Bandwidth{600'000'000};
  const AppliedScenario a = apply_scenario(
      scenario_of(R"({"links": [{"between": [1, 0], "bandwidth_factor": 0.25, "extra_latency": "3us"}]})"), spec);
  const ChannelParams& p = a.spec.links[0].params;
  CHECK(p.bandwidth.bytes_per_s == 250'000'000);
  CHECK(p.write_bandwidth.bytes_per_s == 200'000'000);
  CHECK(p.sdma_read_rate.bytes_per_s == 150'000'000);
  CHECK(p.sdma_write_rate.bytes_per_s == 0);  // no cap stays no cap
  CHECK(p.latency == Time::from_ns(100) + Time::from_us(3));
  REQUIRE(a.changes.size() == 1);
  CHECK(a.changes[0] == "hccs npu0<->npu1 degraded: bandwidth x0.25, latency +3.000 us ($.links[0])");
}

TEST_CASE("a link at half its bandwidth doubles the bytes' time of a transfer alone on it", "[scenario]") {
  TwoNpus two(0);
  const std::uint64_t bytes = 1'000'000;  // 1 ms at kLink's 1 GB/s
  memcpy_task(two.graph, two.main, 0, 1, bytes);
  const ScenarioOutcome o = run_graph(
      two.platform, setup_of(two.healthy, R"({"links": [{"kind": "hccs", "bandwidth_factor": 0.5}]})"), two.graph);
  const Time bytes_time = testing::kLink.bandwidth.transfer_time(bytes);
  REQUIRE(bytes_time == Time::from_us(1000));
  const Time fixed = o.healthy - bytes_time;  // launch, SDMA set-up, latency: unchanged
  CHECK(o.p50 == fixed + bytes_time + bytes_time);
  CHECK(o.samples == 1);
  CHECK(o.times.size() == 1);
  CHECK(o.slowdown == Approx(static_cast<double>((fixed + bytes_time + bytes_time).ps) / static_cast<double>(o.healthy.ps)));
}

TEST_CASE("a link down inside a mesh fails the operation and names the link", "[scenario]") {
  TwoNpus two(0);
  memcpy_task(two.graph, two.main, 0, 1, 4096);
  Platform& platform = two.platform;
  const TaskGraph& g = two.graph;
  const ScenarioSetup setup = setup_of(two.healthy, R"({"links": [{"between": [0, 1], "down": true}]})");
  CHECK(setup.applied.changes == std::vector<std::string>{"hccs npu0<->npu1 down ($.links[0])"});
  CHECK_THROWS_MATCHES(run_graph(platform, setup, g), OperationFailed,
                       Catch::Matchers::Message(
                           "scenario s.json: npu0 cannot reach npu1: hccs link npu0<->npu1 is down and no other path "
                           "joins them (HCCL does not relay through another NPU, and no spine of a fabric is left "
                           "around it), so HCCL fails the operation"));
  // The platform is healthy again afterwards.
  Scheduler scheduler(platform);
  CHECK(scheduler.run(g).failure.empty());
}

TEST_CASE("a lost plane moves a transfer to the other spine at the same time and every plane lost fails", "[scenario]") {
  const TopologySpec healthy = two_planes();
  Platform platform(healthy);
  const std::vector<Channel*> before = platform.route(0, 1);
  REQUIRE(before.size() == 4);
  const int plane = before[1]->label().find("switch2") != std::string::npos ? 0 : 1;  // spine 4 is switch2
  TaskGraph g;
  memcpy_task(g, g.add_thread(0, "main"), 0, 1, 1'000'000);
  const ScenarioSetup setup = setup_of(healthy, R"({"planes_lost": [)" + std::to_string(plane) + "]}");
  const ScenarioOutcome o = run_graph(platform, setup, g);
  CHECK(o.p50 == o.healthy);  // every link is alike: the other plane is as fast
  CHECK(o.slowdown == 1.0);
  set_scenario_draw(platform, setup, 0);
  const std::vector<Channel*>& after = platform.route(0, 1);
  REQUIRE(after.size() == 4);
  CHECK(after[1] != before[1]);
  CHECK(after[0] == before[0]);
  CHECK(after[3] == before[3]);
  CHECK_THROWS_AS(run_graph(platform, setup_of(healthy, R"({"planes_lost": [0, 1]})"), g), OperationFailed);
}

TEST_CASE("a slow rank's extra delay and compute factor add exactly to its tasks", "[scenario]") {
  TwoNpus two(3);
  timed_task(two.graph, two.main, TaskKind::Compute, Time::from_us(10));
  timed_task(two.graph, two.graph.add_thread(1, "other"), TaskKind::Delay, Time::from_us(1));  // rank 1 is not slow
  const ScenarioOutcome o = run_graph(
      two.platform, setup_of(two.healthy, R"({"slow_ranks": [{"rank": 0, "compute_factor": 1.5, "extra_delay": "2us"}]})"),
      two.graph);
  // 4 tasks x 2 us, and half of the 10 us compute.
  CHECK(o.p50 == o.healthy + Time::from_us(8) + Time::from_us(5));
}

TEST_CASE("jitter draws repeat for a seed and differ between draws and seeds", "[scenario][jitter]") {
  TaskJitter j{JitterDistribution::Uniform, 0.5, 1.5, 7, 0};
  const double f = jitter_factor(j, 42);
  CHECK(jitter_factor(j, 42) == f);
  TaskJitter other_draw = j;
  other_draw.draw = 1;
  CHECK(jitter_factor(other_draw, 42) != f);
  TaskJitter other_seed = j;
  other_seed.seed = 8;
  CHECK(jitter_factor(other_seed, 42) != f);
  // The distributions: 20000 draws' mean (uniform, normal) or median (lognormal).
  const auto draws = [](TaskJitter t) {
    std::vector<double> v;
    for (std::uint64_t task = 0; task < 20000; ++task) v.push_back(jitter_factor(t, task));
    return v;
  };
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (const double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  const std::vector<double> u = draws(j);
  CHECK(*std::min_element(u.begin(), u.end()) >= 0.5);
  CHECK(*std::max_element(u.begin(), u.end()) < 1.5);
  CHECK(mean(u) == Approx(1.0).margin(0.01));
  const std::vector<double> n = draws(TaskJitter{JitterDistribution::Normal, 1.0, 0.1, 3, 0});
  CHECK(mean(n) == Approx(1.0).margin(0.003));
  double var = 0;
  for (const double x : n) var += (x - 1.0) * (x - 1.0);
  CHECK(std::sqrt(var / static_cast<double>(n.size())) == Approx(0.1).margin(0.003));
  std::vector<double> l = draws(TaskJitter{JitterDistribution::LogNormal, std::log(2.0), 0.5, 3, 0});
  std::sort(l.begin(), l.end());
  CHECK(l[l.size() / 2] == Approx(2.0).margin(0.03));
  CHECK(jittered_span(TaskJitter{}, 1, Time::from_us(3)) == Time::from_us(3));
}

TEST_CASE("jittered runs give the same percentiles for a seed on one platform", "[scenario][jitter]") {
  TwoNpus two(20);
  const std::string jitter = R"({"jitter": {"distribution": "uniform", "low": 1.0, "high": 2.0}})";
  const ScenarioOutcome a = run_graph(two.platform, setup_of(two.healthy, jitter, 9, 5), two.graph);
  const ScenarioOutcome b = run_graph(two.platform, setup_of(two.healthy, jitter, 9, 5), two.graph);
  const ScenarioOutcome c = run_graph(two.platform, setup_of(two.healthy, jitter, 9, 6), two.graph);
  REQUIRE(a.times.size() == 9);
  CHECK(a.times == b.times);
  CHECK(a.times != c.times);
  CHECK(a.healthy == c.healthy);
  // 20 delays of 1 us, each x [1, 2): slower, never by 20 us or more.
  for (const Time t : a.times) {
    CHECK(t > a.healthy);
    CHECK(t < a.healthy + Time::from_us(20));
  }
  CHECK(a.p50 == nearest_rank(a.times, 0.5));
  CHECK(a.max == *std::max_element(a.times.begin(), a.times.end()));
}

TEST_CASE("nearest-rank percentiles take the ceil(q n)-th smallest", "[scenario]") {
  std::vector<Time> t;
  for (int i = 10; i >= 1; --i) t.push_back(Time::from_us(static_cast<std::uint64_t>(i)));
  CHECK(nearest_rank(t, 0.5) == Time::from_us(5));
  CHECK(nearest_rank(t, 0.9) == Time::from_us(9));
  CHECK(nearest_rank(t, 0.99) == Time::from_us(10));
  CHECK(nearest_rank(t, 1.0) == Time::from_us(10));
  CHECK(nearest_rank({Time::from_us(4)}, 0.5) == Time::from_us(4));
}

TEST_CASE("a compute factor that makes a task longer than an input may give is refused", "[scenario]") {
  TwoNpus two(0);
  timed_task(two.graph, two.main, TaskKind::Compute, kMaxInputTime);  // the longest a program may give
  CHECK_THROWS_MATCHES(
      run_graph(two.platform, setup_of(two.healthy, R"({"slow_ranks": [{"rank": 0, "compute_factor": 2}]})"), two.graph),
      InputError, Catch::Matchers::Message(
                      "option --scenario: rank 0 thread 'main' task #0 (Compute) would take longer than 10^6 s, the limit "
                      "of one task's time, under the scenario's compute factor or jitter"));
}

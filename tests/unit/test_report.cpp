// sim/report: streamed rows, row transport and the ordered gather of MPI
// sweeps, baselines and their comparison. No SystemC: these are pure logic.
#include <catch2/catch.hpp>

#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/input_files.h"
#include "sim/report/baseline.h"
#include "sim/report/row_transport.h"
#include "sim/report/row_writer.h"

using namespace hcclsim;

namespace {
PerfRow sample_row(std::uint64_t size, std::uint64_t ps, const std::string& check = "success") {
  PerfRow r{};
  r.op_name = "all_reduce";
  r.op = CollOp::AllReduce;
  r.ranks = 8;
  r.dtype = DataType::Fp32;
  r.reduce_op = ReduceOp::Sum;
  r.algo = "level0:fullmesh";
  r.count = size / 4;
  r.input_bytes = r.output_bytes = r.data_size = size;
  r.time = Time{ps};
  r.algbw_gbps = static_cast<double>(size) / (static_cast<double>(ps) / 1e12) / 1e9;
  r.busbw_gbps = r.algbw_gbps * 1.75;
  r.check = check;
  r.tasks = 912;
  r.activations = 1234;
  return r;
}

// An in-memory group of `size` processes, run one after another in a test:
// the others' messages are queued before rank 0 reads them.
struct Queues {
  std::map<int, std::deque<std::string>> to_root;
};
class FakeGroup : public ProcessGroup {
 public:
  FakeGroup(Queues& q, int rank, int size) : q_(q), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void send_to_root(const std::string& m) override { q_.to_root[rank_].push_back(m); }
  std::string receive_from(int r) override {
    auto& queue = q_.to_root[r];
    REQUIRE(!queue.empty());
    std::string m = queue.front();
    queue.pop_front();
    return m;
  }

 private:
  Queues& q_;
  int rank_;
  int size_;
};
}  // namespace

TEST_CASE("the streamed JSON array is byte for byte the whole array's dump(2)") {
  nlohmann::json whole = nlohmann::json::array();
  std::ostringstream streamed;
  JsonArrayStream stream(streamed);
  for (std::uint64_t s : {8192ULL, 16384ULL, 1ULL << 30}) {
    whole.push_back(perf_row_json(sample_row(s, 29882332 + s)));
    stream.add(whole.back());
  }
  stream.finish();
  CHECK(streamed.str() == whole.dump(2) + "\n");
  std::ostringstream empty;
  JsonArrayStream none(empty);
  none.finish();
  CHECK(empty.str() == "[]\n");
}

TEST_CASE("hccl_test layout: the printf formats of print_execution_time") {
  const std::string text = format_rows({sample_row(8192, 29882332), sample_row(67108864, 1031890000, "skipped"),
                                        sample_row(16384, 30005000, "fail: rank 1 output differs")},
                                       RowFormat::HcclTest, "", HcclTestPreamble{8192, 67108864, 20, 5});
  CHECK(text ==
        "the minbytes is 8192, maxbytes is 67108864, iters is 20, warmup_iters is 5\n"
        "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\n"
        "8192              | 29.88          | 0.27414              | success\n"
        "67108864          | 1031.89        | 65.03490             | NULL\n"
        "16384             | 30.00          | 0.54604              | failed\n");
}

TEST_CASE("a table names, before its last line, each executor with the rule that chose it and the sizes it ran") {
  std::vector<PerfRow> rows;
  for (const std::uint64_t size : {8192ULL, 65536ULL, 524288ULL, 4194304ULL, 33554432ULL}) {
    PerfRow r = sample_row(size, 1000000 + size);
    const bool small = size <= 256 * 1024;
    r.executor = small ? "AllReduceMeshSmallCountExecutor" : "AllReduceMeshOpbaseLoopExecutor";
    r.executor_rule = small ? "op-base, one server, <= 256 KiB" : "op-base, one server, > 256 KiB";
    if (size == 33554432ULL) r.executor_rule = "another rule";  // same executor, another rule: a line of its own
    rows.push_back(r);
  }
  const std::string table = format_rows(rows, RowFormat::Table, "AllReduce", {}, "a2.json");
  const std::string why = "# AllReduceMeshSmallCountExecutor for data_size 8192..65536: op-base, one server, <= 256 KiB\n"
                          "# AllReduceMeshOpbaseLoopExecutor for data_size 524288..4194304: op-base, one server, > 256 KiB\n"
                          "# AllReduceMeshOpbaseLoopExecutor for data_size 33554432: another rule\n"
                          "# assumed constants used: none\n";
  REQUIRE(table.size() > why.size());
  CHECK(table.substr(table.size() - why.size()) == why);
  CHECK(perf_row_json(rows[0]).at("executor_rule") == "op-base, one server, <= 256 KiB");
  // A row that crossed a process boundary keeps its rule, and layouts other than the table print none.
  CHECK(deserialize_perf_row(serialize_perf_row(rows[2])).executor_rule == "op-base, one server, > 256 KiB");
  CHECK_THAT(format_rows(rows, RowFormat::Csv), !Catch::Contains("256 KiB"));
  CHECK_THAT(format_rows(rows, RowFormat::HcclTest), !Catch::Contains("256 KiB"));
}

TEST_CASE("a row crosses a process boundary exactly") {
  const PerfRow r = sample_row(3 << 20, 123456789);
  const PerfRow back = deserialize_perf_row(serialize_perf_row(r));
  CHECK(back.time.ps == r.time.ps);
  CHECK(back.algbw_gbps == r.algbw_gbps);  // exact: round-trip precision
  CHECK(back.busbw_gbps == r.busbw_gbps);
  CHECK(format_rows({back}, RowFormat::Csv) == format_rows({r}, RowFormat::Csv));
  CHECK_THROWS_AS(deserialize_perf_row("{\"op\": 1}"), std::invalid_argument);
}

TEST_CASE("the ordered gather emits every item in order whichever process ran it") {
  const std::size_t n = 7;
  for (const auto& owners : {assign_round_robin(n, 3), assign_blocks(n, 3)}) {
    Queues q;
    for (int rank : {1, 2}) {
      FakeGroup g(q, rank, 3);
      OrderedGather gather(g, owners, [](std::size_t, const std::string&) { FAIL("only rank 0 emits"); });
      for (std::size_t i = 0; i < n; ++i) {
        if (owners[i] == rank) gather.local(i, "item" + std::to_string(i));
      }
      CHECK(!gather.finish());
    }
    FakeGroup root(q, 0, 3);
    std::vector<std::string> emitted;
    OrderedGather gather(root, owners, [&](std::size_t i, const std::string& s) {
      CHECK(i == emitted.size());
      emitted.push_back(s);
    });
    for (std::size_t i = 0; i < n; ++i) {
      if (owners[i] == 0) gather.local(i, "item" + std::to_string(i));
    }
    CHECK(!gather.finish());
    REQUIRE(emitted.size() == n);
    for (std::size_t i = 0; i < n; ++i) CHECK(emitted[i] == "item" + std::to_string(i));
  }
}

TEST_CASE("a failing process stops the output at its item and reaches rank 0") {
  const std::vector<int> owners = assign_blocks(6, 2);  // 0 0 0 1 1 1
  Queues q;
  {
    FakeGroup g(q, 1, 2);
    OrderedGather gather(g, owners, [](std::size_t, const std::string&) {});
    gather.local(3, "item3");
    gather.fail(2, "bad point 4");
  }
  FakeGroup root(q, 0, 2);
  std::vector<std::size_t> emitted;
  OrderedGather gather(root, owners, [&](std::size_t i, const std::string&) { emitted.push_back(i); });
  for (std::size_t i = 0; i < 3; ++i) gather.local(i, "x");
  const auto failure = gather.finish();
  REQUIRE(failure);
  CHECK(failure->exit_code == 2);
  CHECK(failure->message == "bad point 4");
  CHECK(emitted == std::vector<std::size_t>{0, 1, 2, 3});
}

TEST_CASE("baseline comparison: slower beyond the tolerance fails, faster is reported, missing fails") {
  Baseline old;
  old.command = {"perf", "all_reduce"};
  old.command_kind = "perf";
  old.inputs = {{"a.json", "fnv1a64:1"}, {"b.json", "fnv1a64:2"}};
  old.items = {perf_row_item("all_reduce", 8192, "level0:fullmesh", 100.0),
               perf_row_item("all_reduce", 16384, "level0:fullmesh", 100.0),
               perf_row_item("all_reduce", 32768, "level0:fullmesh", 100.0),
               perf_row_item("all_reduce", 65536, "level0:fullmesh", 100.0)};
  const std::vector<BaselineItem> now{perf_row_item("all_reduce", 8192, "level0:fullmesh", 101.9),
                                      perf_row_item("all_reduce", 16384, "level0:fullmesh", 102.1),
                                      perf_row_item("all_reduce", 32768, "level0:ring", 90.0)};
  const Comparison c = compare_baseline(old, now, {{"a.json", "fnv1a64:1"}, {"b.json", "fnv1a64:9"}}, 2.0);
  REQUIRE(c.items.size() == 4);
  CHECK(c.items[0].status == ItemComparison::Status::Held);
  CHECK(c.items[1].status == ItemComparison::Status::Slower);
  CHECK(c.items[2].status == ItemComparison::Status::Faster);
  CHECK(c.items[2].note == "algo level0:fullmesh -> level0:ring");
  CHECK(c.items[3].status == ItemComparison::Status::Missing);
  CHECK(c.regressed());
  CHECK(c.changed_inputs == std::vector<std::string>{"b.json (fnv1a64:2 -> fnv1a64:9)"});
  const std::string xml = junit_xml(c, "suite");
  CHECK(xml.find("<testcase classname=\"hcclsim.check\" name=\"all_reduce 16384 B\">\n      <failure") !=
        std::string::npos);
  CHECK(xml.find("failures=\"2\"") != std::string::npos);
  const std::string text = format_comparison(c);
  CHECK(text.find("SLOWER") != std::string::npos);
  CHECK(text.find("faster") != std::string::npos);

  const Comparison same = compare_baseline(old, old.items, old.inputs, 0.0);
  CHECK(!same.regressed());
}

TEST_CASE("a baseline file reads back what was written, strictly") {
  Baseline b;
  b.version = "0.1.0 (test)";
  b.command = {"run", "--program", "p.json"};
  b.command_kind = "run";
  b.inputs = {{"p.json", "fnv1a64:" + fnv1a64_hex("abc")}};
  b.items = {handle_item("gather", 0, 1, "all_gather", 12.345678), total_item(20.5)};
  const std::string file = "test_report_baseline.json";
  {
    std::ofstream out(file);
    out << baseline_json(b);
  }
  const Baseline back = load_baseline(file);
  CHECK(back.command == b.command);
  CHECK(back.inputs[0].hash == b.inputs[0].hash);
  REQUIRE(back.items.size() == 2);
  CHECK(back.items[0].id == "handle gather (domain 0, repeat 1)");
  CHECK(back.items[0].time_us == 12.345678);
  {
    std::ofstream out(file);
    out << R"({"format": "hcclsim-baseline-1", "hcclsim_version": "x", "command": ["perf"], "inputs": [],
               "command_kind": "perf", "results": [], "extra": 1})";
  }
  CHECK_THROWS_WITH(load_baseline(file), Catch::Contains("extra") && Catch::Contains(file));
  std::remove(file.c_str());
  CHECK(fnv1a64_hex("") == "cbf29ce484222325");  // the FNV-1a 64 offset basis
  CHECK(parse_tolerance("2%") == 2.0);
  CHECK(parse_tolerance("0.5") == 0.5);
  CHECK_THROWS_AS(parse_tolerance("-1%"), std::invalid_argument);
}

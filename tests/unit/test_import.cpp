// sim/calibrate/import: hccl_test's printed table and torch_npu's
// communication.json as points of a measurement file, and the measurement
// file writer they go through (sim/report/validate.h). No SystemC runs here.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "fixtures.h"
#include "sim/calibrate/import.h"
#include "base/input_files.h"
#include "base/json_reader.h"
#include "sim/report/row_writer.h"

using namespace hcclsim;
using hcclsim::testing::source_file;
using Catch::Matchers::Contains;

namespace {

std::string temp_path(const std::string& name) { return "/tmp/hcclsim_test_import_" + std::to_string(::getpid()) + "_" + name; }

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const std::string kHeader = "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\n";

// What parse_hccl_test_log says refusing hccl_test's header and `rows` as "a.log".
std::string refusal_of(const std::string& rows) {
  try {
    parse_hccl_test_log(kHeader + rows, "a.log");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

ImportTarget a2_server() { return ImportTarget{source_file("configs/topologies/a2-server.json"), -1, 0, ""}; }

const char* kProfile = "tests/import/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json";

// A communication.json of one step holding `op` (JSON text) under "collective".
nlohmann::json one_op(const std::string& op) {
  return parse_json_text(R"j({"step1": {"p2p": {}, "collective": {"hcom_allReduce__844_1_1@1": )j" + op + "}}}",
                         "c.json");
}

}  // namespace

// ------------------------------------------------------------- hccl_test

TEST_CASE("hccl_test's own layout is read with the lines around and inside its table passed over", "[import][hccl_test]") {
  // As CANN's documentation prints it (`avg_time`, cells padded on both
  // sides), with mpirun's and HCCL's lines around it and a failed rank's
  // line inside it.
  const std::string log =
      "+ mpirun -n 8 ./bin/all_reduce_test -b 8K -e 64M -f 2 -d fp32 -o sum -p 8\n"
      "the minbytes is 8192, maxbytes is 67108864, iters is 20, warmup_iters is 5\n"
      "data_size(Bytes): |   avg_time(us): | alg_bandwidth(GB/s): | check_result:\n"
      "8192              |     764.55    |       0.00998        | success\r\n"
      "rank id 3, check result failed\n"
      "16384             |     858.80    |       0.01777        | failed\n"
      "\n"
      "[INFO] HCCL(1,all_reduce_test): 2025-01-01 a log line\n"
      "67108864          |    2630.20    |      23.76245        | NULL\n"
      "mpirun: all processes ended\n";
  const std::vector<HcclTestRow> rows = parse_hccl_test_log(log, "run.log");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].line == 4);
  CHECK(rows[0].data_size == 8192);
  CHECK(rows[0].time_us == 764.55);
  CHECK(rows[0].algbw_gbps == 0.00998);
  CHECK(rows[0].check == "success");
  CHECK(rows[1].line == 6);
  CHECK(rows[1].check == "failed");
  CHECK(rows[2].line == 9);
  CHECK(rows[2].data_size == 67108864);
  CHECK(rows[2].time_us == 2630.20);
  CHECK(rows[2].check == "NULL");
}

TEST_CASE("the hand-written sample log under tests/import reads as the five rows it holds", "[import][hccl_test]") {
  const std::string file = source_file("tests/import/hccl_test_a2_8p.log");
  const std::vector<HcclTestRow> rows = parse_hccl_test_log(read_regular_file(file, kMaxImportBytes), file);
  REQUIRE(rows.size() == 5);
  CHECK(rows.front().data_size == 8192);
  CHECK(rows.front().line == 6);
  CHECK(rows.back().data_size == 33554432);
  CHECK(rows.back().time_us == 1164.07);
  CHECK(rows[2].check == "failed");
}

TEST_CASE("hcclsim perf's --format hccl_test output reads back as the rows it printed", "[import][hccl_test]") {
  std::vector<PerfRow> printed;
  for (const auto& [size, ps, check] : {std::tuple{std::uint64_t{8192}, std::uint64_t{29'468'000}, "success"},
                                       std::tuple{std::uint64_t{1048576}, std::uint64_t{81'234'567}, "skipped"},
                                       std::tuple{std::uint64_t{67108864}, std::uint64_t{2'286'514'000}, "fail: x"}}) {
    PerfRow r{};
    r.data_size = size;
    r.time = Time{ps};
    r.algbw_gbps = static_cast<double>(size) / (static_cast<double>(ps) / 1e12) / 1e9;
    r.check = check;
    printed.push_back(r);
  }
  const std::string text = format_rows(printed, RowFormat::HcclTest, "", HcclTestPreamble{8192, 67108864, 20, 10});
  const std::vector<HcclTestRow> rows = parse_hccl_test_log(text, "perf.log");
  REQUIRE(rows.size() == 3);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("row " << i);
    CHECK(rows[i].line == i + 3);  // after the preamble and the header
    CHECK(rows[i].data_size == printed[i].data_size);
    // %.2f of the time in us: within half a hundredth.
    CHECK(std::abs(rows[i].time_us - static_cast<double>(printed[i].time.ps) / 1e6) <= 0.005);
  }
  CHECK(rows[0].check == "success");
  CHECK(rows[1].check == "NULL");
  CHECK(rows[2].check == "failed");
}

TEST_CASE("a log without hccl_test's table is refused naming the file and the header it expected", "[import][hccl_test]") {
  CHECK_THROWS_WITH(parse_hccl_test_log("the minbytes is 8192, maxbytes is 8192\nmpirun failed\n", "empty.log"),
                    Contains("empty.log: no hccl_test table") && Contains("data_size(Bytes): | aveg_time(us):"));
  CHECK_THROWS_WITH(parse_hccl_test_log("", "empty.log"), Contains("empty.log: no hccl_test table"));
  // A header with nothing under it names the header's line.
  CHECK_THROWS_WITH(parse_hccl_test_log("x\n" + kHeader, "cut.log"),
                    Contains("cut.log:2: the table under this header has no rows"));
  // hcclsim perf's own table format is not hccl_test's.
  CHECK_THROWS_WITH(parse_hccl_test_log("# AllReduce\n     data_size      aveg_time  alg_bandwidth\n", "table.log"),
                    Contains("table.log:2") && Contains("not hccl_test's") && Contains("--format hccl_test"));
}

TEST_CASE("a cell that is not a number is refused naming the file, the line and the column", "[import][hccl_test]") {
  CHECK_THAT(refusal_of("8192 | 12.5 | 0.6 | success\n16384 | 1x.0 | 1.2 | success\n"),
             Contains("a.log:3: aveg_time '1x.0' is not a decimal number"));
  CHECK_THAT(refusal_of("8K | 12.5 | 0.6 | success\n"), Contains("a.log:2: data_size '8K' is not a whole number of bytes"));
  CHECK_THAT(refusal_of("8192 | 12.5 | nan | success\n"), Contains("a.log:2: alg_bandwidth 'nan' is not a decimal number"));
  CHECK_THAT(refusal_of("99999999999999999999 | 12.5 | 0.6 | success\n"), Contains("a.log:2") && Contains("fits 64 bits"));
  CHECK_THAT(refusal_of("8192 | 0.00 | 0.6 | success\n"), Contains("a.log:2: aveg_time 0.00 is not a positive time"));
  CHECK_THAT(refusal_of("8192 | 2000000000000.00 | 0.6 | success\n"),
             Contains("a.log:2: aveg_time 2000000000000.00 is not a positive time in us of at most 10^6 s"));
  CHECK_THAT(refusal_of("8192 | 12.5 | 0.6 | passed\n"),
             Contains("a.log:2: check_result 'passed' is not one of: success, failed, NULL"));
}

TEST_CASE("a row with the wrong number of columns is refused naming the file and the line", "[import][hccl_test]") {
  CHECK_THAT(refusal_of("8192 | 12.5 | 0.6\n"), Contains("a.log:2: expected 4 columns") && Contains("found 3"));
  CHECK_THAT(refusal_of("8192 | 12.5 | 0.6 | success\n16384 | 13 | 1.2 | success | x\n"),
             Contains("a.log:3: expected 4 columns") && Contains("found 5"));
  // A header of other columns.
  CHECK_THROWS_WITH(parse_hccl_test_log("data_size(Bytes): | aveg_time(us): | check_result:\n", "a.log"),
                    Contains("a.log:1") && Contains("not hccl_test's"));
}

TEST_CASE("hccl_test rows become time_us points; failed rows are passed over naming their line", "[import][hccl_test]") {
  const std::string file = source_file("tests/import/hccl_test_a2_8p.log");
  const std::vector<HcclTestRow> rows = parse_hccl_test_log(read_regular_file(file, kMaxImportBytes), file);
  ImportTarget target = a2_server();
  target.ranks = 8;
  const ImportResult r = hccl_test_points(rows, file, "all_reduce", "fp32", target);
  REQUIRE(r.points.size() == 4);
  REQUIRE(r.warnings.size() == 1);
  CHECK_THAT(r.warnings[0], Contains(file + ":11: check_result failed"));
  const MeasuredPoint& p = r.points[0];
  CHECK(p.group == "hccl_test_a2_8p all_reduce");
  CHECK(p.id == "hccl_test_a2_8p all_reduce/all_reduce/8192");
  CHECK(p.topology == target.topology);
  CHECK(p.servers == -1);
  CHECK(p.ranks == 8);
  CHECK(p.op == "all_reduce");
  CHECK(p.dtype == "fp32");
  CHECK(p.size_bytes == 8192);
  CHECK(p.size_means == "hccl_test");
  CHECK(p.metric == "time_us");
  CHECK(p.value == 25.31);
  CHECK(p.source == "hccl_test output " + file + ", line 6");
  CHECK(r.points[2].size_bytes == 4194304);  // 524288 failed its check

  target.group = "mine";
  CHECK(hccl_test_points(rows, file, "all_reduce", "fp32", target).points[0].id == "mine/all_reduce/8192");
}

TEST_CASE("a data_size given twice in one log is refused naming both lines", "[import][hccl_test]") {
  const std::vector<HcclTestRow> rows =
      parse_hccl_test_log(kHeader + "8192 | 12.5 | 0.6 | success\n" + kHeader + "8192 | 12.9 | 0.6 | success\n", "two.log");
  REQUIRE(rows.size() == 2);
  CHECK_THROWS_WITH(hccl_test_points(rows, "two.log", "all_reduce", "fp32", a2_server()),
                    Contains("two.log:4: data_size 8192 is given again (first at line 2)"));
}

TEST_CASE("ops are named as validate names them, hccl_test's binaries included", "[import][hccl_test]") {
  CHECK(measured_op_name("all_reduce") == "all_reduce");
  CHECK(measured_op_name("all_reduce_test") == "all_reduce");
  CHECK(measured_op_name("alltoallv_test") == "alltoallv");
  CHECK(measured_op_name("reduce") == "reduce");
  CHECK_FALSE(measured_op_name("scatter_test"));
  CHECK_FALSE(measured_op_name("_test"));
  CHECK_FALSE(measured_op_name("p2p_write"));
  CHECK(parse_hccl_test_data_type("bfp16") == DataType::Bf16);
  CHECK_FALSE(parse_hccl_test_data_type("uint8"));
}

// ---------------------------------------------------------- the writer

TEST_CASE("imported points read back through load_measurements unchanged", "[import][writer]") {
  const std::string file = source_file("tests/import/hccl_test_a2_8p.log");
  ImportTarget target = a2_server();
  target.servers = 1;
  target.ranks = 4;
  const ImportResult r =
      hccl_test_points(parse_hccl_test_log(read_regular_file(file, kMaxImportBytes), file), file, "all_gather", "bf16", target);
  const std::string out = write_temp("points.json", measurements_json(r.points, "test"));
  const std::vector<MeasuredPoint> back = load_measurements(out);
  REQUIRE(back.size() == r.points.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    INFO("point " << r.points[i].id);
    CHECK(back[i].id == r.points[i].id);
    CHECK(back[i].group == r.points[i].group);
    CHECK(back[i].topology == r.points[i].topology);
    CHECK(back[i].servers == 1);
    CHECK(back[i].ranks == 4);
    CHECK(back[i].op == "all_gather");
    CHECK(back[i].dtype == "bf16");
    CHECK(back[i].size_bytes == r.points[i].size_bytes);
    CHECK(back[i].size_means == "hccl_test");
    CHECK(back[i].metric == "time_us");
    CHECK(back[i].value == r.points[i].value);
    CHECK(back[i].source == r.points[i].source);
  }
  std::remove(out.c_str());
}

TEST_CASE("the calibration file written again reads back as the same points", "[import][writer]") {
  const std::vector<MeasuredPoint> original = load_measurements(source_file("configs/calibration/measurements.json"));
  const std::string text = measurements_json(original, "again");
  // One point a line, as the calibration file has them.
  CHECK(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) == original.size() + 5);
  // Beside a link to configs/, so that its relative topology paths resolve as the original's do.
  namespace fs = std::filesystem;
  const fs::path dir = temp_path("calibration");
  fs::create_directories(dir);
  fs::create_directory_symlink(source_file("configs"), dir / "configs");
  std::ofstream(dir / "measurements.json", std::ios::binary) << text;
  const std::vector<MeasuredPoint> back = load_measurements((dir / "measurements.json").string());
  fs::remove_all(dir);
  REQUIRE(back.size() == original.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    const MeasuredPoint& a = original[i];
    const MeasuredPoint& b = back[i];
    INFO("point " << a.id);
    CHECK(std::tie(a.id, a.group, a.topology, a.servers, a.ranks, a.op, a.dtype, a.size_bytes, a.size_means, a.metric,
                   a.value, a.options, a.source, a.tolerance_pct, a.known_gap, a.block_bytes, a.total_bytes) ==
          std::tie(b.id, b.group, b.topology, b.servers, b.ranks, b.op, b.dtype, b.size_bytes, b.size_means, b.metric,
                   b.value, b.options, b.source, b.tolerance_pct, b.known_gap, b.block_bytes, b.total_bytes));
  }
}

// ------------------------------------------------------- torch_npu profile

TEST_CASE("communication.json is found from the profiler directory, ASCEND_PROFILER_OUTPUT or the file", "[import][torch]") {
  const std::string file = source_file(kProfile);
  CHECK(find_communication_json(source_file("tests/import/rank0_ascend_pt")) == file);
  CHECK(find_communication_json(source_file("tests/import/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT")) == file);
  CHECK(find_communication_json(file) == file);
  CHECK_THROWS_WITH(find_communication_json(source_file("tests/import")),
                    Contains("tests/import: no communication.json in it or in its ASCEND_PROFILER_OUTPUT"));
  CHECK_THROWS_WITH(find_communication_json("/nonexistent/prof"), Contains("/nonexistent/prof: no such file"));
}

TEST_CASE("the sample profile's operators are read with SDMA and RDMA bytes, HCCS not counted twice", "[import][torch]") {
  const std::string file = source_file(kProfile);
  std::size_t p2p = 0;
  const std::vector<CommunicationOp> ops =
      parse_communication_json(parse_json_text(read_regular_file(file, kMaxImportBytes), file), file, &p2p);
  REQUIRE(ops.size() == 7);  // step1: 5, step2: 2; "Total Op Info" is no operator
  CHECK(p2p == 1);
  // nlohmann's objects iterate in key order.
  CHECK(ops[0].step == "step1");
  CHECK(ops[0].name == "hcom_allGather__844_2_1@13681369207305868844");
  CHECK(ops[0].kind == "allgather");
  CHECK(ops[0].path == "$.step1.collective.hcom_allGather__844_2_1@13681369207305868844");
  CHECK(ops[0].elapse_ms == 0.12514);
  CHECK(ops[0].transit_mb == 7.340032);  // SDMA only: HCCS holds the same bytes
  CHECK(ops[1].kind == "allreduce");
  CHECK(ops[1].transit_mb == 29.360128);
  CHECK(ops[2].kind == "alltoallv");
  CHECK(ops[3].kind == "broadcast");
  CHECK(ops[4].kind == "reducescatter");
  CHECK(ops[5].step == "step2");
  CHECK(ops[6].kind == "alltoall");
}

TEST_CASE("profile operators become points sized by their bytes over the bus factor", "[import][torch]") {
  std::vector<CommunicationOp> ops(6);
  ops[0] = {"$.s.collective.a", "s", "hcom_allReduce__1_1_1@9", "allreduce", 0.41227, 29.360128};
  ops[1] = {"$.s.collective.b", "s", "hcom_allGather__1_2_1@9", "allgather", 0.125, 7.340032};
  ops[2] = {"$.s.collective.c", "s", "hcom_broadcast__1_3_1@9", "broadcast", 0.06, 0.9};
  ops[3] = {"$.s.collective.d", "s", "hcom_broadcast__1_4_1@9", "broadcast", 0.06, 0.9};
  ops[4] = {"$.s.collective.e", "s", "hcom_allReduce__1_5_1@9", "allreduce", 0.01, 0};
  ops[5] = {"$.s.collective.f", "s", "hcom_scatter__1_6_1@9", "scatter", 0.01, 1};
  const ImportResult r = communication_points(ops, 2, "c.json", 8, a2_server(), "rank0");
  REQUIRE(r.points.size() == 2);
  const MeasuredPoint& p = r.points[0];
  CHECK(p.id == "rank0/s/hcom_allReduce__1_1_1@9");
  CHECK(p.group == "rank0");
  CHECK(p.op == "all_reduce");
  CHECK(p.size_bytes == 16777216);  // 29.360128e6 / (2 * 7 / 8)
  CHECK(p.value == 412.27);
  CHECK(p.dtype == "fp16");
  CHECK(p.metric == "time_us");
  CHECK(p.size_means == "hccl_test");
  CHECK(p.ranks == 0);
  CHECK_THAT(p.source, Contains("c.json at $.s.collective.a") && Contains("Elapse Time(ms) 0.41227"));
  CHECK(r.points[1].op == "all_gather");
  CHECK(r.points[1].size_bytes == 8388608);  // 7.340032e6 / (7 / 8)
  // One warning a kind and reason, with the count and the first; and the p2p ones.
  REQUIRE(r.warnings.size() == 4);
  CHECK_THAT(r.warnings[0], Contains("1 'allreduce' operator(s) passed over") && Contains("$.s.collective.e"));
  CHECK_THAT(r.warnings[1], Contains("2 'broadcast' operator(s) passed over") && Contains("root") &&
                                Contains("the first at $.s.collective.c"));
  CHECK_THAT(r.warnings[2], Contains("1 'scatter' operator(s)") && Contains("not a collective validate runs"));
  CHECK_THAT(r.warnings[3], Contains("2 point-to-point operator(s)"));
  // On 16 ranks the same bytes are a smaller AllReduce: 29.360128e6 / (2 * 15 / 16).
  CHECK(communication_points({ops[0]}, 0, "c.json", 16, a2_server(), "g").points[0].size_bytes == 15658735);
}

TEST_CASE("bad communication.json values are refused naming the JSON path and what was expected", "[import][torch]") {
  const std::string bandwidth = R"j("Communication Bandwidth Info": {"SDMA": {"Transit Size(MB)": 1}})j";
  CHECK_THROWS_WITH(parse_communication_json(one_op(R"j({"Communication Time Info": {"Elapse Time(ms)": "0.4"}, )j" +
                                                    bandwidth + "}"),
                                             "c.json"),
                    Contains("c.json at $.step1.collective.hcom_allReduce__844_1_1@1.Communication Time "
                             "Info.Elapse Time(ms)") &&
                        Contains("expected a number >= 0"));
  CHECK_THROWS_WITH(
      parse_communication_json(one_op(R"j({"Communication Time Info": {"Elapse Time(ms)": 1e300}, )j" + bandwidth + "}"), "c.json"),
      Contains("Communication Time Info.Elapse Time(ms)") && Contains("longer than the limit of 10^6 s"));
  CHECK_THROWS_WITH(parse_communication_json(one_op(R"j({"Communication Time Info": {}, )j" + bandwidth + "}"), "c.json"),
                    Contains("Communication Time Info.Elapse Time(ms)") && Contains("missing required key"));
  CHECK_THROWS_WITH(
      parse_communication_json(one_op(R"j({"Communication Time Info": {"Elapse Time(ms)": 1},
                                          "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 1}}})j"),
                               "c.json"),
      Contains("Communication Bandwidth Info") && Contains("neither SDMA nor RDMA"));
  CHECK_THROWS_WITH(
      parse_communication_json(one_op(R"j({"Communication Time Info": {"Elapse Time(ms)": 1},
                                          "Communication Bandwidth Info": {"RDMA": {"Transit Size(MB)": -3}}})j"),
                               "c.json"),
      Contains("Communication Bandwidth Info.RDMA.Transit Size(MB)") && Contains("number -3"));
  CHECK_THROWS_WITH(parse_communication_json(parse_json_text(R"({"step1": {"p2p": {}}})", "c.json"), "c.json"),
                    Contains("c.json at $.step1: missing key 'collective'"));
  CHECK_THROWS_WITH(parse_communication_json(parse_json_text(R"([1, 2])", "c.json"), "c.json"),
                    Contains("c.json at $: expected an object of steps"));
  CHECK_THROWS_WITH(parse_communication_json(parse_json_text(R"({"step1": {"collective": []}})", "c.json"), "c.json"),
                    Contains("c.json at $.step1.collective: expected an object"));
}

// ------------------------------------------------------------ input files

TEST_CASE("inputs are read only from regular files within the size limit", "[import][input]") {
  const std::string fifo = temp_path("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Refused without waiting for a writer.
  CHECK_THROWS_WITH(read_regular_file(fifo, 1024), Contains(fifo + ": cannot read it: it is a FIFO"));
  ::unlink(fifo.c_str());
  CHECK_THROWS_WITH(read_regular_file("/dev/zero", 1024), Contains("/dev/zero: cannot read it: it is a character device"));
  CHECK_THROWS_WITH(read_regular_file("/tmp", 1024), Contains("/tmp: cannot read it: it is a directory"));
  const std::string big = write_temp("big", std::string(2000, 'x'));
  CHECK_THROWS_WITH(read_regular_file(big, 1999), Contains("2000 bytes, more than the limit of 1999 bytes"));
  CHECK(read_regular_file(big, 2000).size() == 2000);
  std::remove(big.c_str());
  CHECK_THROWS_WITH(read_regular_file("/nonexistent/x.log", 10), Contains("/nonexistent/x.log: cannot open file"));
}

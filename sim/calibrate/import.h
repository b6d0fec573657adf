// `hcclsim import`: a user's own measurements as points of a measurement
// file, the format `hcclsim validate` reads (sim/report/validate.h), from
//  - the table hccl_test prints (and `hcclsim perf --format hccl_test`), and
//  - the torch_npu profiler's ASCEND_PROFILER_OUTPUT/communication.json.
// Parsing is strict about what it uses: a bad row or value is InputError
// naming the file and line (the log) or JSON path (communication.json) and
// what was expected; lines and keys it does not use are passed over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/report/validate.h"

namespace hcclsim {

// Inputs are read whole; a larger file is refused.
constexpr std::uint64_t kMaxImportBytes = std::uint64_t{256} << 20;

// Where the points of one import run and how they are named (the options
// every import takes).
struct ImportTarget {
  std::string topology;  // written as given
  int servers = -1;      // -1: not written (the topology as it is)
  int ranks = 0;         // 0: not written (every NPU)
  std::string group;     // empty: a name made from the input file's
};

// What an import made: the points, and what it passed over and why (printed
// as warnings).
struct ImportResult {
  std::vector<MeasuredPoint> points;
  std::vector<std::string> warnings;
};

// --- hccl_test ---

// One row of hccl_test's table.
struct HcclTestRow {
  std::size_t line = 0;        // 1-based, in the log
  std::uint64_t data_size = 0;
  double time_us = 0;          // aveg_time
  double algbw_gbps = 0;
  std::string check;           // success, failed, or NULL (no check)
};

// The rows of every table in `text`. A table is hccl_test's header line
// `data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:`
// (`avg_time` accepted, any spacing) and the lines after it whose first cell
// starts with a digit or that have four cells. Other lines (hccl_test's
// preamble, MPI and HCCL messages) are passed over. `file` names the log in
// errors: "LOG:LINE: ...".
std::vector<HcclTestRow> parse_hccl_test_log(const std::string& text, const std::string& file);

// The name a point takes for a perf op ("all_reduce") or an hccl_test
// binary ("all_reduce_test"); nullopt for anything validate does not run.
std::optional<std::string> measured_op_name(const std::string& name);

// One point a row: metric time_us (aveg_time), size_means hccl_test,
// size_bytes = data_size, id "<group>/<op>/<data_size>", source naming the
// log and line. A row whose check failed is passed over with a warning; a
// data_size given twice is refused. `op` as measured_op_name returns it,
// `dtype` one of data_type_names(), `log` as given (the default group is
// its file name without the extension, a space and the op).
ImportResult hccl_test_points(const std::vector<HcclTestRow>& rows, const std::string& log, const std::string& op,
                              const std::string& dtype, const ImportTarget& target);

// --- torch_npu profiler ---

// communication.json given as the file, the directory holding it
// (ASCEND_PROFILER_OUTPUT), or the profiler's output directory above that.
std::string find_communication_json(const std::string& path);

// One HCCL operator of communication.json (torch_npu's
// profiler/analysis/prof_view/_communication_parser.py writes
// {"<step>": {"collective": {"<op>@<group>": {"Communication Time Info":
// {"Elapse Time(ms)": ...}, "Communication Bandwidth Info": {"<transport>":
// {"Transit Size(MB)": ...}}}, "Total Op Info": ...}, "p2p": {...}}}).
struct CommunicationOp {
  std::string path;        // its JSON path
  std::string step;        // the step's key, "step1" (or "step")
  std::string name;        // its key, "hcom_allReduce__844_2_1@13681369207305868844"
  std::string kind;        // the HCCL op type in its name, lower case: "allreduce"
  double elapse_ms = 0;    // Communication Time Info: Elapse Time(ms)
  double transit_mb = 0;   // Communication Bandwidth Info: Transit Size(MB) of SDMA and RDMA (MB = 10^6 bytes)
};

// Every operator under a step's "collective" (a step's "p2p" operators are
// counted in `p2p_ops`, not returned).
std::vector<CommunicationOp> parse_communication_json(const nlohmann::json& doc, const std::string& file,
                                                      std::size_t* p2p_ops = nullptr);

// One point an operator of a collective validate runs as measured (all
// reduce, all gather, reduce scatter, alltoall): metric time_us = Elapse
// Time, size_means hccl_test with size_bytes = the bytes the rank moved to
// other ranks over the collective's bus factor on `ranks` ranks (the bytes a
// bandwidth-optimal algorithm moves, nccl-tests' busbw definition), dtype
// fp16 (communication.json does not say). Others are passed over with a
// warning per kind. The default group is `default_group`.
ImportResult communication_points(const std::vector<CommunicationOp>& ops, std::size_t p2p_ops,
                                  const std::string& file, int ranks, const ImportTarget& target,
                                  const std::string& default_group);

}  // namespace hcclsim

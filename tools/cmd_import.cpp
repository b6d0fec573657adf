// `hcclsim import hccl-test LOG ...` and `hcclsim import torch-npu-profile
// DIR ...`: the user's own measurements as a measurement file for `hcclsim
// validate` (sim/calibrate/import.h).
#include <filesystem>
#include <iostream>
#include <optional>

#include "sim/calibrate/import.h"
#include "base/input_files.h"
#include "base/json_reader.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

const char* kHcclTestHelp = R"help(Reads the text hccl_test prints (or `hcclsim perf --format hccl_test`): every
table headed `data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:`
(`avg_time` too, any spacing) and its rows `data_size | aveg_time | alg_bandwidth |
check_result`. Other lines (the `the minbytes is ...` preamble, MPI and HCCL
messages) are passed over. Each row becomes a point: metric time_us = aveg_time,
size_bytes = data_size (size_means hccl_test), id <group>/<op>/<data_size>, source
<LOG>, line N. Not read: alg_bandwidth (validate derives it), the preamble's
iterations. A row whose check_result is `failed` is passed over with a warning
naming its line; `NULL` (no check) rows are imported. Refused (exit 2, naming the
line): a log without a table, a row without 4 cells, a cell that is not a number,
a data_size given twice.)help";

const char* kTorchHelp = R"help(Reads communication.json, the torch_npu profiler's per-rank summary of HCCL
operators (DIR/ASCEND_PROFILER_OUTPUT/communication.json; DIR may also be the
ASCEND_PROFILER_OUTPUT directory or the file): for each step, each operator under
"collective" with its "Communication Time Info" "Elapse Time(ms)" and its
"Communication Bandwidth Info" "Transit Size(MB)" of SDMA and RDMA (SDMA already
holds HCCS, PCIE and SIO). hcom_allReduce, hcom_allGather, hcom_reduceScatter and
hcom_alltoall operators become points: metric time_us = Elapse Time, size_bytes =
the transit bytes over the op's bus factor on --ranks ranks (default the
topology's NPUs), which is the data size for bandwidth-optimal algorithms, dtype
fp16 (not recorded), id <group>/<step>/<operator>. Passed over with a warning:
broadcast and reduce (a rank's bytes depend on the root), alltoallv (per-peer
counts not recorded), the "p2p" operators and unknown kinds. Not read: wait,
synchronization and idle times, bandwidths, size distributions, "Total Op Info".
Elapse Time is one rank's operator span including waiting for late peers; the
simulator starts every rank at once.)help";

class ImportCommand : public Command {
 public:
  std::string name() const override { return "import"; }
  std::string summary() const override {
    return "your own measurements (hccl_test output, a torch_npu profile) as a measurement file for validate";
  }

  void declare(CommandOptions& app) override {
    app.require_subcommand(1, 1);
    app.footer("Writes the measurement file `hcclsim validate FILE` reads (docs/calibration.md: the measurement file; "
               "docs/user-guide-import.md). 'hcclsim import hccl-test --help' and 'hcclsim import torch-npu-profile "
               "--help' say what each reads and what it does not.");
    hccl_test_ = app.add_subcommand("hccl-test", "points from the table hccl_test prints");
    hccl_test_->footer(kHcclTestHelp);
    hccl_test_->add_option("log", input_, "hccl_test's output, as printed")->required()->type_name("LOG");
    hccl_test_->add_option("--op", op_, "the collective: all_reduce ... reduce, alltoallv, or hccl_test's binary name "
                                        "(all_reduce_test, ...)")
        ->required()
        ->type_name("OP");
    hccl_test_->add_option("-d,--datatype", dtype_, "hccl_test's -d: fp32 (hccl_test's default) | fp16 | bf16 (bfp16) | "
                                                    "int8 | int16 | int32 | int64")
        ->type_name("DTYPE");
    npus_opt_ = hccl_test_->add_option("-p,--npus", npus_, "hccl_test's -p, NPUs per server: on one server the ranks; on a "
                                                           "cluster it must equal the topology's")
                    ->type_name("N");
    hccl_test_target_ = declare_target(*hccl_test_, "hccl_test's ranks (default every NPU of the topology)");

    torch_ = app.add_subcommand("torch-npu-profile", "points from a torch_npu profile's communication.json");
    torch_->footer(kTorchHelp);
    torch_->add_option("dir", input_, "the profiler's output directory, its ASCEND_PROFILER_OUTPUT, or communication.json")
        ->required()
        ->type_name("DIR");
    torch_target_ = declare_target(*torch_, "the ranks of the profiled communicator, for the size (default every NPU of "
                                            "the topology)");
  }

  int run(CommandContext& ctx) override {
    check_replaceable("--out", out_);
    const TargetOptions& options = hccl_test_->parsed() ? hccl_test_target_ : torch_target_;
    const std::optional<int> servers = given(options.servers, servers_);
    if (servers) checked_int("--servers", *servers, 1, 1 << 16);
    const TopologySpec spec = load_point_topology(topology_, servers.value_or(-1));
    const ImportTarget target{topology_, servers.value_or(-1), 0, group_};
    const std::optional<int> ranks = given(options.ranks, ranks_);
    std::string description;
    const ImportResult result = hccl_test_->parsed() ? from_hccl_test(spec, target, ranks, &description)
                                                     : from_profile(spec, target, ranks, &description);
    for (const std::string& w : result.warnings) std::cerr << "hcclsim: warning: " << printable(w) << "\n";
    if (result.points.empty()) {
      throw InputError(input_, result.warnings.empty() ? "nothing to import: it holds no HCCL operator"
                                                       : "nothing to import: every entry was passed over (warnings above)");
    }
    write_file_atomically("--out", out_, measurements_json(result.points, description));
    *ctx.out << result.points.size() << " point(s) of group '" << printable(result.points.front().group)
             << "' written to " << printable(out_) << "\n";
    return 0;
  }

 private:
  // The options both kinds of import take: where the points run, how they
  // are named, where they go. Both bind the same variables (one kind runs).
  struct TargetOptions {
    CommandOption* servers = nullptr;
    CommandOption* ranks = nullptr;
  };
  TargetOptions declare_target(CommandOptions& sub, const std::string& ranks_help) {
    sub.add_option("--topology", topology_, "topology JSON the points run on (written as given)")
        ->required()
        ->type_name("FILE");
    TargetOptions options;
    options.servers = sub.add_option("--servers", servers_, "servers of a cluster topology")->type_name("N");
    options.ranks = sub.add_option("--ranks", ranks_, ranks_help)->type_name("N");
    sub.add_option("--group", group_, "the points' group (default made from the input's name)")->type_name("NAME");
    sub.add_option("--out", out_, "the measurement file to write (replaced only once complete)")
        ->required()
        ->type_name("FILE");
    return options;
  }

  ImportResult from_hccl_test(const TopologySpec& spec, ImportTarget target, std::optional<int> ranks,
                              std::string* description) const {
    const std::optional<std::string> op = measured_op_name(op_);
    if (!op) {
      throw InputError("option --op", "unknown collective '" + op_ + "'; expected one of: " +
                                          join(measured_collective_ops()) + " (or hccl_test's names: all_reduce_test, ...)");
    }
    const std::optional<DataType> dtype = parse_hccl_test_data_type(dtype_);
    if (!dtype) {
      throw InputError("option -d", "unknown value '" + dtype_ + "'; expected one of: " + join(data_type_names()) +
                                        " (hccl_test's others are not simulated)");
    }
    target.ranks = hccl_test_ranks(spec, topology_, ranks, given(npus_opt_, npus_), 0);
    const std::vector<HcclTestRow> rows = parse_hccl_test_log(read_regular_file(input_, kMaxImportBytes), input_);
    *description = "hccl_test's measurements of " + *op + " from " + input_ + " (hcclsim import hccl-test)";
    return hccl_test_points(rows, input_, *op, data_type_name(*dtype), target);
  }

  ImportResult from_profile(const TopologySpec& spec, ImportTarget target, std::optional<int> ranks,
                            std::string* description) const {
    target.ranks = hccl_test_ranks(spec, topology_, ranks, std::nullopt, 0);
    const std::string file = find_communication_json(input_);
    const nlohmann::json doc = parse_json_text(read_regular_file(file, kMaxImportBytes), file);
    std::size_t p2p_ops = 0;
    const std::vector<CommunicationOp> ops = parse_communication_json(doc, file, &p2p_ops);
    *description = "HCCL operators of a torch_npu profile, " + file + " (hcclsim import torch-npu-profile)";
    return communication_points(ops, p2p_ops, file, target.ranks > 0 ? target.ranks : spec.npus, target,
                                profile_name(file));
  }

  // The default group of a profile: the profiler's output directory's name
  // (".../rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json" -> "rank0_ascend_pt").
  static std::string profile_name(const std::string& file) {
    namespace fs = std::filesystem;
    fs::path dir = fs::path(file).parent_path();
    std::error_code ec;
    dir = fs::weakly_canonical(fs::absolute(dir.empty() ? fs::path(".") : dir), ec);
    if (dir.filename() == "ASCEND_PROFILER_OUTPUT") dir = dir.parent_path();
    const std::string name = dir.filename().string();
    return name.empty() ? "torch_npu profile" : name;
  }

  CommandOptions* hccl_test_ = nullptr;
  CommandOptions* torch_ = nullptr;
  std::string input_;
  std::string op_;
  std::string dtype_ = "fp32";  // hccl_test's default
  int npus_ = 0;
  std::string topology_;
  int servers_ = -1;
  int ranks_ = 0;
  std::string group_;
  std::string out_;
  CommandOption* npus_opt_ = nullptr;
  TargetOptions hccl_test_target_;
  TargetOptions torch_target_;
};

}  // namespace

std::unique_ptr<Command> make_import_command() { return std::make_unique<ImportCommand>(); }

}  // namespace hcclsim

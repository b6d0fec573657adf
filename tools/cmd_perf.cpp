// `hcclsim perf <op>`: hccl_test on the simulator. Takes hccl_test's own
// command line (the binaries' names as <op>, -b -e -f -d -o -r -p -n -w -c)
// and hcclsim's options; writes each row as its size finishes.
#include <iostream>
#include <optional>

#include "sim/executors/hccl_algo.h"
#include "sim/perf/perf.h"
#include "sim/report/link_stats.h"
#include "sim/report/row_transport.h"
#include "sim/report/row_writer.h"
#include "tools/baseline_output.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

class PerfCommand : public Command {
 public:
  std::string name() const override { return "perf"; }
  std::string summary() const override { return "hccl_test-style sweep of one collective over sizes"; }
  bool parallel() const override { return true; }

  void declare(CommandOptions& app) override {
    app.add_option("op", op_,
                   "all_reduce | all_gather | reduce_scatter | alltoall | alltoallv | broadcast | reduce, "
                   "or hccl_test's binary name (all_reduce_test, ...)")
        ->required();
    topology_.declare(app);
    ranks_opt_ = app.add_option("--ranks", ranks_,
                                "ranks 0..N-1 take part (default: every NPU; more than one server: whole servers)")
                     ->type_name("N");
    sweep_.declare(app);
    app.add_option("-d,--datatype", dtype_, "fp32 | fp16 | bf16 (bfp16) | int8 | int16 | int32 | int64 (default fp16)")
        ->type_name("DTYPE");
    app.add_option("-o,--op", reduce_op_, "sum | prod | max | min (default sum)")->type_name("OP");
    app.add_option("-r,--root", root_, "root rank of broadcast / reduce (default 0)")->type_name("ROOT");
    npus_opt_ = app.add_option("-p,--npus", npus_,
                               "hccl_test: NPUs per server; on one server the ranks, on a cluster it must "
                               "equal the topology's NPUs per server")
                    ->type_name("N");
    iters_opt_ = app.add_option("-n,--iters", iters_, "hccl_test iterations (accepted; one deterministic run)")
                     ->type_name("N");
    warmup_opt_ = app.add_option("-w,--warmup_iters", warmup_, "hccl_test warm-up iterations (accepted; none needed)")
                      ->type_name("N");
    check_opt_ = app.add_option("-c,--check", check_, "hccl_test data check: 1 on (default), 0 off (= --no-check)")
                     ->type_name("0|1");
    app.add_option("--vcounts", vcounts_,
                   "alltoallv: how each rank's data_size splits over its peers: uniform (default), random:SEED, "
                   "zipf:S")
        ->type_name("DIST");
    algo_opt_ = app.add_option("--algo", algo_,
                   "HCCL_ALGO syntax, e.g. \"level0:ring\", \"level0:NA;level1:NHR\", "
                   "\"allreduce=level1:H-D_R/allgather=level0:NA\"; NA = HCCL's choice; level1/level2: ring, "
                   "H-D_R, NHR, NB, pairwise; level1 also pipeline (A2 clusters)")
        ->type_name("SPEC");
    app.add_option("--buffsize", buffsize_, "HCCL_BUFFSIZE, the HCCL buffer per rank (default: the profile's)")
        ->type_name("SIZE");
    app.add_option("--mode", mode_, "HCCL's workflow mode: opbase (default, as hccl_test and torch) | graph")
        ->type_name("M");
    app.add_option("--expansion", expansion_,
                   "HCCL_OP_EXPANSION_MODE: host | aicpu | aiv (default: host on A2, aicpu on A3); aiv runs the "
                   "collective as AI Vector core kernels")
        ->type_name("E");
    app.add_flag("--deterministic", deterministic_,
                 "HCCL_DETERMINISTIC=true (executors HCCL then selects that hcclsim does not model are refused by name)");
    app.add_option("--executor", executor_,
                   "run this HCCL executor instead of HCCL's choice (list: hcclsim executors)")
        ->type_name("NAME");
    app.add_option("--format", format_,
                   "table | csv | json | jsonl | hccl_test (default table); a json / jsonl row's \"executor_rule\" "
                   "is the selection rule that chose its executor (thresholds: the profile's npu.hccl_selection) and "
                   "its \"assumed\" lists the profile's assumed constants its tasks used; a table ends with both "
                   "(csv and hccl_test: unchanged)")
        ->type_name("F");
    app.add_option("--out", out_file_, "write the rows to FILE instead of stdout")->type_name("FILE");
    app.add_option("--trace", trace_file_, "write a Chrome trace-event JSON (Perfetto, MindStudio Insight)")
        ->type_name("FILE");
    app.add_option("--save-baseline", baseline_file_,
                   "record the command, version, input files and times for 'hcclsim check'")
        ->type_name("FILE");
    memory_limit_.declare(app);
    scenario_.declare(app);
    app.add_option("--model", model_,
                   "detailed (default): the executor's task graph on the SystemC model; estimate: the same "
                   "executor's task order in closed form (ranks of one server each followed, else one "
                   "representative rank; each step's flows at max-min shares), no SystemC, no data check, trace, "
                   "link usage or --scenario (refused, exit 2), milliseconds a point at 100,000 NPUs (an AlltoAll's first point up to about 25 ms on 2 cores: "
                   "it solves each step pattern's shares once for the sweep, on the machine's cores; Broadcast and "
                   "Reduce across up to 1024 A2 NPUs follow every write, up to about 0.25 s a point). Leaves out "
                   "flows of different steps "
                   "overlapping in time (AlltoAll counts neighbouring steps' flows as a share instead; beyond 64 "
                   "pairwise steps whose pairs all cross the spines, 32 are solved and the others take their shares, "
                   "rotated); mean 0.4%, at most 7.7% from detailed on the tested grid (docs/estimate.md; AlltoAll "
                   "from 256M across leaves 6-8% fast); the AIV executors (one server) within 0.1%")
        ->type_name("M");
    app.add_flag("--no-check", no_check_, "skip the data check (check_result shows \"skipped\")");
    app.add_option("--links", links_file_,
                   "write every link direction's bytes, busy time, utilization and peak concurrent flows per row "
                   "as CSV (row,data_size,link,kind,bytes,busy_us,utilization,peak_flows)")
        ->type_name("FILE");
    app.add_flag("--stats", stats_,
                 "print wall time, tasks, events/s, peak memory, the time spent per row (the first apart: it builds "
                 "what the others reuse) and the 10 busiest links (over all rows) to stderr");
  }

  int run(CommandContext& ctx) override;

 private:
  std::string op_;
  TopologyOptions topology_;
  MemoryLimit memory_limit_;
  ScenarioOptions scenario_;
  int ranks_ = 0;
  SizeSweepOptions sweep_;
  std::string dtype_ = "fp16";
  std::string reduce_op_ = "sum";
  int root_ = 0;
  int npus_ = 0;
  int iters_ = 20;   // hccl_test's defaults
  int warmup_ = 10;
  int check_ = 1;
  std::string vcounts_;
  std::string algo_;
  std::string buffsize_;
  std::string mode_ = "opbase";
  std::string expansion_;
  bool deterministic_ = false;
  std::string executor_;
  std::string format_ = "table";
  std::string out_file_;
  std::string trace_file_;
  std::string baseline_file_;
  std::string links_file_;
  bool no_check_ = false;
  std::string model_ = "detailed";
  bool stats_ = false;
  CommandOption* ranks_opt_ = nullptr;
  CommandOption* npus_opt_ = nullptr;
  CommandOption* iters_opt_ = nullptr;
  CommandOption* warmup_opt_ = nullptr;
  CommandOption* check_opt_ = nullptr;
  CommandOption* algo_opt_ = nullptr;
};

int PerfCommand::run(CommandContext& ctx) {
  // hccl_test's binaries are named all_reduce_test, alltoallv_test, ...
  const std::string op_name = hccl_test_op_name(op_);
  const bool alltoallv = op_name == "alltoallv";
  const auto op = alltoallv ? std::optional<CollOp>(CollOp::AlltoAll) : parse_coll_op(op_name);
  if (!op) {
    throw InputError("<op>", "unknown collective '" + op_ + "'; expected one of: " + join(coll_op_names()) +
                                 ", alltoallv (or hccl_test's names: all_reduce_test, ...)");
  }
  const std::optional<RowFormat> format = parse_row_format(format_);
  if (!format) {
    throw InputError("option --format", "unknown format '" + format_ + "'; expected one of: " + join(row_format_names()));
  }
  std::string topology_file;
  const TopologySpec spec = topology_.load(&topology_file);

  PerfRequest req;
  req.op = *op;
  req.ranks = hccl_test_ranks(spec, topology_file, given(ranks_opt_, ranks_), given(npus_opt_, npus_), spec.npus);
  req.dtype = checked_data_type(dtype_);
  const std::optional<ReduceOp> reduce_op = parse_reduce_op(reduce_op_);
  if (!reduce_op) {
    throw InputError("option -o", "unknown value '" + reduce_op_ + "'; expected one of: " + join(reduce_op_names()));
  }
  req.reduce_op = *reduce_op;
  req.root = checked_int("-r", root_, 0, req.ranks - 1, "the root must be one of the ranks");
  req.buffer_bytes = buffsize_.empty() ? spec.npu.hccl_buffer_bytes : checked_size("--buffsize", buffsize_);
  if (req.buffer_bytes == 0) throw InputError("option --buffsize", "the HCCL buffer cannot be empty; expected a size above 0");
  if (check_opt_->count() > 0) {
    if (check_ != 0 && check_ != 1) {
      throw InputError("option -c", "expected 0 (no data check) or 1 (data check), got " + std::to_string(check_));
    }
    if (check_ == 1 && no_check_) throw InputError("option -c", "-c 1 asks for the data check and --no-check turns it off");
  }
  req.check = !no_check_ && check_ != 0;
  if (iters_opt_->count() > 0) checked_int("-n", iters_, 0, 1 << 30);
  if (warmup_opt_->count() > 0) checked_int("-w", warmup_, 0, 1 << 30);
  if (algo_opt_->count() > 0 && algo_.find_first_not_of(" \t") == std::string::npos) {
    throw InputError("option --algo", "empty value; give an HCCL_ALGO string such as \"level0:ring\", or leave "
                                      "--algo out for HCCL's choice");
  }
  req.algo = parse_algo(algo_, *op);
  const std::optional<WorkflowMode> mode = parse_workflow_mode(mode_);
  if (!mode) throw InputError("option --mode", "unknown value '" + mode_ + "'; expected one of: opbase, graph");
  req.mode = *mode;
  if (!expansion_.empty()) {
    req.expansion = parse_expansion(expansion_);
    if (!req.expansion) throw InputError("option --expansion", "unknown value '" + expansion_ + "'; expected one of: host, aicpu, aiv");
  }
  req.deterministic = deterministic_;
  req.executor = executor_;
  if (!executor_.empty() && find_executor(executor_) == nullptr) {
    std::vector<std::string> names;
    for (const Executor& e : executors()) names.push_back(e.name);
    throw InputError("option --executor", "unknown executor '" + executor_ + "'; expected one of: " + join(names));
  }
  if (!vcounts_.empty() && !alltoallv) throw InputError("option --vcounts", "only alltoallv takes per-peer counts");
  if (alltoallv) {
    req.alltoallv_distribution = vcounts_.empty() ? "uniform" : vcounts_;
    try {
      alltoallv_counts(req.alltoallv_distribution, 2, 2);
    } catch (const std::invalid_argument& e) {
      throw InputError("option --vcounts", e.what());
    }
  }
  const std::vector<std::uint64_t> sizes = sweep_.sizes();
  const std::uint64_t last = checked_size("-e", sweep_.last);
  for (const std::uint64_t s : sizes) {
    const std::string problem = perf_size_problem(req.op, op_name, req.ranks, req.dtype, s);
    if (!problem.empty()) throw InputError("option -b", problem);
  }
  if (model_ != "detailed" && model_ != "estimate") {
    throw InputError("option --model", "unknown value '" + model_ + "'; expected detailed or estimate");
  }
  const bool estimate = model_ == "estimate";
  if (estimate) {
    for (const auto& [given, option] : {std::pair{!trace_file_.empty(), "--trace"}, std::pair{!links_file_.empty(), "--links"}}) {
      if (given) throw InputError(std::string("option ") + option, std::string(option) + " needs the detailed model's tasks and links; --model estimate has none");
    }
    // (its AlltoAllV form follows even counts: an uneven one came out as fast as the even one)
    if (req.alltoallv_distribution != "uniform" && !vcounts_.empty()) {
      throw InputError("option --vcounts", "--model estimate follows even per-peer counts only; give --model detailed "
                                           "for '" + vcounts_ + "'");
    }
    req.check = false;
  }
  const std::optional<ScenarioSetup> scenario = scenario_.load(spec);
  if (scenario) {
    if (estimate) {
      throw InputError("option --scenario", "--model estimate has no scenarios (its closed forms take the healthy "
                                            "links only); use --model detailed");
    }
    if (!trace_file_.empty()) {
      throw InputError("option --trace", "--scenario runs each size several times (healthy, then each draw); a trace "
                                         "of one of them is not written: leave --trace out");
    }
    if (ctx.group->size() > 1) throw InputError("option --scenario", "a scenario runs in one process; run without mpirun");
  }
  // Refused before anything is allocated (docs/user-guide.md: limits); the estimate
  // allocates little but walks every HCCL-buffer loop.
  const std::string too_large =
      estimate ? estimate_problem(req, sizes.back())
               : footprint_problem(estimate_perf_row(spec, req, sizes.back()),
                                   op_name + " of " + format_size(sizes.back()) + " on " + std::to_string(req.ranks) +
                                       " ranks of " + std::to_string(spec.npus) + " NPUs",
                                   memory_limit_.bytes());
  if (!too_large.empty()) throw InputError(sizes.size() > 1 ? "option -e" : "option -b/-e", too_large);
  ProcessGroup& group = *ctx.group;
  if (!trace_file_.empty() && group.size() > 1) {
    throw InputError("option --trace", "a trace needs one process (the sizes run by other MPI processes are not "
                                       "gathered); run without mpirun");
  }

  try {
    hierarchy_of(spec, req.ranks);
  } catch (const std::invalid_argument& e) {
    throw InputError("option --ranks", e.what());
  }

  // Every output is opened before the run: a bad path fails now, not after it.
  std::optional<OutputFile> out_file;
  std::optional<OutputFile> trace_out;
  std::optional<BaselineOutput> baseline;
  std::optional<OutputFile> links_out;
  if (ctx.root() && !ctx.replay) {
    if (!out_file_.empty()) out_file.emplace("--out", out_file_);
    if (!links_file_.empty()) {
      links_out.emplace("--links", links_file_);
      write_links_csv_header(links_out->stream());
    }
    if (!trace_file_.empty()) trace_out.emplace("--trace", trace_file_);
    if (!baseline_file_.empty()) baseline.emplace(baseline_file_);
  }
  if (ctx.root() && !ctx.replay && (iters_opt_->count() > 0 || warmup_opt_->count() > 0)) {
    std::cerr << "hcclsim: note: -n/-w: the simulator is deterministic, so it runs each size once (no warm-up "
                 "needed); that time is what every iteration would take\n";
  }

  std::ostream& out = out_file ? out_file->stream() : *ctx.out;
  const std::string title = alltoallv ? "AlltoAllV (" + req.alltoallv_distribution + ")" : coll_op_title(req.op);
  RowWriter writer(out, *format,
                   title + " on " + std::to_string(req.ranks) + " ranks of " + spec.name + ", " +
                       data_type_name(req.dtype),
                   HcclTestPreamble{sizes.front(), last, iters_, warmup_}, spec.profile_file);
  Progress progress("perf " + op_name, sizes.size(), ctx.root() && !ctx.replay);
  bool failed_check = false;
  std::uint64_t tasks = 0;
  std::uint64_t events = 0;
  RunRecord record{"perf", {}};
  LinkTotals link_totals;
  std::size_t row_index = 0;
  std::vector<double> row_seconds;   // this process's rows, for --stats
  req.link_details = !ctx.replay && (stats_ || !links_file_.empty());

  // Sizes go round robin over the MPI processes; rank 0 writes every row in order.
  const std::vector<int> owners = assign_round_robin(sizes.size(), group.size());
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (owners[i] == group.rank()) mine.push_back(i);
  }
  OrderedGather gather(group, owners, [&](std::size_t, const std::string& text) {
    const PerfRow row = deserialize_perf_row(text);
    writer.row(row);
    if (links_out) write_links_csv(links_out->stream(), std::to_string(row_index), std::to_string(row.data_size), row.links);
    if (stats_) link_totals.add(row.links, row.time);
    ++row_index;
    progress.step(format_size(row.data_size));
    if (row.check.rfind("fail", 0) == 0) failed_check = true;
    record.items.push_back(perf_row_item(row.op_name, row.data_size, row.algo, static_cast<double>(row.time.ps) / 1e6));
  });
  req.sizes.clear();
  for (const std::size_t i : mine) req.sizes.push_back(sizes[i]);
  WallClock clock;
  TraceWriter trace;
  std::optional<OrderedGather::Failure> failure;
  try {
    const PerfRowCallback on_row = [&](std::size_t i, const PerfRow& row) {
      row_seconds.push_back(row.seconds);
      tasks += row.tasks;
      events += row.activations;
      gather.local(mine[i], serialize_perf_row(row));
    };
    if (estimate) {
      try {
        estimate_perf(spec, req, on_row);
      } catch (const std::invalid_argument& e) {
        throw InputError("option --model", e.what());
      }
    } else if (scenario) {
      run_perf_scenario(platform_kept_until_exit(spec), req, *scenario, on_row);
    } else {
      run_perf(platform_kept_until_exit(spec), req, trace_out ? &trace : nullptr, on_row);
    }
    failure = gather.finish();
  } catch (const InputError& e) {
    failure = gather.fail(2, e.what());
    if (!failure) return 2;
  } catch (const GraphError& e) {
    failure = gather.fail(1, e.what());
    if (!failure) return 1;
  }
  progress.done();
  if (failure) {
    if (failure->exit_code == 2) throw InputError("", failure->message);
    throw GraphError(failure->message);
  }
  if (!ctx.root()) return 0;
  writer.finish();
  if (out_file) out_file->close();
  if (trace_out) {
    trace.write(trace_out->stream());
    trace_out->close();
  }
  if (links_out) links_out->close();
  if (stats_ && !ctx.replay) {
    print_stats(clock, tasks, events);
    print_row_times(row_seconds);
    std::cerr << format_busiest_links(link_totals.links(), 10,
                                      "stats: busiest links over " + std::to_string(row_index) + " row(s)");
  }
  if (ctx.record) *ctx.record = record;
  if (baseline) {
    if (failed_check) {
      std::cerr << "hcclsim: no baseline written: a row failed its data check\n";
    } else {
      baseline->write(ctx.words, record);
    }
  }
  return failed_check ? 1 : 0;
}

}  // namespace

std::unique_ptr<Command> make_perf_command() { return std::make_unique<PerfCommand>(); }

}  // namespace hcclsim

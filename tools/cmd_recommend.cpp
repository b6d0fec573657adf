// `hcclsim recommend`: for each op and size, HCCL's default choice, the best
// HCCL_ALGO / HCCL_OP_EXPANSION_MODE setting hcclsim finds among the
// candidates valid for the topology, and the predicted gain (issue 43, item
// 2). The candidates run as perf requests (sim/report/recommend.h).
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "sim/perf/perf.h"
#include "sim/report/recommend.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

const std::vector<std::string> kDefaultOps{"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce"};

class RecommendCommand : public Command {
 public:
  std::string name() const override { return "recommend"; }
  std::string summary() const override {
    return "for each op and size: HCCL's default choice, the best HCCL_ALGO / HCCL_OP_EXPANSION_MODE hcclsim finds "
           "and the predicted gain; as a table, JSON, or the lines to export";
  }

  void declare(CommandOptions& app) override {
    topology_.declare(app);
    ranks_opt_ = app.add_option("--ranks", ranks_,
                                "ranks 0..N-1 take part (default: every NPU; more than one server: whole servers)")
                     ->type_name("N");
    ops_opt_ = app.add_option("--ops", ops_,
                   "comma-separated ops (default all_reduce,all_gather,reduce_scatter,alltoall,broadcast,reduce)")
        ->type_name("LIST");
    sweep_.declare(app);
    app.add_option("-d,--datatype", dtype_, "fp32 | fp16 | bf16 (bfp16) | int8 | int16 | int32 | int64 (default fp16)")
        ->type_name("DTYPE");
    app.add_option("--buffsize", buffsize_, "HCCL_BUFFSIZE, the HCCL buffer per rank (default: the profile's)")
        ->type_name("SIZE");
    app.add_option("--model", model_,
                   "estimate | detailed (default: per op, the estimate (closed forms, fast) when it has a closed form "
                   "for every executor the op's candidates select, else detailed (SystemC); the table and JSON say "
                   "which). With estimate, a candidate without a closed form is skipped")
        ->type_name("M");
    app.add_option("--format", format_,
                   "table | json | env (default table); env: the export lines of the per-process setting with the "
                   "least time summed over the sizes (nothing to export when HCCL's default is best)")
        ->type_name("F");
    app.add_option("--out", out_file_, "write the output to FILE instead of stdout")->type_name("FILE");
    memory_limit_.declare(app);
    app.footer(
        "Candidates: HCCL_ALGO with every level the topology has (level0 NA | fullmesh | ring; level1, more than one "
        "server: NA | ring | H-D_R | NHR | NB | pairwise | pipeline; level2, more than one A3 supernode: NA | ring | "
        "H-D_R | NHR | NB | pairwise) x HCCL_OP_EXPANSION_MODE (A2: host, aiv; A3: aicpu, aiv). A candidate HCCL "
        "refuses for the op and size, or whose executor hcclsim does not model, is skipped. Candidates that select "
        "the same executor and levels run once. The default is what perf runs without --algo and --expansion; a "
        "candidate must be strictly faster to replace it. gain_% = default time / best time - 1.");
  }

  int run(CommandContext& ctx) override;

 private:
  TopologyOptions topology_;
  MemoryLimit memory_limit_;
  SizeSweepOptions sweep_;
  int ranks_ = 0;
  std::string ops_;
  std::string dtype_ = "fp16";
  std::string buffsize_;
  std::string model_;
  std::string format_ = "table";
  std::string out_file_;
  CommandOption* ranks_opt_ = nullptr;
  CommandOption* ops_opt_ = nullptr;
};

std::vector<CollOp> parse_ops(const std::string& text, bool given) {
  if (given && text.find_first_not_of(" \t") == std::string::npos) {
    throw InputError("option --ops", "empty value; give a comma-separated list of: " + join(coll_op_names()) +
                                         ", or leave --ops out for all of them");
  }
  std::vector<std::string> names;
  if (text.empty()) {
    names = kDefaultOps;
  } else {
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, ',')) names.push_back(item);
    if (text.back() == ',') names.push_back("");
  }
  std::vector<CollOp> ops;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    const std::optional<CollOp> op = parse_coll_op(hccl_test_op_name(name));
    if (!op) {
      throw InputError("option --ops", "unknown op '" + name + "'; expected a comma-separated list of: " +
                                           join(coll_op_names()));
    }
    if (!seen.insert(coll_op_name(*op)).second) {
      throw InputError("option --ops", "'" + coll_op_name(*op) + "' is given twice; give each op once");
    }
    ops.push_back(*op);
  }
  return ops;
}

int RecommendCommand::run(CommandContext& ctx) {
  const std::vector<CollOp> ops = parse_ops(ops_, ops_opt_->count() > 0);
  if (format_ != "table" && format_ != "json" && format_ != "env") {
    throw InputError("option --format", "unknown format '" + format_ + "'; expected table, json or env");
  }
  RecommendModel model = RecommendModel::Auto;
  if (model_ == "estimate") {
    model = RecommendModel::Estimate;
  } else if (model_ == "detailed") {
    model = RecommendModel::Detailed;
  } else if (!model_.empty()) {
    throw InputError("option --model", "unknown value '" + model_ + "'; expected detailed or estimate");
  }
  std::string topology_file;
  const TopologySpec spec = topology_.load(&topology_file);
  PerfRequest base;
  base.ranks = hccl_test_ranks(spec, topology_file, given(ranks_opt_, ranks_), std::nullopt, spec.npus);
  base.dtype = checked_data_type(dtype_);
  base.buffer_bytes = buffsize_.empty() ? spec.npu.hccl_buffer_bytes : checked_size("--buffsize", buffsize_);
  if (base.buffer_bytes == 0) throw InputError("option --buffsize", "the HCCL buffer cannot be empty; expected a size above 0");
  base.check = false;
  const std::vector<std::uint64_t> sizes = sweep_.sizes();
  for (const CollOp op : ops) {
    for (const std::uint64_t s : sizes) {
      const std::string problem = perf_size_problem(op, coll_op_name(op), base.ranks, base.dtype, s);
      if (!problem.empty()) throw InputError("option -b", problem);
    }
  }
  Hierarchy hierarchy;
  try {
    hierarchy = hierarchy_of(spec, base.ranks);
  } catch (const std::invalid_argument& e) {
    throw InputError("option --ranks", e.what());
  }
  // Refused before anything runs, as perf does: the estimate walks every
  // HCCL-buffer loop; the detailed model allocates the largest row.
  const std::string too_large_for_estimate = estimate_problem(base, sizes.back());
  if (!too_large_for_estimate.empty()) {
    if (model == RecommendModel::Estimate) throw InputError("option -e", too_large_for_estimate);
    model = RecommendModel::Detailed;
  }
  auto footprint = [&](const PerfRequest& req, std::uint64_t size) {
    return footprint_problem(estimate_perf_row(spec, req, size),
                             coll_op_name(req.op) + " of " + format_size(size) + " on " + std::to_string(req.ranks) +
                                 " ranks of " + std::to_string(spec.npus) + " NPUs",
                             memory_limit_.bytes());
  };
  if (model == RecommendModel::Detailed) {
    for (const CollOp op : ops) {
      PerfRequest req = base;
      req.op = op;
      if (const std::string why = footprint(req, sizes.back()); !why.empty()) throw InputError("option -e", why);
    }
  }

  std::optional<OutputFile> out_file;
  if (!out_file_.empty()) out_file.emplace("--out", out_file_);
  std::ostream& out = out_file ? out_file->stream() : *ctx.out;

  const std::vector<RecommendCandidate> candidates = recommend_candidates(hierarchy, spec.npu.hccl_api);
  Platform* platform = nullptr;  // built when an op first needs the detailed model
  const RecommendRunner runner = [&](const PerfRequest& req, bool estimate) {
    if (estimate) return estimate_perf(spec, req);
    if (const std::string why = footprint(req, req.sizes.back()); !why.empty()) throw InputError("option -e", why);
    if (platform == nullptr) platform = &platform_kept_until_exit(spec);
    return run_perf(*platform, req);
  };
  Progress progress("recommend", ops.size(), !ctx.replay);
  std::vector<RecommendOp> results;
  for (const CollOp op : ops) {
    PerfRequest req = base;
    req.op = op;
    try {
      results.push_back(recommend_op(spec, req, sizes, candidates, model, runner));
    } catch (const std::invalid_argument& e) {
      throw InputError(model == RecommendModel::Estimate ? "option --model" : "recommend " + coll_op_name(op), e.what());
    }
    for (const std::string& note : results.back().notes) std::cerr << "hcclsim: note: " << note << "\n";
    progress.step(coll_op_name(op));
  }
  progress.done();

  const std::string heading = std::to_string(base.ranks) + " ranks of " + spec.name + ", " +
                              data_type_name(base.dtype) + ", data_size " + format_size(sizes.front()) +
                              (sizes.size() > 1 ? ".." + format_size(sizes.back()) : "");
  if (format_ == "table") {
    write_recommend_table(out, heading, results, candidates.size());
  } else if (format_ == "json") {
    out << recommend_json(results).dump(2) << "\n";
  } else {
    write_recommend_env(out, heading, results, candidates, spec.npu.hccl_api);
  }
  out.flush();
  if (out_file) out_file->close();
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_recommend_command() { return std::make_unique<RecommendCommand>(); }

}  // namespace hcclsim

// `hcclsim step`: a training or inference step of a Hugging Face model on a
// parallel layout, every group's communication at once on HCCL's executors,
// with compute (sim/step/step.h says what is modelled).
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "sim/perf/perf.h"
#include "sim/report/row_writer.h"
#include "sim/step/step.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

std::string fmt3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

class StepCommand : public Command {
 public:
  std::string name() const override { return "step"; }
  std::string summary() const override {
    return "a training / inference step of a Hugging Face model on a parallel layout: every group's collectives on "
           "HCCL's executors at once on one fabric, with roofline compute; step time, exposed communication per "
           "group, pipeline bubble, critical path";
  }
  void declare(CommandOptions& app) override {
    app.add_option("--model-config", model_file_,
                   "a Hugging Face config.json as it is (llama / qwen3 dense, qwen3_moe, deepseek_v3 with MLA and "
                   "shared experts, mixtral; examples in configs/models/); with --layout or --search and --batch, unless --chakra. "
                   "Simplified: an MoE layer's compute is its GEMMs at the dense rate, router and permutation, optimistic "
                   "(the one measured MoE step ran 1.75x longer; docs/calibration.md)")
        ->type_name("FILE");
    app.add_option("--chakra", chakra_dir_,
                   "run a Chakra execution-trace workload instead of a model: DIR holds PREFIX.<rank>.et per rank (as "
                   "ASTRA-sim and PARAM take them) and optionally comm_group.json ({\"<pg id>\": [ranks]}, a node's "
                   "pg_name attribute). Compute nodes at their duration_micros, in dependency order on their rank's "
                   "compute stream; collective nodes (comm_size: a rank's whole buffer, as ASTRA-sim reads it; bf16) on "
                   "HCCL's executors once every member has reached them; send/recv as a 2-rank Broadcast; Barrier as an "
                   "8-byte AllReduce (assumed); Gather and Scatter are refused")
        ->type_name("DIR");
    app.add_option("--export-chakra", export_dir_,
                   "also write the step as Chakra execution traces into DIR (created if missing; refused if it already "
                   "holds traces): PREFIX step.<rank>.et and comm_group.json; compute durations rounded to whole "
                   "microseconds, collectives with comm_type, comm_size and pg_name")
        ->type_name("DIR");
    app.add_option("--layout", layout_,
                   "tp=N,pp=N,dp=N[,ep=N][,cp=N][,vpp=N][,etp=N]; ranks in Megatron's order tp-cp-ep-dp-pp (TP "
                   "fastest), EP groups are ep consecutive DP ranks (ep divides dp); etp (expert tensor parallelism) 1 "
                   "(default: experts whole on a rank) or tp (each expert's FFN split over the TP group, Megatron's "
                   "default: a TP AllGather of the dispatched tokens before the experts and a ReduceScatter after)")
        ->type_name("L");
    app.add_option("--search", search_,
                   "rank layouts instead of one: \"tp=1,2,4,8;pp=1,2;ep=8,16\" (also cp, vpp, etp, dp; dp left out fills "
                   "the topology); each layout that plans and fits the profile's HBM (bf16 parameters, fp32 "
                   "gradients, 12 bytes of optimizer state per parameter / dp, 34 x s x b x h / (tp x cp) bytes of "
                   "activations per layer and micro-batch in flight, pp - s of them on stage s; the stage that needs "
                   "the most) is timed by "
                   "the estimate and ranked by step time")
        ->type_name("GRID");
    app.add_option("--batch", batch_,
                   "global=N,micro=N,seq=N: sequences per step and per micro-batch, tokens per sequence (decode: the "
                   "context each new token attends)")
        ->type_name("B");
    app.add_option("--phase", phase_,
                   "train (default: 1F1B, interleaved with vpp; backward: a GEMM its two gradients, attention twice its forward, a vector pass its own bytes; distributed optimizer) | "
                   "prefill | decode (forward only, one token per sequence)")
        ->type_name("P");
    app.add_option("--dispatcher", dispatcher_,
                   "MoE token dispatcher: alltoall (default: AlltoAll) | allgather (AllGather + ReduceScatter) | deepep "
                   "(the AIV kernels of hcclsim moe; the estimate times each distinct call once on the detailed "
                   "model, alone on its group; not with --search)")
        ->type_name("D");
    app.add_flag("--no-distributed-optimizer", no_dist_opt_,
                 "plain DDP instead of the distributed optimizer (train): gradients all-reduced in buckets, every "
                 "rank's optimizer over all its parameters, no parameter AllGather after the step (Megatron without "
                 "--use-distributed-optimizer)");
    app.add_flag("--no-overlap-grad-reduce", no_overlap_grad_,
                 "the gradient buckets' collectives wait for the end of the backward instead of starting as each "
                 "bucket's layers are done (Megatron without --overlap-grad-reduce)");
    app.add_flag("--overlap-param-gather", overlap_param_gather_,
                 "the distributed optimizer's parameter AllGathers at the step's start, bucket by bucket, each under "
                 "the forward until the first micro-batch reaches a layer of its bucket (in steady state the gathers "
                 "after one step's optimizer overlap the next step's forward), instead of after the optimizer "
                 "(Megatron's --overlap-param-gather)");
    app.add_option("--num-layer-list", layer_list_,
                   "the layers of each pipeline stage, in order, as MindSpeed's --num-layer-list (e.g. 17,20,22,21 for "
                   "80 layers on pp 4; vpp 1); default: as even as possible, the first stages one more")
        ->type_name("N,N,...");
    app.add_option("--recompute", recompute_,
                   "activation recomputation in training, as Megatron's --recompute-granularity full: none (default); "
                   "full (every layer: --recompute-method uniform --recompute-num-layers 1); block:N (the first N "
                   "layers of each model chunk on a stage: --recompute-method block --recompute-num-layers N). A "
                   "recomputed layer keeps only its input and runs its forward again (compute and its TP, CP and EP "
                   "communication) just before its backward")
        ->type_name("MODE");
    app.add_flag("--mc2", mc2_,
                 "TP communication fused with its matmuls, as MindSpeed's --use-mc2 runs it (torch_npu's AllGather + "
                 "matmul and matmul + ReduceScatter kernels): each TP AllGather and ReduceScatter and its matmul in tp "
                 "pieces (assumed: one per rank's block; the kernels' tiling is not public), piece k of the matmul after "
                 "gathered piece k, scattered piece k after it, so the transfers run under the matmul. A fused kernel is "
                 "launched once (its later pieces pay no op launch). Simplified: each piece is timed as an HCCL "
                 "collective with its handshakes, and small shapes are cut as large ones (the kernels' tiling leaves "
                 "them whole), so on small matmuls the pieces cost more than they hide (tiny-llama at tp 8, seq 512: "
                 "5.3 ms against 2.0 ms). Backward, as MindSpeed, only "
                 "the row-parallel layers' AllGather is fused; a column-parallel layer's ReduceScatter runs under its "
                 "weight gradient. Needs sequence "
                 "parallelism; no effect with tp = 1");
    app.add_flag("--no-sequence-parallel", no_sp_,
                 "TP AllReduce after attention and MLP instead of AllGather before / ReduceScatter after (the default "
                 "with tp > 1)");
    app.add_option("--compute", compute_file_,
                   "measured operator times instead of the roofline: CSV lines operator,shape,us (operators: embedding, "
                   "norm, qkv, rope, attn_core, attn_out, residual, mlp, swiglu, router, permute, experts, "
                   "shared_experts, unpermute, lm_head, cross_entropy, optimizer, a _bwd suffix for backward (else the "
                   "forward x its factor: 2; rope, residual, permute, unpermute 1; swiglu 5/3; cross_entropy 14/38); "
                   "shape as the step writes it, or *; '*,*,us' for all). Simplified: by default a matmul is its 128 x "
                   "256 output blocks in waves over the AIC (each a fixed cost and its K loop), flash attention its "
                   "score blocks (each a softmax cost and two matmuls), vector passes (norms, RoPE, residual adds, "
                   "SwiGLU, MoE permutation, the loss's passes over the fp32 logits) their bytes at HBM's rate, with "
                   "the profile's constants (on A2 fitted to published 7B-72B steps, judged on 0.5B-70B ones: docs/calibration.md); "
                   "recomputation of whole layers only (--recompute), no per-kernel launch cost; MoE layers without grouped-GEMM or routing costs "
                   "(Mixtral's published step is 75% slower); TP collectives block the compute but in a "
                   "column-parallel layer's backward (as Megatron: its input gradient reduce-scattered, or all-reduced "
                   "without sequence parallelism, under the weight gradient; with sequence parallelism the input "
                   "gathered again under the input gradient) and with --mc2; EP "
                   "communication does not overlap compute (CP's ring sends do); a PP or CP send is a 2-rank HCCL Broadcast; uniform MoE routing "
                   "(docs/user-guide.md, \"Training and inference steps\")")
        ->type_name("FILE");
    topology_.declare(app);
    app.add_option("--model", model_,
                   "auto (default): detailed when its tasks fit under --max-memory, else the estimate (said on "
                   "stderr, and \"model\" in the output); detailed: every group's executor graphs appended into one "
                   "task graph on the SystemC model, so groups contend for links (refused over --max-memory); "
                   "estimate: each collective by its executor's closed form on its group alone (no contention between "
                   "groups, but it names the groups that share links while both are under way: shared_links; no "
                   "busiest links), the same schedule, planned for one rank per stage and CP index")
        ->type_name("M");
    app.add_option("--format", format_, "table (default) | json | csv")->type_name("F");
    app.add_flag("--per-layer", per_layer_,
                 "also per model layer on the critical rank, over its micro-batches and both directions: compute_us, "
                 "communication_us (its collectives under way) and exposed_us (table and json: \"layers\")");
    app.add_option("--out", out_file_, "write the result to FILE instead of stdout")->type_name("FILE");
    app.add_option("--trace", trace_file_,
                   "Chrome trace. Detailed: a process per rank, a track per stream (compute, tp/, cp<c>/, ep/, dp/, pp<s>f/ "
                   "...: one per group). Estimate: a slice per operation on each planned rank (one per stage and CP "
                   "index), compute on compute, a group's collectives on <group>/collectives")
        ->type_name("FILE");
    memory_limit_.declare(app);
    app.add_flag("--stats", stats_, "print wall time, tasks and peak memory to stderr");
    scenario_.declare(app);
  }

  int run(CommandContext& ctx) override {
    StepRequest req;
    if (phase_ == "train") req.phase = StepPhase::Train;
    else if (phase_ == "prefill") req.phase = StepPhase::Prefill;
    else if (phase_ == "decode") req.phase = StepPhase::Decode;
    else throw InputError("option --phase", "unknown phase '" + phase_ + "'; expected train, prefill or decode");
    if (dispatcher_ == "alltoall") req.dispatcher = Dispatcher::AlltoAll;
    else if (dispatcher_ == "allgather") req.dispatcher = Dispatcher::AllGather;
    else if (dispatcher_ == "deepep") req.dispatcher = Dispatcher::DeepEp;
    else throw InputError("option --dispatcher", "unknown dispatcher '" + dispatcher_ + "'; expected alltoall, allgather or deepep");
    if (model_ != "auto" && model_ != "detailed" && model_ != "estimate") {
      throw InputError("option --model", "unknown value '" + model_ + "'; expected auto, detailed or estimate");
    }
    if (format_ != "table" && format_ != "json" && format_ != "csv") {
      throw InputError("option --format", "unknown format '" + format_ + "'; expected table, json or csv");
    }
    bool estimate = model_ == "estimate";
    req.sequence_parallel = !no_sp_;
    if (mc2_ && no_sp_) throw InputError("option --mc2", "MC2 fuses sequence parallelism's AllGather and ReduceScatter; drop --no-sequence-parallel");
    req.mc2 = mc2_;
    req.recompute = parse_recompute(recompute_);
    if (!layer_list_.empty()) req.layer_list = parse_layer_list(layer_list_);
    req.distributed_optimizer = !no_dist_opt_;
    req.overlap_grad_reduce = !no_overlap_grad_;
    req.overlap_param_gather = overlap_param_gather_;
    if (per_layer_ && format_ == "csv") {
      throw InputError("option --per-layer", "the per-layer figures are in the table and in json's \"layers\"; give "
                                             "--format table or json");
    }
    if (!chakra_dir_.empty()) return run_chakra(ctx);
    if (model_file_.empty()) throw InputError("option --model-config", "give a model (--model-config FILE) or a Chakra workload (--chakra DIR)");
    if (batch_.empty()) throw InputError("option --batch", "give --batch global=N,micro=N,seq=N (with --model-config)");
    if (search_.empty() == layout_.empty()) {
      throw InputError("option --layout", "give either --layout or --search (not both)");
    }
    if (!search_.empty() && !trace_file_.empty()) throw InputError("option --trace", "a search writes no trace");
    if (!layout_.empty()) req.layout = parse_layout(layout_);
    req.batch = parse_batch(batch_);
    req.model = read_model_config(model_file_);
    if (!compute_file_.empty()) req.compute = ComputeTable::read(compute_file_);
    std::string topology_file;
    const TopologySpec spec = topology_.load(&topology_file);
    if (!search_.empty()) {
      std::optional<OutputFile> out_file;
      if (!out_file_.empty()) out_file.emplace("--out", out_file_);
      const std::vector<SearchRow> rows = search_layouts(spec, req, search_);
      write_search(out_file ? out_file->stream() : *ctx.out, rows);
      if (out_file) out_file->close();
      if (std::none_of(rows.begin(), rows.end(), [](const SearchRow& r) { return r.valid; })) {
        std::cerr << "note: no layout of --search plans and fits on " << spec.npus << " NPUs; each row says why\n";
      }
      return 0;
    }
    if (scenario_.given()) {
      if (estimate) throw InputError("option --scenario", "a scenario needs --model detailed (the estimate runs no tasks)");
      if (!search_.empty()) throw InputError("option --scenario", "a search runs no scenario; give --layout");
      if (!trace_file_.empty()) {
        throw InputError("option --trace", "--scenario runs the step several times (healthy, then each draw); a "
                                           "trace of one of them is not written: leave --trace out");
      }
      if (format_ == "csv") {
        throw InputError("option --format", "--scenario's figures are in the table's footnote and json's \"scenario\"; "
                                            "csv has no place for them: give --format table or json");
      }
    }
    const std::optional<ScenarioSetup> scenario = scenario_.load(spec);
    const auto plan_for = [&](bool for_estimate) {
      return plan_step(spec, req, for_estimate && export_dir_.empty() ? StepPlanScope::Symmetric : StepPlanScope::EveryRank);
    };
    StepPlanPtr plan;
    if (!estimate) {
      estimate = !detailed_fits(ctx, [&] {
        plan = plan_for(false);
        check_footprint(*plan, spec, "option --layout", "the step (" + req.layout.describe() + ")",
                        scenario_.given() ? ". Use fewer micro-batches or a smaller layout (a scenario needs the detailed "
                                            "model), or a larger --max-memory"
                                          : ". Use --model estimate, fewer micro-batches or a smaller layout");
      });
    }
    if (estimate) plan = plan_for(true);
    if (!export_dir_.empty()) write_chakra(export_chakra(*plan));
    const MemoryUse mem = step_memory(req);
    if (spec.npu.memory.hbm_capacity > 0 && mem.total() > spec.npu.memory.hbm_capacity && !ctx.replay) {
      std::cerr << "note: the layout needs about " << mem.total() / (1ULL << 30) << " GiB of HBM per rank (parameters "
                << mem.parameters / (1ULL << 30) << ", gradients " << mem.gradients / (1ULL << 30) << ", optimizer "
                << mem.optimizer / (1ULL << 30) << ", activations " << mem.activations / (1ULL << 30)
                << " GiB); the profile gives " << spec.npu.memory.hbm_capacity / (1ULL << 30) << " GiB\n";
    }
    return run_plan(ctx, spec, *plan, req, estimate, scenario);
  }

 private:
  // Plans for (and checks) the detailed model: false when it is refused as
  // too large under --model auto, which then runs the estimate, saying so;
  // the refusal stands under --model detailed and under a scenario (which
  // needs the detailed model).
  bool detailed_fits(const CommandContext& ctx, const std::function<void()>& plan_and_check) const {
    try {
      plan_and_check();
      return true;
    } catch (const TooLargeError& refusal) {
      if (model_ != "auto" || scenario_.given()) throw;
      if (!ctx.replay) {
        const std::string& why = refusal.message();
        std::cerr << "note: --model auto: the detailed model is " << why.substr(0, why.find(". Use"))
                  << "; the estimate runs instead\n";
      }
      return false;
    }
  }

  // A detailed run whose tasks would not fit under --max-memory is refused before it starts.
  void check_footprint(const StepPlan& plan, const TopologySpec& spec, const std::string& option, const std::string& what,
                       const std::string& advice) const {
    Footprint f;
    f.tasks = step_tasks(plan);
    f.bytes = f.tasks * kBytesPerTask + static_cast<std::uint64_t>(spec.npus) * kPlatformBytesPerNpu;
    const std::string why = footprint_problem(f, what, memory_limit_.bytes());
    if (!why.empty()) throw TooLargeError(option, why.substr(0, why.find(". Use")) + advice);
  }

  // Runs a plan on the back end asked for (under --scenario: healthy, then
  // each draw) and writes the result, the trace and the statistics.
  int run_plan(CommandContext& ctx, const TopologySpec& spec, const StepPlan& plan, const StepRequest& req, bool estimate,
               const std::optional<ScenarioSetup>& scenario) {
    std::optional<OutputFile> out_file;
    std::optional<OutputFile> trace_out;
    if (!out_file_.empty()) out_file.emplace("--out", out_file_);
    if (!trace_file_.empty()) trace_out.emplace("--trace", trace_file_);
    WallClock clock;
    TraceWriter trace;
    StepResult r;
    std::optional<ScenarioOutcome> outcome;
    if (estimate) {
      r = run_step_estimate(plan, trace_out ? &trace : nullptr, step_has_moe_kernels(plan) ? &platform_kept_until_exit(spec) : nullptr);
    } else if (!scenario) {
      r = run_step_detailed(platform_kept_until_exit(spec), plan, trace_out ? &trace : nullptr);
    } else {
      Platform& platform = platform_kept_until_exit(spec);
      std::vector<StepResult> draws;  // the healthy run, then each draw
      outcome = run_scenario(platform, *scenario, [&] {
        draws.push_back(run_step_detailed(platform, plan, nullptr));
        const StepResult& d = draws.back();
        const Time time{static_cast<std::uint64_t>(std::llround(d.step_time_us * 1e6))};
        return ScenarioPoint{time, d.busiest_links.empty() ? std::string()
                                                           : bottleneck_label(d.busiest_links.front().label,
                                                                              d.busiest_links.front().utilization)};
      });
      r = draws.at(1 + static_cast<std::size_t>(outcome->p50_draw));
    }
    std::ostream& out = out_file ? out_file->stream() : *ctx.out;
    write(out, r, req, spec, outcome ? &*outcome : nullptr, estimate);
    if (out_file) out_file->close();
    if (trace_out) {
      trace.write(trace_out->stream());
      trace_out->close();
    }
    if (stats_) print_stats(clock, r.tasks, 0);
    return 0;
  }

  // --chakra DIR: the workload's plan on either back end, reported as a step.
  int run_chakra(CommandContext& ctx) {
    bool estimate = model_ == "estimate";
    for (const auto& [given, option] : {std::pair{!model_file_.empty(), "--model-config"}, std::pair{!layout_.empty(), "--layout"},
                                        std::pair{!search_.empty(), "--search"}, std::pair{!batch_.empty(), "--batch"},
                                        std::pair{!compute_file_.empty(), "--compute"}, std::pair{scenario_.given(), "--scenario"}}) {
      if (given) {
        throw InputError(std::string("option ") + option, "--chakra runs the traces' own nodes; leave " + std::string(option) + " out");
      }
    }
    const ChakraWorkload workload = read_chakra_dir(chakra_dir_);
    std::string topology_file;
    const TopologySpec spec = topology_.load(&topology_file);
    const StepPlanPtr plan = plan_chakra(spec, workload);
    if (!export_dir_.empty()) write_chakra(export_chakra(*plan));
    if (!estimate) {
      estimate = !detailed_fits(ctx, [&] {
        check_footprint(*plan, spec, "option --chakra", "the Chakra workload " + chakra_dir_, ". Use --model estimate");
      });
    }
    StepRequest none;
    none.model.file = chakra_dir_;
    none.model.model_type = "chakra, " + std::to_string(workload.ranks.size()) + " ranks";
    none.layout = Layout{};
    none.layout.dp = static_cast<int>(workload.ranks.size());
    return run_plan(ctx, spec, *plan, none, estimate, std::nullopt);
  }

  // --export-chakra DIR: every file through a temporary renamed at the end;
  // a DIR holding any of them is refused before anything is written.
  void write_chakra(const ChakraWorkload& w) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(export_dir_, ec) && !fs::is_directory(export_dir_, ec)) {
      throw InputError("option --export-chakra", export_dir_ + " exists and is not a directory");
    }
    std::vector<std::pair<std::string, std::string>> files;   // path, bytes
    for (std::size_t r = 0; r < w.ranks.size(); ++r) {
      files.push_back({(fs::path(export_dir_) / ("step." + std::to_string(r) + ".et")).string(), encode_chakra(w.ranks[r])});
    }
    if (!w.groups.empty()) files.push_back({(fs::path(export_dir_) / "comm_group.json").string(), encode_comm_groups(w.groups)});
    for (const auto& [path, bytes] : files) {
      if (fs::exists(path, ec)) {
        throw InputError("option --export-chakra", path + " already exists; hcclsim writes traces only into a new or "
                                                          "empty directory");
      }
    }
    fs::create_directories(export_dir_, ec);
    if (ec) throw InputError("option --export-chakra", "cannot create " + export_dir_ + ": " + ec.message());
    for (const auto& [path, bytes] : files) {
      OutputFile f("--export-chakra", path);
      f.stream() << bytes;
      f.close();
    }
  }

  void write_search(std::ostream& out, const std::vector<SearchRow>& rows) const {
    if (format_ == "json") {
      nlohmann::json doc = nlohmann::json::array();
      for (const SearchRow& r : rows) {
        nlohmann::json row = {{"layout", r.layout.describe()}, {"valid", r.valid}, {"memory_gib", round3(r.memory_gib)}};
        if (r.valid) {
          row["step_time_us"] = round3(r.step_time_us);
          row["compute_us"] = round3(r.compute_us);
          row["bubble_us"] = round3(r.bubble_us);
          row["exposed_us"] = round3(r.exposed_us);
        } else {
          row["why"] = r.why;
        }
        doc.push_back(row);
      }
      out << doc.dump(2) << "\n";
      return;
    }
    if (format_ == "csv") out << "layout,valid,step_time_us,compute_us,bubble_us,exposed_us,memory_gib,why\n";
    else out << "# layouts by estimated step time (then the refused ones)\n";
    char line[512];
    if (format_ == "table") {
      std::snprintf(line, sizeof line, "%-34s %14s %14s %12s %12s %10s\n", "layout", "step_time_us", "compute_us",
                    "bubble_us", "exposed_us", "mem_GiB");
      out << line;
    }
    for (const SearchRow& r : rows) {
      if (format_ == "csv") {
        std::string why = r.why;
        std::replace(why.begin(), why.end(), ',', ';');
        out << '"' << r.layout.describe() << "\"," << (r.valid ? "true" : "false") << "," << fmt3(r.step_time_us) << ","
            << fmt3(r.compute_us) << "," << fmt3(r.bubble_us) << "," << fmt3(r.exposed_us) << "," << fmt3(r.memory_gib)
            << "," << why << "\n";
      } else if (r.valid) {
        std::snprintf(line, sizeof line, "%-34s %14.3f %14.3f %12.3f %12.3f %10.1f\n", r.layout.describe().c_str(),
                      r.step_time_us, r.compute_us, r.bubble_us, r.exposed_us, r.memory_gib);
        out << line;
      } else {
        out << r.layout.describe() << "  refused: " << r.why << "\n";
      }
    }
  }

  // Under --scenario, `scenario` is the outcome and `r` its p50 draw.
  void write(std::ostream& out, const StepResult& r, const StepRequest& req, const TopologySpec& spec,
             const ScenarioOutcome* scenario, bool estimate) const {
    const char* model = estimate ? "estimate" : "detailed";
    if (format_ == "json") {
      nlohmann::json groups = nlohmann::json::array();
      for (const StepGroupResult& g : r.groups) {
        groups.push_back({{"group", g.group}, {"ranks", g.ranks}, {"executor", g.executor}, {"time_us", round3(g.time_us)},
                          {"exposed_us", round3(g.exposed_us)}});
      }
      nlohmann::json path = nlohmann::json::array();
      for (const StepPathEntry& e : r.critical_path) {
        path.push_back({{"op", e.op}, {"group", e.group}, {"rank", e.rank}, {"start_us", round3(e.start_us)},
                        {"end_us", round3(e.end_us)}});
      }
      nlohmann::json links = nlohmann::json::array();
      for (const LinkUsage& l : r.busiest_links) {
        links.push_back({{"link", l.label}, {"kind", l.kind}, {"bytes", l.bytes}, {"utilization", round3(l.utilization)}});
      }
      nlohmann::json doc = {{"step_time_us", round3(r.step_time_us)}, {"compute_us", round3(r.compute_us)},
                            {"bubble_us", round3(r.bubble_us)},       {"groups", groups},
                            {"critical_path", path},                  {"busiest_links", links},
                            {"assumed", r.assumed}};
      doc["model"] = model;
      if (estimate) {
        nlohmann::json shared = nlohmann::json::array();
        for (const StepSharedLinks& s : r.shared_links) {
          shared.push_back({{"groups", {s.first, s.second}}, {"link_kinds", s.link_kinds},
                            {"link_directions", s.link_directions}, {"together_us", round3(s.together_us)}});
        }
        doc["shared_links"] = shared;
      }
      if (per_layer_) {
        nlohmann::json layers = nlohmann::json::array();
        for (const StepLayerResult& l : r.layers) {
          layers.push_back({{"layer", l.layer}, {"compute_us", round3(l.compute_us)},
                            {"communication_us", round3(l.communication_us)}, {"exposed_us", round3(l.exposed_us)}});
        }
        doc["layers"] = layers;
      }
      if (scenario != nullptr) doc["scenario"] = scenario_json(*scenario);
      out << doc.dump(2) << "\n";
      return;
    }
    if (format_ == "csv") {
      out << "step_time_us,compute_us,bubble_us,group,ranks,executor,time_us,exposed_us\n";
      for (const StepGroupResult& g : r.groups) {
        std::string ranks;
        for (int x : g.ranks) ranks += (ranks.empty() ? "" : " ") + std::to_string(x);
        out << fmt3(r.step_time_us) << "," << fmt3(r.compute_us) << "," << fmt3(r.bubble_us) << "," << g.group << ","
            << ranks << "," << g.executor << "," << fmt3(g.time_us) << "," << fmt3(g.exposed_us) << "\n";
      }
      if (r.groups.empty()) out << fmt3(r.step_time_us) << "," << fmt3(r.compute_us) << "," << fmt3(r.bubble_us) << ",,,,,\n";
      return;
    }
    if (!chakra_dir_.empty()) {
      out << "# Chakra workload " << chakra_dir_ << " (" << req.layout.world() << " ranks) on " << spec.name << " (" << model << ")\n";
    } else {
      out << "# step of " << req.model.file << " (" << req.model.model_type << "), " << phase_ << ", layout "
          << req.layout.describe() << ", batch " << batch_ << " on " << spec.name << " (" << model << ")\n";
    }
    out << "step_time_us " << fmt3(r.step_time_us) << "  compute_us " << fmt3(r.compute_us) << "  bubble_us "
        << fmt3(r.bubble_us) << "  (on rank " << r.critical_rank << ", the last to finish; " << r.micro_batches
        << " micro-batches per pipeline)\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-5s %12s %12s  %-40s %s\n", "group", "time_us", "exposed_us", "ranks", "executor");
    out << line;
    for (const StepGroupResult& g : r.groups) {
      std::string ranks;
      for (std::size_t i = 0; i < g.ranks.size(); ++i) {
        if (i == 6 && g.ranks.size() > 8) {
          ranks += " ... " + std::to_string(g.ranks.back());
          break;
        }
        ranks += (i ? " " : "") + std::to_string(g.ranks[i]);
      }
      std::snprintf(line, sizeof line, "%-5s %12.3f %12.3f  %-40s %s\n", g.group.c_str(), g.time_us, g.exposed_us,
                    ranks.c_str(), g.executor.c_str());
      out << line;
    }
    if (per_layer_) {
      out << "per layer on rank " << r.critical_rank << " (all micro-batches, forward and backward):\n";
      std::snprintf(line, sizeof line, "  %5s %14s %18s %12s\n", "layer", "compute_us", "communication_us", "exposed_us");
      out << line;
      for (const StepLayerResult& l : r.layers) {
        std::snprintf(line, sizeof line, "  %5d %14.3f %18.3f %12.3f\n", l.layer, l.compute_us, l.communication_us, l.exposed_us);
        out << line;
      }
    }
    const std::size_t shown = std::min<std::size_t>(r.critical_path.size(), 12);
    out << "critical path (" << r.critical_path.size() << " operations; the last " << shown << "):\n";
    for (std::size_t i = r.critical_path.size() - shown; i < r.critical_path.size(); ++i) {
      const StepPathEntry& e = r.critical_path[i];
      std::snprintf(line, sizeof line, "  %12.3f %12.3f  rank %-5d %s\n", e.start_us, e.end_us, e.rank, e.op.c_str());
      out << line;
    }
    if (!r.busiest_links.empty()) {
      out << "busiest links:\n";
      for (const LinkUsage& l : r.busiest_links) {
        std::snprintf(line, sizeof line, "  %-40s %6.1f%%  %llu bytes\n", l.label.c_str(), 100 * l.utilization,
                      static_cast<unsigned long long>(l.bytes));
        out << line;
      }
    }
    if (!r.shared_links.empty()) {
      out << "groups sharing links while both are under way (the estimate times each group alone; --model detailed "
             "shares the links):\n";
      for (const StepSharedLinks& s : r.shared_links) {
        std::string kinds;
        for (const std::string& k : s.link_kinds) kinds += (kinds.empty() ? "" : ", ") + k;
        std::snprintf(line, sizeof line, "  %-4s %-4s %6d link directions (%s), together %.3f us\n", s.first.c_str(),
                      s.second.c_str(), s.link_directions, kinds.c_str(), s.together_us);
        out << line;
      }
    }
    out << assumed_footnote(r.assumed, spec.profile_file);
    if (scenario != nullptr) out << scenario_footnote({scenario}, {req.layout.describe()}, "layout", "step_time_us");
  }

  std::string model_file_;
  std::string chakra_dir_;
  std::string export_dir_;
  std::string layout_;
  std::string search_;
  std::string batch_;
  std::string phase_ = "train";
  std::string dispatcher_ = "alltoall";
  bool no_sp_ = false;
  bool mc2_ = false;
  std::string recompute_ = "none";
  bool no_dist_opt_ = false;
  std::string layer_list_;
  bool no_overlap_grad_ = false;
  bool overlap_param_gather_ = false;
  std::string compute_file_;
  TopologyOptions topology_;
  std::string model_ = "auto";
  std::string format_ = "table";
  std::string out_file_;
  std::string trace_file_;
  MemoryLimit memory_limit_;
  bool stats_ = false;
  bool per_layer_ = false;
  ScenarioOptions scenario_;
};

}  // namespace

std::unique_ptr<Command> make_step_command() { return std::make_unique<StepCommand>(); }

}  // namespace hcclsim

#include "sim/perf/perf.h"

#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include "base/error.h"
#include "sim/estimate/estimate.h"
#include "sim/scheduler.h"
#include "sim/used_constants.h"

namespace hcclsim {

namespace {
// Largest seed or Zipf exponent --vcounts takes (1/(k+1)^S underflows to 0 long before).
constexpr double kMaxDistributionArg = 1e6;

bool per_rank_blocks(CollOp op) {
  return op == CollOp::AllGather || op == CollOp::ReduceScatter || op == CollOp::AlltoAll;
}
}  // namespace

std::uint64_t count_for_size(CollOp op, int ranks, DataType dtype, std::uint64_t data_size) {
  const std::uint64_t unit = data_type_size(dtype) * (per_rank_blocks(op) ? static_cast<std::uint64_t>(ranks) : 1);
  return data_size / unit;
}

std::uint64_t data_size_of(CollOp op, int ranks, DataType dtype, std::uint64_t count) {
  return count * data_type_size(dtype) * (per_rank_blocks(op) ? static_cast<std::uint64_t>(ranks) : 1);
}

double bus_factor(CollOp op, int ranks) {
  const double n = ranks;
  switch (op) {
    case CollOp::AllReduce: return 2.0 * (n - 1) / n;
    case CollOp::AllGather:
    case CollOp::ReduceScatter:
    case CollOp::AlltoAll: return (n - 1) / n;
    case CollOp::Broadcast:
    case CollOp::Reduce: return 1.0;
  }
  return 1.0;
}

std::vector<std::uint64_t> perf_sizes(std::uint64_t first, std::uint64_t last, std::uint64_t factor) {
  if (first == 0 || last < first) throw std::invalid_argument("expected 0 < -b <= -e");
  if (factor == 0) throw std::invalid_argument("the factor must be at least 1");
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t s = first;; s *= factor) {
    sizes.push_back(s);
    if (factor == 1 || s > last / factor) break;  // the next size would pass `last` (or overflow)
  }
  return sizes;
}

std::string perf_size_problem(CollOp op, const std::string& op_name, int ranks, DataType dtype, std::uint64_t size) {
  const std::uint64_t dsize = data_type_size(dtype);
  if (size % dsize != 0) {
    return "data_size " + std::to_string(size) + " is not a multiple of the " + data_type_name(dtype) +
           " element size (" + std::to_string(dsize) + " bytes)";
  }
  if (count_for_size(op, ranks, dtype, size) == 0) {
    return "data_size " + std::to_string(size) + " holds no element per rank for " + op_name + " on " +
           std::to_string(ranks) + " ranks";
  }
  return "";
}

Footprint estimate_perf_row(const TopologySpec& topology, const PerfRequest& request, std::uint64_t size) {
  using u128 = unsigned __int128;
  const std::uint64_t ranks = static_cast<std::uint64_t>(std::max(request.ranks, 1));
  const std::uint64_t per_server =
      std::min<std::uint64_t>(ranks, static_cast<std::uint64_t>(std::max(topology.npus_per_server, 1)));
  const std::uint64_t servers = (ranks + per_server - 1) / per_server;
  std::uint64_t log2_servers = 0;
  while ((std::uint64_t{1} << log2_servers) < servers) ++log2_servers;
  const std::uint64_t buffer = std::max<std::uint64_t>(request.buffer_bytes, 1);
  const std::uint64_t loops = size / buffer + 1;
  const u128 tasks = static_cast<u128>(ranks) * loops * (20 * per_server + 24 * log2_servers + 20);
  const u128 bytes = tasks * kBytesPerTask + static_cast<u128>(topology.npus) * kPlatformBytesPerNpu;
  const u128 cap = ~std::uint64_t{0};
  return Footprint{static_cast<std::uint64_t>(std::min(tasks, cap)), static_cast<std::uint64_t>(std::min(bytes, cap))};
}

std::string footprint_problem(const Footprint& f, const std::string& what, std::uint64_t limit) {
  if (f.bytes <= limit) return "";
  // (Rounded up; below a GiB in MiB, so that a small limit's refusal reads right.)
  const std::string need = f.bytes >= (1ULL << 30) ? std::to_string((f.bytes + (1ULL << 30) - 1) >> 30) + " GiB"
                                                   : std::to_string((f.bytes + (1ULL << 20) - 1) >> 20) + " MiB";
  const std::string tasks = f.tasks > 0 ? " (about " + std::to_string(f.tasks) + " tasks)" : "";
  return "too large: " + what + " needs about " + need + tasks + "; the limit is " +
         (limit % (1ULL << 30) == 0 ? std::to_string(limit >> 30) + " GiB" : std::to_string(limit) + " bytes") +
         " (--max-memory). Use fewer ranks or servers, smaller sizes, or a larger --buffsize (fewer loops)";
}

Hierarchy hierarchy_of(const Platform& platform, int ranks) { return hierarchy_of(platform.spec(), ranks); }

Hierarchy hierarchy_of(const TopologySpec& spec, int ranks) {
  Hierarchy h;
  h.per_server = std::min(ranks, spec.npus_per_server);
  if (ranks % h.per_server != 0) {
    throw std::invalid_argument(std::to_string(ranks) + " ranks do not fill whole servers of " +
                                std::to_string(spec.npus_per_server) + " NPUs");
  }
  const int servers = ranks / h.per_server;
  // The stages group ranks by per_server: every server taking part must hold exactly that many.
  for (int r = 0; r < ranks; ++r) {
    if (server_of(spec, r) - server_of(spec, 0) != r / h.per_server) {
      throw std::invalid_argument("the servers of ranks 0.." + std::to_string(ranks - 1) + " differ in size (rank " +
                                  std::to_string(r) + " would start or continue a server of " +
                                  std::to_string(h.per_server) +
                                  " NPUs but does not); hcclsim composes collectives only over servers of equal size");
    }
  }
  // Servers sharing an SDMA domain form a supernode (A3); A2 servers each have their own.
  int per_pod = 1;
  if (!spec.sdma_domain_of.empty()) {
    while (per_pod < servers && spec.sdma_domain_of[static_cast<std::size_t>(per_pod * h.per_server)] ==
                                    spec.sdma_domain_of[0]) {
      ++per_pod;
    }
  } else {
    per_pod = servers;
  }
  if (per_pod == 1) {
    h.servers_per_pod = servers;
    h.pods = 1;
  } else {
    if (servers % per_pod != 0) {
      throw std::invalid_argument(std::to_string(ranks) + " ranks do not fill whole supernodes of " +
                                  std::to_string(per_pod) + " servers");
    }
    h.servers_per_pod = per_pod;
    h.pods = servers / per_pod;
  }
  return h;
}

namespace {
// The rate one NPU has towards other servers: its NIC, else its UB or HCCS port.
// One pass over the links (100,000 NPUs have millions), stopping at the first NIC.
Bandwidth inter_server_bandwidth(const TopologySpec& spec) {
  const std::string kinds[] = {"roce", "ub", "hccs"};  // by preference
  const LinkSpec* first[3] = {nullptr, nullptr, nullptr};
  for (const LinkSpec& l : spec.links) {
    for (std::size_t k = 0; k < 3; ++k) {
      if (first[k] == nullptr && l.kind == kinds[k]) first[k] = &l;
    }
    if (first[0] != nullptr) break;
  }
  for (const LinkSpec* l : first) {
    if (l != nullptr) return l->params.bandwidth;
  }
  return Bandwidth{};
}
}  // namespace

std::vector<std::vector<std::uint64_t>> alltoallv_counts(const std::string& distribution, int ranks,
                                                         std::uint64_t elements) {
  const std::uint64_t p = static_cast<std::uint64_t>(ranks);
  std::vector<std::vector<std::uint64_t>> counts(p, std::vector<std::uint64_t>(p, 0));
  const std::uint64_t mean = elements / p;
  const auto colon = distribution.find(':');
  const std::string kind = distribution.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : distribution.substr(colon + 1);
  auto number = [&](const char* what) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(arg, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    // NaN and infinity are refused: they would turn every share into an undefined integer.
    if (arg.empty() || used != arg.size() || !std::isfinite(v) || v < 0 || v > kMaxDistributionArg) {
      throw std::invalid_argument("'" + distribution + "' needs a finite non-negative " + what +
                                  " of at most 1e6 after the colon");
    }
    return v;
  };
  if (kind == "uniform" && arg.empty()) {
    for (auto& row : counts) std::fill(row.begin(), row.end(), mean);
  } else if (kind == "random") {
    // A fixed 64-bit LCG (Knuth's MMIX constants): the same seed gives the same counts everywhere.
    std::uint64_t state = static_cast<std::uint64_t>(number("integer seed")) * 2654435761ULL + 1;
    for (auto& row : counts) {
      for (auto& c : row) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        c = mean == 0 ? 0 : (state >> 11) % (2 * mean + 1);
      }
    }
  } else if (kind == "zipf") {
    const double s = number("exponent");
    std::vector<double> weight(p);
    double total = 0;
    for (std::uint64_t k = 0; k < p; ++k) total += weight[k] = 1.0 / std::pow(static_cast<double>(k + 1), s);
    for (std::uint64_t r = 0; r < p; ++r) {
      for (std::uint64_t k = 0; k < p; ++k) {
        counts[r][(r + k) % p] = static_cast<std::uint64_t>(static_cast<double>(elements) * weight[k] / total);
      }
    }
  } else {
    throw std::invalid_argument("unknown AlltoAllV distribution '" + distribution +
                                "'; expected uniform, random:SEED or zipf:S");
  }
  return counts;
}

ExecContext exec_context(const Platform& platform, const PerfRequest& request) {
  return exec_context(platform.spec(), request);
}

ExecContext exec_context(const TopologySpec& topo, const PerfRequest& request) {
  ExecContext ctx;
  ctx.hccl_rules = topo.npu.hccl_rules;
  ctx.mode = request.mode;
  ctx.expansion = request.expansion.value_or(default_expansion(topo.npu.hccl_api));
  ctx.deterministic = request.deterministic;
  ctx.hierarchy = hierarchy_of(topo, request.ranks);
  ctx.inter_server_bandwidth = inter_server_bandwidth(topo);
  ctx.aiv_cores = topo.npu.cores.aiv;
  ctx.hccl = topo.npu.hccl_api;
  ctx.algo = request.algo;
  return ctx;
}

CollectiveSpec collective_for(const PerfRequest& request, std::uint64_t size) {
  CollectiveSpec spec;
  spec.op = request.op;
  spec.ranks = request.ranks;
  spec.dtype = request.dtype;
  spec.reduce_op = request.reduce_op;
  spec.root = request.root;
  spec.buffer_bytes = request.buffer_bytes;
  spec.count = count_for_size(request.op, request.ranks, request.dtype, size);
  if (!request.alltoallv_distribution.empty()) {
    spec.alltoallv_counts =
        alltoallv_counts(request.alltoallv_distribution, request.ranks, size / data_type_size(request.dtype));
  }
  return spec;
}

namespace {

ExecutorChoice choose_executor(const CollectiveSpec& spec, const ExecContext& ctx, const PerfRequest& request) {
  return request.executor.empty() ? select_executor(spec, ctx)
                                  : ExecutorChoice{request.executor, default_levels(spec, ctx), "asked for with --executor"};
}

// A row's description and figures; the caller adds the check and the counts.
PerfRow row_of(const PerfRequest& request, const CollectiveSpec& spec, const ExecContext& ctx,
               const ExecutorChoice& choice, Time time) {
  const BufferSizes sizes = buffer_sizes(spec);
  PerfRow row{};
  row.op = spec.op;
  row.op_name = request.alltoallv_distribution.empty() ? coll_op_name(spec.op) : "alltoallv";
  row.ranks = spec.ranks;
  row.dtype = spec.dtype;
  row.reduce_op = spec.reduce_op;
  row.algo = choice.plan.describe(ctx.hierarchy, spec.op);
  row.executor = choice.executor;
  row.executor_rule = choice.rule;
  row.count = spec.count;
  row.input_bytes = sizes.input;
  row.output_bytes = sizes.output;
  row.data_size = spec.alltoallv_counts.empty() ? data_size_of(spec.op, spec.ranks, spec.dtype, spec.count)
                                                : sizes.input;  // the largest send buffer of any rank
  row.time = time;
  const double seconds = static_cast<double>(row.time.ps) / 1e12;
  row.algbw_gbps = seconds > 0 ? static_cast<double>(row.data_size) / seconds / 1e9 : 0.0;
  if (spec.alltoallv_counts.empty()) {
    row.busbw_gbps = row.algbw_gbps * bus_factor(spec.op, spec.ranks);
  } else {
    // Only bytes that cross links: the most any rank sends to the others
    // (its block to itself stays on the chip). With even counts this is
    // the (n-1)/n of AlltoAll.
    std::uint64_t crossing = 0;
    for (int r = 0; r < spec.ranks; ++r) {
      std::uint64_t sent = 0;
      for (int j = 0; j < spec.ranks; ++j) {
        if (j != r) sent += spec.pair_count(r, j);
      }
      crossing = std::max(crossing, sent * data_type_size(spec.dtype));
    }
    row.busbw_gbps = seconds > 0 ? static_cast<double>(crossing) / seconds / 1e9 : 0.0;
  }
  return row;
}

// An estimate runs no graph: its row lists the assumed constants the
// executor's graph for the same collective would pay, built (not run) when
// it has at most request.assumed_graph_max_tasks tasks (2^17 by default), once per
// executor and plan of a sweep (the first row's). A
// larger one would cost more than the closed form itself (a 1 GiB
// CloudMatrix384 AllReduce: 4.9 M tasks), so such a row lists the assumed
// constants any graph of its executor on the topology can pay: an upper
// bound, never an omission.

namespace {

// What any collective graph can pay on `topology`: the stream's gaps, notify,
// SDMA, RDMA and on-chip memory costs, the constants of every link kind the
// topology has, and, for an executor on the AIV cores, theirs. Never the
// step's or the MoE kernels' (HBM, AIC, host synchronisation) nor the
// one-sided batches'.
UsedConstants collective_constants_bound(const TopologySpec& topology, bool on_aiv) {
  UsedConstants bound;
  for (const Constant c : {Constant::SdmaEngines, Constant::SdmaTaskFixed, Constant::SdmaReadFixed,
                           Constant::SdmaCopyBandwidth, Constant::SdmaReduceBandwidth, Constant::NotifyRecordLocal,
                           Constant::NotifyRecordRemote, Constant::NotifyWait, Constant::StreamTaskDispatch,
                           Constant::StreamOpLaunch, Constant::RdmaPost, Constant::RdmaNotifyWrite,
                           Constant::LocalBandwidth, Constant::LocalLatency}) {
    bound.add(c);
  }
  if (on_aiv) {
    for (const Constant c : {Constant::CoresAiv, Constant::CoresAivBandwidth, Constant::AivCoreBandwidth,
                             Constant::AivCopyFixed, Constant::AivFlagWrite, Constant::AivFlagPoll,
                             Constant::AivRemoteBandwidth}) {
      bound.add(c);
    }
  }
  std::set<std::string> kinds;
  for (const LinkSpec& link : topology.links) kinds.insert(link.kind);
  for (const std::string& kind : kinds) {
    for (const LinkConstant c : {LinkConstant::Bandwidth, LinkConstant::WriteBandwidth, LinkConstant::Latency}) {
      bound.add(parse_link_kind(kind), c);
    }
  }
  return bound;
}

}  // namespace

std::vector<std::string> estimate_assumed(const TopologySpec& topology, const PerfRequest& request,
                                          const CollectiveSpec& spec, const ExecContext& ctx,
                                          const ExecutorChoice& choice, std::uint64_t size,
                                          std::optional<TopologyPaths>& paths) {
  if (estimate_perf_row(topology, request, size).tasks > request.assumed_graph_max_tasks) {
    const Executor* executor = find_executor(choice.executor);
    return assumed_constants_used(collective_constants_bound(topology, executor == nullptr || executor->on_aiv), topology);
  }
  if (!paths) paths.emplace(topology);
  const TaskGraph graph = build_executor(spec, ctx, choice);
  return assumed_constants_used(used_constants(graph, *paths), topology);
}

}  // namespace

ExecutorChoice perf_choice(const TopologySpec& topology, const PerfRequest& request, std::uint64_t size) {
  const ExecContext ctx = exec_context(topology, request);
  const CollectiveSpec spec = collective_for(request, size);
  ExecutorChoice choice = choose_executor(spec, ctx, request);
  const Executor* executor = find_executor(choice.executor);
  if (executor == nullptr) throw std::invalid_argument("unknown executor '" + choice.executor + "'");
  if (const std::string why = executor->refuses(spec, ctx); !why.empty()) {
    throw std::invalid_argument(choice.executor + " cannot run this collective: " + why);
  }
  return choice;
}

std::string estimate_problem(const PerfRequest& request, std::uint64_t size) {
  const std::uint64_t loops = size / std::max<std::uint64_t>(request.buffer_bytes, 1);
  if (loops <= kMaxEstimateLoops) return "";
  return "too large for the estimate: data_size " + std::to_string(size) + " is " + std::to_string(loops) +
         " times the HCCL buffer (" + std::to_string(request.buffer_bytes) + " bytes); the closed forms walk every "
         "loop over it, at most " + std::to_string(kMaxEstimateLoops) + " (use a smaller size or a larger --buffsize)";
}

std::vector<PerfRow> estimate_perf(const TopologySpec& topology, const PerfRequest& request,
                                   const PerfRowCallback& on_row) {
  for (const std::uint64_t size : request.sizes) {
    if (const std::string why = estimate_problem(request, size); !why.empty()) throw std::invalid_argument(why);
  }
  std::vector<PerfRow> rows;
  // The solve threads make their working memory while the hierarchy is
  // worked out, and the points are timed once it is made: part of loading
  // the topology, not of a point (on 99,840 dies its page faults, up to 22
  // ms of kernel time on this VM, were much of the first AlltoAll point's spread).
  const EstimateFabric fabric(topology);
  fabric.start_solve_threads();
  const ExecContext ctx = exec_context(topology, request);
  fabric.await_solve_threads();
  std::optional<TopologyPaths> paths;   // made when a row first needs it
  // The assumed constants an executor's graph pays depend on its task kinds
  // and the links they cross, not on the size (larger sizes loop over the
  // same tasks): each executor and plan of the sweep lists those of its first
  // (smallest) row's graph, built once instead of at every size.
  std::map<std::string, std::vector<std::string>> assumed_of;
  for (const std::uint64_t size : request.sizes) {
    const auto started = std::chrono::steady_clock::now();
    const CollectiveSpec spec = collective_for(request, size);
    const ExecutorChoice choice = choose_executor(spec, ctx, request);
    const Executor* executor = find_executor(choice.executor);
    if (executor == nullptr) throw std::invalid_argument("unknown executor '" + choice.executor + "'");
    if (const std::string why = executor->refuses(spec, ctx); !why.empty()) {
      throw std::invalid_argument(choice.executor + " cannot run this collective: " + why);
    }
    const EstimateFn* estimate = find_estimate(choice.executor);
    if (estimate == nullptr) {
      throw std::invalid_argument("--model estimate has no closed form for " + choice.executor +
                                  " (HCCL's choice for " + coll_op_name(spec.op) + " of " + std::to_string(size) +
                                  " bytes on " + std::to_string(spec.ranks) + " ranks); use --model detailed");
    }
    const double ps = (*estimate)(spec, ctx, choice.plan, fabric);
    if (const std::string why = time_limit_problem(ps); !why.empty()) {
      throw InputError("size " + std::to_string(size), why);
    }
    PerfRow row = row_of(request, spec, ctx, choice, Time{static_cast<std::uint64_t>(std::llround(ps))});
    row.model = "estimate";
    row.check = "skipped";
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // After the timing: --stats tells the closed form's own cost.
    const std::string key = choice.executor + "/" + choice.describe(ctx, spec.op);
    auto known = assumed_of.find(key);
    if (known == assumed_of.end()) {
      known = assumed_of.emplace(key, estimate_assumed(topology, request, spec, ctx, choice, size, paths)).first;
    }
    row.assumed = known->second;
    rows.push_back(std::move(row));
    if (on_row) on_row(rows.size() - 1, rows.back());
  }
  return rows;
}

std::vector<PerfRow> run_perf(Platform& platform, const PerfRequest& request, TraceWriter* trace,
                              const PerfRowCallback& on_row) {
  std::vector<PerfRow> rows;
  Scheduler scheduler(platform);
  scheduler.keep_timings(trace != nullptr);   // a row needs only the run's end
  LinkMeter meter(platform);
  const ExecContext ctx = exec_context(platform, request);
  const Hierarchy& hierarchy = ctx.hierarchy;
  for (const std::uint64_t size : request.sizes) {
    const auto started = std::chrono::steady_clock::now();
    const CollectiveSpec spec = collective_for(request, size);
    const ExecutorChoice choice = choose_executor(spec, ctx, request);
    const AlgoPlan& plan = choice.plan;
    std::optional<DataTracker> tracker;
    if (request.check) {
      const BufferSizes sizes = buffer_sizes(spec);
      const bool idempotent = request.reduce_op == ReduceOp::Max || request.reduce_op == ReduceOp::Min;
      tracker.emplace(spec.ranks, sizes.input, sizes.output, 2 * spec.buffer_bytes, idempotent);
    }
    auto build = [&] { return build_executor(spec, ctx, choice); };
    TaskGraph graph = build();
    const std::size_t tasks = graph.tasks().size();
    meter.start();
    // Without a trace nothing reads the tasks after they are compiled (the
    // data check keeps what it needs of the copies): the scheduler frees
    // them as it goes, and builds the graph again only to report a run that
    // did not finish or a copy beyond its buffers. (`graph` is read below
    // only with a trace, when it was not moved.)
    const RunResult result = trace ? scheduler.run(graph, tracker ? &*tracker : nullptr)
                                   : scheduler.run_releasing(std::move(graph), build, tracker ? &*tracker : nullptr);
    if (!result.failure.empty()) {
      throw GraphError(coll_op_name(spec.op) + " of " + std::to_string(size) + " bytes on " +
                       std::to_string(spec.ranks) + " ranks (" + plan.describe(hierarchy, spec.op) +
                       ") did not finish: " + result.failure);
    }

    PerfRow row = row_of(request, spec, ctx, choice, result.elapsed());
    row.tasks = tasks;
    row.activations = result.activations;
    row.link_summary = meter.summary(row.time);
    row.assumed = assumed_constants_used(result.constants, platform.spec());
    if (request.link_details) row.links = meter.stop(row.time);
    if (!tracker) {
      row.check = "skipped";
    } else if (!result.check_error.empty()) {
      row.check = "fail: " + result.check_error;
    } else {
      row.check = "success";
      ExpectedOutputs expected(spec, tracker->sets());
      for (int r = 0; r < spec.ranks && row.check == "success"; ++r) {
        if (spec.op == CollOp::Reduce && r != spec.root) continue;
        // AlltoAllV outputs differ in length per rank; the buffer is sized for the largest.
        const std::string diff = tracker->compare(r, BufferKind::Output, 0, expected.of(r));
        if (!diff.empty()) row.check = "fail: rank " + std::to_string(r) + " output " + diff;
      }
    }
    if (trace) trace->add_run(graph, result, platform, row.op_name + " " + format_size(row.data_size));
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    rows.push_back(std::move(row));
    if (on_row) on_row(rows.size() - 1, rows.back());
  }
  return rows;
}

std::vector<PerfRow> run_perf_scenario(Platform& platform, const PerfRequest& request, const ScenarioSetup& setup,
                                       const PerfRowCallback& on_row) {
  std::vector<PerfRow> rows;
  for (const std::uint64_t size : request.sizes) {
    PerfRequest one = request;
    one.sizes = {size};
    std::vector<PerfRow> runs;  // the healthy run, then each draw
    const ScenarioOutcome outcome = run_scenario(platform, setup, [&] {
      runs.push_back(run_perf(platform, one).front());
      const LinkSummary& links = runs.back().link_summary;
      return ScenarioPoint{runs.back().time, bottleneck_label(links.busiest, links.busiest_utilization)};
    });
    double seconds = 0;
    for (const PerfRow& r : runs) seconds += r.seconds;
    std::size_t p50 = 1;
    while (p50 + 1 < runs.size() && runs[p50].time != outcome.p50) ++p50;
    PerfRow row = std::move(runs[p50]);
    row.scenario = outcome;
    row.seconds = seconds;
    rows.push_back(std::move(row));
    if (on_row) on_row(rows.size() - 1, rows.back());
  }
  return rows;
}

}  // namespace hcclsim

#include "sim/report/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <systemc>

#include "base/error.h"
#include "base/json_reader.h"
#include "sim/executors/hccl_algo.h"
#include "sim/moe/moe.h"
#include "sim/perf/perf.h"
#include "sim/scheduler.h"
#include "sim/step/step.h"
#include "topologies/config.h"

namespace hcclsim {

namespace {

namespace fs = std::filesystem;

// A topology path as the file writes it: absolute, or relative to the working
// directory, or to the nearest directory above the measurement file holding it.
std::string resolve(const std::string& path, const std::string& measurement_file) {
  if (fs::path(path).is_absolute() || fs::exists(path)) return path;
  for (fs::path dir = fs::absolute(measurement_file).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const fs::path candidate = dir / path;
    if (fs::exists(candidate)) return candidate.lexically_normal().string();
    if (dir == dir.root_path()) break;
  }
  return path;
}

std::string option_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A step point's request, as `hcclsim step` builds it from its options.
// Errors name the point's options in the file (`where`) when it is read.
StepRequest step_request_of(const MeasuredPoint& p, const JsonLocation& where) {
  static const std::set<std::string> known{"model", "layout", "batch", "phase", "dispatcher", "sequence_parallel", "mc2",
                                           "recompute", "distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather",
                                           "num_layer_list"};
  for (const auto& entry : p.options) {
    if (known.count(entry.first) == 0) {
      where.key(entry.first).fail("unknown step option; expected model, layout, batch, phase, dispatcher, "
                                  "sequence_parallel, mc2, recompute, distributed_optimizer, overlap_grad_reduce, "
                                  "overlap_param_gather or num_layer_list");
    }
  }
  for (const char* key : {"model", "layout", "batch"}) {
    if (p.options.count(key) == 0) where.fail(std::string("a step point needs options.") + key);
  }
  auto option_or = [&](const char* key, const char* fallback) {
    const auto it = p.options.find(key);
    return it == p.options.end() ? std::string(fallback) : it->second;
  };
  StepRequest req;
  try {
    req.layout = parse_layout(p.options.at("layout"), "layout");
  } catch (const InputError& e) {
    where.key("layout").fail(e.message());
  }
  try {
    req.batch = parse_batch(p.options.at("batch"));
  } catch (const InputError& e) {
    where.key("batch").fail(e.message());
  }
  const std::string phase = option_or("phase", "train");
  if (phase == "train") req.phase = StepPhase::Train;
  else if (phase == "prefill") req.phase = StepPhase::Prefill;
  else if (phase == "decode") req.phase = StepPhase::Decode;
  else where.key("phase").fail("unknown phase '" + phase + "'; expected train, prefill or decode");
  const std::string dispatcher = option_or("dispatcher", "alltoall");
  if (dispatcher == "alltoall") req.dispatcher = Dispatcher::AlltoAll;
  else if (dispatcher == "allgather") req.dispatcher = Dispatcher::AllGather;
  else where.key("dispatcher").fail("unknown dispatcher '" + dispatcher + "'; expected alltoall or allgather (a "
                                    "step point runs on the estimate, which has no deepep kernels)");
  auto flag = [&](const char* key, const char* fallback) {
    const std::string value = option_or(key, fallback);
    if (value != "true" && value != "false") where.key(key).fail("expected true or false");
    return value == "true";
  };
  req.sequence_parallel = flag("sequence_parallel", "true");
  req.mc2 = flag("mc2", "false");
  req.distributed_optimizer = flag("distributed_optimizer", "true");
  req.overlap_grad_reduce = flag("overlap_grad_reduce", "true");
  req.overlap_param_gather = flag("overlap_param_gather", "false");
  if (req.mc2 && !req.sequence_parallel) where.key("mc2").fail("MC2 needs sequence_parallel true");
  try {
    req.recompute = parse_recompute(option_or("recompute", "none"));
  } catch (const InputError& e) {
    where.key("recompute").fail(e.message());
  }
  if (p.options.count("num_layer_list")) {
    try {
      req.layer_list = parse_layer_list(p.options.at("num_layer_list"));
    } catch (const InputError& e) {
      where.key("num_layer_list").fail(e.message());
    }
  }
  req.model = read_model_config(p.model_file);
  return req;
}

}  // namespace

const std::vector<std::string>& measured_collective_ops() {
  static const std::vector<std::string> ops{"all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                            "alltoallv",  "broadcast",  "reduce"};
  return ops;
}

std::vector<MeasuredPoint> load_measurements(const std::string& file) {
  const nlohmann::json doc = load_json_file(file);
  ObjectReader root(doc, JsonLocation{file});
  root.optional_string("description");
  const nlohmann::json& points = root.required_array("points");
  root.finish();
  std::vector<MeasuredPoint> out;
  std::set<std::string> ids;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const JsonLocation loc = root.location_of("points").index(i);
    ObjectReader r(points[i], loc);
    MeasuredPoint p;
    p.where = loc;
    p.id = r.required_string("id");
    if (!ids.insert(p.id).second) r.location_of("id").fail("the id '" + p.id + "' is used by an earlier point");
    p.group = r.required_string("group");
    p.topology = r.required_string("topology");
    p.topology_file = resolve(p.topology, file);
    if (!fs::exists(p.topology_file)) r.location_of("topology").fail("no such file: " + p.topology);
    p.servers = static_cast<int>(r.int_in_or("servers", 1, 1 << 16, -1));
    p.ranks = static_cast<int>(r.int_in_or("ranks", 1, 1 << 20, 0));
    std::vector<std::string> ops = measured_collective_ops();
    for (const char* extra : {"p2p_write", "p2p_read", "p2p_notify", "moe_dispatch", "moe_combine", "step"}) {
      ops.push_back(extra);
    }
    p.op = r.required_choice("op", ops);
    p.dtype = r.choice_or("dtype", data_type_names(), "fp16");
    p.metric = r.required_choice("metric", {"time_us", "algbw_GBps", "busbw_GBps", "tokens_per_npu_s"});
    const bool step = p.op == "step";
    if (step != (p.metric == "tokens_per_npu_s") && !(step && p.metric == "time_us")) {
      r.location_of("metric").fail(step ? "a step point's metric is time_us or tokens_per_npu_s"
                                        : "tokens_per_npu_s is the metric of a step point only");
    }
    const nlohmann::json& value = r.required_value("value");
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0) {
      r.location_of("value").fail("expected a positive number (the measured " + p.metric + ")");
    }
    p.value = value.get<double>();
    p.source = r.required_string("source");
    if (const nlohmann::json* t = r.optional_value("tolerance_pct")) {
      if (!t->is_number() || !(t->get<double>() >= 0)) r.location_of("tolerance_pct").fail("expected a number >= 0");
      p.tolerance_pct = t->get<double>();
    }
    p.known_gap = r.string_or("known_gap", "");
    if (r.has("options")) {
      ObjectReader o = r.required_object("options");
      for (auto it = points[i].at("options").begin(); it != points[i].at("options").end(); ++it) {
        o.required_value(it.key());
        p.options[it.key()] = option_text(it.value());
      }
      o.finish();
    }
    const bool p2p = p.op.rfind("p2p_", 0) == 0;
    const bool moe = p.op.rfind("moe_", 0) == 0;
    if (p2p) {
      // Bytes as plain integers: the format is shared with other tools.
      p.block_bytes = static_cast<std::uint64_t>(r.required_int_in("block_bytes", 1, std::int64_t{1} << 50));
      p.total_bytes = static_cast<std::uint64_t>(r.required_int_in("total_bytes", 1, std::int64_t{1} << 50));
      if (p.block_bytes == 0 || p.total_bytes < p.block_bytes) {
        r.location_of("block_bytes").fail("expected 0 < block_bytes <= total_bytes");
      }
      for (const char* key : {"method", "src", "dst"}) {
        if (p.options.count(key) == 0) r.location_of("options").fail(std::string("a p2p point needs options.") + key);
      }
      // (one task within one NPU is its on-chip copy, as A2-3 measured; a batch or a domain needs two NPUs)
      if (p.options.at("src") == p.options.at("dst") && (p.op == "p2p_notify" || p.options.at("method") != "single_task")) {
        r.location_of("options").fail("options.src and options.dst are the same NPU; only a single_task write (an "
                                      "on-chip copy) may stay on one, a " + p.options.at("method") + " " + p.op +
                                      " needs two");
      }
    } else if (step) {
      const JsonLocation options = r.location_of("options");
      if (p.options.count("model") != 0) {
        p.model_file = resolve(p.options.at("model"), file);
        if (!fs::exists(p.model_file)) options.key("model").fail("no such file: " + p.options.at("model"));
      }
      (void)step_request_of(p, options);   // refuses bad options now, naming them in the file
    } else if (!moe) {
      p.size_bytes = static_cast<std::uint64_t>(r.required_int_in("size_bytes", 1, std::int64_t{1} << 50));
      p.size_means = r.required_choice("size_means", {"input_per_rank", "output_per_rank", "hccl_test"});
      const std::uint64_t element = data_type_size(*parse_data_type(p.dtype));
      if (p.size_bytes % element != 0) {
        r.location_of("size_bytes").fail(std::to_string(p.size_bytes) + " is not a whole number of " + p.dtype +
                                         " elements (" + std::to_string(element) + " bytes each)");
      }
    }
    if (moe && p.options.count("ep") != 0 && p.ranks > 0 && p.options.at("ep") != std::to_string(p.ranks)) {
      r.location_of("ranks").fail("a MoE point's ranks (" + std::to_string(p.ranks) + ") must equal options.ep (" +
                                  p.options.at("ep") + ")");
    }
    r.finish();
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

// JSON text of `v`; bytes that are not UTF-8 (a file name) become U+FFFD.
template <class Json>
std::string dump_text(const Json& v) {
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A point on one line, `"key": value` pairs joined by ", ", as the
// calibration file writes them.
std::string one_line(const nlohmann::ordered_json& point) {
  std::string line = "{";
  for (auto it = point.begin(); it != point.end(); ++it) {
    line += (it == point.begin() ? "" : ", ") + dump_text(nlohmann::json(it.key())) + ": " + dump_text(it.value());
  }
  return line + "}";
}

}  // namespace

std::string measurements_json(const std::vector<MeasuredPoint>& points, const std::string& description) {
  std::string out = "{\n \"description\": " + dump_text(nlohmann::json(description)) + ",\n \"points\": [";
  for (std::size_t i = 0; i < points.size(); ++i) {
    const MeasuredPoint& p = points[i];
    const bool p2p = p.op.rfind("p2p_", 0) == 0;
    const bool sizeless = p.op.rfind("moe_", 0) == 0 || p.op == "step";   // MoE and step points: no dtype or size of their own
    nlohmann::ordered_json o;
    o["id"] = p.id;
    o["group"] = p.group;
    o["topology"] = p.topology;
    if (p.servers != -1) o["servers"] = p.servers;
    if (p.ranks != 0) o["ranks"] = p.ranks;
    o["op"] = p.op;
    if (p2p) {
      o["block_bytes"] = p.block_bytes;
      o["total_bytes"] = p.total_bytes;
    }
    if ((!p2p && !sizeless) || p.dtype != "fp16") o["dtype"] = p.dtype;
    if (!p2p && !sizeless) {
      o["size_bytes"] = p.size_bytes;
      o["size_means"] = p.size_means;
    }
    o["metric"] = p.metric;
    o["value"] = p.value;
    if (!p.options.empty()) o["options"] = p.options;
    o["source"] = p.source;
    if (p.tolerance_pct) o["tolerance_pct"] = *p.tolerance_pct;
    if (!p.known_gap.empty()) o["known_gap"] = p.known_gap;
    out += (i == 0 ? "\n  " : ",\n  ") + one_line(o);
  }
  return out + (points.empty() ? "]\n}\n" : "\n ]\n}\n");
}

namespace {

// A platform under a SystemC name of its own, so that several coexist.
struct NamedPlatform : sc_core::sc_module {
  Platform platform;
  NamedPlatform(sc_core::sc_module_name name, const TopologySpec& spec) : sc_core::sc_module(name), platform(spec) {}
};

// Where an error about point `p` (or its options.`key`) is: the file and
// JSON path when it was read from a file, else its id.
std::string point_where(const MeasuredPoint& p, const std::string& key = "") {
  if (p.where.file.empty()) return "point " + p.id + (key.empty() ? "" : " options." + key);
  const JsonLocation at = key.empty() ? p.where : p.where.key("options").key(key);
  return at.describe() + " (point " + p.id + ")";
}

int option_int(const MeasuredPoint& p, const std::string& key) {
  const std::string& text = p.options.at(key);
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used == text.size()) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw InputError(point_where(p, key), "not an integer: " + text);
}

double seconds(Time t) { return static_cast<double>(t.ps) / 1e12; }

// hixl's communication-domain benchmark: one HcclBatchPut (a write) or
// HcclBatchGet (a read) of total_bytes / block_bytes descriptors to one
// peer (hicann/hixl benchmarks; HCCL's one-sided service, hcomm
// hccl_one_sided_service.cc and transport_*_mem.cc, read as facts). No
// handshake per descriptor: the issuer (the host on A2, the AI CPU on A3)
// puts one task per descriptor on the stream, one_sided.*_issue apart,
// while the stream runs the earlier ones in order. Inside an SDMA domain a
// task is an SDMA copy that ends when its bytes have landed; over RoCE it is
// a doorbell task (one_sided.rdma_doorbell) that starts once the previous
// signalled write has completed, then the write. A block's time is
// therefore about max(issue, transfer) inside an SDMA domain and
// max(issue, doorbell + transfer) over RoCE.
double domain_batch(Scheduler& sched, Platform& platform, const MeasuredPoint& p, int src, int dst) {
  const bool read = p.op == "p2p_read";
  const bool rdma = platform.rdma_between(src, dst);
  if (read && rdma) throw InputError(point_where(p), "a communication-domain read across RDMA is not modelled");
  const OneSidedParams& costs = platform.spec().npu.one_sided;
  const int actor = read ? dst : src;
  const std::uint64_t blocks = std::max<std::uint64_t>(1, p.total_bytes / p.block_bytes);
  TaskGraph g;
  const ThreadId issuer = g.add_thread(actor, "issuer");
  const ThreadId stream = g.add_thread(actor, "stream");
  const ThreadId completions = rdma ? g.add_thread(dst, "completions") : 0;
  std::optional<TaskId> completed;  // the previous write's completion (RDMA)
  for (std::uint64_t i = 0; i < blocks; ++i) {
    const TaskId issued = g.delay(issuer, rdma ? costs.rdma_issue : costs.sdma_issue);
    const BufferRef from{src, BufferKind::Input, i * p.block_bytes};
    const BufferRef to{dst, BufferKind::Output, i * p.block_bytes};
    if (!rdma) {
      g.add_dependency(issued, g.copy(stream, from, to, p.block_bytes));
      continue;
    }
    const TaskId bell = g.delay(stream, costs.rdma_doorbell, "doorbell");
    g.add_dependency(issued, bell);
    if (completed) g.add_dependency(*completed, bell);
    g.copy(stream, from, to, p.block_bytes);
    // The write's completion: a record that lands once the write has arrived.
    g.record(stream, dst, 0, "completion");
    completed = g.wait(completions, 0, "completion");
  }
  const RunResult r = sched.run(g);
  if (!r.failure.empty()) throw GraphError("point " + p.id + ": " + r.failure);
  const Time span = r.elapsed();
  const double bytes = static_cast<double>(p.block_bytes * blocks);
  return p.metric == "time_us" ? span.us() : bytes / seconds(span) / 1e9;
}

// Point-to-point runs, as the calibration rows were measured.
// A moe_dispatch / moe_combine point: the kernel hcclsim moe runs with the point's options.
double run_moe_point(Platform& platform, const MeasuredPoint& point, std::string* what) {
  MoeParams p;
  auto integer = [&](const char* key, int fallback) {
    const auto it = point.options.find(key);
    if (it == point.options.end()) return fallback;
    try {
      std::size_t used = 0;
      const long v = std::stol(it->second, &used);
      if (used == it->second.size()) return static_cast<int>(v);
    } catch (const std::exception&) {
    }
    throw InputError(point_where(point, key), "not an integer: " + it->second);
  };
  for (const auto& [key, value] : point.options) {
    static const std::set<std::string> known{"ep", "tokens", "hidden", "topk", "experts", "mode", "dtype", "routing", "seed", "scope"};
    if (known.count(key) == 0) {
      throw InputError(point_where(point, key), "unknown MoE option; expected ep, tokens, hidden, topk, experts, mode, dtype, routing, seed, scope");
    }
  }
  p.ep = integer("ep", point.ranks > 0 ? point.ranks : 8);
  p.tokens = integer("tokens", p.tokens);
  p.hidden = integer("hidden", p.hidden);
  p.topk = integer("topk", p.topk);
  p.experts = integer("experts", p.experts);
  p.seed = static_cast<std::uint64_t>(integer("seed", 1));
  const std::string mode = point.options.count("mode") ? point.options.at("mode") : "normal";
  if (mode != "normal" && mode != "low_latency") throw InputError(point_where(point, "mode"), "expected normal or low_latency");
  p.mode = mode == "normal" ? MoeMode::Normal : MoeMode::LowLatency;
  const std::string dtype = point.options.count("dtype") ? point.options.at("dtype") : "int8";
  if (dtype != "int8" && dtype != "bf16") throw InputError(point_where(point, "dtype"), "expected int8 or bf16");
  p.int8 = dtype == "int8";
  if (point.options.count("routing")) p.routing = point.options.at("routing");
  const MoePhase phase = point.op == "moe_dispatch" ? MoePhase::Dispatch : MoePhase::Combine;
  // scope: "call" (default) times the whole call; "kernel" the data kernel
  // of a normal-mode dispatch alone (a profiler's kernel time, without the
  // count exchange and the host synchronisation before it).
  const std::string scope = point.options.count("scope") ? point.options.at("scope") : "call";
  if (scope != "call" && scope != "kernel") throw InputError(point_where(point, "scope"), "expected call or kernel");
  if (scope == "kernel" && (phase != MoePhase::Dispatch || p.mode != MoeMode::Normal || point.metric != "time_us")) {
    throw InputError(point_where(point, "scope"), "kernel is for the time_us of a normal-mode dispatch");
  }
  const MoeRun run = run_moe(platform, p, {phase}).front();
  *what = run.kernel;
  if (scope == "kernel") return run.kernel_time_us;
  if (point.metric == "time_us") return run.time_mean_us;
  return run.bandwidth_gbps;
}

// A step point: `hcclsim step --model estimate` with the point's options.
double run_step_point(const Platform& platform, const MeasuredPoint& point, std::string* what) {
  const StepRequest req = step_request_of(
      point, point.where.file.empty() ? JsonLocation{"point " + point.id, "$.options"} : point.where.key("options"));
  StepPlanPtr plan;
  try {
    plan = plan_step(platform.spec(), req, StepPlanScope::Symmetric);
  } catch (const InputError& e) {   // (the step names its own options: --layout, --batch)
    // Its --layout, --batch, ... is the point's options.layout, options.batch, ...
    std::string option = e.where().rfind("option --", 0) == 0 ? e.where().substr(9) : "";
    std::replace(option.begin(), option.end(), '-', '_');   // --num-layer-list is options.num_layer_list
    if (!option.empty() && point.options.count(option)) throw InputError(point_where(point, option), e.message());
    throw InputError(point_where(point) + " options", e.message());
  }
  const StepResult result = run_step_estimate(*plan);
  *what = "step estimate " + req.layout.describe();
  if (point.metric == "time_us") return result.step_time_us;
  // Tokens a step processes: every sequence's tokens, one per sequence in decode.
  const double tokens = static_cast<double>(req.batch.global) *
                        static_cast<double>(req.phase == StepPhase::Decode ? 1 : req.batch.seq);
  return tokens / (result.step_time_us * 1e-6) / static_cast<double>(req.layout.world());
}

double run_p2p(Platform& platform, const MeasuredPoint& p, std::string* what) {
  Scheduler sched(platform);
  const int src = option_int(p, "src");
  const int dst = option_int(p, "dst");
  if (src < 0 || dst < 0 || src >= platform.npus() || dst >= platform.npus()) {
    throw InputError(point_where(p), "options.src / options.dst name NPUs outside 0.." + std::to_string(platform.npus() - 1));
  }
  const std::string method = p.options.at("method");
  // hixl_cs's batches and HcclBatchPut/Get are one-sided descriptors; a
  // single task is HCCL's two-sided transport (A2-3's send/recv).
  sched.one_sided(method == "batch" || method == "domain");
  const bool read = p.op == "p2p_read";
  const int actor = read ? dst : src;  // whose SDMA engine moves the bytes
  *what = p.op + " " + method;
  TaskGraph g;
  if (p.op == "p2p_notify") {
    const TaskId rec = g.record(g.add_thread(src, "Plane0"), dst, 0, "record");
    g.wait(g.add_thread(dst, "Plane0"), 0, "wait");
    const RunResult r = sched.run(g);
    return (r.timings[rec].end - r.timings[rec].start).us();
  }
  if (method == "single_task" || method == "batch") {
    const ThreadId t = g.add_thread(actor, "Plane0");
    const std::uint64_t blocks = method == "batch" ? std::max<std::uint64_t>(1, p.total_bytes / p.block_bytes) : 1;
    // hixl_cs's client issues a batch block by block (one_sided.direct_issue
    // apart) while the stream copies the earlier ones; over RDMA the stream
    // posts each write itself (rdma.post) and the bytes travel on their own.
    const bool issued = method == "batch" && !platform.rdma_between(src, dst);
    const ThreadId issuer = issued ? g.add_thread(actor, "issuer") : 0;
    TaskId first = 0;
    for (std::uint64_t i = 0; i < blocks; ++i) {
      const TaskId copy =
          g.copy(t, {src, BufferKind::Input, i * p.block_bytes}, {dst, BufferKind::Output, i * p.block_bytes}, p.block_bytes);
      if (i == 0) first = copy;
      if (issued) g.add_dependency(g.delay(issuer, platform.spec().npu.one_sided.direct_issue), copy);
    }
    const RunResult r = sched.run(g);
    if (!r.failure.empty()) throw GraphError("point " + p.id + ": " + r.failure);
    // One task: its own span; a batch: the first copy's start to the last arrival.
    const Time span = method == "batch" ? r.end - r.timings[first].start : r.timings[first].end - r.timings[first].start;
    const double bytes = static_cast<double>(p.block_bytes * blocks);
    return p.metric == "time_us" ? span.us() : bytes / seconds(span) / 1e9;
  }
  if (method == "domain") return domain_batch(sched, platform, p, src, dst);
  throw InputError(point_where(p, "method"), "'" + method + "' is not one of: single_task, batch, domain");
}

// A collective point as a perf request of one size (hccl_test's data_size
// from what the point's size means).
PerfRequest perf_request_of(const TopologySpec& topology, const MeasuredPoint& p) {
  PerfRequest req;
  const bool alltoallv = p.op == "alltoallv";
  req.op = alltoallv ? CollOp::AlltoAll : *parse_coll_op(p.op);
  if (alltoallv) req.alltoallv_distribution = p.options.count("vcounts") ? p.options.at("vcounts") : "uniform";
  req.ranks = p.ranks > 0 ? p.ranks : topology.npus;
  req.dtype = *parse_data_type(p.dtype);
  req.buffer_bytes = topology.npu.hccl_buffer_bytes;
  req.check = false;
  for (const auto& [key, value] : p.options) {
    const std::string where = point_where(p, key);
    if (key == "algo") {
      req.algo = parse_hccl_algo(value, req.op);
    } else if (key == "mode") {
      const auto m = parse_workflow_mode(value);
      if (!m) throw InputError(where, "expected opbase or graph");
      req.mode = *m;
    } else if (key == "expansion") {
      req.expansion = parse_expansion(value);
      if (!req.expansion) throw InputError(where, "expected host, aicpu or aiv");
    } else if (key == "deterministic") {
      req.deterministic = value == "true";
    } else if (key == "executor") {
      req.executor = value;
    } else if (key == "buffsize") {
      req.buffer_bytes = parse_size(value, true);
    } else if (key == "reduce_op") {
      const auto o = parse_reduce_op(value);
      if (!o) throw InputError(where, "expected sum, prod, max or min");
      req.reduce_op = *o;
    } else if (key != "vcounts") {
      throw InputError(where, "unknown option; expected algo, mode, expansion, deterministic, executor, buffsize, "
                              "reduce_op or vcounts");
    }
  }
  const std::uint64_t n = static_cast<std::uint64_t>(req.ranks);
  std::uint64_t data_size = p.size_bytes;
  const bool per_rank_out = req.op == CollOp::AllGather;
  const bool per_rank_in = req.op == CollOp::ReduceScatter;
  if (p.size_means == "input_per_rank" && per_rank_out) data_size = p.size_bytes * n;
  if (p.size_means == "output_per_rank" && per_rank_in) data_size = p.size_bytes * n;
  req.sizes = {data_size};
  return req;
}

// A collective's row in the point's metric.
double metric_of(const MeasuredPoint& p, const PerfRow& row, std::string* executor) {
  *executor = row.executor;
  if (p.metric == "time_us") return row.time.us();
  if (p.metric == "busbw_GBps") return row.busbw_gbps;
  return static_cast<double>(p.size_bytes) / seconds(row.time) / 1e9;
}

// A MoE point runs with the flow quantum its mode needs (moe_flow_quantum),
// as `hcclsim moe` does; everything else with the default.
std::uint64_t quantum_of(const MeasuredPoint& p) {
  if (p.op.rfind("moe_", 0) != 0) return FlowBatching{}.quantum_ps;
  MoeParams m;
  const auto mode = p.options.find("mode");
  m.mode = mode != p.options.end() && mode->second == "low_latency" ? MoeMode::LowLatency : MoeMode::Normal;
  return moe_flow_quantum(m).ps;
}

using PlatformKey = std::tuple<std::string, int, std::uint64_t>;
PlatformKey platform_key(const MeasuredPoint& p) { return std::make_tuple(p.topology_file, p.servers, quantum_of(p)); }

// The servers to build a point's topology with: "servers": 1 on a listed
// (one-server) topology means that topology as it is.
int point_servers(const std::string& file, int servers) {
  const bool listed = servers == 1 && !load_json_file(file).contains("cluster");
  return listed ? -1 : servers;
}

}  // namespace

TopologySpec load_point_topology(const std::string& file, int servers) {
  return load_topology(file, std::nullopt, point_servers(file, servers));
}

bool has_closed_form(const MeasuredPoint& p) { return p.op.rfind("p2p_", 0) != 0 && p.op.rfind("moe_", 0) != 0; }

struct PointRunner::Site {
  std::string topology_file;
  int servers = -1;
  std::uint64_t quantum_ps = 0;
  std::unique_ptr<NamedPlatform> platform;
};

PointRunner::PointRunner(const std::vector<MeasuredPoint>& points, const std::optional<std::string>& profile_file) {
  std::optional<HardwareProfile> profile;
  if (profile_file) profile = load_profile(*profile_file);
  std::map<std::string, NpuParams> own_npu;  // topology file -> its own profile's NPU
  // Every platform first: SystemC elaborates before the first run.
  for (const MeasuredPoint& p : points) {
    const PlatformKey key = platform_key(p);
    if (index_.count(key) != 0) continue;
    if (profile) {
      auto [it, added] = own_npu.emplace(p.topology_file, NpuParams{});
      if (added) it->second = load_profile(topology_profile_file(p.topology_file)).npu;
      if (it->second.model != profile->npu.model) {
        const NpuParams& own = it->second;
        throw InputError("option --profile",
                         "point " + p.id + ": profile " + *profile_file + " describes a " + profile->npu.model + " (" +
                             profile->npu.traits.name + ") NPU, but its topology " + p.topology +
                             " is built of " + own.model + " (" + own.traits.name + ") NPUs; give a " +
                             own.model + " profile");
      }
    }
    const int servers = point_servers(p.topology_file, p.servers);
    TopologySpec spec = profile ? load_topology_with(p.topology_file, *profile, servers, "option --profile")
                                : load_topology(p.topology_file, std::nullopt, servers);
    spec.flow_batching.quantum_ps = std::get<2>(key);
    auto site = std::make_unique<Site>();
    site->topology_file = p.topology_file;
    site->servers = servers;
    site->quantum_ps = std::get<2>(key);
    const std::string name = "validate" + std::to_string(sites_.size());
    site->platform = std::make_unique<NamedPlatform>(name.c_str(), spec);
    index_.emplace(key, sites_.size());
    sites_.push_back(std::move(site));
  }
}

PointRunner::~PointRunner() = default;

void PointRunner::set_profile(const HardwareProfile& profile) {
  for (const auto& site : sites_) {
    TopologySpec spec = load_topology_with(site->topology_file, profile, site->servers, profile.file);
    spec.flow_batching.quantum_ps = site->quantum_ps;
    site->platform->platform.set_parameters(spec);
  }
}

ValidationResult PointRunner::run(const MeasuredPoint& p, bool estimate) {
  const auto found = index_.find(platform_key(p));
  if (found == index_.end()) throw std::logic_error("point " + p.id + " was not given to the PointRunner");
  Platform& platform = sites_[found->second]->platform->platform;
  if (p.ranks > platform.npus()) {
    throw InputError(point_where(p), "ranks " + std::to_string(p.ranks) + " is more than the " +
                                          std::to_string(platform.npus()) + " NPUs of its topology " + p.topology);
  }
  // The flow network solves large components at multiples of its quantum
  // of simulated time: each point starts at one, so that its result does
  // not depend on the points run before it.
  const std::uint64_t quantum = sites_[found->second]->quantum_ps;
  const std::uint64_t now = sc_core::sc_time_stamp().value();
  if (quantum > 0 && now % quantum != 0) sc_core::sc_start(sc_core::sc_time::from_value(quantum - now % quantum));
  ValidationResult r;
  r.point = &p;
  try {
    if (p.op.rfind("p2p_", 0) == 0) {
      r.simulated = run_p2p(platform, p, &r.executor);
    } else if (p.op.rfind("moe_", 0) == 0) {
      r.simulated = run_moe_point(platform, p, &r.executor);
    } else if (p.op == "step") {
      r.simulated = run_step_point(platform, p, &r.executor);
    } else if (estimate) {
      r.simulated = metric_of(p, estimate_perf(platform.spec(), perf_request_of(platform.spec(), p)).front(), &r.executor);
    } else {
      r.simulated = metric_of(p, run_perf(platform, perf_request_of(platform.spec(), p)).front(), &r.executor);
    }
  } catch (const std::invalid_argument& e) {
    throw InputError(point_where(p), e.what());
  }
  r.error_pct = 100.0 * (r.simulated - p.value) / p.value;
  if (!p.known_gap.empty()) {
    r.status = "gap";
  } else if (p.tolerance_pct) {
    r.status = std::fabs(r.error_pct) <= *p.tolerance_pct ? "ok" : "outside";
  } else {
    r.status = "-";
  }
  return r;
}

std::vector<ValidationResult> run_validation(const std::vector<MeasuredPoint>& points,
                                             const std::optional<std::string>& profile_file) {
  PointRunner runner(points, profile_file);
  std::vector<ValidationResult> out;
  for (const MeasuredPoint& p : points) out.push_back(runner.run(p));
  return out;
}

std::vector<GroupSummary> summarize(const std::vector<ValidationResult>& results) {
  std::vector<GroupSummary> groups;
  std::map<std::string, std::size_t> index;
  std::vector<double> sums, sums_without_gaps;
  for (const ValidationResult& r : results) {
    auto [it, added] = index.emplace(r.point->group, groups.size());
    if (added) {
      groups.push_back(GroupSummary{r.point->group, 0, 0, 0, std::nullopt});
      sums.push_back(0);
      sums_without_gaps.push_back(0);
    }
    GroupSummary& g = groups[it->second];
    ++g.points;
    sums[it->second] += std::fabs(r.error_pct);
    if (r.point->known_gap.empty()) {
      sums_without_gaps[it->second] += std::fabs(r.error_pct);
    } else {
      ++g.known_gaps;
    }
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    GroupSummary& g = groups[i];
    g.mean_abs_error_pct = sums[i] / g.points;
    if (g.points > g.known_gaps) g.mean_abs_error_without_gaps_pct = sums_without_gaps[i] / (g.points - g.known_gaps);
  }
  return groups;
}

std::string validation_table(const std::vector<ValidationResult>& results, const std::vector<GroupSummary>& groups) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-34s %12s %12s %9s %8s  %s\n", "id", "measured", "simulated", "error", "status",
                "executor");
  os << line;
  for (const ValidationResult& r : results) {
    std::snprintf(line, sizeof line, "%-34s %12s %12s %8s%% %8s  %s\n", r.point->id.c_str(), format_fixed(r.point->value, 3).c_str(),
                  format_fixed(r.simulated, 3).c_str(), format_fixed(r.error_pct, 1).c_str(), r.status.c_str(), r.executor.c_str());
    os << line;
  }
  os << "\n";
  std::snprintf(line, sizeof line, "%-44s %7s %5s %15s %14s\n", "group", "points", "gaps", "mean |error| %",
                "without gaps");
  os << line;
  for (const GroupSummary& g : groups) {
    const std::string without =
        g.mean_abs_error_without_gaps_pct ? format_fixed(*g.mean_abs_error_without_gaps_pct, 1) : std::string("-");
    std::snprintf(line, sizeof line, "%-44s %7d %5d %15s %14s\n", g.group.c_str(), g.points, g.known_gaps,
                  format_fixed(g.mean_abs_error_pct, 1).c_str(), without.c_str());
    os << line;
  }
  return os.str();
}

std::string validation_csv(const std::vector<ValidationResult>& results) {
  std::ostringstream os;
  os << "id,group,metric,measured,simulated,error_pct,status,executor\n";
  for (const ValidationResult& r : results) {
    os << r.point->id << "," << r.point->group << "," << r.point->metric << "," << format_fixed(r.point->value, 4) << ","
       << format_fixed(r.simulated, 4) << "," << format_fixed(r.error_pct, 2) << "," << r.status << "," << r.executor << "\n";
  }
  return os.str();
}

std::string validation_json(const std::vector<ValidationResult>& results, const std::vector<GroupSummary>& groups) {
  nlohmann::json out{{"points", nlohmann::json::array()}, {"groups", nlohmann::json::array()}};
  for (const ValidationResult& r : results) {
    nlohmann::json item{{"id", r.point->id},
                        {"group", r.point->group},
                        {"metric", r.point->metric},
                        {"measured", r.point->value},
                        {"simulated", std::stod(format_fixed(r.simulated, 6))},
                        {"error_pct", std::stod(format_fixed(r.error_pct, 3))},
                        {"status", r.status},
                        {"executor", r.executor}};
    if (r.point->tolerance_pct) item["tolerance_pct"] = *r.point->tolerance_pct;
    out["points"].push_back(item);
  }
  for (const GroupSummary& g : groups) {
    nlohmann::json item{{"group", g.group},
                        {"points", g.points},
                        {"mean_abs_error_pct", std::stod(format_fixed(g.mean_abs_error_pct, 3))},
                        {"known_gaps", g.known_gaps},
                        {"mean_abs_error_without_gaps_pct", nullptr}};
    if (g.mean_abs_error_without_gaps_pct) {
      item["mean_abs_error_without_gaps_pct"] = std::stod(format_fixed(*g.mean_abs_error_without_gaps_pct, 3));
    }
    out["groups"].push_back(item);
  }
  return out.dump(2) + "\n";
}

std::string validation_svg(const std::vector<ValidationResult>& results) {
  // Log-log axes over the range of both values, padded by a factor of 1.5.
  double lo = 1e300;
  double hi = 0;
  for (const ValidationResult& r : results) {
    for (const double v : {r.point->value, r.simulated}) {
      if (v > 0) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (hi <= 0) {
    lo = 1;
    hi = 10;
  }
  lo /= 1.5;
  hi *= 1.5;
  const double size = 560;
  const double margin = 70;
  const double span = std::log10(hi) - std::log10(lo);
  auto pos = [&](double v) { return (std::log10(v) - std::log10(lo)) / span * size; };
  auto x = [&](double v) { return margin + pos(v); };
  auto y = [&](double v) { return margin + size - pos(v); };
  static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                                  "#7f7f7f", "#bcbd22", "#17becf"};
  std::map<std::string, std::size_t> group_index;
  for (const ValidationResult& r : results) group_index.emplace(r.point->group, group_index.size());
  std::ostringstream os;
  const double width = 2 * margin + size + 330;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << format_fixed(width, 0) << "\" height=\"" << format_fixed(2 * margin + size, 0)
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<rect x=\"" << margin << "\" y=\"" << margin << "\" width=\"" << size << "\" height=\"" << size
     << "\" fill=\"none\" stroke=\"black\"/>\n";
  // Decade grid and labels.
  for (double d = std::pow(10.0, std::ceil(std::log10(lo))); d <= hi; d *= 10) {
    os << "<line x1=\"" << format_fixed(x(d), 1) << "\" y1=\"" << margin << "\" x2=\"" << format_fixed(x(d), 1) << "\" y2=\"" << margin + size
       << "\" stroke=\"#ddd\"/>\n";
    os << "<line x1=\"" << margin << "\" y1=\"" << format_fixed(y(d), 1) << "\" x2=\"" << margin + size << "\" y2=\"" << format_fixed(y(d), 1)
       << "\" stroke=\"#ddd\"/>\n";
    os << "<text x=\"" << format_fixed(x(d), 1) << "\" y=\"" << margin + size + 16 << "\" text-anchor=\"middle\">" << format_fixed(d, d < 1 ? 2 : 0)
       << "</text>\n";
    os << "<text x=\"" << margin - 6 << "\" y=\"" << format_fixed(y(d) + 4, 1) << "\" text-anchor=\"end\">" << format_fixed(d, d < 1 ? 2 : 0)
       << "</text>\n";
  }
  // y = x and the +-10% band.
  for (const double f : {1.0, 1.1, 1 / 1.1}) {
    os << "<line x1=\"" << format_fixed(x(lo), 1) << "\" y1=\"" << format_fixed(y(lo * f), 1) << "\" x2=\"" << format_fixed(x(hi / f), 1) << "\" y2=\""
       << format_fixed(y(hi), 1) << "\" stroke=\"" << (f == 1.0 ? "black" : "#999") << "\" stroke-dasharray=\""
       << (f == 1.0 ? "" : "4 3") << "\"/>\n";
  }
  for (const ValidationResult& r : results) {
    if (r.point->value <= 0 || r.simulated <= 0) continue;
    os << "<circle cx=\"" << format_fixed(x(r.point->value), 1) << "\" cy=\"" << format_fixed(y(r.simulated), 1) << "\" r=\"4\" fill=\""
       << colours[group_index[r.point->group] % 10] << "\" fill-opacity=\"0.75\"><title>" << r.point->id << ": "
       << format_fixed(r.error_pct, 1) << "%</title></circle>\n";
  }
  os << "<text x=\"" << margin + size / 2 << "\" y=\"" << 2 * margin + size - 20 << "\" text-anchor=\"middle\">measured</text>\n";
  os << "<text x=\"20\" y=\"" << margin + size / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
     << margin + size / 2 << ")\">simulated</text>\n";
  os << "<text x=\"" << margin << "\" y=\"40\" font-size=\"14\">hcclsim validate: simulated against measured "
        "(dashed: +-10%)</text>\n";
  for (const auto& [group, i] : group_index) {
    const double ly = margin + 16 + 18.0 * static_cast<double>(i);
    os << "<circle cx=\"" << margin + size + 24 << "\" cy=\"" << format_fixed(ly - 4, 1) << "\" r=\"5\" fill=\"" << colours[i % 10]
       << "\"/><text x=\"" << margin + size + 34 << "\" y=\"" << format_fixed(ly, 1) << "\">" << group << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

}  // namespace hcclsim

#include "sim/step/step.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <unordered_map>
#include <set>
#include <stdexcept>

#include "base/error.h"
#include "base/json_reader.h"
#include "sim/estimate/estimate.h"
#include "sim/moe/moe.h"
#include "sim/perf/perf.h"
#include "sim/scheduler.h"
#include "sim/step/chakra.h"
#include "sim/used_constants.h"
#include "topologies/group_view.h"
#include "topologies/routes.h"

namespace hcclsim {

namespace {

constexpr std::uint64_t kDtype = 2;  // bf16 parameters, activations and gradients
// Megatron's DDP bucket: max(40,000,000, 1,000,000 x dp) parameters (distributed.DistributedDataParallelConfig).
constexpr std::int64_t kBucketParams = 40000000;
constexpr std::int64_t kBucketPerDp = 1000000;
// The distributed optimizer's Adam step per parameter of its shard: fp32 master
// weight, two moments and the fp32 gradient read (16 bytes), the three fp32
// states written (12) and the bf16 parameter written (2).
constexpr std::uint64_t kOptimizerBytesPerParam = 30;
// Activations kept per layer and micro-batch: 34 x s x b x h bytes with
// sequence parallelism, / tp (Korthikanti et al. 2022, "Reducing Activation
// Recomputation", table 2; flash attention keeps no s^2 term). Assumed for MoE
// layers too.
constexpr std::uint64_t kActivationBytesPerToken = 34;
// The vector passes over the fp32 logits per element in Megatron's vocabulary-
// parallel cross entropy (assumed: counted from its public code,
// megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy;
// not measured): forward, the bf16
// logits made fp32 (read 2, write 4), the row max (read 4), minus the max
// (read 4, write 4), exp (read 4, write 4), the row sum (read 4) and the
// division kept for backward (read 4, write 4): 38 bytes; backward, the saved
// softmax times the loss gradient (read 4, write 4) and made bf16 for the
// head's matmul (read 4, write 2): 14 bytes.
constexpr double kCrossEntropyForwardBytes = 38;
constexpr double kCrossEntropyBackwardBytes = 14;
// A GEMM's output base block on one AIC: 128 x 256 elements, whose fp32
// accumulator fills the 910B cube's 128 KiB L0C (assumed: the block of the
// Ascend C matmul samples, cann/asc-devkit examples/03_libraries/01_matrix;
// the tiling of each aclnn kernel is not public). A block narrower than the
// GEMM is cut to the 16 x 16 fractal.
constexpr double kAicBaseM = 128;
constexpr double kAicBaseN = 256;
constexpr double kAicFractal = 16;

// The most operations a plan holds (about 100 bytes each with their dependencies).
constexpr double kMaxOps = 4e7;
// The longest step, and so the longest operator and the most compute on one
// rank, a plan may hold: hcclsim's limit of 2^62 ps (about 53 days, base/units.h),
// where the detailed run stops too, so that both back ends refuse the same
// steps; within 64 bits with room for a sum of two.
constexpr std::uint64_t kMaxStepPs = kTimeLimit.ps;

// Comm: a process group of a Chakra trace (hcclsim step --chakra).
enum class Group : std::uint8_t { Tp, Cp, Ep, Dp, Edp, PpFwd, PpBwd, Comm };
const char* group_name(Group g) {
  switch (g) {
    case Group::Tp: return "tp";
    case Group::Cp: return "cp";
    case Group::Ep: return "ep";
    case Group::Dp:
    case Group::Edp: return "dp";
    case Group::PpFwd:
    case Group::PpBwd: return "pp";
    case Group::Comm: return "pg";
  }
  return "";
}
std::string group_prefix(Group g, int slot) {
  switch (g) {
    case Group::Edp: return "edp/";
    case Group::Cp: return "cp" + std::to_string(slot) + "/";
    case Group::PpFwd: return "pp" + std::to_string(slot) + "f/";
    case Group::PpBwd: return "pp" + std::to_string(slot) + "b/";
    case Group::Comm: return "pg" + std::to_string(slot) + "/";
    default: return std::string(group_name(g)) + "/";
  }
}

// One collective as HCCL runs it on a group's shape (a view).
struct Part {
  Group group;
  int view = 0;
  bool moe = false;
  CollOp op = CollOp::AllReduce;
  std::uint64_t count = 0;     // elements per rank (AlltoAll: per peer)
  MoePhase phase = MoePhase::Dispatch;
  MoeParams moe_params;
  std::vector<int> members;    // of the first domain that ran it (MoE: its fabric)
  std::string executor;
  // Whether its streams pay npu.stream.op_launch first. An MC2 kernel is one
  // launch: its collective's later pieces are rounds of the same operation.
  bool launched = true;
};

struct Domain {
  Group group;
  int slot = 0;
  std::vector<int> members;    // global ranks, in the group's rank order
  int view = 0;
  int last_op = -1;
  std::string name;            // in the report, when not the group's ("pg 3": a Chakra process group)
};

std::string domain_name(const Domain& d) { return d.name.empty() ? group_name(d.group) : d.name; }

struct Op {
  bool coll = false;
  int rank = -1;               // compute: its rank
  Time duration;               // compute
  int domain = -1, part = -1;  // collective
  std::uint32_t label = 0;
  std::vector<int> deps;       // ops that must end first (on this op's ranks)
  int prev = -1;               // the previous op of its stream (compute) or domain (collective)
  std::int32_t layer = -1;     // the model layer it belongs to (-1: embedding, head, sends, optimizer, DP)
};

// A step's layers per model chunk: as even as possible, the first chunks one more.
std::vector<std::int64_t> chunk_starts(std::int64_t layers, int chunks) {
  std::vector<std::int64_t> start(static_cast<std::size_t>(chunks) + 1, 0);
  for (int g = 0; g < chunks; ++g) start[g + 1] = start[g] + layers / chunks + (g < layers % chunks ? 1 : 0);
  return start;
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

// The first layer of each model chunk (and the end): the request's
// --num-layer-list, else as even as possible. Throws InputError when the
// list does not fit the layout and the model.
std::vector<std::int64_t> layer_starts(const StepRequest& r, std::int64_t layers) {
  const Layout& l = r.layout;
  if (r.layer_list.empty()) return chunk_starts(layers, l.pp * l.vpp);
  const std::string what = "--num-layer-list gives " + std::to_string(r.layer_list.size()) + " stages";
  if (l.vpp != 1) throw InputError("option --num-layer-list", "a layer list is per pipeline stage; it needs vpp 1 (layout " + l.describe() + ")");
  if (static_cast<int>(r.layer_list.size()) != l.pp) {
    throw InputError("option --num-layer-list", what + " but the layout has pp " + std::to_string(l.pp));
  }
  std::vector<std::int64_t> start{0};
  for (const std::int64_t n : r.layer_list) start.push_back(start.back() + n);
  if (start.back() != layers) {
    throw InputError("option --num-layer-list", what + " of " + std::to_string(start.back()) + " layers in all, but the model has " +
                                                    std::to_string(layers));
  }
  return start;
}

}  // namespace

std::vector<std::int64_t> parse_layer_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::optional<std::int64_t> layers = positive_number(text.substr(at, comma - at), 999999);
    if (!layers) {
      throw InputError("option --num-layer-list", "'" + printable(text) + "': expected layer counts of the pipeline "
                                                  "stages, each at least 1, separated by commas (e.g. 17,20,22,21)");
    }
    out.push_back(*layers);
    at = comma + 1;
  }
  return out;
}

Recompute parse_recompute(const std::string& text) {
  Recompute r;
  if (text == "none") return r;
  r.on = true;
  if (text == "full") return r;
  const std::string prefix = "block:";
  if (text.rfind(prefix, 0) == 0) {
    if (const std::optional<std::int64_t> n = positive_number(text.substr(prefix.size()), 999999)) {
      r.layers = static_cast<int>(*n);
      return r;
    }
  }
  throw InputError("option --recompute", "'" + printable(text) + "': expected none, full or block:N (N >= 1: the first N "
                                         "layers of each model chunk)");
}

class StepPlan {
 public:
  const TopologySpec* topology = nullptr;
  StepRequest request;
  int m = 0;                                           // micro-batches per pipeline
  std::vector<std::unique_ptr<TopologySpec>> views;    // a group shape's view of the topology
  std::map<std::pair<int, int>, int> view_of;          // (group, slot) -> view
  std::vector<Part> parts;
  std::map<std::string, int> part_of;
  std::vector<Domain> domains;
  std::map<std::tuple<int, int, int>, int> domain_of;  // (group, slot, first member) -> domain
  std::vector<Op> ops;
  std::vector<std::string> labels;
  std::unordered_map<std::string, std::uint32_t> label_ids;   // ids in first-seen order
  std::set<std::string> compute_assumed;
  std::map<int, TaskGraph> graphs;                     // part -> its graph (detailed), built once
  bool symmetric = false;                              // StepPlanScope::Symmetric: representatives' ops only

  std::uint32_t intern(const std::string& text) {
    auto [it, added] = label_ids.emplace(text, static_cast<std::uint32_t>(labels.size()));
    if (added) labels.push_back(text);
    return it->second;
  }
};

void StepPlanDeleter::operator()(StepPlan* p) const { delete p; }

namespace {

std::string members_text(const std::vector<int>& members) {
  std::string s = "{";
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (i == 8 && members.size() > 10) {
      s += ", ..., " + std::to_string(members.back());
      break;
    }
    s += (i ? ", " : "") + std::to_string(members[i]);
  }
  return s + "}";
}

PerfRequest part_request(const TopologySpec& view, const Part& part) {
  PerfRequest req;
  req.op = part.op;
  req.ranks = static_cast<int>(part.members.size());
  req.dtype = DataType::Bf16;
  req.check = false;
  req.buffer_bytes = view.npu.hccl_buffer_bytes;
  return req;
}

// Builds the plan: the operations of every rank, in each stream's order.
class Planner {
 public:
  Planner(StepPlan& plan) : p_(plan), t_(*plan.topology), r_(plan.request), l_(plan.request.layout), mc_(plan.request.model) {}

  void run();

 private:
  struct Item {            // one step of a layer: compute, or a collective of a group
    bool coll = false;
    std::string op;        // compute: operator name
    std::string shape;
    Time time;             // compute
    Group group = Group::Tp;
    CollOp cop = CollOp::AllReduce;
    std::uint64_t count = 0;
    bool moe = false;
    MoePhase phase = MoePhase::Dispatch;
    std::uint64_t ring = 0;  // attn_core with cp > 1: the K/V block (elements) each ring step passes on
    bool matmul = false;     // a TP-split GEMM that --mc2 fuses with its AllGather / ReduceScatter
    // Backward of a column-parallel matmul: the share of its time that is
    // that GEMM's weight gradient, which Megatron runs while the input
    // gradient is reduce-scattered (0: none).
    double weight_grad_share = 0;
  };

  int rank_of(int t, int c, int d, int s) const { return t + l_.tp * (c + l_.cp * (d + l_.dp * s)); }
  // Whether `rank`'s operations are planned: every rank, or in a symmetric
  // plan the representatives (TP and DP index 0: one per CP index and stage).
  bool planned(int rank) const { return !p_.symmetric || (rank % l_.tp == 0 && rank / (l_.tp * l_.cp) % l_.dp == 0); }
  // The ranks of a stage are a run: [s x inner, (s + 1) x inner).
  int inner() const { return l_.tp * l_.cp * l_.dp; }
  // `rank`'s peer in stage `other` (same TP, CP and DP indices).
  int at_stage(int rank, int other) const { return rank % inner() + other * inner(); }
  // `rank`'s peer `ahead` places further on its CP ring.
  int cp_ahead(int rank, int ahead) const {
    const int c = rank / l_.tp % l_.cp;
    return rank + ((c + ahead) % l_.cp - c) * l_.tp;
  }
  std::vector<int> group_members(Group g, int rank, int slot) const;
  int domain(Group g, int slot, const std::vector<int>& members);
  int part(int domain, const Item& item, bool launched = true);
  void check();
  Time vector_time(double bytes) const;
  // Seconds of an operator at the profile's rates as a Time; beyond
  // kMaxStepPs the profile's rates are refused.
  Time rate_time(double seconds) const;
  // GEMMs of an operator: rows m (tokens), reduction k, columns n, `count` alike.
  struct Gemm {
    double m, k, n;
    double count = 1;
  };
  // On the cube: each GEMM's output blocks spread over the AIC in waves, a
  // block its fixed time and its K loop at `rate` (default: the GEMM's).
  double gemm_seconds(const Gemm& g) const;
  double block_seconds(const Gemm& g, std::uint64_t rate, Time block_fixed) const;
  // A matmul operator: max(its GEMMs on the cube, its bytes at HBM's rate);
  // backward the GEMMs of both gradients (dX: k and n swapped; dW: m x n
  // reduced over the m tokens) and twice the bytes.
  // `column_parallel`: gemms[0] is a column-parallel GEMM (its backward's
  // weight gradient is the item's weight_grad_share).
  Item gemm(const std::string& op, const std::string& shape, const std::vector<Gemm>& gemms, double bytes, bool backward,
            bool column_parallel = false);
  // `backward_factor`: the backward's time over the forward's (a matmul's
  // backward computes two gradients: 2).
  Item compute(const std::string& op, const std::string& shape, Time roof, bool backward, double backward_factor = 2.0);
  // The same with the roofline of each direction given.
  Item compute_phases(const std::string& op, const std::string& shape, Time forward_roof, Time backward_roof, bool backward,
                      double backward_factor = 2.0);
  std::vector<Item> layer_items(std::int64_t layer, bool backward);
  // layer_items, worked out once per kind of layer (dense or MoE) and
  // direction: every micro-batch's layers of a kind are alike.
  const std::vector<Item>& items_of_layer(std::int64_t layer, bool backward);
  void emit(int stage, const std::vector<Item>& items, const std::string& what);
  // `label`: an id of p_.intern("<what> <operator>"), the same for every rank of a stage.
  int add_compute(int rank, const Item& item, std::uint32_t label);
  int add_coll(int domain, int part, const std::string& label, const std::vector<int>& dep_ranks, bool blocking);
  int p2p(Group g, int slot, int sender, int receiver, int chunk, int mb);
  void ring_attention(int stage, const Item& item, const std::string& what);
  // Whether items[i] is the TP AllGather or ReduceScatter MC2 fuses with its matmul.
  bool is_tp_gather(const std::vector<Item>& items, std::size_t i) const;
  bool is_tp_scatter(const std::vector<Item>& items, std::size_t i) const;
  void mc2(int stage, const Item* gather, const Item& matmul, const Item* scatter, const std::string& what);
  void column_parallel_backward(int stage, const Item& matmul, const Item& reduction, const std::string& what);
  // A backward column-parallel matmul as (input-gradient part, weight-gradient part).
  std::pair<Item, Item> split_weight_grad(const Item& matmul) const;
  // `reduction` after each rank's last compute, the weight-gradient part under
  // it (after the group's `regathered` AllGather, if any), the next operator after it.
  void reduce_under_weight_grad(int stage, const Item& weight_grad, const Item& reduction, const std::string& what,
                                const std::map<int, int>& regathered);
  // Each TP group of `stage` once, through its planned leader: fn(leader, members, domain).
  void for_each_tp_group(int stage, const std::function<void(int, const std::vector<int>&, int)>& fn);

  StepPlan& p_;
  const TopologySpec& t_;
  const StepRequest& r_;
  const Layout& l_;
  const ModelConfig& mc_;
  std::int64_t tokens_ = 0;      // per rank and micro-batch (after CP)
  std::int64_t context_ = 0;     // keys each token attends
  std::int64_t ep_tokens_ = 0;   // tokens a rank dispatches
  std::vector<int> last_compute_;
  std::vector<std::uint64_t> compute_ps_;  // per rank: its compute so far (bounded by kMaxStepPs)
  std::vector<std::vector<int>> pending_;  // per rank: what its next compute waits for
  std::map<std::tuple<int, int, int, int>, int> p2p_op_;  // (group, global chunk, mb, receiver)
  std::vector<std::vector<int>> end_waits_;   // per rank: the gradient reductions its optimizer waits for
  std::int32_t layer_ = -1;                   // the layer whose operations are being emitted
  std::array<std::optional<std::vector<Item>>, 4> layer_items_;  // items_of_layer's: [moe layer][backward]
};

std::vector<int> Planner::group_members(Group g, int rank, int slot) const {
  const int t = rank % l_.tp, c = rank / l_.tp % l_.cp, d = rank / (l_.tp * l_.cp) % l_.dp, s = rank / (l_.tp * l_.cp * l_.dp);
  std::vector<int> out;
  switch (g) {
    case Group::Tp: for (int i = 0; i < l_.tp; ++i) out.push_back(rank_of(i, c, d, s)); break;
    case Group::Cp: for (int i = 0; i < l_.cp; ++i) out.push_back(rank_of(t, i, d, s)); break;
    case Group::Dp: for (int i = 0; i < l_.dp; ++i) out.push_back(rank_of(t, c, i, s)); break;
    case Group::Ep: for (int i = d / l_.ep * l_.ep; i < d / l_.ep * l_.ep + l_.ep; ++i) out.push_back(rank_of(t, c, i, s)); break;
    case Group::Edp: for (int i = d % l_.ep; i < l_.dp; i += l_.ep) out.push_back(rank_of(t, c, i, s)); break;
    case Group::PpFwd: out = {rank_of(t, c, d, slot), rank_of(t, c, d, (slot + 1) % l_.pp)}; break;
    case Group::PpBwd: out = {rank_of(t, c, d, (slot + 1) % l_.pp), rank_of(t, c, d, slot)}; break;
    case Group::Comm: break;   // Chakra groups come with their ranks (ChakraPlanner)
  }
  return out;
}

int Planner::domain(Group g, int slot, const std::vector<int>& members) {
  const auto key = std::tuple{static_cast<int>(g), slot, members.front()};
  const auto found = p_.domain_of.find(key);
  if (found != p_.domain_of.end()) return found->second;
  auto view = p_.view_of.find({static_cast<int>(g), slot});
  if (view == p_.view_of.end()) {
    const std::string what = "layout " + l_.describe() + ": the " + group_name(g) + " group " + members_text(members);
    try {
      p_.views.push_back(std::make_unique<TopologySpec>(group_view(t_, members, what)));
    } catch (const std::invalid_argument& e) {
      throw InputError("option --layout", e.what());
    }
    view = p_.view_of.emplace(std::pair{static_cast<int>(g), slot}, static_cast<int>(p_.views.size()) - 1).first;
  }
  Domain dom{g, slot, members, view->second, -1, ""};
  p_.domains.push_back(dom);
  const int id = static_cast<int>(p_.domains.size()) - 1;
  p_.domain_of.emplace(key, id);
  return id;
}

int Planner::part(int dom, const Item& item, bool launched) {
  const Domain& d = p_.domains[static_cast<std::size_t>(dom)];
  const std::string key = std::to_string(d.view) + "/" + (item.moe ? "moe" + std::to_string(static_cast<int>(item.phase))
                                                                    : coll_op_name(item.cop)) + "/" + std::to_string(item.count) +
                          (launched ? "" : "/in-kernel");
  const auto found = p_.part_of.find(key);
  if (found != p_.part_of.end()) return found->second;
  Part part{d.group, d.view, item.moe, item.cop, item.count, item.phase, MoeParams{}, d.members, "", launched};
  const TopologySpec& view = *p_.views[static_cast<std::size_t>(d.view)];
  const std::string what = "layout " + l_.describe() + ": the " + group_name(d.group) + " group " + members_text(d.members);
  if (item.moe) {
    MoeParams& mp = part.moe_params;
    mp.ep = static_cast<int>(d.members.size());
    mp.tokens = static_cast<int>(ep_tokens_);
    mp.hidden = static_cast<int>(mc_.hidden);
    mp.topk = static_cast<int>(mc_.topk);
    mp.experts = static_cast<int>(mc_.experts);
    mp.mode = r_.phase == StepPhase::Decode ? MoeMode::LowLatency : MoeMode::Normal;
    mp.int8 = r_.phase != StepPhase::Train;
    if (const auto problem = moe_params_problem(mp, t_.npus)) {
      throw InputError("option --dispatcher", what + ": the deepep kernels refuse " + problem->param + ": " + problem->why);
    }
    const std::string why = moe_fabric_problem(moe_fabric(t_.npu, t_.sdma_domain_of, d.members));
    if (!why.empty()) throw InputError("option --dispatcher", what + ": " + why);
    part.executor = mp.mode == MoeMode::Normal ? "deepep_normal" : "deepep_low_latency";
  } else {
    const PerfRequest req = part_request(view, part);
    const std::uint64_t size = data_size_of(part.op, req.ranks, req.dtype, part.count);
    try {
      part.executor = perf_choice(view, req, size).executor;
    } catch (const std::invalid_argument& e) {
      throw InputError("option --layout", what + " cannot run " + coll_op_name(part.op) + " of " +
                                              std::to_string(size) + " bytes on HCCL's executors: " + e.what());
    }
  }
  p_.parts.push_back(part);
  return p_.part_of.emplace(key, static_cast<int>(p_.parts.size()) - 1).first->second;
}

double Planner::gemm_seconds(const Gemm& g) const {
  return block_seconds(g, t_.npu.cores.aic_flops_per_s, t_.npu.cores.aic_gemm_block_fixed);
}

double Planner::block_seconds(const Gemm& g, std::uint64_t rate, Time block_fixed) const {
  const CoreParams& c = t_.npu.cores;
  if (rate == 0 || c.aic == 0) return 0;
  auto fractals = [](double x) { return std::ceil(x / kAicFractal) * kAicFractal; };
  const double bm = std::min(kAicBaseM, fractals(g.m)), bn = std::min(kAicBaseN, fractals(g.n));
  const double blocks = std::ceil(g.m / bm) * std::ceil(g.n / bn) * g.count;
  const double waves = std::ceil(blocks / c.aic);
  const double per_block = static_cast<double>(block_fixed.ps) * 1e-12 + 2 * bm * bn * g.k / static_cast<double>(rate);
  return waves * per_block;
}

Planner::Item Planner::gemm(const std::string& op, const std::string& shape, const std::vector<Gemm>& gemms, double bytes,
                            bool backward, bool column_parallel) {
  const double hbm = static_cast<double>(t_.npu.memory.hbm_bandwidth.bytes_per_s);
  double forward = 0, back = 0, weight_grad = 0;
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const Gemm& g = gemms[i];
    forward += gemm_seconds(g);
    const double dw = gemm_seconds({g.k, g.m, g.n, g.count});
    back += gemm_seconds({g.m, g.n, g.k, g.count}) + dw;
    if (column_parallel && i == 0) weight_grad = dw;
  }
  const double weight_grad_share = back > 0 ? weight_grad / back : 0;
  if (hbm > 0) {
    forward = std::max(forward, bytes / hbm);
    back = std::max(back, 2 * bytes / hbm);
  }
  Item it = compute_phases(op, shape, rate_time(forward), rate_time(back), backward);
  if (backward) it.weight_grad_share = weight_grad_share;
  return it;
}

Time Planner::vector_time(double bytes) const {
  const double vec = static_cast<double>(t_.npu.cores.aiv_bandwidth.bytes_per_s) * t_.npu.cores.aiv;
  const double hbm = static_cast<double>(t_.npu.memory.hbm_bandwidth.bytes_per_s);
  return rate_time(std::max(vec > 0 ? bytes / vec : 0.0, hbm > 0 ? bytes / hbm : 0.0));
}

Time Planner::rate_time(double seconds) const {
  if (!(seconds * 1e12 <= static_cast<double>(kMaxStepPs) / 2)) {
    throw InputError(t_.profile_file + " at $.npu", "an operator of the step would take more than 2^61 ps (about 27 days) at its "
                                                    "rates (npu.cores, npu.memory): expected rates and costs of an NPU");
  }
  return Time{static_cast<std::uint64_t>(std::llround(seconds * 1e12))};
}

// A compute item: the user's table first (operator, or operator_bwd; a
// backward the table lacks is its forward times backward_factor), else the roofline.
Planner::Item Planner::compute(const std::string& op, const std::string& shape, Time roof, bool backward,
                               double backward_factor) {
  const Time back = rate_time(backward_factor * static_cast<double>(roof.ps) * 1e-12);
  return compute_phases(op, shape, roof, back, backward, backward_factor);
}

Planner::Item Planner::compute_phases(const std::string& op, const std::string& shape, Time forward_roof, Time backward_roof,
                                      bool backward, double backward_factor) {
  Item it;
  it.op = backward ? op + "_bwd" : op;
  it.shape = shape;
  const ComputeTable& table = r_.compute;
  std::optional<double> us = table.find(it.op, shape);
  if (!us && backward) {
    if (const auto fwd = table.find(op, shape)) us = backward_factor * *fwd;
  }
  if (!us) us = table.find("*", "*");
  if (us) {
    it.time = Time{static_cast<std::uint64_t>(std::llround(*us * 1e6))};
  } else {
    it.time = backward ? backward_roof : forward_roof;
    for (const char* c : {"npu.cores.aic_fp16_rate", "npu.cores.aic_attention_rate", "npu.cores.aic_gemm_block_fixed",
                          "npu.cores.aic_attention_block_fixed",
                          "npu.memory.hbm_bandwidth", "npu.cores.aiv_bandwidth"}) {
      if (std::count(t_.assumed_constants.begin(), t_.assumed_constants.end(), c) != 0) p_.compute_assumed.insert(c);
    }
  }
  return it;
}

const std::vector<Planner::Item>& Planner::items_of_layer(std::int64_t layer, bool backward) {
  std::optional<std::vector<Item>>& items = layer_items_[(mc_.is_moe_layer(layer) ? 2 : 0) + (backward ? 1 : 0)];
  if (!items) items = layer_items(layer, backward);
  return *items;
}

std::vector<Planner::Item> Planner::layer_items(std::int64_t layer, bool backward) {
  const double T = static_cast<double>(tokens_);
  const double h = static_cast<double>(mc_.hidden);
  const double tp = l_.tp;
  const double dt = kDtype;
  const bool sp = r_.sequence_parallel && l_.tp > 1;
  const std::string tok = "tokens=" + std::to_string(tokens_);
  std::vector<Item> items;
  auto coll = [&](Group g, CollOp op, std::uint64_t count) {
    Item it;
    it.coll = true;
    it.group = g;
    it.cop = op;
    it.count = std::max<std::uint64_t>(count, 1);
    items.push_back(it);
  };
  auto moe_call = [&](MoePhase phase) {
    Item it;
    it.coll = true;
    it.group = Group::Ep;
    it.moe = true;
    it.phase = phase;
    items.push_back(it);
  };
  const std::uint64_t tp_block = ceil_div(static_cast<std::uint64_t>(tokens_) * mc_.hidden, l_.tp);
  auto tp_in = [&] {
    if (sp) coll(Group::Tp, CollOp::AllGather, tp_block);
  };
  auto tp_out = [&] {
    if (sp) coll(Group::Tp, CollOp::ReduceScatter, tp_block);
    else if (l_.tp > 1) coll(Group::Tp, CollOp::AllReduce, static_cast<std::uint64_t>(tokens_) * mc_.hidden);
  };
  const double norm_tokens = sp ? T / tp : T;
  auto matmul = [&](Item it) {
    it.matmul = true;
    items.push_back(std::move(it));
  };
  // Attention: the norm on this rank's share of the sequence, then its gather.
  items.push_back(compute("norm", tok, vector_time(2 * norm_tokens * h * dt), backward));
  tp_in();
  const double heads = static_cast<double>(mc_.heads) / tp;  // a rank's share
  double qkv_w = 0;
  if (mc_.mla) {
    const double q = mc_.q_lora_rank > 0 ? h * mc_.q_lora_rank + static_cast<double>(mc_.q_lora_rank) * mc_.heads * mc_.qk_dim()
                                         : h * mc_.heads * mc_.qk_dim();
    qkv_w = (q + h * (mc_.kv_lora_rank + mc_.qk_rope_dim) +
             static_cast<double>(mc_.kv_lora_rank) * mc_.heads * (mc_.qk_nope_dim + mc_.v_head_dim)) / tp;
  } else {
    qkv_w = h * static_cast<double>(mc_.heads + 2 * mc_.kv_heads) * mc_.head_dim / tp;
  }
  // (MLA's four projections as one GEMM over the hidden size: simplified.)
  matmul(gemm("qkv", tok, {{T, h, qkv_w / h}}, qkv_w * dt + 2 * T * h * dt, backward, true));
  // The vector passes below are their bytes read and written at HBM's rate,
  // and their backward factors counts of the same (assumed: not measured).
  // Rotary embedding of the queries and keys, read and written once; its
  // backward is the inverse rotation of their gradients.
  const double rotated = mc_.mla ? heads * mc_.qk_rope_dim + static_cast<double>(mc_.qk_rope_dim)
                                 : static_cast<double>(mc_.heads + mc_.kv_heads) * mc_.head_dim / tp;
  items.push_back(compute("rope", tok, vector_time(2 * T * rotated * dt), backward, 1.0));
  const double causal = r_.phase == StepPhase::Decode ? 1.0 : 0.5;
  const double S = static_cast<double>(context_);
  const double kv_bytes = r_.phase == StepPhase::Decode
                              ? static_cast<double>(r_.batch.micro) * S *
                                    (mc_.mla ? static_cast<double>(mc_.kv_lora_rank + mc_.qk_rope_dim)
                                             : 2.0 * static_cast<double>(mc_.kv_heads) * mc_.head_dim / tp) * dt
                              : S * 2.0 * static_cast<double>(mc_.kv_heads) * mc_.head_dim / tp * dt;
  // Flash attention in score blocks (queries x keys) of the GEMM's block
  // size: per block the cube's two matmuls (Q K^T over the query/key dim, P V
  // over the keys) at the attention rate and the block's online softmax on
  // the vector units (npu.cores.aic_attention_block_fixed), whatever the head
  // dimension. Causal: the blocks on or below the diagonal (a sequence's query
  // block i needs the key blocks up to its last row; with CP, or a sequence
  // not a whole number of blocks, half of them). Decode: each sequence's query
  // rows (a KV head's group of query heads; MLA: every head) against its context.
  Gemm scores{T, static_cast<double>(mc_.qk_dim() + mc_.v_dim()), S, heads * causal};
  const std::int64_t seq = r_.batch.seq;
  if (r_.phase == StepPhase::Decode) {
    const double kv_heads = std::max(1.0, static_cast<double>(mc_.kv_heads) / tp);
    scores.m = mc_.mla ? heads : std::max(1.0, heads / kv_heads);
    scores.count = static_cast<double>(r_.batch.micro) * (mc_.mla ? 1.0 : kv_heads);
  } else if (l_.cp == 1 && seq % static_cast<std::int64_t>(kAicBaseM) == 0 && seq >= static_cast<std::int64_t>(kAicBaseN)) {
    double blocks = 0;  // per sequence and head
    const auto base_m = static_cast<std::int64_t>(kAicBaseM), base_n = static_cast<std::int64_t>(kAicBaseN);
    for (std::int64_t end = base_m; end <= seq; end += base_m) blocks += static_cast<double>((end + base_n - 1) / base_n);
    // One query block row and key block column per block, `count` of them.
    scores = Gemm{kAicBaseM, scores.k, kAicBaseN, blocks * static_cast<double>(r_.batch.micro) * heads};
  }
  const CoreParams& cores = t_.npu.cores;
  const double attention_s = block_seconds(scores, cores.aic_attention_flops_per_s, cores.aic_attention_block_fixed);
  const double hbm = static_cast<double>(t_.npu.memory.hbm_bandwidth.bytes_per_s);
  const double attention_bytes = T * heads * static_cast<double>(mc_.qk_dim() + mc_.v_dim()) * dt + kv_bytes;
  const double attention_roof = std::max(attention_s, hbm > 0 ? attention_bytes / hbm : 0.0);
  items.push_back(compute("attn_core", tok + ",context=" + std::to_string(context_), rate_time(attention_roof), backward));
  if (l_.cp > 1) {  // ring attention: each step passes this rank's K and V on (backward: and their gradients)
    const std::uint64_t kv = mc_.mla ? static_cast<std::uint64_t>(mc_.kv_lora_rank + mc_.qk_rope_dim)
                                     : ceil_div(2 * static_cast<std::uint64_t>(mc_.kv_heads * mc_.head_dim), l_.tp);
    items.back().ring = static_cast<std::uint64_t>(tokens_) * kv * (backward ? 2 : 1);
  }
  const double out_w = static_cast<double>(mc_.heads) * mc_.v_dim() * h / tp;
  matmul(gemm("attn_out", tok, {{T, out_w / h, h}}, out_w * dt + 2 * T * h * dt, backward));
  tp_out();
  // The residual add after attention and after the MLP (read two, write one);
  // backward, the gradients of the two branches summed where they forked.
  const Item residual = compute("residual", "tokens=" + std::to_string(static_cast<std::int64_t>(norm_tokens)),
                                vector_time(3 * norm_tokens * h * dt), backward, 1.0);
  items.push_back(residual);
  // SwiGLU between the gate/up and the down matmul of `rows` token rows of
  // `ffn` columns: reads gate and up, writes their product; backward reads the
  // gradient, gate and up and writes two gradients (5 / 3 of the forward).
  auto swiglu = [&](double rows, double ffn) {
    items.push_back(compute("swiglu", "tokens=" + std::to_string(static_cast<std::int64_t>(rows)),
                            vector_time(3 * rows * ffn * dt), backward, 5.0 / 3.0));
  };
  // MLP.
  if (!mc_.is_moe_layer(layer)) {
    items.push_back(compute("norm", tok, vector_time(2 * norm_tokens * h * dt), backward));
    tp_in();
    const double w = 3 * h * static_cast<double>(mc_.ffn) / tp;
    const double ffn = static_cast<double>(mc_.ffn) / tp;
    matmul(gemm("mlp", tok, {{T, h, 2 * ffn}, {T, ffn, h}}, w * dt + 2 * T * h * dt, backward, true));
    tp_out();
    // (SwiGLU runs between the MLP's two matmuls; after the collective in the
    // chain, so that --mc2 finds the matmul next to it: the same time.)
    swiglu(T, ffn);
  } else {
    const double te = static_cast<double>(ep_tokens_);
    const std::string etok = "tokens=" + std::to_string(ep_tokens_);
    items.push_back(compute("norm", etok, vector_time(2 * te * h * dt), backward));
    const double router_w = h * static_cast<double>(mc_.experts);
    items.push_back(gemm("router", etok, {{te, h, static_cast<double>(mc_.experts)}}, router_w * dt + te * h * dt, backward));
    const std::uint64_t routed = static_cast<std::uint64_t>(ep_tokens_ * mc_.topk);
    auto dispatch = [&](bool first) {
      if (l_.ep == 1) return;
      const bool is_dispatch = first != backward;  // backward: the combine's gradient goes out first
      if (r_.dispatcher == Dispatcher::DeepEp) {
        moe_call(is_dispatch ? MoePhase::Dispatch : MoePhase::Combine);
      } else if (r_.dispatcher == Dispatcher::AllGather) {
        coll(Group::Ep, is_dispatch ? CollOp::AllGather : CollOp::ReduceScatter,
             static_cast<std::uint64_t>(ep_tokens_ * mc_.hidden));
      } else {
        coll(Group::Ep, CollOp::AlltoAll, ceil_div(routed * mc_.hidden, l_.ep));
      }
    };
    // Megatron's token dispatchers sort each token's top-k copies by expert
    // before sending them and put them back in token order after (read the
    // tokens, write the copies; backward the same); the deepep kernels write
    // the copies expert by expert themselves.
    const bool permutes = r_.dispatcher != Dispatcher::DeepEp;
    const double copies_bytes = te * (1 + mc_.topk) * h * dt;
    if (permutes) items.push_back(compute("permute", etok, vector_time(copies_bytes), backward, 1.0));
    dispatch(true);
    // With expert tensor parallelism the TP group gathers what each of its
    // ranks holds after the dispatch (alltoall: its routed copies; allgather:
    // its EP group's tokens) and every rank runs all of it through its
    // 1/etp of each expert's FFN; a ReduceScatter returns the partial sums.
    const int etp = l_.etp;
    const std::uint64_t held = r_.dispatcher == Dispatcher::AllGather ? static_cast<std::uint64_t>(ep_tokens_) * l_.ep : routed;
    if (etp > 1) coll(Group::Tp, CollOp::AllGather, held * mc_.hidden);
    const double local_experts = static_cast<double>(mc_.experts / l_.ep);
    const double expert_rows = te * mc_.topk * etp;  // the copies this rank's experts run
    const double active = std::min(local_experts, expert_rows);
    const double ew = 3 * h * static_cast<double>(mc_.moe_ffn) / etp;
    const double moe_ffn = static_cast<double>(mc_.moe_ffn) / etp;
    const double rows = expert_rows / active;  // per active expert (uniform routing)
    items.push_back(gemm("experts", etok, {{rows, h, 2 * moe_ffn, active}, {rows, moe_ffn, h, active}},
                         active * ew * dt + 2 * expert_rows * h * dt, backward));
    swiglu(expert_rows, moe_ffn);
    if (mc_.shared_experts > 0) {
      const double sw = 3 * h * static_cast<double>(mc_.moe_ffn) * static_cast<double>(mc_.shared_experts);
      const double shared_ffn = static_cast<double>(mc_.moe_ffn) * static_cast<double>(mc_.shared_experts);
      items.push_back(gemm("shared_experts", etok, {{te, h, 2 * shared_ffn}, {te, shared_ffn, h}}, sw * dt + 2 * te * h * dt, backward));
      swiglu(te, shared_ffn);
    }
    if (etp > 1) coll(Group::Tp, CollOp::ReduceScatter, held * mc_.hidden);
    dispatch(false);
    if (permutes) items.push_back(compute("unpermute", etok, vector_time(copies_bytes), backward, 1.0));
    if (!sp && l_.tp > 1) coll(Group::Tp, CollOp::AllGather, static_cast<std::uint64_t>(ep_tokens_ * mc_.hidden));
  }
  items.push_back(residual);
  if (backward) std::reverse(items.begin(), items.end());
  if (backward) {  // a forward AllGather's gradient is a ReduceScatter and back
    for (Item& it : items) {
      if (!it.coll || it.moe || it.group == Group::Ep) continue;
      if (it.cop == CollOp::AllGather) it.cop = CollOp::ReduceScatter;
      else if (it.cop == CollOp::ReduceScatter) it.cop = CollOp::AllGather;
    }
  }
  if (backward && !sp && l_.tp > 1) {
    // Without sequence parallelism a row-parallel layer's backward needs no
    // collective; the AllReduce goes after the next column-parallel layer's
    // input gradient (Megatron's async all-reduce of dX under dW).
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      if (!it.coll || it.moe || it.group != Group::Tp || it.cop != CollOp::AllReduce) continue;
      std::size_t j = i + 1;
      while (j < items.size() && items[j].weight_grad_share <= 0) ++j;
      if (j == items.size()) continue;
      const Item all_reduce = it;
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(i));
      items.insert(items.begin() + static_cast<std::ptrdiff_t>(j), all_reduce);  // right after that matmul
      i = j;
    }
  }
  return items;
}

int Planner::add_compute(int rank, const Item& item, std::uint32_t label) {
  std::uint64_t& sum = compute_ps_[static_cast<std::size_t>(rank)];
  if (item.time.ps > kMaxStepPs - sum) {
    throw InputError("option --batch", "rank " + std::to_string(rank) + "'s compute in one step would reach hcclsim's limit of 2^62 ps (about 53 days): use "
                                       "fewer micro-batches (or check the profile's rates and --compute)");
  }
  sum += item.time.ps;
  Op op;
  op.rank = rank;
  op.duration = item.time;
  op.label = label;
  op.layer = layer_;
  op.deps = std::move(pending_[static_cast<std::size_t>(rank)]);
  pending_[static_cast<std::size_t>(rank)].clear();
  op.prev = last_compute_[static_cast<std::size_t>(rank)];
  p_.ops.push_back(std::move(op));
  return last_compute_[static_cast<std::size_t>(rank)] = static_cast<int>(p_.ops.size()) - 1;
}

int Planner::add_coll(int dom, int part, const std::string& label, const std::vector<int>& dep_ranks, bool blocking) {
  Domain& d = p_.domains[static_cast<std::size_t>(dom)];
  Op op;
  op.coll = true;
  op.domain = dom;
  op.part = part;
  op.label = p_.intern(std::string(group_name(d.group)) + " " +
                       (p_.parts[static_cast<std::size_t>(part)].moe
                            ? (p_.parts[static_cast<std::size_t>(part)].phase == MoePhase::Dispatch ? "moe_dispatch" : "moe_combine")
                            : coll_op_name(p_.parts[static_cast<std::size_t>(part)].op)) +
                       " " + label);
  for (int r : dep_ranks) {
    if (last_compute_[static_cast<std::size_t>(r)] >= 0) op.deps.push_back(last_compute_[static_cast<std::size_t>(r)]);
    auto& pend = pending_[static_cast<std::size_t>(r)];
    op.deps.insert(op.deps.end(), pend.begin(), pend.end());
  }
  op.prev = d.last_op;
  op.layer = layer_;
  p_.ops.push_back(std::move(op));
  const int id = static_cast<int>(p_.ops.size()) - 1;
  d.last_op = id;
  if (blocking) {
    for (int r : dep_ranks) pending_[static_cast<std::size_t>(r)] = {id};
  }
  return id;
}

// The send of (chunk, micro-batch) from `sender` to `receiver`, made by
// whichever side is planned first.
int Planner::p2p(Group g, int slot, int sender, int receiver, int chunk, int mb) {
  const auto key = std::tuple{static_cast<int>(g), chunk, mb, receiver};
  const auto found = p2p_op_.find(key);
  if (found != p2p_op_.end()) return found->second;
  const int dom = domain(g, slot, group_members(g, sender, slot));
  Item it;
  it.coll = true;
  it.group = g;
  it.cop = CollOp::Broadcast;
  it.count = static_cast<std::uint64_t>(tokens_) * mc_.hidden / (r_.sequence_parallel && l_.tp > 1 ? l_.tp : 1);
  const int pt = part(dom, it);
  const int id = add_coll(dom, pt, (g == Group::PpFwd ? "F" : "B") + std::string(" mb") + std::to_string(mb) + " chunk " +
                                       std::to_string(chunk), {}, false);
  p2p_op_.emplace(key, id);
  return id;
}

// Ring attention over the CP group (Megatron's p2p context parallelism): in
// cp steps each rank computes attention against the K/V block it holds
// while it sends that block to the next rank of the ring on a stream of its
// own (a 2-rank Broadcast on the pair's domain); step k + 1 waits for the
// block of step k. The core attention's time is split evenly over the steps.
void Planner::ring_attention(int stage, const Item& item, const std::string& what) {
  Item chunk = item;
  chunk.time = Time{item.time.ps / static_cast<std::uint64_t>(l_.cp)};
  Item send;
  send.coll = true;
  send.group = Group::Cp;
  send.cop = CollOp::Broadcast;
  send.count = item.ring;
  std::map<int, int> received;  // rank -> the send that brought its block of the previous step
  for (int k = 0; k < l_.cp; ++k) {
    std::map<int, int> sent;
    for (int rank = stage * inner(); rank < (stage + 1) * inner() && k + 1 < l_.cp; ++rank) {
      if (!planned(rank)) continue;
      const int next = cp_ahead(rank, 1);
      const int dom = domain(Group::Cp, rank / l_.tp % l_.cp, {rank, next});
      const int id = add_coll(dom, part(dom, send), what + " ring " + std::to_string(k), {}, false);
      Op& op = p_.ops[static_cast<std::size_t>(id)];
      op.deps = {k == 0 ? last_compute_[static_cast<std::size_t>(rank)] : received.at(rank)};
      if (k == 0) op.deps.insert(op.deps.end(), pending_[static_cast<std::size_t>(rank)].begin(),
                                 pending_[static_cast<std::size_t>(rank)].end());
      sent[next] = id;
    }
    const std::uint32_t label = p_.intern(what + " " + chunk.op);
    for (int rank = stage * inner(); rank < (stage + 1) * inner(); ++rank) {
      if (!planned(rank)) continue;
      if (k > 0) pending_[static_cast<std::size_t>(rank)].push_back(received.at(rank));
      add_compute(rank, chunk, label);
    }
    received = std::move(sent);
  }
}

void Planner::emit(int stage, const std::vector<Item>& items, const std::string& what) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (is_tp_gather(items, i) || (it.matmul && is_tp_scatter(items, i + 1))) {
      const Item* gather = it.coll ? &it : nullptr;
      if (gather != nullptr) ++i;
      const Item* scatter = is_tp_scatter(items, i + 1) ? &items[i + 1] : nullptr;
      mc2(stage, gather, items[i], scatter, what);
      if (scatter != nullptr) ++i;
      continue;
    }
    if (!r_.mc2 && it.weight_grad_share > 0 && i + 1 < items.size() && items[i + 1].coll && !items[i + 1].moe &&
        items[i + 1].group == Group::Tp &&
        (items[i + 1].cop == CollOp::ReduceScatter || items[i + 1].cop == CollOp::AllReduce)) {
      column_parallel_backward(stage, it, items[i + 1], what);
      ++i;
      continue;
    }
    if (it.ring > 0) {
      ring_attention(stage, it, what);
      continue;
    }
    const std::uint32_t label = it.coll ? 0 : p_.intern(what + " " + it.op);
    for (int rank = stage * inner(); rank < (stage + 1) * inner(); ++rank) {
      if (!planned(rank)) continue;
      if (!it.coll) {
        add_compute(rank, it, label);
        continue;
      }
      const std::vector<int> members = group_members(it.group, rank, 0);
      if (members.front() != rank) continue;  // one collective per group instance
      const int dom = domain(it.group, 0, members);
      add_coll(dom, part(dom, it), what, members, true);
    }
  }
}

bool Planner::is_tp_gather(const std::vector<Item>& items, std::size_t i) const {
  return r_.mc2 && i + 1 < items.size() && items[i].coll && !items[i].moe && items[i].group == Group::Tp &&
         items[i].cop == CollOp::AllGather && items[i + 1].matmul;
}

bool Planner::is_tp_scatter(const std::vector<Item>& items, std::size_t i) const {
  return r_.mc2 && i < items.size() && i > 0 && items[i].coll && !items[i].moe && items[i].group == Group::Tp &&
         items[i].cop == CollOp::ReduceScatter && items[i - 1].matmul;
}

// MC2 (MindSpeed's --use-mc2: the AllGather + matmul and matmul + ReduceScatter
// kernels of torch_npu) on a stage: the TP collective and its matmul cut into
// tp pieces, one per rank's block of the sequence (assumed: the kernels'
// own tiling is not public); matmul piece k waits for gathered piece k, and
// scattered piece k for matmul piece k of every member, so the TP stream's
// transfers run under the cube's work. The next compute waits for the last
// scattered piece.
void Planner::mc2(int stage, const Item* gather, const Item& matmul, const Item* scatter, const std::string& what) {
  // Backward, MindSpeed fuses only the row-parallel layers' AllGather; a
  // column-parallel layer's ReduceScatter runs under its weight gradient
  // (its gathered input was kept from the forward).
  if (scatter != nullptr && matmul.weight_grad_share > 0) {
    const auto [input_grad, weight_grad] = split_weight_grad(matmul);
    mc2(stage, gather, input_grad, nullptr, what);
    reduce_under_weight_grad(stage, weight_grad, *scatter, what, {});
    return;
  }
  const int n = l_.tp;
  const std::uint32_t label = p_.intern(what + " " + matmul.op);
  auto piece_of = [&](const Item& coll) {
    Item piece = coll;
    piece.count = ceil_div(coll.count, static_cast<std::uint64_t>(n));
    return piece;
  };
  std::map<int, std::vector<int>> gathered;  // TP group leader -> its gathered pieces
  if (gather != nullptr) {
    for_each_tp_group(stage, [&](int leader, const std::vector<int>& members, int dom) {
      const int first = part(dom, piece_of(*gather)), later = part(dom, piece_of(*gather), false);
      for (int k = 0; k < n; ++k) gathered[leader].push_back(add_coll(dom, k == 0 ? first : later, what + " mc2", members, false));
    });
  }
  std::map<int, std::vector<int>> multiplied;  // rank -> its matmul pieces
  for (int rank = stage * inner(); rank < (stage + 1) * inner(); ++rank) {
    if (!planned(rank)) continue;
    const int leader = group_members(Group::Tp, rank, 0).front();
    for (int k = 0; k < n; ++k) {
      Item piece = matmul;
      const unsigned __int128 ps = matmul.time.ps;  // (pieces that sum to the whole, exactly)
      piece.time = Time{static_cast<std::uint64_t>(ps * static_cast<unsigned>(k + 1) / static_cast<unsigned>(n) -
                                                   ps * static_cast<unsigned>(k) / static_cast<unsigned>(n))};
      if (gather != nullptr) pending_[static_cast<std::size_t>(rank)].push_back(gathered.at(leader)[static_cast<std::size_t>(k)]);
      multiplied[rank].push_back(add_compute(rank, piece, label));
    }
  }
  if (scatter == nullptr) return;
  for_each_tp_group(stage, [&](int, const std::vector<int>& members, int dom) {
    const int first = part(dom, piece_of(*scatter)), later = part(dom, piece_of(*scatter), false);
    int last = -1;
    for (int k = 0; k < n; ++k) {
      last = add_coll(dom, k == 0 ? first : later, what + " mc2", {}, false);
      for (int m : members) {
        const auto found = multiplied.find(m);
        if (found != multiplied.end()) p_.ops[static_cast<std::size_t>(last)].deps.push_back(found->second[static_cast<std::size_t>(k)]);
      }
    }
    for (int m : members) pending_[static_cast<std::size_t>(m)] = {last};
  });
}

void Planner::for_each_tp_group(int stage, const std::function<void(int, const std::vector<int>&, int)>& fn) {
  for (int rank = stage * inner(); rank < (stage + 1) * inner(); ++rank) {
    if (!planned(rank)) continue;
    const std::vector<int> members = group_members(Group::Tp, rank, 0);
    if (members.front() == rank) fn(rank, members, domain(Group::Tp, 0, members));
  }
}

// The backward of a column-parallel linear as Megatron's
// LinearWithGradAccumulationAndAsyncCommunication runs it: the input
// gradient, then its collective (`reduction`: a ReduceScatter under sequence
// parallelism, else an AllReduce) while the weight gradient is computed; the
// next operator waits for the collective. Under sequence parallelism the
// input, kept sequence-sharded, is all-gathered again while the input
// gradient is computed, and the weight gradient waits for it. Collectives
// on the TP stream, matmuls on the compute stream.
void Planner::column_parallel_backward(int stage, const Item& matmul, const Item& reduction, const std::string& what) {
  std::map<int, int> regathered;  // TP group leader -> its AllGather
  if (reduction.cop == CollOp::ReduceScatter) {
    Item gather = reduction;
    gather.cop = CollOp::AllGather;
    for_each_tp_group(stage, [&](int leader, const std::vector<int>& members, int dom) {
      regathered[leader] = add_coll(dom, part(dom, gather), what + " input", members, false);
    });
  }
  const auto [input_grad, weight_grad] = split_weight_grad(matmul);
  const std::uint32_t label = p_.intern(what + " " + matmul.op);
  for (int rank = stage * inner(); rank < (stage + 1) * inner(); ++rank) {
    if (planned(rank)) add_compute(rank, input_grad, label);
  }
  reduce_under_weight_grad(stage, weight_grad, reduction, what, regathered);
}

std::pair<Planner::Item, Planner::Item> Planner::split_weight_grad(const Item& matmul) const {
  const std::uint64_t weight_grad_ps =
      static_cast<std::uint64_t>(std::llround(matmul.weight_grad_share * static_cast<double>(matmul.time.ps)));
  Item input_grad = matmul, weight_grad = matmul;
  input_grad.time = Time{matmul.time.ps - weight_grad_ps};
  weight_grad.time = Time{weight_grad_ps};
  return {input_grad, weight_grad};
}

void Planner::reduce_under_weight_grad(int stage, const Item& weight_grad, const Item& reduction, const std::string& what,
                                       const std::map<int, int>& regathered) {
  std::map<int, int> reduced;  // TP group leader -> its ReduceScatter or AllReduce
  for_each_tp_group(stage, [&](int leader, const std::vector<int>& members, int dom) {
    reduced[leader] = add_coll(dom, part(dom, reduction), what, members, false);
  });
  const std::uint32_t label = p_.intern(what + " " + weight_grad.op);
  for (int rank = stage * inner(); rank < (stage + 1) * inner(); ++rank) {
    if (!planned(rank)) continue;
    const int leader = group_members(Group::Tp, rank, 0).front();
    if (!regathered.empty()) pending_[static_cast<std::size_t>(rank)].push_back(regathered.at(leader));
    add_compute(rank, weight_grad, label);
    pending_[static_cast<std::size_t>(rank)].push_back(reduced.at(leader));
  }
}

void Planner::check() {
  const std::string layout = "layout " + l_.describe();
  if (l_.world() > t_.npus) {
    throw InputError("option --layout", layout + " needs " + std::to_string(l_.world()) + " ranks but the topology has " +
                                            std::to_string(t_.npus) + " NPUs (use --servers or a larger topology)");
  }
  if (l_.dp % l_.ep != 0) throw InputError("option --layout", layout + ": ep must divide dp (EP groups are taken from the DP ranks)");
  if (l_.ep > 1 && mc_.experts == 0) throw InputError("option --layout", layout + ": ep > 1 but " + mc_.file + " is a dense model");
  if (l_.etp != 1) {
    if (l_.etp != l_.tp) throw InputError("option --layout", layout + ": etp must be 1 or tp (" + std::to_string(l_.tp) + ")");
    if (mc_.experts == 0) throw InputError("option --layout", layout + ": etp > 1 but " + mc_.file + " is a dense model");
    if (!r_.sequence_parallel) throw InputError("option --layout", layout + ": etp > 1 needs sequence parallelism (drop --no-sequence-parallel)");
    if (r_.dispatcher == Dispatcher::DeepEp) {
      throw InputError("option --layout", layout + ": the deepep kernels dispatch over EP only; give etp=1");
    }
  }
  if (mc_.experts > 0 && mc_.experts % l_.ep != 0) {
    throw InputError("option --layout", layout + ": ep must divide the experts (" + std::to_string(mc_.experts) + ")");
  }
  if (mc_.heads % l_.tp != 0 || (!mc_.mla && mc_.kv_heads % l_.tp != 0 && l_.tp % mc_.kv_heads != 0)) {
    throw InputError("option --layout", layout + ": tp must divide the attention heads (" + std::to_string(mc_.heads) +
                                            ") and the key/value heads (" + std::to_string(mc_.kv_heads) + ")");
  }
  const std::int64_t chunks = static_cast<std::int64_t>(l_.pp) * l_.vpp;
  if (mc_.layers < chunks) {
    throw InputError("option --layout", layout + ": pp x vpp = " + std::to_string(chunks) + " chunks but the model has " +
                                            std::to_string(mc_.layers) + " layers");
  }
  if (l_.vpp > 1 && r_.phase != StepPhase::Train) throw InputError("option --layout", "vpp applies to --phase train only");
  if (l_.vpp > 1 && l_.pp == 1) throw InputError("option --layout", layout + ": vpp > 1 needs pp > 1 (virtual stages of a pipeline)");
  const Batch& b = r_.batch;
  if (b.global % (b.micro * l_.dp) != 0) {
    throw InputError("option --batch", "global=" + std::to_string(b.global) + " is not a multiple of micro x dp = " +
                                           std::to_string(b.micro * l_.dp) + " (" + layout + ")");
  }
  const std::int64_t m = b.global / (b.micro * l_.dp);
  if (m > 1000000) throw InputError("option --batch", "more than 10^6 micro-batches per pipeline");
  p_.m = static_cast<int>(m);
  if (l_.vpp > 1 && m % l_.pp != 0) {
    throw InputError("option --batch", "the interleaved schedule (vpp > 1) needs the micro-batches per pipeline (" +
                                           std::to_string(m) + ") to be a multiple of pp (" + std::to_string(l_.pp) + ")");
  }
  if (b.micro * b.seq > (std::int64_t{1} << 26)) {
    throw InputError("option --batch", "micro x seq = " + std::to_string(b.micro * b.seq) +
                                           " tokens per micro-batch; at most 2^26 (67,108,864) are modelled");
  }
  if (r_.overlap_param_gather && !r_.distributed_optimizer) {
    throw InputError("option --overlap-param-gather", "the parameters are gathered by the distributed optimizer; drop "
                                                       "--no-distributed-optimizer");
  }
  if (r_.recompute.on && r_.phase != StepPhase::Train) {
    throw InputError("option --recompute", "recomputation is a training step's (--phase train)");
  }
  // Every rank's operations are planned: refuse a plan that would not fit in memory.
  // (Per rank and layer: about 20 operations, and with --mc2 the tp pieces of
  // its three fused matmuls and a TP collective's four; a recomputed layer
  // runs its forward twice; a symmetric plan plans the representatives only.)
  const double per_layer = 20.0 + (r_.mc2 ? 3.0 * l_.tp + 4.0 : 0.0);
  const double passes = r_.phase == StepPhase::Train ? (r_.recompute.on ? 3 : 2) : 1;
  const double ops = static_cast<double>(l_.world()) * static_cast<double>(m) * (static_cast<double>(mc_.layers) / l_.pp + 2) *
                     per_layer * passes * l_.cp / (p_.symmetric ? l_.tp * l_.dp : 1);
  if (ops > kMaxOps) {
    throw TooLargeError("option --batch", "the step would plan about " + std::to_string(static_cast<std::uint64_t>(ops)) +
                                           " operations (ranks x micro-batches x layers per stage); at most " +
                                           std::to_string(static_cast<std::uint64_t>(kMaxOps)) +
                                           " are planned: use fewer micro-batches (a larger micro or a smaller global)");
  }
  p_.ops.reserve(static_cast<std::size_t>(ops));
  if (r_.phase != StepPhase::Decode && b.seq % l_.cp != 0) {
    throw InputError("option --batch", "seq=" + std::to_string(b.seq) + " is not a multiple of cp=" + std::to_string(l_.cp));
  }
  if (t_.npu.memory.hbm_bandwidth.bytes_per_s == 0 && r_.compute.find("*", "*") == std::nullopt) {
    throw InputError(t_.profile_file + " at $.npu.memory.hbm_bandwidth",
                     "missing: the compute roofline needs the HBM bandwidth (or give every operator in --compute)");
  }
  if (r_.dispatcher == Dispatcher::DeepEp && mc_.hidden % 128 != 0) {
    throw InputError("option --dispatcher", "deepep needs hidden_size a multiple of 128 (" + mc_.file + ")");
  }
}

void Planner::run() {
  check();
  const Batch& b = r_.batch;
  tokens_ = r_.phase == StepPhase::Decode ? b.micro : b.micro * b.seq / l_.cp;
  context_ = b.seq;
  ep_tokens_ = std::max<std::int64_t>(1, tokens_ / l_.tp);
  const int world = l_.world();
  last_compute_.assign(static_cast<std::size_t>(world), -1);
  compute_ps_.assign(static_cast<std::size_t>(world), 0);
  pending_.assign(static_cast<std::size_t>(world), {});
  const int chunks = l_.pp * l_.vpp;
  const std::vector<std::int64_t> starts = layer_starts(r_, mc_.layers);
  const int m = p_.m;
  const bool train = r_.phase == StepPhase::Train;
  const bool sp = r_.sequence_parallel && l_.tp > 1;
  const double h = static_cast<double>(mc_.hidden);
  const double T = static_cast<double>(tokens_);
  // A layer's parameters on a rank: dense (attention, and the dense MLP or
  // the MoE layer's router and shared experts, whole) and its experts'.
  auto layer_params = [&](std::int64_t layer) {
    std::int64_t dense = mc_.attention_params() / l_.tp;
    std::int64_t expert = 0;
    if (mc_.is_moe_layer(layer)) {
      dense += mc_.hidden * mc_.experts + mc_.shared_experts * mc_.expert_params();
      expert = mc_.experts / l_.ep * mc_.expert_params() / l_.etp;
    } else {
      dense += mc_.dense_mlp_params() / l_.tp;
    }
    return std::pair{dense, expert};
  };
  // The loss over this rank's share of the vocabulary's logits (fp32).
  auto cross_entropy = [&](bool backward) {
    const double logits = T * static_cast<double>(mc_.vocab) / l_.tp;
    return compute("cross_entropy", "tokens=" + std::to_string(tokens_), vector_time(kCrossEntropyForwardBytes * logits),
                   backward, kCrossEntropyBackwardBytes / kCrossEntropyForwardBytes);
  };
  for (int s = 0; s < l_.pp; ++s) {
    // The stage's order of (forward?, chunk, micro-batch): 1F1B, interleaved with vpp.
    struct Action {
      bool fwd;
      int chunk;  // local chunk
      int mb;
    };
    std::vector<Action> order;
    const int virtual_mbs = m * l_.vpp;
    auto fwd_of = [&](int k) { return Action{true, (k % (l_.pp * l_.vpp)) / l_.pp, (k / (l_.pp * l_.vpp)) * l_.pp + k % l_.pp}; };
    auto bwd_of = [&](int k) {
      return Action{false, l_.vpp - 1 - (k % (l_.pp * l_.vpp)) / l_.pp, (k / (l_.pp * l_.vpp)) * l_.pp + k % l_.pp};
    };
    if (!train) {
      for (int k = 0; k < virtual_mbs; ++k) order.push_back(fwd_of(k));
    } else {
      const int warmup = l_.vpp == 1 ? std::min(l_.pp - s - 1, m)
                                     : std::min((l_.pp - s - 1) * 2 + (l_.vpp - 1) * l_.pp, virtual_mbs);
      for (int k = 0; k < warmup; ++k) order.push_back(fwd_of(k));
      for (int k = 0; k < virtual_mbs - warmup; ++k) {
        order.push_back(fwd_of(warmup + k));
        order.push_back(bwd_of(k));
      }
      for (int k = virtual_mbs - warmup; k < virtual_mbs; ++k) order.push_back(bwd_of(k));
    }
    // Gradient buckets of the last micro-batch's backward (per chunk's last backward).
    std::int64_t dense_acc = 0, expert_acc = 0;
    const std::int64_t bucket = std::max(kBucketParams, kBucketPerDp * l_.dp);
    const int edp = l_.dp / l_.ep;
    // Without --overlap-grad-reduce the buckets wait for the end of the backward.
    std::vector<std::pair<bool, std::int64_t>> held;   // (expert, parameters) of buckets not yet reduced
    bool backward_done = false;
    auto flush = [&](bool expert, std::int64_t& acc) {
      if (acc == 0) return;
      if (!r_.overlap_grad_reduce && !backward_done) {
        held.push_back({expert, acc});
        acc = 0;
        return;
      }
      const int size = expert ? edp : l_.dp;
      if (size > 1) {
        Item it;
        it.coll = true;
        it.group = expert ? Group::Edp : Group::Dp;
        // The distributed optimizer reduce-scatters a bucket; plain DDP all-reduces it.
        it.cop = r_.distributed_optimizer ? CollOp::ReduceScatter : CollOp::AllReduce;
        it.count = r_.distributed_optimizer ? ceil_div(static_cast<std::uint64_t>(acc), static_cast<std::uint64_t>(size))
                                            : static_cast<std::uint64_t>(acc);
        for (int rank = s * inner(); rank < (s + 1) * inner(); ++rank) {
          if (!planned(rank)) continue;
          const std::vector<int> members = group_members(it.group, rank, 0);
          if (members.front() != rank) continue;
          const int dom = domain(it.group, 0, members);
          // On a DP stream of its own, after the members' last compute (--overlap-grad-reduce).
          std::vector<int> deps;
          for (int r : members) {   // (a symmetric plan has no ops on the members it does not plan)
            if (last_compute_[static_cast<std::size_t>(r)] >= 0) deps.push_back(last_compute_[static_cast<std::size_t>(r)]);
          }
          const int id = add_coll(dom, part(dom, it), "grads", {}, false);
          p_.ops[static_cast<std::size_t>(id)].deps = deps;
          for (int r : members) end_waits_[static_cast<std::size_t>(r)].push_back(id);
        }
      }
      acc = 0;
    };
    end_waits_.assign(static_cast<std::size_t>(world), {});
    std::int64_t local_params = 0, local_expert_params = 0;
    // The head's and the embedding's parameters, in the gradient buckets,
    // the optimizer's shard and the parameter gathers like a layer's (a
    // tied head on a single stage is the embedding: counted once).
    const std::int64_t head_params =
        mc_.tied_embeddings && l_.pp == 1 ? 0 : static_cast<std::int64_t>(static_cast<double>(mc_.vocab) * h / l_.tp);
    const std::int64_t embedding_params = mc_.vocab * mc_.hidden / l_.tp;
    // --overlap-param-gather: the parameters are gathered at the step's
    // start, bucket by bucket in the forward's order (in steady state a
    // step's gathers overlap its own forward), and the first micro-batch
    // waits at each layer for its bucket. The buckets are the gradients':
    // those the last micro-batch's backward fills, in its order.
    std::map<std::int64_t, std::pair<int, int>> bucket_of;   // layer (-1 embedding, -2 head) -> (dense, expert bucket or -1)
    std::map<std::tuple<bool, int, int>, int> gather_op;      // (expert, bucket, DP group leader) -> its AllGather
    if (train && r_.overlap_param_gather) {
      std::vector<std::int64_t> sizes[2];   // parameters per bucket, dense and expert, in the backward's order
      std::int64_t acc[2] = {0, 0};
      auto close = [&](int kind) {
        if (acc[kind] > 0) sizes[kind].push_back(acc[kind]);
        acc[kind] = 0;
      };
      for (const Action& a : order) {
        if (a.fwd || a.mb != m - 1) continue;
        const int g = a.chunk * l_.pp + s;
        if (g == chunks - 1) {
          bucket_of[-2] = {static_cast<int>(sizes[0].size()), -1};
          acc[0] += head_params;
        }
        for (std::int64_t layer = starts[g + 1] - 1; layer >= starts[g]; --layer) {
          const auto [dense, expert] = layer_params(layer);
          bucket_of[layer] = {static_cast<int>(sizes[0].size()), expert > 0 ? static_cast<int>(sizes[1].size()) : -1};
          acc[0] += dense;
          acc[1] += expert;
          if (acc[0] >= bucket) close(0);
          if (acc[1] >= bucket) close(1);
        }
        if (g == 0) {
          bucket_of[-1] = {static_cast<int>(sizes[0].size()), -1};
          acc[0] += embedding_params;
        }
      }
      close(0);
      close(1);
      for (const bool expert : {false, true}) {
        const int size = expert ? edp : l_.dp;
        const std::vector<std::int64_t>& list = sizes[expert ? 1 : 0];
        if (size <= 1) continue;
        for (int b = static_cast<int>(list.size()) - 1; b >= 0; --b) {
          Item ag;
          ag.coll = true;
          ag.group = expert ? Group::Edp : Group::Dp;
          ag.cop = CollOp::AllGather;
          ag.count = ceil_div(static_cast<std::uint64_t>(list[static_cast<std::size_t>(b)]), static_cast<std::uint64_t>(size));
          for (int rank = s * inner(); rank < (s + 1) * inner(); ++rank) {
            if (!planned(rank)) continue;
            const std::vector<int> members = group_members(ag.group, rank, 0);
            if (members.front() != rank) continue;
            const int dom = domain(ag.group, 0, members);
            gather_op[{expert, b, rank}] = add_coll(dom, part(dom, ag), "params", {}, false);
          }
        }
      }
    }
    std::set<std::pair<int, int>> waited;   // (rank, gather op) already waited for
    auto wait_params = [&](std::int64_t key) {
      const auto found = bucket_of.find(key);
      if (found == bucket_of.end()) return;
      for (int rank = s * inner(); rank < (s + 1) * inner(); ++rank) {
        if (!planned(rank)) continue;
        for (const bool expert : {false, true}) {
          const int b = expert ? found->second.second : found->second.first;
          if (b < 0) continue;
          const int leader = group_members(expert ? Group::Edp : Group::Dp, rank, 0).front();
          const auto op = gather_op.find({expert, b, leader});
          if (op != gather_op.end() && waited.insert({rank, op->second}).second) {
            pending_[static_cast<std::size_t>(rank)].push_back(op->second);
          }
        }
      }
    };
    for (const Action& a : order) {
      const int g = a.chunk * l_.pp + s;  // global chunk
      const std::string what = std::string(a.fwd ? "F" : "B") + " mb" + std::to_string(a.mb) +
                               (l_.vpp > 1 ? " chunk" + std::to_string(g) : "");
      // Input from the previous chunk (forward) or gradient from the next (backward).
      const bool needs_input = a.fwd ? g > 0 : g < chunks - 1;
      for (int rank = s * inner(); rank < (s + 1) * inner() && needs_input && l_.pp > 1; ++rank) {
        if (!planned(rank)) continue;
        const int other = a.fwd ? (s + l_.pp - 1) % l_.pp : (s + 1) % l_.pp;
        const Group pg = a.fwd ? Group::PpFwd : Group::PpBwd;
        const int slot = a.fwd ? other : s;
        const int id = p2p(pg, slot, at_stage(rank, other), rank, a.fwd ? g : g + 1, a.mb);
        // The receiver posts it after its previous compute; its next compute waits for it.
        if (last_compute_[static_cast<std::size_t>(rank)] >= 0) {
          p_.ops[static_cast<std::size_t>(id)].deps.push_back(last_compute_[static_cast<std::size_t>(rank)]);
        }
        pending_[static_cast<std::size_t>(rank)].push_back(id);
      }
      const bool first_chunk = g == 0, last_chunk = g == chunks - 1;
      const std::string tok = "tokens=" + std::to_string(tokens_);
      const bool first_mb_fwd = a.fwd && a.mb == 0 && !gather_op.empty();
      if (first_mb_fwd && first_chunk) wait_params(-1);
      if (a.fwd && first_chunk) emit(s, {compute("embedding", tok, vector_time(2 * T * h * kDtype), false)}, what);
      const bool last_mb_bwd = !a.fwd && a.mb == m - 1;
      if (a.fwd) {
        for (std::int64_t layer = starts[g]; layer < starts[g + 1]; ++layer) {
          layer_ = static_cast<std::int32_t>(layer);
          if (first_mb_fwd) wait_params(layer);
          emit(s, items_of_layer(layer, false), what + " L" + std::to_string(layer));
          layer_ = -1;
        }
        if (last_chunk) {
          const double w = static_cast<double>(mc_.vocab) * h / l_.tp;
          if (first_mb_fwd) wait_params(-2);
          if (sp) {
            Item ag;
            ag.coll = true;
            ag.group = Group::Tp;
            ag.cop = CollOp::AllGather;
            ag.count = ceil_div(static_cast<std::uint64_t>(tokens_) * mc_.hidden, l_.tp);
            emit(s, {ag}, what + " head");
          }
          emit(s, {gemm("lm_head", tok, {{T, h, w / h}}, w * kDtype + T * h * kDtype + T * mc_.vocab / l_.tp * 4.0, false)},
               what);
          if (train) emit(s, {cross_entropy(false)}, what);
        }
      } else {
        if (last_chunk) {
          const double w = static_cast<double>(mc_.vocab) * h / l_.tp;
          emit(s, {cross_entropy(true),
                   gemm("lm_head", tok, {{T, h, w / h}}, w * kDtype + T * h * kDtype + T * mc_.vocab / l_.tp * 4.0, true)},
               what);
          if (last_mb_bwd) {
            dense_acc += head_params;
            local_params += head_params;
          }
        }
        for (std::int64_t layer = starts[g + 1] - 1; layer >= starts[g]; --layer) {
          layer_ = static_cast<std::int32_t>(layer);
          if (r_.recompute.covers(layer - starts[g])) {
            emit(s, items_of_layer(layer, false), what + " L" + std::to_string(layer) + " recompute");
          }
          emit(s, items_of_layer(layer, true), what + " L" + std::to_string(layer));
          layer_ = -1;
          if (last_mb_bwd) {
            const auto [dense, expert] = layer_params(layer);
            dense_acc += dense;
            expert_acc += expert;
            local_params += dense;
            local_expert_params += expert;
            if (dense_acc >= bucket) flush(false, dense_acc);
            if (expert_acc >= bucket) flush(true, expert_acc);
          }
        }
        if (first_chunk) {
          emit(s, {compute("embedding", tok, vector_time(2 * T * h * kDtype), true)}, what);
          if (last_mb_bwd) {
            dense_acc += embedding_params;
            local_params += embedding_params;
          }
        }
      }
      // Send the output (forward) or the input's gradient (backward) on.
      const bool sends = a.fwd ? !last_chunk : !first_chunk;
      if (sends && l_.pp > 1) {
        for (int rank = s * inner(); rank < (s + 1) * inner(); ++rank) {
          if (!planned(rank)) continue;
          const int other = a.fwd ? (s + 1) % l_.pp : (s + l_.pp - 1) % l_.pp;
          const Group pg = a.fwd ? Group::PpFwd : Group::PpBwd;
          const int slot = a.fwd ? s : other;
          const int id = p2p(pg, slot, rank, at_stage(rank, other), a.fwd ? g + 1 : g, a.mb);
          p_.ops[static_cast<std::size_t>(id)].deps.push_back(last_compute_[static_cast<std::size_t>(rank)]);
        }
      }
    }
    if (train) {
      flush(false, dense_acc);
      flush(true, expert_acc);
      backward_done = true;   // the held buckets go now, in their order
      for (auto& [expert, params] : held) flush(expert, params);
      // The optimizer on each rank's shard, after its gradients are reduced; then the parameters are gathered.
      for (int rank = s * inner(); rank < (s + 1) * inner(); ++rank) {
        if (!planned(rank)) continue;
        auto& waits = end_waits_[static_cast<std::size_t>(rank)];
        pending_[static_cast<std::size_t>(rank)].insert(pending_[static_cast<std::size_t>(rank)].end(), waits.begin(), waits.end());
      }
      const int shards = r_.distributed_optimizer ? l_.dp : 1, expert_shards = r_.distributed_optimizer ? edp : 1;
      const double shard = static_cast<double>(local_params) / shards + static_cast<double>(local_expert_params) / expert_shards;
      emit(s, {compute("optimizer", "params=" + std::to_string(static_cast<std::int64_t>(shard)),
                       vector_time(shard * kOptimizerBytesPerParam), false)},
           "step");
      for (const auto& [expert, params, size] :
           {std::tuple{false, local_params, l_.dp}, std::tuple{true, local_expert_params, edp}}) {
        if (!r_.distributed_optimizer || r_.overlap_param_gather || size <= 1 || params == 0) continue;
        for (std::int64_t done = 0; done < params; done += bucket) {
          Item ag;
          ag.coll = true;
          ag.group = expert ? Group::Edp : Group::Dp;
          ag.cop = CollOp::AllGather;
          ag.count = ceil_div(static_cast<std::uint64_t>(std::min(bucket, params - done)), static_cast<std::uint64_t>(size));
          emit(s, {ag}, "params");
        }
      }
      // The step ends when every rank has its parameters: a zero-length marker after the gathers.
      Item end;
      end.op = "end";
      end.shape = "-";
      emit(s, {end}, "step");
    }
  }
}


// Each op's timing: compute ops their start and end; a collective the
// latest end of what it waits for (its start) and its end on each member.
struct OpTimes {
  std::vector<std::uint64_t> start, end;          // ps; end: the latest over members
  // Collectives: each member's end, in the domain's order (member_end(i, k)),
  // held as one array: op i's from member_at[i].
  std::vector<std::uint64_t> member_ends;
  std::vector<std::size_t> member_at;
  std::uint64_t member_end(std::size_t op, std::size_t k) const { return member_ends[member_at[op] + k]; }
  // Places for every collective's members (after start and end are sized).
  void place_members(const StepPlan& plan) {
    member_at.assign(plan.ops.size(), 0);
    std::size_t total = 0;
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      member_at[i] = total;
      if (plan.ops[i].coll) total += plan.domains[static_cast<std::size_t>(plan.ops[i].domain)].members.size();
    }
    member_ends.assign(total, 0);
  }
};

// What an op waits for: its dependencies, then its stream's (or domain's) previous op.
template <class F>
void for_each_pred(const Op& op, F&& f) {
  for (int p : op.deps) f(p);
  if (op.prev >= 0) f(op.prev);
}

const TaskGraph& part_graph(const StepPlan& plan, int index) {
  auto& graphs = const_cast<StepPlan&>(plan).graphs;
  const auto found = graphs.find(index);
  if (found != graphs.end()) return found->second;
  const Part& part = plan.parts[static_cast<std::size_t>(index)];
  const TopologySpec& view = *plan.views[static_cast<std::size_t>(part.view)];
  TaskGraph g;
  if (part.moe) {
    std::string kernel;
    g = build_moe(part.moe_params, part.phase, make_routing(part.moe_params),
                  moe_fabric(plan.topology->npu, plan.topology->sdma_domain_of, part.members), &kernel);
  } else {
    const PerfRequest req = part_request(view, part);
    const std::uint64_t size = data_size_of(part.op, req.ranks, req.dtype, part.count);
    g = build_executor(collective_for(req, size), exec_context(view, req), perf_choice(view, req, size));
  }
  // Each collective is an operation of its own: every stream it uses pays
  // npu.stream.op_launch before its first task, as a collective run alone
  // does. The step's graph says so (launches_in_graph), so the stream
  // engines charge no launch of their own at the run's start: the first
  // collective on a stream pays one launch, and compute starts at once, as
  // in the estimate. The stream engine puts its dispatch gap between the
  // launch and the first task, so the launch's own delay is op_launch less
  // that gap: the first task starts op_launch after the stream takes the
  // collective up, as it does in a collective run alone.
  TaskGraph launched;
  TaskGraph::ThreadIndex streams;
  const StreamParams& stream = plan.topology->npu.stream;
  const Time launch = stream.op_launch.ps > stream.task_dispatch.ps ? stream.op_launch - stream.task_dispatch : Time{};
  for (const Thread& th : g.threads()) {
    const ThreadId id = launched.add_thread(th.rank, th.name);
    streams.emplace(std::pair{th.rank, th.name}, id);
    if (part.launched && !th.tasks.empty()) launched.delay(id, launch, "op launch");
  }
  if (part.launched && stream.op_launch.ps > 0) launched.note_constant(Constant::StreamOpLaunch);
  std::vector<int> identity(static_cast<std::size_t>(part.members.size()));
  for (std::size_t r = 0; r < identity.size(); ++r) identity[r] = static_cast<int>(r);
  launched.append(g, identity, 0, "", &streams);
  return graphs.emplace(index, std::move(launched)).first->second;
}

// The report, the same from either back end's times.
StepResult report(const StepPlan& plan, const OpTimes& times) {
  StepResult out;
  const int world = plan.request.layout.world();
  std::vector<std::uint64_t> rank_end(static_cast<std::size_t>(world), 0);
  std::uint64_t step_end = 0;
  int last_op = -1;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if (!op.coll) {
      rank_end[static_cast<std::size_t>(op.rank)] = std::max(rank_end[static_cast<std::size_t>(op.rank)], times.end[i]);
    } else {
      const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
      for (std::size_t k = 0; k < d.members.size(); ++k) {
        auto& e = rank_end[static_cast<std::size_t>(d.members[k])];
        e = std::max(e, times.member_end(i, k));
      }
    }
    if (last_op < 0 || times.end[i] > step_end) {
      step_end = times.end[i];
      last_op = static_cast<int>(i);
    }
  }
  const int crit = static_cast<int>(std::max_element(rank_end.begin(), rank_end.end()) - rank_end.begin());
  out.critical_rank = crit;
  out.micro_batches = plan.m;
  out.step_time_us = static_cast<double>(step_end) / 1e6;
  // Intervals on the critical rank.
  using Interval = std::pair<std::uint64_t, std::uint64_t>;
  std::vector<Interval> compute, all;
  std::map<std::string, std::vector<Interval>> by_group;
  std::map<std::string, std::set<std::string>> executors;
  std::map<std::string, std::vector<int>> members;
  double compute_ps = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if (!op.coll) {
      if (op.rank != crit) continue;
      compute.push_back({times.start[i], times.end[i]});
      compute_ps += static_cast<double>(times.end[i] - times.start[i]);
      continue;
    }
    const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
    const auto at = std::find(d.members.begin(), d.members.end(), crit);
    if (at == d.members.end()) continue;
    const std::uint64_t end = times.member_end(i, static_cast<std::size_t>(at - d.members.begin()));
    const std::string name = domain_name(d);
    by_group[name].push_back({std::min(times.start[i], end), end});
    executors[name].insert(plan.parts[static_cast<std::size_t>(op.part)].executor);
    if (members[name].empty()) members[name] = d.members;
  }
  auto measure = [](std::vector<Interval> v) {
    std::sort(v.begin(), v.end());
    std::uint64_t total = 0, until = 0;
    for (const auto& [a, b] : v) {
      const std::uint64_t from = std::max(a, until);
      if (b > from) total += b - from;
      until = std::max(until, b);
    }
    return total;
  };
  const std::uint64_t compute_measure = measure(compute);
  all = compute;
  const Layout& l = plan.request.layout;
  for (const auto& [name, intervals] : by_group) {
    StepGroupResult g;
    g.group = name;
    g.ranks = members[name];
    if (name == "pp") {  // the whole pipeline of the critical rank
      g.ranks.clear();
      const int inner = l.tp * l.cp * l.dp;
      for (int s = 0; s < l.pp; ++s) g.ranks.push_back(crit % inner + s * inner);
    }
    if (name == "cp") {  // the whole ring of the critical rank
      g.ranks.clear();
      const int t = crit % l.tp, rest = crit / (l.tp * l.cp);
      for (int c = 0; c < l.cp; ++c) g.ranks.push_back(t + l.tp * (c + l.cp * rest));
    }
    std::string ex;
    for (const std::string& e : executors[name]) ex += (ex.empty() ? "" : "+") + e;
    g.executor = ex;
    g.time_us = static_cast<double>(measure(intervals)) / 1e6;  // (a rank's send and receive of a ring overlap)
    std::vector<Interval> with = compute;
    with.insert(with.end(), intervals.begin(), intervals.end());
    g.exposed_us = static_cast<double>(measure(with) - compute_measure) / 1e6;
    all.insert(all.end(), intervals.begin(), intervals.end());
    out.groups.push_back(std::move(g));
  }
  const std::vector<std::string> order = {"tp", "cp", "ep", "pp", "dp"};
  std::stable_sort(out.groups.begin(), out.groups.end(), [&](const StepGroupResult& a, const StepGroupResult& b) {
    return std::find(order.begin(), order.end(), a.group) < std::find(order.begin(), order.end(), b.group);
  });
  out.compute_us = compute_ps / 1e6;
  const std::uint64_t rank_busy = measure(all);
  out.bubble_us = static_cast<double>(rank_end[static_cast<std::size_t>(crit)] - std::min(rank_busy, rank_end[static_cast<std::size_t>(crit)])) / 1e6;
  // The critical path: from the op that ended last, back through what released each latest.
  std::vector<StepPathEntry> path;
  for (int i = last_op; i >= 0;) {
    const Op& op = plan.ops[static_cast<std::size_t>(i)];
    StepPathEntry e;
    e.op = plan.labels[op.label];
    e.group = op.coll ? domain_name(plan.domains[static_cast<std::size_t>(op.domain)]) : "compute";
    e.rank = op.coll ? plan.domains[static_cast<std::size_t>(op.domain)].members.front() : op.rank;
    e.start_us = static_cast<double>(times.start[static_cast<std::size_t>(i)]) / 1e6;
    e.end_us = static_cast<double>(times.end[static_cast<std::size_t>(i)]) / 1e6;
    path.push_back(e);
    int next = -1;
    for_each_pred(op, [&](int p) {
      if (next < 0 || times.end[static_cast<std::size_t>(p)] > times.end[static_cast<std::size_t>(next)] ||
          (times.end[static_cast<std::size_t>(p)] == times.end[static_cast<std::size_t>(next)] && p < next)) {
        next = p;
      }
    });
    i = next;
  }
  std::reverse(path.begin(), path.end());
  out.critical_path = std::move(path);
  // Per layer on the critical rank, over its micro-batches and both directions.
  std::map<std::int32_t, std::pair<std::vector<Interval>, std::vector<Interval>>> by_layer;   // compute, communication
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if (op.layer < 0) continue;
    if (!op.coll) {
      if (op.rank == crit) by_layer[op.layer].first.push_back({times.start[i], times.end[i]});
      continue;
    }
    const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
    const auto at = std::find(d.members.begin(), d.members.end(), crit);
    if (at == d.members.end()) continue;
    const std::uint64_t end = times.member_end(i, static_cast<std::size_t>(at - d.members.begin()));
    by_layer[op.layer].second.push_back({std::min(times.start[i], end), end});
  }
  for (const auto& [layer, iv] : by_layer) {
    StepLayerResult l;
    l.layer = layer;
    const std::uint64_t comp = measure(iv.first);
    std::vector<Interval> both = iv.first;
    both.insert(both.end(), iv.second.begin(), iv.second.end());
    l.compute_us = static_cast<double>(comp) / 1e6;
    l.communication_us = static_cast<double>(measure(iv.second)) / 1e6;
    l.exposed_us = static_cast<double>(measure(both) - comp) / 1e6;
    out.layers.push_back(l);
  }
  out.assumed.assign(plan.compute_assumed.begin(), plan.compute_assumed.end());
  return out;
}

void add_assumed(StepResult& r, const std::vector<std::string>& more) {
  std::set<std::string> all(r.assumed.begin(), r.assumed.end());
  all.insert(more.begin(), more.end());
  r.assumed.assign(all.begin(), all.end());
}

}  // namespace

StepPlanPtr plan_step(const TopologySpec& topology, const StepRequest& request, StepPlanScope scope) {
  StepPlanPtr plan(new StepPlan);
  plan->topology = &topology;
  plan->request = request;
  plan->symmetric = scope == StepPlanScope::Symmetric;
  Planner(*plan).run();
  return plan;
}

std::uint64_t step_plan_ops(const StepPlan& plan) { return plan.ops.size(); }

bool step_has_moe_kernels(const StepPlan& plan) {
  return std::any_of(plan.parts.begin(), plan.parts.end(), [](const Part& p) { return p.moe; });
}

void require_every_rank(const StepPlan& plan, const char* what) {
  if (plan.symmetric) throw std::logic_error(std::string(what) + " needs a plan of every rank (StepPlanScope::EveryRank)");
}

std::uint64_t step_tasks(const StepPlan& plan) {
  require_every_rank(plan, "step_tasks");
  std::uint64_t tasks = 0;
  for (const Op& op : plan.ops) {
    if (!op.coll) {
      ++tasks;
      continue;
    }
    tasks += part_graph(plan, op.part).tasks().size() + plan.domains[static_cast<std::size_t>(op.domain)].members.size();
  }
  return tasks;
}

// The groups whose collectives cross the same link directions while both
// are under way in `t`'s schedule. A domain crosses the routes between its
// members: every ordered pair up to 64 members, else ring neighbours both
// ways (the rings and neighbour steps of large groups' executors). Only
// the plan's domains count: in the symmetric plan those of TP and DP index
// 0 of each stage, whose sharing the others' mirrors.
std::vector<StepSharedLinks> shared_links(const StepPlan& plan, const OpTimes& t) {
  constexpr std::size_t kAllPairsMax = 64;
  const RouteFinder routes(*plan.topology);
  std::map<std::string, std::set<int>> crossed;   // group name -> channels its domains' routes cross
  std::vector<int> path;
  for (const Domain& d : plan.domains) {
    const std::vector<int>& m = d.members;
    if (m.size() < 2) continue;
    std::set<int>& used = crossed[domain_name(d)];
    auto add = [&](int a, int b) {
      path.clear();
      routes.append_path(a, b, path);
      used.insert(path.begin(), path.end());
    };
    if (m.size() <= kAllPairsMax) {
      for (const int a : m) {
        for (const int b : m) {
          if (a != b) add(a, b);
        }
      }
    } else {
      for (std::size_t i = 0; i < m.size(); ++i) {
        add(m[i], m[(i + 1) % m.size()]);
        add(m[(i + 1) % m.size()], m[i]);
      }
    }
  }
  // When each group has a collective under way: the union of their [start, end).
  using Intervals = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  std::map<std::string, Intervals> busy;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if (op.coll && t.end[i] > t.start[i]) busy[domain_name(plan.domains[static_cast<std::size_t>(op.domain)])].push_back({t.start[i], t.end[i]});
  }
  for (auto& [name, list] : busy) {
    std::sort(list.begin(), list.end());
    Intervals merged;
    for (const auto& iv : list) {
      if (!merged.empty() && iv.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, iv.second);
      } else {
        merged.push_back(iv);
      }
    }
    list = std::move(merged);
  }
  auto together = [](const Intervals& a, const Intervals& b) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
      const std::uint64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
      if (hi > lo) sum += hi - lo;
      (a[i].second < b[j].second ? i : j)++;
    }
    return sum;
  };
  std::vector<StepSharedLinks> out;
  for (auto a = crossed.begin(); a != crossed.end(); ++a) {
    for (auto b = std::next(a); b != crossed.end(); ++b) {
      std::vector<int> both;
      std::set_intersection(a->second.begin(), a->second.end(), b->second.begin(), b->second.end(), std::back_inserter(both));
      if (both.empty() || busy.count(a->first) == 0 || busy.count(b->first) == 0) continue;
      const std::uint64_t ps = together(busy.at(a->first), busy.at(b->first));
      if (ps == 0) continue;
      std::set<std::string> kinds;
      for (const int c : both) kinds.insert(plan.topology->links[static_cast<std::size_t>(c / 2)].kind);
      out.push_back({a->first, b->first, {kinds.begin(), kinds.end()}, static_cast<int>(both.size()), static_cast<double>(ps) / 1e6});
    }
  }
  return out;
}

// The estimate's schedule as a trace: a slice per operation on each planned
// rank (a symmetric plan's representatives), compute on "compute", a group's
// collectives on "<group>/collectives", as the detailed trace's tracks.
void trace_estimate(const StepPlan& plan, const OpTimes& t, TraceWriter& trace) {
  std::vector<char> planned(static_cast<std::size_t>(plan.topology->npus), 0);
  for (const Op& op : plan.ops) {
    if (!op.coll) planned[static_cast<std::size_t>(op.rank)] = 1;
  }
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    const std::string& name = plan.labels[op.label];
    if (!op.coll) {
      trace.add_slice(op.rank, "compute", name, Time{t.start[i]}, Time{t.end[i] - t.start[i]}, {{"model", "estimate"}});
      continue;
    }
    const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
    const Part& part = plan.parts[static_cast<std::size_t>(op.part)];
    const std::map<std::string, std::string> args{
        {"model", "estimate"}, {"group", domain_name(d)}, {"executor", part.executor}, {"ranks", members_text(d.members)}};
    for (std::size_t k = 0; k < d.members.size(); ++k) {
      if (!planned[static_cast<std::size_t>(d.members[k])]) continue;
      trace.add_slice(d.members[k], group_prefix(d.group, d.slot) + "collectives", name, Time{t.start[i]},
                      Time{t.member_end(i, k) - t.start[i]}, args);
    }
  }
}

// The MoE kernels (--dispatcher deepep) have no closed form: the estimate
// times each distinct call once, alone on the step's platform (the one the
// detailed model runs on) over its group's ranks, as the detailed model runs
// it in the step, its op launch included, and schedules every instance of
// the call at that time.
std::map<std::size_t, std::pair<double, std::vector<std::string>>> time_kernels_alone(const StepPlan& plan,
                                                                                     Platform* platform) {
  std::map<std::size_t, std::pair<double, std::vector<std::string>>> out;
  for (const Op& op : plan.ops) {
    if (!op.coll || !plan.parts[static_cast<std::size_t>(op.part)].moe) continue;
    const auto part = static_cast<std::size_t>(op.part);
    if (out.count(part) != 0) continue;
    if (platform == nullptr) {
      throw InputError("option --dispatcher", "deepep runs the MoE kernels, which have no closed form: the estimate "
                                              "times them on the detailed model, which a layout search does not run; "
                                              "use --dispatcher alltoall|allgather or a single --layout");
    }
    TaskGraph g;
    g.set_launches_in_graph(true);   // the part's graph holds its op launch
    TaskGraph::ThreadIndex threads;
    g.append(part_graph(plan, op.part), plan.domains[static_cast<std::size_t>(op.domain)].members, 0, "", &threads);
    Scheduler scheduler(*platform);
    const RunResult result = scheduler.run(g);
    if (!result.failure.empty()) throw GraphError("the MoE kernel did not finish: " + result.failure);
    out[part] = {static_cast<double>(result.elapsed().ps), assumed_constants_used(result.constants, platform->spec())};
  }
  return out;
}

StepResult run_step_estimate(const StepPlan& plan, TraceWriter* trace, Platform* platform) {
  std::vector<double> part_ps(plan.parts.size(), 0);
  std::set<std::string> assumed;
  const auto kernels = time_kernels_alone(plan, platform);
  // The assumed constants of an executor on a group depend on its tasks'
  // kinds and the links they cross, not on the size: they are taken from the
  // graph of its smallest collective alone (the DP buckets of a large step
  // differ only in size, and their graphs over hundreds of ranks would cost
  // more to build than the rest of the estimate).
  std::map<std::tuple<int, int, std::string>, std::size_t> smallest;   // (view, op, executor) -> part
  for (std::size_t i = 0; i < plan.parts.size(); ++i) {
    const Part& part = plan.parts[i];
    const auto key = std::tuple{part.view, static_cast<int>(part.op), part.executor};
    const auto [it, added] = smallest.emplace(key, i);
    if (!added && part.count < plan.parts[it->second].count) it->second = i;
  }
  // A piece of a collective inside a kernel (MC2's later rounds) pays no
  // launch: its view's op_launch is the stream's dispatch gap, whose closed
  // forms then start at 0, as its graph does without the launch delay.
  std::map<int, std::unique_ptr<TopologySpec>> in_kernel_views;
  auto in_kernel_view = [&](int index) -> const TopologySpec& {
    auto& view = in_kernel_views[index];
    if (!view) {
      view = std::make_unique<TopologySpec>(*plan.views[static_cast<std::size_t>(index)]);
      view->npu.stream.op_launch = view->npu.stream.task_dispatch;
    }
    return *view;
  };
  for (std::size_t i = 0; i < plan.parts.size(); ++i) {
    const Part& part = plan.parts[i];
    if (part.moe) {
      const auto& [ps, used] = kernels.at(i);
      part_ps[i] = ps;
      assumed.insert(used.begin(), used.end());
      continue;
    }
    const TopologySpec& view = part.launched ? *plan.views[static_cast<std::size_t>(part.view)] : in_kernel_view(part.view);
    PerfRequest req = part_request(view, part);
    req.sizes = {data_size_of(part.op, req.ranks, req.dtype, part.count)};
    const bool lists_assumed = smallest.at(std::tuple{part.view, static_cast<int>(part.op), part.executor}) == i;
    if (!lists_assumed) req.assumed_graph_max_tasks = 0;
    std::vector<PerfRow> rows;
    try {
      rows = estimate_perf(view, req);
    } catch (const std::invalid_argument& e) {
      throw InputError("option --model", std::string("the ") + group_name(part.group) + " group " +
                                             members_text(part.members) + ": " + e.what());
    }
    part_ps[i] = static_cast<double>(rows.front().time.ps);
    if (lists_assumed) assumed.insert(rows.front().assumed.begin(), rows.front().assumed.end());
  }
  // Longest path over the ops (Kahn's order).
  const std::size_t n = plan.ops.size();
  // Successors as one array (succ[succ_at[p] .. succ_at[p + 1]) follow p).
  std::vector<int> indegree(n, 0);
  std::vector<std::size_t> succ_at(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for_each_pred(plan.ops[i], [&](int p) {
      ++succ_at[static_cast<std::size_t>(p) + 1];
      ++indegree[i];
    });
  }
  for (std::size_t i = 0; i < n; ++i) succ_at[i + 1] += succ_at[i];
  std::vector<int> succ(succ_at[n]);
  {
    std::vector<std::size_t> fill(succ_at.begin(), succ_at.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      for_each_pred(plan.ops[i], [&](int p) { succ[fill[static_cast<std::size_t>(p)]++] = static_cast<int>(i); });
    }
  }
  OpTimes t;
  t.start.assign(n, 0);
  t.end.assign(n, 0);
  t.place_members(plan);
  std::vector<int> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push_back(static_cast<int>(i));
  }
  std::size_t done = 0;
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    ++done;
    const Op& op = plan.ops[static_cast<std::size_t>(i)];
    std::uint64_t start = 0;
    for_each_pred(op, [&](int p) { start = std::max(start, t.end[static_cast<std::size_t>(p)]); });
    const std::uint64_t dur = op.coll ? static_cast<std::uint64_t>(std::llround(part_ps[static_cast<std::size_t>(op.part)])) : op.duration.ps;
    if (dur > kMaxStepPs - std::min(start, kMaxStepPs)) {
      throw InputError("option --batch", "the step would reach hcclsim's limit of 2^62 ps (about 53 days): use fewer micro-batches");
    }
    t.start[static_cast<std::size_t>(i)] = start;
    t.end[static_cast<std::size_t>(i)] = start + dur;
    if (op.coll) {
      const std::size_t members = plan.domains[static_cast<std::size_t>(op.domain)].members.size();
      std::fill_n(t.member_ends.begin() + static_cast<std::ptrdiff_t>(t.member_at[static_cast<std::size_t>(i)]), members, start + dur);
    }
    for (std::size_t k = succ_at[static_cast<std::size_t>(i)]; k < succ_at[static_cast<std::size_t>(i) + 1]; ++k) {
      if (--indegree[static_cast<std::size_t>(succ[k])] == 0) ready.push_back(succ[k]);
    }
  }
  if (done != n) throw GraphError("step plan has a cycle: " + std::to_string(n - done) + " operations never become ready");
  StepResult r = report(plan, t);
  r.shared_links = shared_links(plan, t);
  if (trace != nullptr) trace_estimate(plan, t, *trace);
  add_assumed(r, {assumed.begin(), assumed.end()});
  return r;
}

StepResult run_step_detailed(Platform& platform, const StepPlan& plan, TraceWriter* trace) {
  require_every_rank(plan, "the detailed step");
  TaskGraph g;
  g.set_launches_in_graph(true);   // part_graph's "op launch" delays
  const std::size_t n = plan.ops.size();
  // Notify (and flag) regions: one per (group, slot, collective) for the
  // executors' collectives, which a domain runs one after another (different
  // collectives wait on a notify from different streams, so each keeps its
  // own); a fresh one per MoE call (flags only grow).
  using RegionKey = std::tuple<int, int, int>;
  std::map<RegionKey, int> region_size;
  for (const Op& op : plan.ops) {
    if (!op.coll) continue;
    const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
    const TaskGraph& part = part_graph(plan, op.part);
    if (plan.parts[static_cast<std::size_t>(op.part)].moe) continue;
    int& size = region_size[{static_cast<int>(d.group), d.slot, op.part}];
    size = std::max({size, part.notifies_used(), part.flags_used()});
  }
  std::map<RegionKey, int> region_base;
  int next_region = 0;
  for (const auto& [key, size] : region_size) {
    region_base[key] = next_region;
    next_region += size;
  }
  std::vector<ThreadId> compute_thread(static_cast<std::size_t>(platform.spec().npus), 0);
  std::vector<char> has_compute(compute_thread.size(), 0);
  std::vector<TaskId> task_of(n, 0);                        // compute ops
  std::vector<std::vector<TaskId>> markers(n);              // collectives: per member
  std::vector<std::vector<std::vector<TaskId>>> firsts(n);  // collectives: per member, first tasks
  TaskGraph::ThreadIndex threads;
  std::map<std::pair<int, int>, ThreadId> marker_thread;    // (domain, member index)
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = plan.ops[i];
    if (!op.coll) {
      const auto r = static_cast<std::size_t>(op.rank);
      if (!has_compute[r]) {
        compute_thread[r] = g.add_thread(op.rank, "compute");
        has_compute[r] = 1;
      }
      Task t;
      t.kind = TaskKind::Delay;
      t.thread = compute_thread[r];
      t.duration = op.duration;
      t.label = g.intern(plan.labels[op.label]);
      task_of[i] = g.add(std::move(t));
      continue;
    }
    const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
    const Part& pt = plan.parts[static_cast<std::size_t>(op.part)];
    const TaskGraph& part = part_graph(plan, op.part);
    int base = 0;
    if (pt.moe) {
      base = next_region;
      next_region += std::max(part.notifies_used(), part.flags_used());
    } else {
      base = region_base.at({static_cast<int>(d.group), d.slot, op.part});
    }
    const std::vector<TaskId> ids = g.append(part, d.members, base, group_prefix(d.group, d.slot), &threads);
    const std::size_t p = d.members.size();
    firsts[i].assign(p, {});
    std::vector<std::vector<TaskId>> lasts(p);
    for (const Thread& th : part.threads()) {
      if (th.tasks.empty()) continue;
      firsts[i][static_cast<std::size_t>(th.rank)].push_back(ids[th.tasks.front()]);
      lasts[static_cast<std::size_t>(th.rank)].push_back(ids[th.tasks.back()]);
    }
    markers[i].resize(p);
    for (std::size_t k = 0; k < p; ++k) {
      auto mt = marker_thread.find({op.domain, static_cast<int>(k)});
      if (mt == marker_thread.end()) {
        mt = marker_thread.emplace(std::pair{op.domain, static_cast<int>(k)},
                                   g.add_thread(d.members[k], group_prefix(d.group, d.slot) + "done")).first;
      }
      Task t;
      t.kind = TaskKind::Delay;
      t.thread = mt->second;
      t.label = g.intern(plan.labels[op.label] + " done");
      markers[i][k] = g.add(std::move(t));
      for (TaskId last : lasts[k]) g.add_dependency(last, markers[i][k]);
    }
  }
  // The task of op `p` on `rank`, if it has one there.
  auto on_rank = [&](int p, int rank) -> std::optional<TaskId> {
    const Op& op = plan.ops[static_cast<std::size_t>(p)];
    if (!op.coll) return op.rank == rank ? std::optional<TaskId>(task_of[static_cast<std::size_t>(p)]) : std::nullopt;
    const auto& mem = plan.domains[static_cast<std::size_t>(op.domain)].members;
    const auto at = std::find(mem.begin(), mem.end(), rank);
    if (at == mem.end()) return std::nullopt;
    return markers[static_cast<std::size_t>(p)][static_cast<std::size_t>(at - mem.begin())];
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = plan.ops[i];
    if (!op.coll) {
      for (int p : op.deps) {
        if (const auto t = on_rank(p, op.rank)) g.add_dependency(*t, task_of[i]);
      }
      continue;
    }
    const auto& mem = plan.domains[static_cast<std::size_t>(op.domain)].members;
    for (std::size_t k = 0; k < mem.size(); ++k) {
      for_each_pred(op, [&](int p) {
        const auto t = on_rank(p, mem[k]);
        if (!t) return;
        if (firsts[i][k].empty()) g.add_dependency(*t, markers[i][k]);
        for (TaskId f : firsts[i][k]) g.add_dependency(*t, f);
      });
    }
  }
  Scheduler scheduler(platform);
  scheduler.keep_timings(true);
  LinkMeter meter(platform);
  meter.start();
  const RunResult result = scheduler.run(g);
  if (!result.failure.empty()) throw GraphError("the step did not finish: " + result.failure);
  const std::uint64_t begin = result.begin.ps;
  OpTimes t;
  t.start.assign(n, 0);
  t.end.assign(n, 0);
  t.place_members(plan);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = plan.ops[i];
    if (!op.coll) {
      const TaskTiming& tt = result.timings[task_of[i]];
      t.start[i] = tt.start.ps - begin;
      t.end[i] = tt.end.ps - begin;
      continue;
    }
    for (std::size_t k = 0; k < markers[i].size(); ++k) {
      const std::uint64_t end = result.timings[markers[i][k]].end.ps - begin;
      t.member_ends[t.member_at[i] + k] = end;
      t.end[i] = std::max(t.end[i], end);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {  // a collective starts once what it waits for has ended
    const Op& op = plan.ops[i];
    if (!op.coll) continue;
    for_each_pred(op, [&](int p) { t.start[i] = std::max(t.start[i], t.end[static_cast<std::size_t>(p)]); });
  }
  StepResult r = report(plan, t);
  std::vector<LinkUsage> links = meter.stop(result.elapsed());
  std::sort(links.begin(), links.end(), [](const LinkUsage& a, const LinkUsage& b) {
    return a.utilization != b.utilization ? a.utilization > b.utilization : a.label < b.label;
  });
  if (links.size() > 8) links.resize(8);
  r.busiest_links = std::move(links);
  r.tasks = g.tasks().size();
  add_assumed(r, assumed_constants_used(result.constants, platform.spec()));
  if (trace != nullptr) trace->add_run(g, result, platform, "step");
  return r;
}

MemoryUse step_memory(const StepRequest& request) {
  const ModelConfig& mc = request.model;
  const Layout& l = request.layout;
  const Batch& b = request.batch;
  const std::vector<std::int64_t> starts = layer_starts(request, mc.layers);
  const double m = static_cast<double>(b.global / std::max<std::int64_t>(1, b.micro * l.dp));
  const int edp = std::max(1, l.dp / l.ep);
  MemoryUse most;
  // The stage that needs the most: its layers' parameters and, in training,
  // min(pp - s, m) micro-batches of activations in flight (the first stage pp).
  for (int s = 0; s < l.pp; ++s) {
    double dense = 0, expert = 0;
    std::int64_t layers = 0, recomputed = 0;
    for (int c = 0; c < l.vpp; ++c) {
      const int g = c * l.pp + s;
      for (std::int64_t layer = starts[g]; layer < starts[g + 1]; ++layer) {
        ++layers;
        if (request.recompute.covers(layer - starts[g])) ++recomputed;
        dense += static_cast<double>(mc.attention_params()) / l.tp;
        if (mc.is_moe_layer(layer)) {
          dense += static_cast<double>(mc.hidden * mc.experts + mc.shared_experts * mc.expert_params());
          expert += static_cast<double>(mc.experts / l.ep) * mc.expert_params() / l.etp;
        } else {
          dense += static_cast<double>(mc.dense_mlp_params()) / l.tp;
        }
      }
    }
    if (s == 0) dense += static_cast<double>(mc.vocab) * mc.hidden / l.tp;
    if (s == l.pp - 1 && !(mc.tied_embeddings && l.pp == 1)) dense += static_cast<double>(mc.vocab) * mc.hidden / l.tp;
    const double params = dense + expert;
    MemoryUse u;
    u.parameters = static_cast<std::uint64_t>(params * kDtype);
    const double in_flight = std::min(static_cast<double>(l.pp - s), std::max(1.0, m));
    if (request.phase == StepPhase::Train) {
      u.gradients = static_cast<std::uint64_t>(params * 4);
      u.optimizer = request.distributed_optimizer ? static_cast<std::uint64_t>(12.0 * (dense / l.dp + expert / edp))
                                                  : static_cast<std::uint64_t>(12.0 * (dense + expert));
      // A recomputed layer keeps its input (bf16); the one being recomputed
      // holds its whole activations once.
      if (recomputed == 0) {
        u.activations = static_cast<std::uint64_t>(static_cast<double>(kActivationBytesPerToken) * b.seq * b.micro *
                                                   mc.hidden / (l.tp * l.cp) * layers * in_flight);
      } else {
        const double per_layer = static_cast<double>(b.seq) * b.micro * mc.hidden / (l.tp * l.cp);
        const double kept = static_cast<double>(kActivationBytesPerToken) * static_cast<double>(layers - recomputed) +
                            static_cast<double>(kDtype) * static_cast<double>(recomputed);
        u.activations = static_cast<std::uint64_t>(per_layer * (kept * in_flight + kActivationBytesPerToken));
      }
    } else {
      const double per_token = mc.mla ? static_cast<double>(mc.kv_lora_rank + mc.qk_rope_dim) * kDtype
                                      : 2.0 * mc.kv_heads * mc.head_dim * kDtype / l.tp;
      u.activations = static_cast<std::uint64_t>(per_token * b.seq * b.micro * layers * in_flight / l.cp);
    }
    if (u.total() > most.total()) most = u;
  }
  return most;
}

std::vector<SearchRow> search_layouts(const TopologySpec& topology, const StepRequest& base, const std::string& grid) {
  if (base.dispatcher == Dispatcher::DeepEp) {
    throw InputError("option --dispatcher", "deepep runs the MoE kernels, which have no closed form: the estimate times "
                                            "them on the detailed model, which a layout search does not run; use "
                                            "--dispatcher alltoall|allgather to search, then --layout with deepep");
  }
  std::map<std::string, std::vector<int>> values;
  std::string rest = grid;
  while (!rest.empty()) {
    const auto semi = rest.find(';');
    const std::string item = rest.substr(0, semi);
    rest = semi == std::string::npos ? "" : rest.substr(semi + 1);
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (eq == std::string::npos ||
        (key != "tp" && key != "pp" && key != "dp" && key != "ep" && key != "cp" && key != "vpp" && key != "etp")) {
      throw InputError("option --search", "'" + item + "' is not KEY=N,N,... with KEY one of tp, pp, dp, ep, cp, vpp, etp");
    }
    if (values.count(key) != 0) throw InputError("option --search", "'" + key + "' is given twice");
    // Each value checked as a layout's would be.
    std::string list = item.substr(eq + 1) + ",";
    for (auto comma = list.find(','); comma != std::string::npos; comma = list.find(',')) {
      const Layout one = parse_layout(key + "=" + list.substr(0, comma), "--search");
      const int v = key == "tp" ? one.tp : key == "pp" ? one.pp : key == "dp" ? one.dp : key == "ep" ? one.ep
                  : key == "cp" ? one.cp : key == "etp" ? one.etp : one.vpp;
      values[key].push_back(v);
      list.erase(0, comma + 1);
    }
  }
  for (const char* key : {"tp", "pp", "ep", "cp", "vpp", "etp"}) {
    if (values.count(key) == 0) values[key] = {1};
  }
  std::vector<SearchRow> rows;
  constexpr std::size_t kMaxLayouts = 100000;
  for (int tp : values["tp"]) {
    for (int pp : values["pp"]) {
      for (int ep : values["ep"]) {
        for (int cp : values["cp"]) {
          for (int vpp : values["vpp"]) {
           for (int etp : values["etp"]) {
            std::vector<int> dps = values.count("dp") ? values["dp"] : std::vector<int>{topology.npus / (tp * cp * pp)};
            for (int dp : dps) {
              if (rows.size() >= kMaxLayouts) throw InputError("option --search", "more than 100000 layouts");
              SearchRow row;
              row.layout = Layout{tp, pp, dp, ep, cp, vpp, etp};
              StepRequest req = base;
              req.layout = row.layout;
              if (dp < 1) {
                row.why = "no DP rank left: tp x cp x pp = " + std::to_string(tp * cp * pp) + " is more than the " +
                          std::to_string(topology.npus) + " NPUs";
                rows.push_back(row);
                continue;
              }
              try {
                const MemoryUse mem = step_memory(req);
                row.memory_gib = static_cast<double>(mem.total()) / (1ULL << 30);
                if (topology.npu.memory.hbm_capacity > 0 && mem.total() > topology.npu.memory.hbm_capacity) {
                  row.why = "needs " + std::to_string(static_cast<int>(std::ceil(row.memory_gib))) + " GiB of HBM per rank";
                  rows.push_back(row);
                  continue;
                }
                const StepResult r = run_step_estimate(*plan_step(topology, req, StepPlanScope::Symmetric));
                row.valid = true;
                row.step_time_us = r.step_time_us;
                row.compute_us = r.compute_us;
                row.bubble_us = r.bubble_us;
                for (const StepGroupResult& g : r.groups) row.exposed_us += g.exposed_us;
              } catch (const InputError& e) {
                row.why = e.message();
              }
              rows.push_back(row);
            }
           }
          }
        }
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const SearchRow& a, const SearchRow& b) {
    if (a.valid != b.valid) return a.valid;
    return a.valid && a.step_time_us < b.step_time_us;
  });
  return rows;
}

// ---- Chakra execution traces (hcclsim step --chakra / --export-chakra) ----

namespace {

// ASTRA-sim's comm_size: the bytes of the whole buffer a rank holds (the
// gathered output of an AllGather, the input of a ReduceScatter, the send
// buffer of an AlltoAll; the buffer of an AllReduce, Broadcast or Reduce).
// The step's parts count elements per rank (AlltoAll: per peer), bf16.
std::uint64_t chakra_bytes(CollOp op, std::uint64_t count, std::size_t ranks) {
  const bool whole = op == CollOp::AllGather || op == CollOp::ReduceScatter || op == CollOp::AlltoAll;
  return count * kDtype * (whole ? ranks : 1);
}

int chakra_type_of(CollOp op) {
  switch (op) {
    case CollOp::AllReduce: return static_cast<int>(ChakraCollective::AllReduce);
    case CollOp::AllGather: return static_cast<int>(ChakraCollective::AllGather);
    case CollOp::ReduceScatter: return static_cast<int>(ChakraCollective::ReduceScatter);
    case CollOp::AlltoAll: return static_cast<int>(ChakraCollective::AllToAll);
    case CollOp::Broadcast: return static_cast<int>(ChakraCollective::Broadcast);
    case CollOp::Reduce: return static_cast<int>(ChakraCollective::Reduce);
  }
  return 0;
}

// HCCL's barrier is a small AllReduce; its size is assumed.
constexpr std::uint64_t kBarrierBytes = 8;

class ChakraPlanner {
 public:
  ChakraPlanner(StepPlan& plan, const ChakraWorkload& w) : p_(plan), w_(w), n_(static_cast<int>(w.ranks.size())) {}

  void run() {
    order();
    std::vector<std::size_t> cursor(static_cast<std::size_t>(n_), 0);
    op_of_.assign(static_cast<std::size_t>(n_), {});
    for (int r = 0; r < n_; ++r) op_of_[static_cast<std::size_t>(r)].assign(w_.ranks[static_cast<std::size_t>(r)].nodes.size(), -1);
    last_compute_.assign(static_cast<std::size_t>(n_), -1);
    seen_.assign(static_cast<std::size_t>(n_), {});
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < n_; ++r) {
        auto& at = cursor[static_cast<std::size_t>(r)];
        const auto& seq = order_[static_cast<std::size_t>(r)];
        while (at < seq.size()) {
          const std::size_t idx = seq[at];
          if (op_of_[static_cast<std::size_t>(r)][idx] >= 0) {  // a collective completed by its last member
            ++at;
            progress = true;
            continue;
          }
          if (!deps_done(r, idx)) break;
          const ChakraNode& node = node_of(r, idx);
          if (!is_comm(node) || alone(r, idx)) {
            emit_compute(r, idx);
            ++at;
            progress = true;
            continue;
          }
          if (!arrive(r, idx)) break;   // waits for the other members
          progress = true;
        }
      }
    }
    for (int r = 0; r < n_; ++r) {
      if (cursor[static_cast<std::size_t>(r)] == order_[static_cast<std::size_t>(r)].size()) continue;
      const std::size_t idx = order_[static_cast<std::size_t>(r)][cursor[static_cast<std::size_t>(r)]];
      const ChakraNode& node = node_of(r, idx);
      std::string waiting = "its dependencies";
      const auto key = pending_key_.find({r, idx});
      if (key != pending_key_.end()) {
        const Pending& pend = pending_.at(key->second);
        std::string missing;
        for (int m : pend.members) {
          if (!pend.arrived.count(m)) missing += (missing.empty() ? "" : " ") + std::to_string(m);
        }
        waiting = "ranks " + missing + " of its group, which never reach the matching communication node";
      }
      throw InputError(file(r), where(r, idx) + " ('" + printable(node.name) + "') waits for " + waiting +
                                    "; collectives must be issued in the same order on every member of a group, "
                                    "sends must match receives");
    }
  }

 private:
  struct Pending {
    std::vector<int> members;
    std::map<int, std::size_t> arrived;   // rank -> its node
    int type = 0;
    std::uint64_t bytes = 0;
    int root = 0;                         // send/recv: the sender
    std::string label;
    std::string group_id;
  };

  const ChakraNode& node_of(int r, std::size_t idx) const { return w_.ranks[static_cast<std::size_t>(r)].nodes[idx]; }
  const std::string& file(int r) const { return w_.ranks[static_cast<std::size_t>(r)].file; }
  std::string where(int r, std::size_t idx) const { return "node " + std::to_string(idx) + " (id " + std::to_string(node_of(r, idx).id) + ")"; }
  static bool is_comm(const ChakraNode& n) {
    return n.type == static_cast<int>(ChakraNodeType::CommColl) || n.type == static_cast<int>(ChakraNodeType::CommSend) ||
           n.type == static_cast<int>(ChakraNodeType::CommRecv);
  }
  std::int64_t attr(int r, std::size_t idx, const std::string& name) const {
    const ChakraNode& n = node_of(r, idx);
    const auto it = n.ints.find(name);
    if (it == n.ints.end()) throw InputError(file(r), where(r, idx) + " ('" + printable(n.name) + "') has no '" + name + "' attribute");
    return it->second;
  }

  // Each rank's nodes in an order their dependencies allow (file order where free).
  void order() {
    order_.resize(static_cast<std::size_t>(n_));
    deps_.resize(static_cast<std::size_t>(n_));
    for (int r = 0; r < n_; ++r) {
      const auto& nodes = w_.ranks[static_cast<std::size_t>(r)].nodes;
      std::map<std::uint64_t, std::size_t> index;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (!index.emplace(nodes[i].id, i).second) {
          throw InputError(file(r), where(r, i) + ": node id " + std::to_string(nodes[i].id) + " appears twice");
        }
      }
      auto& deps = deps_[static_cast<std::size_t>(r)];
      deps.assign(nodes.size(), {});
      std::vector<std::vector<std::size_t>> succ(nodes.size());
      std::vector<int> indegree(nodes.size(), 0);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        std::set<std::size_t> mine;
        for (const auto* list : {&nodes[i].data_deps, &nodes[i].ctrl_deps}) {
          for (std::uint64_t d : *list) {
            const auto it = index.find(d);
            if (it == index.end()) {
              throw InputError(file(r), where(r, i) + " ('" + printable(nodes[i].name) + "') depends on node id " +
                                            std::to_string(d) + ", which is not in the file");
            }
            mine.insert(it->second);
          }
        }
        for (std::size_t d : mine) {
          if (d == i) throw InputError(file(r), where(r, i) + " depends on itself");
          deps[i].push_back(d);
          succ[d].push_back(i);
          ++indegree[i];
        }
      }
      std::set<std::size_t> ready;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        if (indegree[i] == 0) ready.insert(i);
      }
      while (!ready.empty()) {
        const std::size_t i = *ready.begin();
        ready.erase(ready.begin());
        order_[static_cast<std::size_t>(r)].push_back(i);
        for (std::size_t s : succ[i]) {
          if (--indegree[s] == 0) ready.insert(s);
        }
      }
      if (order_[static_cast<std::size_t>(r)].size() != nodes.size()) {
        throw InputError(file(r), "the dependencies of " + std::to_string(nodes.size() - order_[static_cast<std::size_t>(r)].size()) +
                                      " nodes form a cycle");
      }
    }
  }

  bool deps_done(int r, std::size_t idx) const {
    for (std::size_t d : deps_[static_cast<std::size_t>(r)][idx]) {
      if (op_of_[static_cast<std::size_t>(r)][d] < 0) return false;
    }
    return true;
  }
  std::vector<int> dep_ops(int r, std::size_t idx) const {
    std::vector<int> out;
    for (std::size_t d : deps_[static_cast<std::size_t>(r)][idx]) out.push_back(op_of_[static_cast<std::size_t>(r)][d]);
    return out;
  }

  void emit_compute(int r, std::size_t idx) {
    const ChakraNode& node = node_of(r, idx);
    Op op;
    op.rank = r;
    // Compute nodes at their duration; memory and metadata nodes take no time.
    const bool comp = node.type == static_cast<int>(ChakraNodeType::Comp);
    if (comp && node.duration_micros > kMaxInputTime.ps / 1000000) {
      throw InputError(file(r), where(r, idx) + ": duration_micros " + std::to_string(node.duration_micros) + " is above 10^12");
    }
    op.duration = Time{comp ? node.duration_micros * 1000000 : 0};
    op.label = p_.intern(node.name.empty() ? "node " + std::to_string(node.id) : printable(node.name));
    op.deps = dep_ops(r, idx);
    op.prev = last_compute_[static_cast<std::size_t>(r)];
    p_.ops.push_back(std::move(op));
    last_compute_[static_cast<std::size_t>(r)] = op_of_[static_cast<std::size_t>(r)][idx] = static_cast<int>(p_.ops.size()) - 1;
  }

  // A collective node's process group: its pg_name's entry in
  // comm_group.json, else every rank (`id` gets the group's name).
  std::vector<int> group_of(int r, std::size_t idx, std::string* id) const {
    const ChakraNode& node = node_of(r, idx);
    std::vector<int> members;
    const auto pg = node.strings.find("pg_name");
    if (pg != node.strings.end() && !w_.groups.empty()) {
      const auto g = w_.groups.find(pg->second);
      if (g == w_.groups.end()) {
        throw InputError(file(r), where(r, idx) + ": its pg_name '" + printable(pg->second) + "' is not a group of " +
                                      w_.dir + "/comm_group.json");
      }
      members = g->second;
      *id = pg->second;
    } else {
      for (int m = 0; m < n_; ++m) members.push_back(m);
      *id = "all";
    }
    if (std::find(members.begin(), members.end(), r) == members.end()) {
      throw InputError(file(r), where(r, idx) + ": rank " + std::to_string(r) + " is not in its process group " +
                                    printable(*id));
    }
    return members;
  }
  // A collective of a group of one rank moves nothing between NPUs: an
  // ordering point that takes no time, as memory nodes are.
  bool alone(int r, std::size_t idx) const {
    if (node_of(r, idx).type != static_cast<int>(ChakraNodeType::CommColl)) return false;
    std::string id;
    return group_of(r, idx, &id).size() == 1;
  }

  // Rank r reaches communication node idx: true when that completes its
  // collective (the op is emitted), false when it waits for other members.
  bool arrive(int r, std::size_t idx) {
    const auto known = pending_key_.find({r, idx});
    if (known != pending_key_.end()) return false;   // already waiting here
    const ChakraNode& node = node_of(r, idx);
    Pending me;
    std::string key;
    if (node.type == static_cast<int>(ChakraNodeType::CommColl)) {
      me.type = static_cast<int>(attr(r, idx, "comm_type"));
      me.members = group_of(r, idx, &me.group_id);
      me.bytes = me.type == static_cast<int>(ChakraCollective::Barrier) ? kBarrierBytes
                                                                         : static_cast<std::uint64_t>(std::max<std::int64_t>(0, attr(r, idx, "comm_size")));
      const int k = seen_[static_cast<std::size_t>(r)][me.group_id]++;
      key = "coll/" + me.group_id + "/" + std::to_string(k);
    } else {
      const bool send = node.type == static_cast<int>(ChakraNodeType::CommSend);
      const std::int64_t peer = attr(r, idx, send ? "comm_dst" : "comm_src");
      if (peer < 0 || peer >= n_ || peer == r) {
        throw InputError(file(r), where(r, idx) + ": " + (send ? "comm_dst " : "comm_src ") + std::to_string(peer) +
                                      " is not another rank 0.." + std::to_string(n_ - 1));
      }
      const int src = send ? r : static_cast<int>(peer), dst = send ? static_cast<int>(peer) : r;
      const auto tag = node.ints.find("comm_tag");
      const std::string pair = std::to_string(src) + ">" + std::to_string(dst) + "/" + (tag == node.ints.end() ? "" : std::to_string(tag->second));
      me.members = {src, dst};
      me.type = static_cast<int>(ChakraCollective::Broadcast);
      me.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, attr(r, idx, "comm_size")));
      me.group_id = "p2p " + std::to_string(src) + "->" + std::to_string(dst);
      const int k = seen_[static_cast<std::size_t>(r)][pair + (send ? "s" : "r")]++;
      key = "p2p/" + pair + "/" + std::to_string(k);
    }
    auto [it, added] = pending_.emplace(key, me);
    Pending& pend = it->second;
    if (!added && (pend.type != me.type || pend.bytes != me.bytes || pend.members != me.members)) {
      const auto [other, other_idx] = *pend.arrived.begin();
      throw InputError(file(r), where(r, idx) + " ('" + printable(node.name) + "') does not match " + file(other) + " " +
                                    where(other, other_idx) + " ('" + printable(node_of(other, other_idx).name) +
                                    "'): the same collective needs the same comm_type, comm_size and group on every member");
    }
    pend.arrived[r] = idx;
    pending_key_[{r, idx}] = key;
    if (pend.arrived.size() < pend.members.size()) return false;
    emit_collective(pend);
    pending_.erase(key);
    return true;
  }

  void emit_collective(const Pending& pend) {
    const int first = pend.arrived.begin()->first;
    const std::size_t first_idx = pend.arrived.begin()->second;
    const ChakraNode& node = node_of(first, first_idx);
    CollOp cop = CollOp::AllReduce;
    switch (static_cast<ChakraCollective>(pend.type)) {
      case ChakraCollective::AllReduce:
      case ChakraCollective::Barrier: cop = CollOp::AllReduce; break;
      case ChakraCollective::AllGather: cop = CollOp::AllGather; break;
      case ChakraCollective::ReduceScatter: cop = CollOp::ReduceScatter; break;
      case ChakraCollective::AllToAll: cop = CollOp::AlltoAll; break;
      case ChakraCollective::Broadcast: cop = CollOp::Broadcast; break;
      case ChakraCollective::Reduce: cop = CollOp::Reduce; break;
      default:
        throw InputError(file(first), where(first, first_idx) + ": comm_type " + std::to_string(pend.type) +
                                          " (Gather, Scatter, ReduceScatterBlock or unknown) has no HCCL executor in hcclsim; "
                                          "expected AllReduce 0, Reduce 1, AllGather 2, Broadcast 5, AllToAll 6, "
                                          "ReduceScatter 7 or Barrier 9");
    }
    const int dom = domain(pend);
    const Domain& d = p_.domains[static_cast<std::size_t>(dom)];
    const std::uint64_t whole = chakra_bytes(cop, 1, d.members.size());
    Part part{Group::Comm, d.view, false, cop, std::max<std::uint64_t>(1, pend.bytes / whole), MoePhase::Dispatch, MoeParams{},
              d.members, ""};
    const std::string pkey = std::to_string(d.view) + "/" + coll_op_name(cop) + "/" + std::to_string(part.count);
    auto found = p_.part_of.find(pkey);
    if (found == p_.part_of.end()) {
      const TopologySpec& view = *p_.views[static_cast<std::size_t>(d.view)];
      const PerfRequest req = part_request(view, part);
      const std::uint64_t size = data_size_of(cop, req.ranks, req.dtype, part.count);
      // A comm_size is the trace's word: bounded as the estimate bounds perf's
      // sizes (at most 65536 loops over the HCCL buffer), for either back end.
      if (!estimate_problem(req, size).empty()) {
        throw InputError(file(first), where(first, first_idx) + ": comm_size " + std::to_string(pend.bytes) + " is " +
                                          std::to_string(size / std::max<std::uint64_t>(req.buffer_bytes, 1)) +
                                          " times the profile's HCCL buffer (" + std::to_string(req.buffer_bytes) +
                                          " bytes); hcclsim runs at most " + std::to_string(kMaxEstimateLoops) +
                                          " loops of a collective over it");
      }
      try {
        part.executor = perf_choice(view, req, size).executor;
      } catch (const std::invalid_argument& e) {
        throw InputError(file(first), where(first, first_idx) + ": " + coll_op_name(cop) + " of " + std::to_string(size) +
                                          " bytes on ranks " + members_text(d.members) + " has no HCCL executor here: " + e.what());
      }
      p_.parts.push_back(part);
      found = p_.part_of.emplace(pkey, static_cast<int>(p_.parts.size()) - 1).first;
    }
    Op op;
    op.coll = true;
    op.domain = dom;
    op.part = found->second;
    op.label = p_.intern(d.name + " " + coll_op_name(cop) + " " + (node.name.empty() ? "node " + std::to_string(node.id) : printable(node.name)));
    for (const auto& [r, idx] : pend.arrived) {
      const std::vector<int> deps = dep_ops(r, idx);
      op.deps.insert(op.deps.end(), deps.begin(), deps.end());
    }
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
    op.prev = d.last_op;
    p_.ops.push_back(std::move(op));
    const int id = static_cast<int>(p_.ops.size()) - 1;
    p_.domains[static_cast<std::size_t>(dom)].last_op = id;
    for (const auto& [r, idx] : pend.arrived) {
      op_of_[static_cast<std::size_t>(r)][idx] = id;
      pending_key_.erase({r, idx});
    }
  }

  int domain(const Pending& pend) {
    const auto found = domain_of_.find(pend.members);
    if (found != domain_of_.end()) return found->second;
    const int slot = static_cast<int>(p_.domains.size());
    try {
      p_.views.push_back(std::make_unique<TopologySpec>(group_view(*p_.topology, pend.members, "the Chakra group " + members_text(pend.members))));
    } catch (const std::invalid_argument& e) {
      throw InputError("option --chakra", e.what());
    }
    Domain d{Group::Comm, slot, pend.members, static_cast<int>(p_.views.size()) - 1, -1, "pg " + printable(pend.group_id)};
    p_.domains.push_back(d);
    return domain_of_.emplace(pend.members, slot).first->second;
  }

  StepPlan& p_;
  const ChakraWorkload& w_;
  int n_;
  std::vector<std::vector<std::size_t>> order_;
  std::vector<std::vector<std::vector<std::size_t>>> deps_;
  std::vector<std::vector<int>> op_of_;
  std::vector<int> last_compute_;
  std::vector<std::map<std::string, int>> seen_;      // per rank: collectives met per group (and sends per pair)
  std::map<std::string, Pending> pending_;
  std::map<std::pair<int, std::size_t>, std::string> pending_key_;
  std::map<std::vector<int>, int> domain_of_;
};

}  // namespace

StepPlanPtr plan_chakra(const TopologySpec& topology, const ChakraWorkload& workload) {
  const int n = static_cast<int>(workload.ranks.size());
  if (n > topology.npus) {
    throw InputError("option --chakra", workload.dir + " holds " + std::to_string(n) + " ranks' traces; the topology has " +
                                            std::to_string(topology.npus) + " NPUs (give --servers or a larger topology)");
  }
  StepPlanPtr plan(new StepPlan);
  plan->topology = &topology;
  plan->request.layout.dp = n;   // the report's world: the traces' ranks
  plan->m = 1;
  ChakraPlanner(*plan, workload).run();
  return plan;
}

ChakraWorkload export_chakra(const StepPlan& plan) {
  require_every_rank(plan, "--export-chakra");
  ChakraWorkload w;
  const int world = plan.request.layout.world();
  w.ranks.resize(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) w.ranks[static_cast<std::size_t>(r)].version = "0.0.4";
  const auto involves = [&](const Op& op, int r) {
    if (!op.coll) return op.rank == r;
    const auto& m = plan.domains[static_cast<std::size_t>(op.domain)].members;
    return std::find(m.begin(), m.end(), r) != m.end();
  };
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    ChakraNode node;
    node.id = i;
    node.name = plan.labels[op.label];
    std::vector<int> ranks;
    if (!op.coll) {
      node.type = static_cast<int>(ChakraNodeType::Comp);
      node.duration_micros = static_cast<std::uint64_t>(std::llround(static_cast<double>(op.duration.ps) / 1e6));
      ranks = {op.rank};
    } else {
      const Domain& d = plan.domains[static_cast<std::size_t>(op.domain)];
      const Part& part = plan.parts[static_cast<std::size_t>(op.part)];
      if (part.moe) {
        throw InputError("option --export-chakra", "the deepep dispatcher's MoE kernels are not Chakra collectives; "
                                                   "give --dispatcher alltoall or allgather");
      }
      node.type = static_cast<int>(ChakraNodeType::CommColl);
      node.ints["comm_type"] = chakra_type_of(part.op);
      node.ints["comm_size"] = static_cast<std::int64_t>(chakra_bytes(part.op, part.count, d.members.size()));
      const std::string id = std::to_string(op.domain);
      node.strings["pg_name"] = id;
      w.groups[id] = d.members;
      ranks = d.members;
    }
    for (int r : ranks) {
      ChakraNode mine = node;
      for (int dep : op.deps) {
        if (involves(plan.ops[static_cast<std::size_t>(dep)], r)) mine.data_deps.push_back(static_cast<std::uint64_t>(dep));
      }
      if (op.prev >= 0 && involves(plan.ops[static_cast<std::size_t>(op.prev)], r)) mine.ctrl_deps.push_back(static_cast<std::uint64_t>(op.prev));
      w.ranks[static_cast<std::size_t>(r)].nodes.push_back(std::move(mine));
    }
  }
  return w;
}

}  // namespace hcclsim

#include "sim/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "base/error.h"
#include "base/json_reader.h"
#include "models/link/channel.h"
#include "sim/executors/exec_builder.h"
#include "sim/scheduler.h"
#include "sim/trace.h"

namespace hcclsim {

namespace {

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// A fixed 64-bit generator (PCG-style LCG): the same seed gives the same
// routing on every machine.
struct Lcg {
  std::uint64_t state;
  explicit Lcg(std::uint64_t seed) : state(seed * 6364136223846793005ULL + 1442695040888963407ULL) {}
  std::uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 11;
  }
  double uniform() { return static_cast<double>(next() % (1ULL << 52)) / static_cast<double>(1ULL << 52); }
};

}  // namespace

bool operator==(const MoeParams& a, const MoeParams& b) {
  return a.ep == b.ep && a.tokens == b.tokens && a.hidden == b.hidden && a.topk == b.topk && a.experts == b.experts &&
         a.mode == b.mode && a.int8 == b.int8 && a.routing == b.routing && a.seed == b.seed;
}

namespace {

// Why a routing spec is refused, or empty (a routing file is read later).
std::string routing_problem(const std::string& r) {
  if (r == "uniform" || r == "balanced") return {};
  if (r.rfind("file:", 0) == 0) return r.size() > 5 ? std::string() : "file:F needs a file name";
  if (r.rfind("zipf:", 0) == 0) {
    const std::string arg = r.substr(5);
    double s = -1;
    try {
      std::size_t used = 0;
      s = std::stod(arg, &used);
      if (used != arg.size()) s = -1;
    } catch (const std::exception&) {
      s = -1;
    }
    if (!std::isfinite(s) || s < 0 || s > 10) return "zipf:S needs a finite exponent S in [0, 10]";
    return {};
  }
  return "unknown routing '" + r + "'; expected uniform, balanced, zipf:S or file:F";
}

}  // namespace

std::optional<MoeParamProblem> moe_params_problem(const MoeParams& p, int npus) {
  auto bad = [](const std::string& param, const std::string& why) { return MoeParamProblem{param, why}; };
  if (p.ep < 2 || p.ep > npus) return bad("ep", "expected 2 to " + std::to_string(npus) + " ranks (the topology has " + std::to_string(npus) + " NPUs)");
  if (p.tokens < 1 || p.tokens > 131072) return bad("tokens", "expected 1 to 131072 tokens per rank");
  if (p.hidden < 128 || p.hidden > 16384) return bad("hidden", "expected a hidden size from 128 to 16384");
  if (p.hidden % 128 != 0) return bad("hidden", "must be a multiple of 128 (the quantisation group)");
  if (p.experts < 1 || p.experts > 1024) return bad("experts", "expected 1 to 1024 experts");
  if (p.topk < 1 || p.topk > 16) return bad("topk", "expected 1 to 16 experts per token");
  if (p.topk > p.experts) return bad("topk", "top-" + std::to_string(p.topk) + " needs at least that many experts, not " + std::to_string(p.experts));
  if (p.experts % p.ep != 0) return bad("experts", std::to_string(p.experts) + " experts do not divide over " + std::to_string(p.ep) + " ranks");
  if (p.mode == MoeMode::LowLatency && p.tokens > 512) return bad("tokens", "low-latency mode takes at most 512 tokens per rank (BS_UPPER_BOUND)");
  if (const std::string routing = routing_problem(p.routing); !routing.empty()) return bad("routing", routing);
  return std::nullopt;
}

void check_moe_params(const MoeParams& p, int npus) {
  if (const auto problem = moe_params_problem(p, npus)) throw InputError("option --" + problem->param, problem->why);
}

MoeFabric moe_fabric(const NpuParams& npu, const std::vector<int>& sdma_domain_of, const std::vector<int>& ranks) {
  MoeFabric f;
  f.npu = npu;
  if (!sdma_domain_of.empty()) {
    for (const int r : ranks) f.domain.push_back(sdma_domain_of.at(static_cast<std::size_t>(r)));
  }
  return f;
}

std::string moe_fabric_problem(const MoeFabric& fabric) {
  // Runs of consecutive ranks in one domain.
  std::vector<std::pair<int, int>> runs;   // (domain, ranks)
  for (const int d : fabric.domain) {
    if (!runs.empty() && runs.back().first == d) {
      ++runs.back().second;
    } else {
      runs.push_back({d, 1});
    }
  }
  if (runs.size() < 2) return {};
  std::set<int> seen;
  for (const auto& run : runs) {
    if (!seen.insert(run.first).second) {
      return "the ranks of SDMA domain " + std::to_string(run.first) + " (a server or supernode) are not consecutive "
             "in the call's rank order; list each domain's ranks together";
    }
  }
  for (const auto& run : runs) {
    if (run.second != runs.front().second) {
      return "the call spans SDMA domains with " + std::to_string(runs.front().second) + " and " +
             std::to_string(run.second) + " of its ranks; across domains every domain needs the same number (a row "
             "for another domain goes to the rank of the same local index there)";
    }
  }
  return {};
}

std::uint64_t dispatch_slot_bytes(const MoeParams& p) {
  const std::uint64_t payload = round_up(static_cast<std::uint64_t>(p.hidden) * (p.int8 ? 1 : 2), 32);
  return round_up(payload + 32 + 12, 512);
}

std::uint64_t combine_slot_bytes(const MoeParams& p) { return round_up(static_cast<std::uint64_t>(p.hidden) * 2, 512); }

MoeRouting make_routing(const MoeParams& p) {
  MoeRouting out(static_cast<std::size_t>(p.ep),
                 std::vector<std::vector<int>>(static_cast<std::size_t>(p.tokens), std::vector<int>(static_cast<std::size_t>(p.topk), -1)));
  const std::string& r = p.routing;
  if (r.rfind("file:", 0) == 0) {
    const std::string file = r.substr(5);
    const nlohmann::json doc = load_json_file(file);
    ObjectReader root(doc, JsonLocation{file});
    const nlohmann::json& ranks = root.required_array("experts");
    root.finish();
    if (ranks.size() != static_cast<std::size_t>(p.ep)) {
      root.location_of("experts").fail("expected one list per rank, " + std::to_string(p.ep) + " (--ep)");
    }
    for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
      const JsonLocation rloc = root.location_of("experts").index(rank);
      if (!ranks[rank].is_array() || ranks[rank].size() != static_cast<std::size_t>(p.tokens)) {
        rloc.fail("expected one list of expert ids per token, " + std::to_string(p.tokens) + " (--tokens)");
      }
      for (std::size_t t = 0; t < ranks[rank].size(); ++t) {
        const nlohmann::json& ids = ranks[rank][t];
        const JsonLocation tloc = rloc.index(t);
        if (!ids.is_array() || ids.size() != static_cast<std::size_t>(p.topk)) tloc.fail("expected " + std::to_string(p.topk) + " expert ids (--topk)");
        std::set<int> seen;
        for (std::size_t k = 0; k < ids.size(); ++k) {
          if (!ids[k].is_number_integer() || ids[k].get<std::int64_t>() < -1 || ids[k].get<std::int64_t>() >= p.experts) {
            tloc.index(k).fail("expected an expert id in [0, " + std::to_string(p.experts - 1) + "] or -1 (dropped)");
          }
          const int e = ids[k].get<int>();
          if (e >= 0 && !seen.insert(e).second) tloc.index(k).fail("expert " + std::to_string(e) + " is chosen twice for this token");
          out[rank][t][k] = e;
        }
      }
    }
    return out;
  }
  if (r == "balanced") {
    // Round robin: every expert gets the same number of rows (as near as the counts allow).
    for (int rank = 0; rank < p.ep; ++rank) {
      for (int t = 0; t < p.tokens; ++t) {
        const std::uint64_t base = (static_cast<std::uint64_t>(rank) * static_cast<std::uint64_t>(p.tokens) + static_cast<std::uint64_t>(t)) *
                                   static_cast<std::uint64_t>(p.topk);
        for (int k = 0; k < p.topk; ++k) out[rank][t][k] = static_cast<int>((base + static_cast<std::uint64_t>(k)) % static_cast<std::uint64_t>(p.experts));
      }
    }
    return out;
  }
  // uniform (each token's top-k distinct experts uniformly at random, as
  // DeepEP's tests draw them), or zipf:S (expert e chosen with weight 1/(e+1)^S).
  std::vector<double> weight(static_cast<std::size_t>(p.experts), 1.0);
  if (const std::string problem = routing_problem(r); !problem.empty()) throw InputError("option --routing", problem);
  if (r.rfind("zipf:", 0) == 0) {
    const double s = std::stod(r.substr(5));
    for (int e = 0; e < p.experts; ++e) weight[static_cast<std::size_t>(e)] = 1.0 / std::pow(e + 1.0, s);
  }
  Lcg rng(p.seed);
  if (r == "uniform") {
    // Equal weights: the same draws as the weighted walk below (x = u x the
    // number of experts left picks the floor(x)-th of them, in id order), in
    // O(K) per token instead of O(K x experts).
    std::vector<int> taken;
    for (int rank = 0; rank < p.ep; ++rank) {
      for (int t = 0; t < p.tokens; ++t) {
        taken.clear();
        for (int k = 0; k < p.topk; ++k) {
          const int left = p.experts - k;
          const double x = rng.uniform() * static_cast<double>(left);
          int pick = 0;
          if (x < static_cast<double>(left)) {
            pick = static_cast<int>(x);  // the pick-th expert not yet taken
            for (const int e : taken) pick += e <= pick ? 1 : 0;
          } else {
            // u x left rounded up to left: the walk falls through to the
            // last expert, then on to the next one not taken.
            pick = p.experts - 1;
            while (std::find(taken.begin(), taken.end(), pick) != taken.end()) pick = (pick + 1) % p.experts;
          }
          out[rank][t][k] = pick;
          taken.insert(std::upper_bound(taken.begin(), taken.end(), pick), pick);
        }
      }
    }
    return out;
  }
  for (int rank = 0; rank < p.ep; ++rank) {
    for (int t = 0; t < p.tokens; ++t) {
      std::vector<double> w = weight;
      for (int k = 0; k < p.topk; ++k) {
        const double total = std::accumulate(w.begin(), w.end(), 0.0);
        double x = rng.uniform() * total;
        int pick = p.experts - 1;
        for (int e = 0; e < p.experts; ++e) {
          if (w[static_cast<std::size_t>(e)] <= 0) continue;
          if (x < w[static_cast<std::size_t>(e)]) {
            pick = e;
            break;
          }
          x -= w[static_cast<std::size_t>(e)];
        }
        while (w[static_cast<std::size_t>(pick)] <= 0) pick = (pick + 1) % p.experts;
        out[rank][t][k] = pick;
        w[static_cast<std::size_t>(pick)] = 0;
      }
    }
  }
  return out;
}

namespace {

// Vector work a core does per element: INT8 quantisation reads the BF16 row,
// finds its absolute maximum in FP32, scales and casts (about four passes
// over 4-byte values); the weighted sum of combine casts each of the K rows
// to FP32 and multiplies-adds it (about two passes per row).
constexpr std::uint64_t kQuantBytesPerElement = 16;
constexpr std::uint64_t kSumBytesPerElement = 8;
constexpr int kCombinePieces = 4;   // combine's per-token pipelining, in quarters

// Whether a call runs DeepEP's A2 kernels across servers (notify_dispatch_a2,
// dispatch_normal_a2, moe_distribute_combine_a2): normal mode over more than
// one RDMA domain of NPUs whose profile says DeepEP has them
// (npu.moe.layered_kernels_across_servers: 910B); elsewhere across domains
// the generic relay form below stands in.
bool a2_layered_kernels(const MoeParams& p, const MoeFabric& fabric) {
  if (p.mode != MoeMode::Normal || !fabric.npu.moe_layered_kernels) return false;
  for (std::size_t i = 1; i < fabric.domain.size(); ++i) {
    if (fabric.domain[i] != fabric.domain.front()) return true;
  }
  return false;
}

class MoeBuilder {
 public:
  MoeBuilder(const MoeParams& p, const MoeRouting& routing, const MoeFabric& fabric)
      : p_(p), routing_(routing), fabric_(fabric), npu_(fabric.npu),
        cores_(lanes_for(npu_.cores.aiv)), per_lane_(std::max(1, std::min(48, npu_.cores.aiv)) / cores_),
        per_rank_(p.experts / p.ep) {
    for (int r = 0; r < p_.ep; ++r) {
      core_.emplace_back();
      for (int c = 0; c < cores_; ++c) core_.back().push_back(graph_.add_thread(r, "AIV" + std::to_string(c)));
      host_.push_back(graph_.add_thread(r, "Host"));
    }
    barrier_ = flags_.take(1);
    rounds_.assign(static_cast<std::size_t>(p_.ep), 0);
    // Which ranks share an SDMA/UB domain (a server on A2, a supernode on A3).
    for (int r = 0; r < p_.ep; ++r) server_.push_back(domain_of(r));
    per_server_ = 0;
    for (int r = 0; r < p_.ep; ++r) per_server_ += server_[static_cast<std::size_t>(r)] == server_[0] ? 1 : 0;
    layered_ = per_server_ < p_.ep;
    a2_layered_ = a2_layered_kernels(p_, fabric_);
  }

  TaskGraph dispatch() {
    if (a2_layered_) {
      layout();
      a2_count_exchange();
      host_sync();
      a2_layered_dispatch();
      return std::move(graph_);
    }
    if (p_.mode == MoeMode::Normal) {
      layout();
      count_exchange();
      host_sync();
    }
    if (p_.mode == MoeMode::LowLatency && !layered_) {
      low_latency_dispatch();
    } else {
      data_dispatch();
    }
    return std::move(graph_);
  }

  TaskGraph combine() {
    if (a2_layered_) {
      a2_layered_combine();
      return std::move(graph_);
    }
    if (p_.mode == MoeMode::LowLatency && !layered_) {
      low_latency_combine();
    } else {
      data_combine();
    }
    return std::move(graph_);
  }

 private:
  // The kernels launch every vector core (up to 48), each a thread here.
  // (Grouping cores into fewer, wider lanes would cut the flows the network
  // shares out, but it changes which sources are pulled at the same time:
  // with 8 lanes EP 16 dispatch came out 50% slower, so every core stays.)
  static int lanes_for(int aiv) { return std::max(1, std::min(48, aiv)); }
  int owner(int expert) const { return expert / per_rank_; }
  int domain_of(int r) const {
    // Ranks of one SDMA domain are numbered contiguously: the first rank
    // reaching r without RDMA starts r's domain.
    int first = r;
    while (first > 0 && !fabric_.rdma_between(first - 1, r)) --first;
    return first;
  }
  bool same_domain(int a, int b) const { return server_[static_cast<std::size_t>(a)] == server_[static_cast<std::size_t>(b)]; }
  int local_index(int r) const { return r - server_[static_cast<std::size_t>(r)]; }
  // The rank of `r`'s local index in the domain of `other`.
  int relay(int r, int other) const { return server_[static_cast<std::size_t>(other)] + local_index(r); }
  ThreadId core(int r, int c) const { return core_[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)]; }
  // The write pipe (MTE3) of core c of rank r: the low-latency kernels write
  // a row out there while the core loads and computes the next one. Its
  // moves take no core from the pool (the kernel holds the core already).
  ThreadId write_pipe(int r, int c) {
    if (write_pipe_.empty()) write_pipe_.assign(static_cast<std::size_t>(p_.ep) * static_cast<std::size_t>(cores_), kNoThread);
    ThreadId& t = write_pipe_[static_cast<std::size_t>(r) * static_cast<std::size_t>(cores_) + static_cast<std::size_t>(c)];
    if (t == kNoThread) t = graph_.add_thread(r, "AIV" + std::to_string(c) + " MTE3");
    return t;
  }
  // One row through a core: a load into its unified buffer (GM -> UB, on the
  // core itself), or a write from it (UB -> GM, on its write pipe).
  TaskId load_row(int r, int c, int from, std::uint64_t bytes, const std::string& label) {
    return graph_.aiv_move(core(r, c), BufferRef{from, BufferKind::Scratch, 0}, BufferRef{r, BufferKind::Scratch, 0},
                           bytes, false, label, per_lane_);
  }
  TaskId write_row(int r, int c, int to, std::uint64_t bytes, const std::string& label) {
    return graph_.aiv_move(write_pipe(r, c), BufferRef{r, BufferKind::Scratch, 0}, BufferRef{to, BufferKind::Output, 0},
                           bytes, false, label, 0);
  }
  std::uint64_t slot() const { return dispatch_slot_bytes(p_); }
  std::uint64_t cslot() const { return combine_slot_bytes(p_); }

  // An AIV copy; across RDMA domains an RDMA write posted by the core.
  void move(ThreadId t, int from, int to, std::uint64_t bytes, const std::string& label) {
    if (bytes == 0) return;
    const BufferRef src{from, BufferKind::Scratch, 0};
    const BufferRef dst{to, BufferKind::Output, 0};
    if (fabric_.rdma_between(from, to)) {
      graph_.copy(t, src, dst, bytes, label + " (RDMA)");
    } else {
      graph_.aiv_move(t, src, dst, bytes, false, label, per_lane_);
    }
  }
  std::optional<TaskId> compute(ThreadId t, std::uint64_t bytes, const std::string& label) {
    if (bytes == 0) return std::nullopt;
    Task task;
    task.kind = TaskKind::Compute;
    task.thread = t;
    task.core_kind = CoreKind::Aiv;
    task.cores = per_lane_;
    task.duration = npu_.cores.aiv_bandwidth.transfer_time(bytes / static_cast<std::uint64_t>(per_lane_));
    graph_.note_constant(Constant::CoresAivBandwidth);
    task.label = graph_.intern(label);
    return graph_.add(std::move(task));
  }
  // SyncAll: every core of rank r adds to the barrier counter, then waits for
  // all. With `drained`, a core enters only once that task of its own has
  // finished (PipeBarrier<PIPE_ALL>: its write pipe has drained).
  void barrier(int r, const std::vector<std::optional<TaskId>>* drained = nullptr) {
    const auto round = ++rounds_[static_cast<std::size_t>(r)];
    for (int c = 0; c < cores_; ++c) {
      const TaskId set = graph_.flag_set(core(r, c), r, barrier_, "SyncAll");
      if (drained != nullptr && (*drained)[static_cast<std::size_t>(c)]) {
        graph_.add_dependency(*(*drained)[static_cast<std::size_t>(c)], set);
      }
    }
    for (int c = 0; c < cores_; ++c) {
      graph_.flag_wait(core(r, c), r, barrier_, static_cast<std::uint32_t>(cores_) * round, "SyncAll");
    }
  }
  // Items [0, n) split over the cores in contiguous ranges.
  Span share(std::uint64_t n, int c) const { return chunk_span(n, cores_, c); }

  // Layout (aclnnDispatchLayout): counts per rank and expert from the top-k ids.
  void layout() {
    for (int r = 0; r < p_.ep; ++r) {
      compute(core(r, 0), static_cast<std::uint64_t>(p_.tokens) * static_cast<std::uint64_t>(p_.topk) * 16, "layout");
      barrier(r);
    }
  }

  // notify_dispatch: each core flags its share of the destination ranks,
  // then pulls, from each of its share of the sources, the three counts per
  // (round, local expert) that source sends here.
  void count_exchange() {
    const int ready = flags_.take(p_.ep);
    const std::uint64_t per_peer = static_cast<std::uint64_t>(per_rank_) * 3 * 4;
    for (int r = 0; r < p_.ep; ++r) {
      for (int c = 0; c < cores_; ++c) {
        const Span peers = share(static_cast<std::uint64_t>(p_.ep), c);
        for (std::uint64_t d = peers.first; d < peers.first + peers.count; ++d) {
          signal(core(r, c), r, static_cast<int>(d), ready + r, "counts ready");
        }
      }
      for (int c = 0; c < cores_; ++c) {
        const Span peers = share(static_cast<std::uint64_t>(p_.ep), c);
        for (std::uint64_t s = peers.first; s < peers.first + peers.count; ++s) {
          await(core(r, c), static_cast<int>(s), r, ready + static_cast<int>(s), "counts ready");
          move(core(r, c), static_cast<int>(s), r, per_peer, "pull counts");
        }
      }
      barrier(r);
      // The Build* reductions of the received counts, one per core.
      for (int c = 0; c < std::min(cores_, 8); ++c) {
        compute(core(r, c), static_cast<std::uint64_t>(p_.ep) * per_peer, "build counts");
      }
    }
  }

  // The host reads the receive counts (to size the outputs) before it
  // launches the data kernel: a stream synchronisation and a small copy.
  void host_sync() {
    for (int r = 0; r < p_.ep; ++r) {
      std::vector<TaskId> lasts;
      for (int c = 0; c < cores_; ++c) {
        const auto& tasks = graph_.thread(core(r, c)).tasks;
        if (!tasks.empty()) lasts.push_back(tasks.back());
      }
      Task sync;
      sync.kind = TaskKind::Delay;
      sync.thread = host_[static_cast<std::size_t>(r)];
      sync.duration = npu_.stream.host_sync;
      graph_.note_constant(Constant::StreamHostSync);
      sync.label = graph_.intern("host sync");
      const TaskId h = graph_.add(std::move(sync));
      for (TaskId l : lasts) graph_.add_dependency(l, h);
      for (int c = 0; c < cores_; ++c) {
        Task start;
        start.kind = TaskKind::Delay;
        start.thread = core(r, c);
        start.label = graph_.intern("kernel start");
        const TaskId s = graph_.add(std::move(start));
        graph_.add_dependency(h, s);
        kernel_starts_.push_back(s);
      }
    }
  }

  // A flag from `from` into `to`'s memory (a 4-byte RDMA notify across RDMA
  // domains, which lands after the writes posted before it to that peer).
  void signal(ThreadId t, int from, int to, int flag, const std::string& label, int use = 0) {
    if (fabric_.rdma_between(from, to)) {
      graph_.record(t, to, rdma_notify(from, to, use), label + " (RDMA)");
    } else {
      graph_.flag_set(t, to, flag, label);
    }
  }
  void await(ThreadId t, int from, int me, int flag, const std::string& label, int use = 0) {
    if (fabric_.rdma_between(from, me)) {
      graph_.wait(t, rdma_notify(from, me, use), label + " (RDMA)");
    } else {
      graph_.flag_wait(t, me, flag, 1, label);
    }
  }
  // Notify registers for RDMA flags: one per (source, destination) pair and
  // use (a call that signals a pair twice gives each its own register).
  int rdma_notify(int from, int to, int use = 0) {
    auto [it, added] = rdma_registers_.emplace(std::make_tuple(from, to, use), 0);
    if (added) it->second = notifies_.take(1);
    return it->second;
  }

  // Rows a rank sends: per destination rank, the (token, expert) pairs that
  // go there; across RDMA domains (A2 servers, layered) the distinct tokens
  // per destination domain go to the relay, which forwards per expert rank.
  struct Plan {
    std::vector<std::uint64_t> to_rank;                 // direct rows per destination rank
    std::vector<std::uint64_t> to_expert;               // direct rows per expert
    std::map<int, std::uint64_t> to_relay;              // rows (tokens) per relay rank
    std::map<int, std::vector<std::uint64_t>> forward;  // relay -> rows per final rank
    std::uint64_t pairs = 0;
  };
  Plan plan_of(int r) const {
    Plan plan;
    plan.to_rank.assign(static_cast<std::size_t>(p_.ep), 0);
    plan.to_expert.assign(static_cast<std::size_t>(p_.experts), 0);
    for (const std::vector<int>& ids : routing_[static_cast<std::size_t>(r)]) {
      std::set<int> relays;
      for (const int e : ids) {
        if (e < 0) continue;
        ++plan.pairs;
        const int d = owner(e);
        if (!layered_ || same_domain(r, d)) {
          ++plan.to_rank[static_cast<std::size_t>(d)];
          ++plan.to_expert[static_cast<std::size_t>(e)];
          continue;
        }
        const int q = relay(r, d);
        relays.insert(q);
        auto& f = plan.forward[q];
        if (f.empty()) f.assign(static_cast<std::size_t>(p_.ep), 0);
        ++f[static_cast<std::size_t>(d)];
      }
      for (const int q : relays) ++plan.to_relay[q];
    }
    return plan;
  }

  void data_dispatch() {
    const bool normal = p_.mode == MoeMode::Normal;
    const int status = flags_.take(p_.experts * p_.ep);   // status + (local expert) * ep + source
    std::vector<Plan> plans;
    for (int r = 0; r < p_.ep; ++r) plans.push_back(plan_of(r));
    // The other RDMA domains, by their first rank.
    std::vector<int> domains;
    for (int r = 0; r < p_.ep; ++r) {
      if (domains.empty() || domains.back() != server_[static_cast<std::size_t>(r)]) domains.push_back(server_[static_cast<std::size_t>(r)]);
    }
    for (int r = 0; r < p_.ep; ++r) {
      const Plan& plan = plans[static_cast<std::size_t>(r)];
      // Stage (normal: into the own window; low latency: pushed to each
      // destination) every (token, expert) row, quantised on the way.
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(plan.pairs, c);
        if (p_.int8) compute(core(r, c), mine.count * static_cast<std::uint64_t>(p_.hidden) * kQuantBytesPerElement, "quantise");
        if (normal) {
          move(core(r, c), r, r, mine.count * slot(), "stage");
        } else {
          // The core's share of every destination's rows, pushed straight
          // there; its pairs come in token order, so destinations interleave:
          // each core starts at a different one.
          for (int i = 0; i < p_.ep; ++i) {
            const int d = (r + c + i) % p_.ep;
            const Span part = share(plan.to_rank[static_cast<std::size_t>(d)], c);
            move(core(r, c), r, d, part.count * slot(), "push");
          }
        }
      }
      // Across RDMA domains: one row per (token, domain) to the relay, and a
      // signal even when there is none (the relay vouches for the source).
      for (const int domain : domains) {
        if (!layered_ || domain == server_[static_cast<std::size_t>(r)]) continue;
        const int q = domain + local_index(r);
        const ThreadId t = core(r, q % cores_);
        const auto found = plan.to_relay.find(q);
        move(t, r, q, found == plan.to_relay.end() ? 0 : found->second * slot(), "to relay");
        signal(t, r, q, 0, "relay rows");
      }
      barrier(r);
      // One status flag per (source, expert) to the expert's rank.
      for (int c = 0; c < cores_; ++c) {
        const Span experts = share(static_cast<std::uint64_t>(p_.experts), c);
        for (std::uint64_t e = experts.first; e < experts.first + experts.count; ++e) {
          const int d = owner(static_cast<int>(e));
          if (layered_ && !same_domain(r, d)) continue;  // the relay signals these
          graph_.flag_set(core(r, c), d, status + static_cast<int>(e % static_cast<std::uint64_t>(per_rank_)) * p_.ep + r, "status");
        }
      }
    }
    // Relays forward what they received across domains, then signal for the source.
    for (int r = 0; r < p_.ep && layered_; ++r) {
      for (const int domain : domains) {
        if (domain == server_[static_cast<std::size_t>(r)]) continue;
        const int q = domain + local_index(r);
        const ThreadId t = core(q, r % cores_);
        await(t, r, q, 0, "relay rows");
        const auto f = plans[static_cast<std::size_t>(r)].forward.find(q);
        for (int d = 0; d < p_.ep; ++d) {
          if (f != plans[static_cast<std::size_t>(r)].forward.end()) move(t, q, d, f->second[static_cast<std::size_t>(d)] * slot(), "forward");
        }
        for (int d = 0; d < p_.ep; ++d) {
          if (!same_domain(q, d)) continue;
          for (int le = 0; le < per_rank_; ++le) graph_.flag_set(t, d, status + le * p_.ep + r, "status (relayed)");
        }
      }
    }
    // Receivers: wait for their (local expert, source) slots, then take the rows.
    for (int r = 0; r < p_.ep; ++r) {
      const std::uint64_t slots = static_cast<std::uint64_t>(per_rank_) * static_cast<std::uint64_t>(p_.ep);
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(slots, c);
        for (std::uint64_t i = mine.first; i < mine.first + mine.count; ++i) {
          graph_.flag_wait(core(r, c), r, status + static_cast<int>(i), 1, "wait status");
        }
      }
      barrier(r);
      // Rows per source for this rank's experts.
      std::vector<std::uint64_t> from(static_cast<std::size_t>(p_.ep), 0);
      std::uint64_t relayed = 0;
      for (int s = 0; s < p_.ep; ++s) {
        const Plan& plan = plans[static_cast<std::size_t>(s)];
        from[static_cast<std::size_t>(s)] = plan.to_rank[static_cast<std::size_t>(r)];
        for (const auto& [q, f] : plan.forward) relayed += f[static_cast<std::size_t>(r)];
      }
      for (int c = 0; c < cores_; ++c) {
        if (normal) {
          // Each core pulls the rows of its own (local expert, source) slots,
          // the same contiguous range whose status flags it waited for.
          const Span mine = share(slots, c);
          for (std::uint64_t i = mine.first; i < mine.first + mine.count; ++i) {
            const int le = static_cast<int>(i / static_cast<std::uint64_t>(p_.ep));
            const int s = static_cast<int>(i % static_cast<std::uint64_t>(p_.ep));
            const std::uint64_t n = plans[static_cast<std::size_t>(s)].to_expert[static_cast<std::size_t>(r * per_rank_ + le)];
            move(core(r, c), s, r, n * slot(), "pull");
          }
          move(core(r, c), r, r, share(relayed, c).count * slot(), "copy relayed");
        } else {
          std::uint64_t total = relayed;
          for (const std::uint64_t n : from) total += n;
          move(core(r, c), r, r, share(total, c).count * slot(), "window to output");
        }
      }
    }
  }

  // Low latency inside one UB/HCCS domain, as MoeDistributeDispatchV2 (the
  // fullmesh kernel behind DeepEP's low-latency dispatch) runs it:
  // - each core takes a contiguous share of the rank's (token, expert) rows
  //   and sends them one at a time: load the BF16 row, quantise it, write it
  //   into the expert's window from the write pipe. The core goes on to the
  //   next row while a write is out, but writes a row's metadata only after
  //   the write before has completed, so it begins a row only once the write
  //   two rows back has landed: the send runs row by row at the pace of the
  //   slower of (load + quantise) and a remote write;
  // - PipeBarrier(ALL), SyncAll, then one status flag per (source, expert)
  //   to the expert's rank; a receiving core polls its contiguous share of
  //   the (local expert, source) entries in one read, so here each core has
  //   one counter of the entries that landed;
  // - SyncAll; each core copies the rows of its entries from the window to
  //   the output a row at a time, double-buffered (a load waits for the
  //   write two rows back); a last SyncAll before the counts are written.
  void low_latency_dispatch() {
    const auto ep = static_cast<std::size_t>(p_.ep);
    const std::uint64_t entries = static_cast<std::uint64_t>(per_rank_) * ep;   // (local expert, source)
    std::vector<int> entry_core(entries);
    for (int c = 0; c < cores_; ++c) {
      const Span mine = share(entries, c);
      for (std::uint64_t i = mine.first; i < mine.first + mine.count; ++i) entry_core[i] = c;
    }
    const int status = flags_.take(cores_);
    const std::uint64_t bf16_row = static_cast<std::uint64_t>(p_.hidden) * 2;
    std::vector<std::vector<std::uint64_t>> to_expert;   // per source, rows per expert
    for (int r = 0; r < p_.ep; ++r) {
      std::vector<int> dest;   // the rank of each (token, expert) row, in token order
      std::vector<std::uint64_t> per_expert(static_cast<std::size_t>(p_.experts), 0);
      for (const std::vector<int>& ids : routing_[static_cast<std::size_t>(r)]) {
        for (const int e : ids) {
          if (e < 0) continue;
          dest.push_back(owner(e));
          ++per_expert[static_cast<std::size_t>(e)];
        }
      }
      to_expert.push_back(std::move(per_expert));
      std::vector<std::optional<TaskId>> drained(static_cast<std::size_t>(cores_));
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(dest.size(), c);
        std::optional<TaskId> previous, before_previous;   // the core's last two writes
        for (std::uint64_t i = mine.first; i < mine.first + mine.count; ++i) {
          const TaskId load = load_row(r, c, r, bf16_row, "load row");
          if (before_previous) graph_.add_dependency(*before_previous, load);
          const std::optional<TaskId> quantised =
              p_.int8 ? compute(core(r, c), static_cast<std::uint64_t>(p_.hidden) * kQuantBytesPerElement, "quantise")
                      : std::nullopt;
          const TaskId write = write_row(r, c, dest[i], slot(), "push row");
          graph_.add_dependency(quantised ? *quantised : load, write);
          before_previous = previous;
          previous = write;
        }
        drained[static_cast<std::size_t>(c)] = previous;
      }
      barrier(r, &drained);
      for (int c = 0; c < cores_; ++c) {
        const Span experts = share(static_cast<std::uint64_t>(p_.experts), c);
        for (std::uint64_t e = experts.first; e < experts.first + experts.count; ++e) {
          const std::uint64_t entry = e % static_cast<std::uint64_t>(per_rank_) * ep + static_cast<std::uint64_t>(r);
          graph_.flag_set(core(r, c), owner(static_cast<int>(e)), status + entry_core[entry], "status");
        }
      }
    }
    for (int r = 0; r < p_.ep; ++r) {
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(entries, c);
        if (mine.count > 0) graph_.flag_wait(core(r, c), r, status + c, static_cast<std::uint32_t>(mine.count), "wait status");
      }
      barrier(r);
      std::vector<std::optional<TaskId>> drained(static_cast<std::size_t>(cores_));
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(entries, c);
        std::uint64_t rows = 0;
        for (std::uint64_t i = mine.first; i < mine.first + mine.count; ++i) {
          const std::uint64_t le = i / ep;
          const std::uint64_t source = i % ep;
          rows += to_expert[source][static_cast<std::size_t>(r) * static_cast<std::size_t>(per_rank_) + le];
        }
        std::optional<TaskId> previous, before_previous;
        for (std::uint64_t k = 0; k < rows; ++k) {
          const TaskId load = load_row(r, c, r, slot(), "window row");
          if (before_previous) graph_.add_dependency(*before_previous, load);
          const TaskId write = write_row(r, c, r, slot(), "row to output");
          graph_.add_dependency(load, write);
          before_previous = previous;
          previous = write;
        }
        drained[static_cast<std::size_t>(c)] = previous;
      }
      barrier(r, &drained);
    }
  }

  // Low-latency combine inside one domain, as MoeDistributeCombineV2 runs it:
  // - an expert rank's cores split the rows it received (by local expert,
  //   then source, then token) into contiguous shares; each core sends its
  //   rows one at a time, starting at an offset set by its rank so that
  //   ranks do not all begin at the same owner: load the row, write it into
  //   the owner's window at the token's slot, then (PipeBarrier on the write
  //   pipe) a flag for that slot once the write is done; loads run ahead by
  //   the two buffers;
  // - then the same core turns owner for its share of the tokens (2-3 of
  //   128): it polls a token's flags until all its rows have landed, loads
  //   them one by one, sums them weighted in FP32 and writes the token out.
  void low_latency_combine() {
    const int token_flags = flags_.take(p_.tokens);   // per token of the owner: its rows that landed
    const std::uint64_t bf16_row = static_cast<std::uint64_t>(p_.hidden) * 2;
    // Rows each expert holds, as (owner, token), in layout order.
    std::vector<std::vector<std::pair<int, int>>> held(static_cast<std::size_t>(p_.experts));
    for (int s = 0; s < p_.ep; ++s) {
      const auto& tokens = routing_[static_cast<std::size_t>(s)];
      for (std::size_t t = 0; t < tokens.size(); ++t) {
        for (const int e : tokens[t]) {
          if (e >= 0) held[static_cast<std::size_t>(e)].push_back({s, static_cast<int>(t)});
        }
      }
    }
    for (int e = 0; e < p_.ep; ++e) {
      std::vector<std::pair<int, int>> rows;
      for (int le = 0; le < per_rank_; ++le) {
        const auto& h = held[static_cast<std::size_t>(e * per_rank_ + le)];
        rows.insert(rows.end(), h.begin(), h.end());
      }
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(rows.size(), c);
        std::optional<TaskId> previous, before_previous;
        for (std::uint64_t j = 0; j < mine.count; ++j) {
          const auto [owner_rank, token] = rows[mine.first + (j + static_cast<std::uint64_t>(e)) % mine.count];
          const TaskId load = load_row(e, c, e, bf16_row, "load row");
          if (before_previous) graph_.add_dependency(*before_previous, load);
          const TaskId write = write_row(e, c, owner_rank, bf16_row, "push row");
          graph_.add_dependency(load, write);
          graph_.flag_set(write_pipe(e, c), owner_rank, token_flags + token, "row flag");
          before_previous = previous;
          previous = write;
        }
      }
    }
    for (int s = 0; s < p_.ep; ++s) {
      const auto& tokens = routing_[static_cast<std::size_t>(s)];
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(tokens.size(), c);
        for (std::uint64_t t = mine.first; t < mine.first + mine.count; ++t) {
          const auto valid = static_cast<std::uint32_t>(
              std::count_if(tokens[t].begin(), tokens[t].end(), [](int e) { return e >= 0; }));
          if (valid > 0) graph_.flag_wait(core(s, c), s, token_flags + static_cast<int>(t), valid, "wait rows");
          for (std::uint32_t k = 0; k < valid; ++k) load_row(s, c, s, bf16_row, "load row");
          compute(core(s, c), valid * static_cast<std::uint64_t>(p_.hidden) * kSumBytesPerElement, "weighted sum");
          write_row(s, c, s, bf16_row, "token out");
        }
      }
    }
  }

  // Combine: every row goes back to its token's owner (pushed, with a flag);
  // across RDMA domains the expert's domain first sums the rows of a token
  // on the relay (the rank of the owner's local index), which sends one row.
  // Owners sum a token's rows as they arrive (in quarters here).
  void data_combine() {
    const int arrived = flags_.take(1);     // rows of the rank's own tokens
    const int relay_in = flags_.take(1);    // rows it sums for owners in other domains
    // Tokens of `owner` with at least one expert in domain D (relay sums them).
    std::vector<std::map<int, std::uint64_t>> relayed(static_cast<std::size_t>(p_.ep));
    for (int s = 0; s < p_.ep; ++s) {
      for (const std::vector<int>& ids : routing_[static_cast<std::size_t>(s)]) {
        std::set<int> domains;
        for (const int e : ids) {
          if (e < 0) continue;
          if (layered_ && !same_domain(s, owner(e))) domains.insert(server_[static_cast<std::size_t>(owner(e))]);
        }
        for (const int d : domains) ++relayed[static_cast<std::size_t>(s)][d];
      }
    }
    // Pieces each relay expects on its `relay_in` counter, and each owner on `arrived`.
    std::vector<std::uint32_t> relay_expected(static_cast<std::size_t>(p_.ep), 0);
    std::vector<std::uint32_t> own_expected(static_cast<std::size_t>(p_.ep), 0);
    // An expert rank's rows are laid out by (local expert, source) as
    // dispatch delivered them; the cores split them into contiguous ranges,
    // so at any time the cores send to different owners.
    std::vector<std::vector<std::uint64_t>> per_expert(static_cast<std::size_t>(p_.experts), std::vector<std::uint64_t>(static_cast<std::size_t>(p_.ep), 0));
    for (int src = 0; src < p_.ep; ++src) {
      for (const std::vector<int>& ids : routing_[static_cast<std::size_t>(src)]) {
        for (const int e : ids) {
          if (e >= 0) ++per_expert[static_cast<std::size_t>(e)][static_cast<std::size_t>(src)];
        }
      }
    }
    for (int e = 0; e < p_.ep; ++e) {
      std::vector<std::pair<int, std::uint64_t>> runs;   // (owner, rows) in layout order
      std::uint64_t total = 0;
      for (int le = 0; le < per_rank_; ++le) {
        for (int src = 0; src < p_.ep; ++src) {
          const std::uint64_t n = per_expert[static_cast<std::size_t>(e * per_rank_ + le)][static_cast<std::size_t>(src)];
          if (n == 0) continue;
          runs.push_back({src, n});
          total += n;
        }
      }
      std::size_t run = 0;
      std::uint64_t used = 0;   // rows of runs[run] already given to earlier cores
      for (int c = 0; c < cores_; ++c) {
        std::uint64_t left = share(total, c).count;
        while (left > 0 && run < runs.size()) {
          const auto [owner_rank, n] = runs[run];
          const std::uint64_t take = std::min(left, n - used);
          const bool via_relay = layered_ && !same_domain(e, owner_rank);
          const int to = via_relay ? relay(owner_rank, e) : owner_rank;
          move(core(e, c), e, to, take * cslot(), "push rows");
          graph_.flag_set(core(e, c), to, via_relay ? relay_in : arrived, "row flags");
          ++(via_relay ? relay_expected : own_expected)[static_cast<std::size_t>(to)];
          left -= take;
          used += take;
          if (used == n) {
            ++run;
            used = 0;
          }
        }
      }
    }
    // Relays: wait for the rows of their domain, sum per token, send one row per token.
    std::vector<std::vector<std::pair<int, std::uint64_t>>> relay_jobs(static_cast<std::size_t>(p_.ep));
    for (int s = 0; s < p_.ep; ++s) {
      for (const auto& [domain, tokens] : relayed[static_cast<std::size_t>(s)]) {
        relay_jobs[static_cast<std::size_t>(domain + local_index(s))].push_back({s, tokens});
      }
    }
    for (int q = 0; q < p_.ep; ++q) {
      if (relay_jobs[static_cast<std::size_t>(q)].empty()) continue;
      const ThreadId t = core(q, cores_ - 1);
      if (relay_expected[static_cast<std::size_t>(q)] > 0) {
        graph_.flag_wait(t, q, relay_in, relay_expected[static_cast<std::size_t>(q)], "relay rows in");
      }
      for (const auto& [s, tokens] : relay_jobs[static_cast<std::size_t>(q)]) {
        compute(t, tokens * static_cast<std::uint64_t>(p_.topk) * static_cast<std::uint64_t>(p_.hidden) * kSumBytesPerElement / 2, "relay sum");
        move(t, q, s, tokens * cslot(), "relay to owner");
        signal(t, q, s, 0, "relay rows");
      }
    }
    // Owners: weighted sum of their tokens, a quarter as each quarter lands.
    for (int s = 0; s < p_.ep; ++s) {
      const std::uint32_t own = own_expected[static_cast<std::size_t>(s)];
      const std::uint64_t tokens = static_cast<std::uint64_t>(p_.tokens);
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(tokens, c);
        for (int g = 0; g < kCombinePieces; ++g) {
          const std::uint32_t need = static_cast<std::uint32_t>((static_cast<std::uint64_t>(own) * static_cast<std::uint64_t>(g + 1) + kCombinePieces - 1) / kCombinePieces);
          if (need > 0) graph_.flag_wait(core(s, c), s, arrived, need, "rows in");
          if (g == kCombinePieces - 1) {
            for (const auto& [domain, n] : relayed[static_cast<std::size_t>(s)]) {
              (void)n;
              if (c == 0) await(core(s, c), domain + local_index(s), s, 0, "relay rows");
            }
          }
          const std::uint64_t part = chunk_span(mine.count, kCombinePieces, g).count;
          const std::uint64_t row_bytes = part * static_cast<std::uint64_t>(p_.topk) * cslot();
          move(core(s, c), s, s, row_bytes, "read rows");
          compute(core(s, c), part * static_cast<std::uint64_t>(p_.topk) * static_cast<std::uint64_t>(p_.hidden) * kSumBytesPerElement, "weighted sum");
        }
      }
    }
  }

  // ---- Normal mode across A2 servers (DeepEP internode on 910B: notify_dispatch_a2,
  // dispatch_normal_a2 = CamMoeDistributeDispatchA2Layered, moe_distribute_combine_a2 =
  // MoeDistributeCombineA2Layered; sgl-kernel-npu csrc/deepep/ops2). Every rank's
  // AIV cores run each phase; the RDMA writes between servers are batch writes
  // the kernel hands to HCCL's AI CPU server (one thread "AICPU" per rank here).

  // The kernels' fixed maximum of tokens per rank (MAX_BATCH_SIZE, MAX_BS):
  // combine's summed rows go between servers at this count whatever the batch.
  static constexpr std::uint64_t kA2MaxBs = 4096;
  // A core's long row loops are built in pieces of this many rows (bulk
  // moves, then the rest of the pieces' per-copy fixed costs), so that the
  // cores' transfers interleave with their fixed costs as row loops do.
  static constexpr std::uint64_t kA2RowPiece = 64;
  // A dispatched token in the A2 windows: the row, then four blocks of K
  // (rounded up to 8) 4-byte fields (expert ids, weights, token index, scale).
  std::uint64_t a2_token_bytes() const {
    return static_cast<std::uint64_t>(p_.hidden) * (p_.int8 ? 1 : 2) + 4 * round_up(static_cast<std::uint64_t>(p_.topk), 8) * 4;
  }
  std::uint64_t bf16_row() const { return static_cast<std::uint64_t>(p_.hidden) * 2; }
  int servers() const { return p_.ep / per_server_; }
  int base(int r) const { return server_[static_cast<std::size_t>(r)]; }
  int server_index(int r) const { return base(r) / per_server_; }
  // Copies a core runs one at a time beyond the bulk moves that carry their
  // bytes (a token loop of DataCopy calls with pipe barriers between): each
  // pays its issue and round trip, aiv.copy_fixed.
  void serial_copies(ThreadId t, std::uint64_t copies, const std::string& label) {
    if (copies == 0) return;
    Task d;
    d.kind = TaskKind::Delay;
    d.thread = t;
    d.duration = Time::from_ps(npu_.aiv.copy_fixed.ps * copies);
    graph_.note_constant(Constant::AivCopyFixed);
    d.label = graph_.intern(label);
    graph_.add(std::move(d));
  }
  ThreadId aicpu(int r) {
    if (aicpu_.empty()) {
      for (int q = 0; q < p_.ep; ++q) aicpu_.push_back(graph_.add_thread(q, "AICPU"));
    }
    return aicpu_[static_cast<std::size_t>(r)];
  }
  // The AI CPU thread of rank r waits until every core of r has passed its
  // last SyncAll (core 0 hands it the batch write after one).
  void aicpu_after_barrier(int r) {
    graph_.flag_wait(aicpu(r), r, barrier_, static_cast<std::uint32_t>(cores_) * rounds_[static_cast<std::size_t>(r)], "SyncAll");
  }
  // The barrier across the ranks of a server (SetIpcFlag / WaitIpcFlag): each
  // of the first L cores flags one local rank and waits for all of them.
  void a2_server_barrier(int flag) {
    for (int r = 0; r < p_.ep; ++r) {
      for (int i = 0; i < std::min(per_server_, cores_); ++i) graph_.flag_set(core(r, i), base(r) + i, flag, "IPC flag");
    }
    for (int r = 0; r < p_.ep; ++r) {
      for (int i = 0; i < std::min(per_server_, cores_); ++i) {
        graph_.flag_wait(core(r, i), r, flag, static_cast<std::uint32_t>(per_server_), "wait IPC flags");
      }
      barrier(r);
    }
  }
  // Rows expert e received from rank s.
  std::vector<std::vector<std::uint64_t>> rows_by_expert_source() const {
    std::vector<std::vector<std::uint64_t>> n(static_cast<std::size_t>(p_.experts), std::vector<std::uint64_t>(static_cast<std::size_t>(p_.ep), 0));
    for (int s = 0; s < p_.ep; ++s) {
      for (const std::vector<int>& ids : routing_[static_cast<std::size_t>(s)]) {
        for (const int e : ids) {
          if (e >= 0) ++n[static_cast<std::size_t>(e)][static_cast<std::size_t>(s)];
        }
      }
    }
    return n;
  }
  // Whether token t of rank s has an expert in server index j.
  bool token_in_server(int s, std::size_t t, int j) const {
    for (const int e : routing_[static_cast<std::size_t>(s)][t]) {
      if (e >= 0 && server_index(owner(e)) == j) return true;
    }
    return false;
  }

  // notify_dispatch_a2: the layout's send data (per expert a count and a
  // MAX_BS list, per token its servers and experts) goes by RDMA to the rank
  // of the same local index in the other server, then every rank gathers its
  // server's copies over HCCS; then the cores derive the offsets. The
  // longest part (BuildSrcDstOffsetData): one core per local expert walks
  // the rows the expert receives, one at a time, each a 4-byte load and two
  // 4-byte stores with pipe barriers between.
  void a2_count_exchange() {
    const std::uint64_t len = (static_cast<std::uint64_t>(p_.experts) * (1 + kA2MaxBs) + static_cast<std::uint64_t>(servers()) +
                               kA2MaxBs * (1 + 2 * static_cast<std::uint64_t>(servers()) + 2 * static_cast<std::uint64_t>(p_.topk))) * 4;
    const int landed = flags_.take(1);
    for (int r = 0; r < p_.ep; ++r) {
      move(core(r, 1 % cores_), r, r, len, "send data to window");
      barrier(r);
      aicpu_after_barrier(r);
      for (int j = 0; j < servers(); ++j) {
        if (j == server_index(r)) continue;
        const int q = j * per_server_ + local_index(r);
        move(aicpu(r), r, q, len, "counts to peer server");
        signal(aicpu(r), r, q, 0, "counts landed", 1);
      }
    }
    for (int r = 0; r < p_.ep; ++r) {
      for (int j = 0; j < servers(); ++j) {
        if (j == server_index(r)) continue;
        await(core(r, 0), j * per_server_ + local_index(r), r, 0, "wait counts", 1);
      }
      barrier(r);
      // Gather within the server: each of the first L cores copies one local rank's blocks.
      for (int i = 0; i < std::min(per_server_, cores_); ++i) {
        const int q = base(r) + i;
        move(core(r, i), q, r, len * static_cast<std::uint64_t>(servers()), "gather counts");
        graph_.flag_set(core(r, i), r, landed, "gathered");
      }
      for (int c = 0; c < cores_; ++c) graph_.flag_wait(core(r, c), r, landed, static_cast<std::uint32_t>(std::min(per_server_, cores_)), "gathered");
      barrier(r);
    }
    const auto n = rows_by_expert_source();
    const int offset_cores = cores_ - (cores_ + 1) / 2;
    for (int r = 0; r < p_.ep; ++r) {
      for (int le = 0; le < per_rank_; ++le) {
        std::uint64_t rows = 0;
        for (const std::uint64_t k : n[static_cast<std::size_t>(r * per_rank_ + le)]) rows += k;
        const int c = (cores_ + 1) / 2 + le % std::max(1, offset_cores);
        serial_copies(core(r, c), 3 * rows, "src/dst offsets");
      }
      barrier(r);
    }
  }

  // dispatch_normal_a2 (CamMoeDistributeDispatchA2Layered::Process).
  void a2_layered_dispatch() {
    const std::uint64_t token = a2_token_bytes();
    const std::uint64_t row = static_cast<std::uint64_t>(p_.hidden) * (p_.int8 ? 1 : 2);
    const int ipc1 = flags_.take(1);
    const int ipc2 = flags_.take(1);
    for (int r = 0; r < p_.ep; ++r) {
      // Input2Win: each core its contiguous share of the tokens: load the
      // token with its ids and weights, write it into the window-out block of
      // every server it goes to, and once more into its own window-in for its
      // own server; one token at a time.
      const auto& tokens = routing_[static_cast<std::size_t>(r)];
      std::vector<std::uint64_t> to_server(static_cast<std::size_t>(servers()), 0);
      for (int c = 0; c < cores_; ++c) {
        const Span mine = share(tokens.size(), c);
        std::uint64_t writes = 0;
        for (std::uint64_t t = mine.first; t < mine.first + mine.count; ++t) {
          for (int j = 0; j < servers(); ++j) {
            if (!token_in_server(r, t, j)) continue;
            ++to_server[static_cast<std::size_t>(j)];
            writes += j == server_index(r) ? 2 : 1;
          }
        }
        move(core(r, c), r, r, mine.count * token, "tokens in");
        move(core(r, c), r, r, writes * token, "tokens to windows");
        const std::uint64_t copies = 3 * mine.count + writes;
        serial_copies(core(r, c), copies > 2 ? copies - 2 : 0, "token loop");
      }
      barrier(r);
      // Core 0 hands the AI CPU one batch: per server (its own too) the
      // block of tokens for it, to the rank of the same local index there,
      // then a flag; a write to itself stays on chip.
      aicpu_after_barrier(r);
      for (int j = 0; j < servers(); ++j) {
        const int q = j * per_server_ + local_index(r);
        const std::uint64_t bytes = 32 + to_server[static_cast<std::size_t>(j)] * token;
        if (q == r) {
          graph_.copy(aicpu(r), BufferRef{r, BufferKind::Scratch, 0}, BufferRef{r, BufferKind::Output, 0}, bytes, "own server block");
          continue;
        }
        move(aicpu(r), r, q, bytes, "tokens to server");
        signal(aicpu(r), r, q, 0, "server block landed");
      }
    }
    // WaitWindow: core j polls the flag of server j's block.
    for (int r = 0; r < p_.ep; ++r) {
      for (int j = 0; j < servers(); ++j) {
        if (j == server_index(r)) continue;
        await(core(r, j % cores_), j * per_server_ + local_index(r), r, 0, "wait server block");
      }
      barrier(r);
    }
    a2_server_barrier(ipc1);
    // Ipc2Out: for each source rank in turn, for each local expert, the
    // cores split its rows from that source; a row is read from the window
    // of the local rank with the source's local index (the source itself,
    // or the rank its block reached over RDMA), written to the output, and
    // its weight after it, one row at a time.
    const auto n = rows_by_expert_source();
    for (int r = 0; r < p_.ep; ++r) {
      for (int c = 0; c < cores_; ++c) {
        for (int src = 0; src < p_.ep; ++src) {
          std::uint64_t rows = 0;
          for (int le = 0; le < per_rank_; ++le) rows += share(n[static_cast<std::size_t>(r * per_rank_ + le)][static_cast<std::size_t>(src)], c).count;
          if (rows == 0) continue;
          const int from = base(r) + src % per_server_;
          move(core(r, c), from, r, rows * token, "window to core");
          move(core(r, c), r, r, rows * row, "rows out");
          serial_copies(core(r, c), 3 * rows - 2, "row loop");
        }
      }
      barrier(r);
    }
    a2_server_barrier(ipc2);
  }

  // moe_distribute_combine_a2 (MoeDistributeCombineA2Layered::Process).
  void a2_layered_combine() {
    const std::uint64_t row = bf16_row();
    const int arrived = flags_.take(servers());   // on a relay: local ranks whose rows for server j landed
    const auto n = rows_by_expert_source();
    // AlltoAllDispatch: the destination ranks split over the cores; a core
    // sends the rows this rank holds for its destination's tokens (all
    // local experts) to the rank of the destination's local index in this
    // server, one row at a time (load, write with its weight, pipe barrier),
    // then flags that rank.
    for (int r = 0; r < p_.ep; ++r) {
      for (int c = 0; c < cores_; ++c) {
        const Span dsts = share(static_cast<std::uint64_t>(p_.ep), c);
        for (std::uint64_t d = dsts.first; d < dsts.first + dsts.count; ++d) {
          std::uint64_t rows = 0;
          for (int le = 0; le < per_rank_; ++le) rows += n[static_cast<std::size_t>(r * per_rank_ + le)][d];
          const int relay_rank = base(r) + static_cast<int>(d) % per_server_;
          for (std::uint64_t done = 0; done < rows; done += kA2RowPiece) {
            const std::uint64_t k = std::min<std::uint64_t>(kA2RowPiece, rows - done);
            move(core(r, c), r, r, k * row, "load rows");
            move(core(r, c), r, relay_rank, k * (row + 32), "rows to relay");
            serial_copies(core(r, c), 2 * k - 2, "row loop");
          }
          graph_.flag_set(core(r, c), relay_rank, arrived + static_cast<int>(d) / per_server_, "rows flag");
        }
      }
      barrier(r);
    }
    // SumToWindow: core j waits for the L local ranks' rows for server j;
    // then the cores, C/S per server, sum per token of the rank of their
    // local index there the rows from this server's experts and write the
    // sum into the window-out block for that server (at the token's index).
    const int per_srv_cores = std::max(1, cores_ / servers());
    for (int r = 0; r < p_.ep; ++r) {
      for (int j = 0; j < servers() && j < cores_; ++j) {
        graph_.flag_wait(core(r, j), r, arrived + j, static_cast<std::uint32_t>(per_server_), "wait rows");
      }
      barrier(r);
      for (int c = 0; c < per_srv_cores * servers() && c < cores_; ++c) {
        const int j = c % servers();
        const int o = j * per_server_ + local_index(r);   // whose tokens these are
        const Span mine = chunk_span(kA2MaxBs, per_srv_cores, c / servers());
        const auto& tokens = routing_[static_cast<std::size_t>(o)];
        std::uint64_t rows = 0;
        std::uint64_t sums = 0;
        for (std::uint64_t t = mine.first; t < mine.first + mine.count && t < tokens.size(); ++t) {
          std::uint64_t k = 0;
          for (const int e : tokens[t]) {
            if (e >= 0 && server_index(owner(e)) == server_index(r)) ++k;
          }
          rows += k;
          sums += k > 0 ? 1 : 0;
        }
        move(core(r, c), r, r, rows * (row + 32), "load rows");
        compute(core(r, c), rows * static_cast<std::uint64_t>(p_.hidden) * kSumBytesPerElement, "weighted sum");
        move(core(r, c), r, r, sums * row, "sum to window");
        const std::uint64_t copies = mine.count + rows + sums;   // offsets, rows, sums
        serial_copies(core(r, c), copies > 3 ? copies - 3 : 0, "token loop");
      }
      barrier(r);
    }
    // AlltoAllServerDispatch + SetStatus: the AI CPU writes each other
    // server's block (MAX_BS rows) to the rank of the same local index there;
    // the core of this server's index copies its own block from window-out to
    // window-in a row at a time; then core 0 has the AI CPU flag each server.
    for (int r = 0; r < p_.ep; ++r) {
      aicpu_after_barrier(r);
      for (int j = 0; j < servers(); ++j) {
        if (j == server_index(r)) continue;
        move(aicpu(r), r, j * per_server_ + local_index(r), kA2MaxBs * row, "sums to server");
      }
      const ThreadId own = core(r, server_index(r) % cores_);
      for (std::uint64_t done = 0; done < kA2MaxBs; done += kA2RowPiece) {
        const std::uint64_t k = std::min<std::uint64_t>(kA2RowPiece, kA2MaxBs - done);
        move(own, r, r, k * row, "own block");
        serial_copies(own, k - 1, "row loop");
      }
      barrier(r);
      aicpu_after_barrier(r);
      for (int j = 0; j < servers(); ++j) {
        if (j == server_index(r)) continue;
        signal(aicpu(r), r, j * per_server_ + local_index(r), 0, "server block landed");
      }
    }
    // WaitDispatch, then SumToServer: the first 8 cores, MAX_BS / 8 token
    // slots each, add a token's block from every server it went to and
    // write the token out.
    for (int r = 0; r < p_.ep; ++r) {
      for (int j = 0; j < servers(); ++j) {
        if (j == server_index(r)) continue;
        await(core(r, j % cores_), j * per_server_ + local_index(r), r, 0, "wait server block");
      }
      barrier(r);
      const auto& tokens = routing_[static_cast<std::size_t>(r)];
      const int summers = std::min(8, cores_);
      for (int c = 0; c < summers; ++c) {
        const Span mine = chunk_span(kA2MaxBs, summers, c);
        std::uint64_t rows = 0;
        std::uint64_t outs = 0;
        for (std::uint64_t t = mine.first; t < mine.first + mine.count && t < tokens.size(); ++t) {
          std::uint64_t k = 0;
          for (int j = 0; j < servers(); ++j) k += token_in_server(r, t, j) ? 1 : 0;
          rows += k;
          outs += k > 0 ? 1 : 0;
        }
        move(core(r, c), r, r, rows * row, "load blocks");
        compute(core(r, c), rows * static_cast<std::uint64_t>(p_.hidden) * kSumBytesPerElement, "sum");
        move(core(r, c), r, r, outs * row, "token out");
        const std::uint64_t copies = mine.count * static_cast<std::uint64_t>(servers()) + rows + outs;
        serial_copies(core(r, c), copies > 3 ? copies - 3 : 0, "token loop");
      }
      barrier(r);
    }
  }

 public:
  const std::vector<TaskId>& kernel_starts() const { return kernel_starts_; }

 private:
  std::vector<ThreadId> aicpu_;
  std::vector<TaskId> kernel_starts_;   // per rank and core, the data kernel's first task (after the host sync)

  MoeParams p_;
  const MoeRouting& routing_;
  const MoeFabric& fabric_;
  const NpuParams& npu_;
  int cores_;      // lanes (threads "AIV<i>")
  int per_lane_;   // vector cores per lane
  int per_rank_;
  TaskGraph graph_;
  std::vector<std::vector<ThreadId>> core_;
  std::vector<ThreadId> host_;
  NotifyAllocator flags_;
  NotifyAllocator notifies_;
  int barrier_ = 0;
  std::vector<std::uint32_t> rounds_;
  std::vector<int> server_;
  int per_server_ = 0;
  bool layered_ = false;
  bool a2_layered_ = false;   // a2_layered_kernels
  std::map<std::tuple<int, int, int>, int> rdma_registers_;
  static constexpr ThreadId kNoThread = 0xffffffffu;
  std::vector<ThreadId> write_pipe_;   // by rank * cores + core, added when first used
};

std::string link_kind(const std::string& label) {
  const auto space = label.find(' ');
  if (label.find("local memory") != std::string::npos) return "local";
  return space == std::string::npos ? label : label.substr(0, space);
}

}  // namespace

TaskGraph build_moe(const MoeParams& p, MoePhase phase, const MoeRouting& routing, const MoeFabric& fabric,
                    std::string* kernel, std::vector<TaskId>* kernel_starts) {
  if (routing.size() != static_cast<std::size_t>(p.ep)) throw std::invalid_argument("build_moe: the routing is not of ep ranks");
  if (!fabric.domain.empty() && fabric.domain.size() != static_cast<std::size_t>(p.ep)) {
    throw std::invalid_argument("build_moe: the fabric does not give one domain per rank");
  }
  if (const std::string problem = moe_fabric_problem(fabric); !problem.empty()) throw std::invalid_argument(problem);
  MoeBuilder b(p, routing, fabric);
  const bool normal = p.mode == MoeMode::Normal;
  const bool a2_layered = a2_layered_kernels(p, fabric);
  if (phase == MoePhase::Dispatch) {
    if (kernel) {
      *kernel = !normal ? "moe_distribute_dispatch_v2"
                : a2_layered ? "notify_dispatch_a2 + dispatch_normal_a2"
                             : "notify_dispatch + cam_moe_dispatch_normal";
    }
    TaskGraph g = b.dispatch();
    if (kernel_starts) *kernel_starts = b.kernel_starts();
    return g;
  }
  if (kernel) *kernel = !normal ? "moe_distribute_combine_v2" : a2_layered ? "moe_distribute_combine_a2" : "cam_moe_combine_normal";
  return b.combine();
}

std::vector<MoeRun> run_moe(Platform& platform, const MoeParams& p, const std::vector<MoePhase>& phases, TraceWriter* trace) {
  check_moe_params(p, platform.npus());
  const MoeRouting routing = make_routing(p);
  // Expert load: rows per expert.
  std::vector<std::uint64_t> load(static_cast<std::size_t>(p.experts), 0);
  std::uint64_t pairs = 0;
  for (const auto& rank : routing) {
    for (const auto& ids : rank) {
      for (const int e : ids) {
        if (e >= 0) {
          ++load[static_cast<std::size_t>(e)];
          ++pairs;
        }
      }
    }
  }
  const double mean_load = static_cast<double>(pairs) / p.experts;
  const double imbalance = mean_load > 0 ? static_cast<double>(*std::max_element(load.begin(), load.end())) / mean_load : 0;
  // Rows each rank receives (dispatch) and its tokens' valid selections (combine).
  const int per_rank = p.experts / p.ep;
  std::vector<double> recv_rows(static_cast<std::size_t>(p.ep), 0);
  std::vector<double> own_rows(static_cast<std::size_t>(p.ep), 0);
  for (int r = 0; r < p.ep; ++r) {
    for (const auto& ids : routing[static_cast<std::size_t>(r)]) {
      for (const int e : ids) {
        if (e < 0) continue;
        recv_rows[static_cast<std::size_t>(e / per_rank)] += 1;
        own_rows[static_cast<std::size_t>(r)] += 1;
      }
    }
  }
  std::vector<int> ranks(static_cast<std::size_t>(p.ep));
  std::iota(ranks.begin(), ranks.end(), 0);
  const MoeFabric fabric = moe_fabric(platform.spec().npu, platform.spec().sdma_domain_of, ranks);
  if (const std::string problem = moe_fabric_problem(fabric); !problem.empty()) throw InputError("option --ep", problem);
  Scheduler sched(platform);
  std::vector<MoeRun> out;
  for (const MoePhase phase : phases) {
    MoeRun run;
    run.phase = phase;
    std::vector<TaskId> kernel_starts;
    const TaskGraph graph = build_moe(p, phase, routing, fabric, &run.kernel, &kernel_starts);
    std::vector<std::uint64_t> before;
    for (const auto& ch : platform.channels()) before.push_back(ch->bytes_carried());
    std::vector<std::uint64_t> local_before;
    for (int n = 0; n < platform.npus(); ++n) local_before.push_back(platform.local_memory(n).bytes_carried());
    const RunResult result = sched.run(graph);
    if (!result.failure.empty()) throw GraphError("MoE " + run.kernel + " did not finish: " + result.failure);
    // Per rank: from the run's start to its last task.
    std::vector<double> times(static_cast<std::size_t>(p.ep), 0);
    for (TaskId id = 0; id < graph.tasks().size(); ++id) {
      const int r = graph.rank_of(id);
      times[static_cast<std::size_t>(r)] = std::max(times[static_cast<std::size_t>(r)], (result.timings[id].end - result.begin).us());
    }
    run.time_us = *std::max_element(times.begin(), times.end());
    run.time_min_us = *std::min_element(times.begin(), times.end());
    run.time_mean_us = std::accumulate(times.begin(), times.end(), 0.0) / p.ep;
    if (!kernel_starts.empty()) {
      std::vector<double> start(static_cast<std::size_t>(p.ep), -1);
      for (const TaskId id : kernel_starts) {
        const auto r = static_cast<std::size_t>(graph.rank_of(id));
        const double at = (result.timings[id].start - result.begin).us();
        if (start[r] < 0 || at < start[r]) start[r] = at;
      }
      double sum = 0;
      for (int r = 0; r < p.ep; ++r) sum += times[static_cast<std::size_t>(r)] - std::max(0.0, start[static_cast<std::size_t>(r)]);
      run.kernel_time_us = sum / p.ep;
    }
    // DeepEP's bandwidth: normal mode counts the rows a rank receives
    // (dispatch: quantised bytes, H (1 + 4/128) per row for INT8, 2H for
    // BF16; combine: 2H); low-latency mode the valid selections of the
    // rank's tokens x (H + H/128 x 4 + 16) for INT8 dispatch, 2H for combine.
    const double h = p.hidden;
    double per_row = 2 * h;
    if (phase == MoePhase::Dispatch && p.int8) per_row = p.mode == MoeMode::Normal ? h * (1 + 4.0 / 128) : h + h / 128 * 4 + 16;
    const std::vector<double>& rows = p.mode == MoeMode::Normal && phase == MoePhase::Dispatch ? recv_rows : own_rows;
    run.bytes_per_rank = std::accumulate(rows.begin(), rows.end(), 0.0) / p.ep * per_row;
    run.bandwidth_gbps = run.time_mean_us > 0 ? run.bytes_per_rank / (run.time_mean_us * 1e-6) / 1e9 : 0;
    for (std::size_t i = 0; i < platform.channels().size(); ++i) {
      const Channel& ch = *platform.channels()[i];
      const std::uint64_t moved = ch.bytes_carried() - before[i];
      if (moved > 0) run.link_bytes[link_kind(ch.label())] += moved;
    }
    for (int n = 0; n < platform.npus(); ++n) {
      const std::uint64_t moved = platform.local_memory(n).bytes_carried() - local_before[static_cast<std::size_t>(n)];
      if (moved > 0) run.link_bytes["local"] += moved;
    }
    run.expert_imbalance = imbalance;
    run.tasks = graph.tasks().size();
    run.events = result.activations;
    run.assumed = assumed_constants_used(result.constants, platform.spec());
    if (trace) trace->add_run(graph, result, platform, std::string("moe ") + (phase == MoePhase::Dispatch ? "dispatch" : "combine"));
    out.push_back(run);
  }
  return out;
}

Time moe_flow_quantum(const MoeParams& p) {
  return p.mode == MoeMode::LowLatency ? Time::from_ns(100) : Time::from_us(1);
}

}  // namespace hcclsim

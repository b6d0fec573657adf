// `--model estimate`: a collective's time in closed form, without SystemC.
// The executor HCCL's selection picks is the same as in the detailed model;
// instead of building its task graph, its task order is evaluated with the
// scheduler's rules (dispatch gaps, notify records and waits, SDMA / RDMA
// set-up, latencies, a transfer's bytes over its rate): for the ranks of one
// server, each with its own times, where the form depends on where a rank
// sits (the mesh and ring stages; level-1 steps, the pairwise and the
// DirectFullmesh AlltoAll up to 512-1024 ranks), else for one
// representative rank whose peers are as far along as it is (every rank of
// these steps runs the same tasks). A
// step's rates are max-min fair shares of the channels its flows cross,
// all of the step's flows counted together (progressive filling, memoized
// per pattern: they do not depend on the size; a form's first point lists
// its solves and runs them at once on the machine's cores, the same rates
// on any number of threads). Where writes of different
// steps or loops are in flight together (the level-1 Broadcast and Reduce
// over RDMA, up to 1024 ranks), each write is followed as a flow of its
// own, its share solved again whenever one starts or drains.
//
// What it leaves out, against the detailed model: flows of other steps or
// stages overlapping elsewhere (a Pipeline's two level-0 lanes share the
// server's links by processor sharing; a ring reduce's gather shares a
// link with one read of the next loop; DirectFullmesh slots drifting into
// neighbouring rounds and the pairwise AlltoAll's writes of neighbouring
// steps count as a share of their steps' flows, not followed in time), and
// skew between ranks where the form follows one representative.
// tests/unit/test_estimate*.cpp bound the difference on a grid of ops,
// sizes, rank counts and products; docs/estimate.md (accuracy) lists where
// it differs most and why.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/unzeroed_allocator.h"
#include "models/link/max_min.h"
#include "models/params.h"
#include "topologies/platform_spec.h"
#include "topologies/routes.h"

namespace hcclsim {

struct CollectiveSpec;
struct ExecContext;
struct AlgoPlan;

// The profile's constants as the closed forms use them: times in ps, rates
// in bytes per ps (a rate of 0 in the profile, "unlimited", becomes huge).
struct StepCosts {
  double launch, dispatch;                 // stream.op_launch, stream.task_dispatch
  double record_local, record_remote, wait;
  double sdma_fixed, sdma_read_fixed;      // set-up of a local copy / write, of a read of a peer
  double copy_rate, reduce_rate;           // SDMA caps
  double local_rate, local_latency;        // the NPU's memory channel
  double rdma_post, rdma_notify_bytes;
  double aiv_fixed, aiv_rate, flag_write, flag_poll;
  double aiv_port;                         // aiv.remote_bandwidth: an NPU's AIV moves to or from peers, each way, in all
  explicit StepCosts(const NpuParams& npu);

  double sdma_cap(bool reduce) const { return reduce ? reduce_rate : copy_rate; }
  // A local SDMA copy (or inline reduction) of `bytes`, alone on the memory channel.
  double local_copy(double bytes, bool reduce = false) const;
  // A notify wait reached at `reach` whose record lands at `landed`.
  double wait_end(double reach, double landed) const { return landed > reach ? landed : reach + wait; }
};

// A path between two NPUs as one transfer alone on it sees it.
struct PathCost {
  double rate = 0;         // the narrowest channel (and the links' SDMA read caps), bytes per ps
  double write_rate = 0;   // the same with the links' write caps (and SDMA write caps)
  double latency = 0;      // ps, summed over the hops (cut-through)
  // What an SDMA task on this path waits beyond npu.sdma.task_fixed (a
  // write) or read_fixed (a read): the links' sdma_*_extra, the largest.
  double write_extra = 0;
  double read_extra = 0;
  bool rdma = false;       // different SDMA domains: RDMA writes through the NICs
  bool same_chip = false;  // a notify record between them is local
};

// One transfer of a step: from and to NPU (a read runs on `to`, a write on `from`).
// `weight`: the share of the time it is in flight with the others listed
// (flows of neighbouring steps that overlap it count 1 / steps each).
struct FlowPair {
  int from = 0;
  int to = 0;
  double weight = 1;
};

// Pairs of NPUs in runs: run r holds (from + k * stride, to + k * stride)
// for k < count. A step of evenly spaced ranks each sending to the rank
// `shift` ahead is two runs, so the kinds of path of its thousands of
// pairs are found by comparing NPUs' places level by level over runs.
struct PairRuns {
  struct Run {
    int from = 0, to = 0, stride = 1, count = 0;
  };
  std::vector<Run> runs;
  std::size_t pairs = 0;
  void add_run(int from, int to, int stride, int count);
  // One pair, continuing the last run when it is that run's next.
  void add(int from, int to);
  // Member x of `members` evenly spaced NPUs (first + x * stride) to
  // member x + ahead, wrapped once: two runs, of at most `most` pairs.
  void add_rotation(int first, int stride, int members, int ahead,
                    std::size_t most = static_cast<std::size_t>(-1));
};

// Flows with their routes: flow i crosses the channels
// channel[first[i]] .. channel[first[i + 1] - 1] (an NPU's memory channel
// numbered after the links').
// (Grown by a resize that leaves the new elements as they are: the router
// writes each flow's channels into room made for them; zeroing it first
// was a tenth of routing a flow.)
struct RoutedFlows {
  std::vector<std::size_t, UnzeroedAllocator<std::size_t>> first{0};
  std::vector<int, UnzeroedAllocator<int>> channel;
  std::size_t size() const { return first.size() - 1; }
};

// How many of some routed flows' hops cross each channel, the channels in
// the order first crossed (EstimateFabric::count_channels).
using ChannelCounts = std::vector<std::pair<int, int>>;
// Per hop of routed flows, its channel's place in their ChannelCounts
// (the lists of crossings are made from it without looking each channel
// up again).
using HopPlaces = std::vector<std::uint32_t, UnzeroedAllocator<std::uint32_t>>;
// The flows crossing each of those channels, and each flow's narrowest
// channel (estimate.cpp's list_crossings).
struct ChannelCrossings {
  // The flows crossing the channel counted k-th, in flow order, once per
  // hop: crossing[first[k] .. first[k + 1]).
  std::vector<std::uint32_t> first, crossing;
  std::vector<double> narrowest;  // per flow: its least capacity (none crossed: no limit)
};

// A part of several solves' flows, its channel counts (and, for a solve
// that asks, its crossings) found once, by the first solve that asks, on
// whichever thread it runs (a SolveBatch's).
class CountedPart {
 public:
  explicit CountedPart(const RoutedFlows& flows) : CountedPart(flows, 0) {}
  // A part that `users` jobs of a SolveBatch take (0: kept to the end):
  // once the last of them is solved its counts and crossings are freed
  // (left empty), so that the parts solved after it reuse their memory
  // instead of fresh pages. (Its routes are its maker's: freeing them too slowed the routing of
  // the rounds after, CloudMatrix384's first AlltoAll point 5.9 -> 6.7
  // ms, medians of 15 runs, and 6.9 ms when the maker freed them.)
  CountedPart(const RoutedFlows& flows, int users) : flows_(flows), users_(users) {}
  // A job taking this part was solved (SolveBatch calls it). (A part made
  // with 0 users counts below 0 and is never freed.)
  void solved_one() const {
    if (users_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      counts_ = ChannelCounts{};
      places_ = HopPlaces{};
      crossings_ = ChannelCrossings{};
    }
  }
  const RoutedFlows& flows() const { return flows_; }
  // count(flows, places): the counts, each hop's place in them written to places.
  template <class Count>
  const ChannelCounts& counts(const Count& count) const {
    std::call_once(counted_, [&] { counts_ = count(flows_, places_); });
    return counts_;
  }
  // list(flows, places), after counts().
  template <class List>
  const ChannelCrossings& crossings(const List& list) const {
    std::call_once(listed_, [&] { crossings_ = list(flows_, places_); });
    return crossings_;
  }

 private:
  const RoutedFlows& flows_;
  mutable std::atomic<int> users_;  // jobs taking it not yet solved
  mutable std::once_flag counted_, listed_;
  mutable ChannelCounts counts_;
  mutable HopPlaces places_;
  mutable ChannelCrossings crossings_;
};

class EstimateFabric {
 public:
  // `spec` must outlive the fabric.
  explicit EstimateFabric(const TopologySpec& spec);
  ~EstimateFabric();  // (stops the solve threads)
  EstimateFabric(const EstimateFabric&) = delete;
  EstimateFabric& operator=(const EstimateFabric&) = delete;

  const TopologySpec& spec() const { return spec_; }
  const StepCosts& costs() const { return costs_; }
  int npus() const { return spec_.npus; }

  // The ring forms add a steady run of identical full slices at once
  // (sim/executors/ring_estimate.cpp, Hierarchical::slices); with `follow` they
  // follow every slice instead (the tests compare the two).
  void follow_every_slice(bool follow) { follow_every_slice_ = follow; }
  bool follows_every_slice() const { return follow_every_slice_; }
  // How many slices were added at once so far.
  std::uint64_t slices_added_at_once() const { return slices_added_at_once_; }
  void count_slices_added_at_once(std::uint64_t slices) const { slices_added_at_once_ += slices; }

  // A pairwise exchange's steps whose shares only ECMP decides take, beyond
  // a few dozen of them, the shares of a few solved ones (level1.cpp,
  // kDrawnSteps); with `every` each one is solved (the tests compare the two).
  void solve_every_step(bool every) { solve_every_step_ = every; }
  bool solves_every_step() const { return solve_every_step_; }
  // How many steps took a solved step's shares so far.
  std::uint64_t steps_drawn() const { return steps_drawn_; }
  void count_steps_drawn(std::uint64_t steps) const { steps_drawn_ += steps; }
  // Per-rank steps whose pairs all take one RDMA path run in loops of their
  // own, which the compiler vectorizes; with `general` they run in the loops
  // every step takes (the tests compare the two: the same times to the bit).
  void general_step_loops(bool general) { general_step_loops_ = general; }
  bool uses_general_step_loops() const { return general_step_loops_; }

  // Assumes the regular topologies hcclsim builds: two pairs in the same
  // relation (same chip, server, SDMA domain, leaf of each fabric) take
  // paths of the same cost.
  PathCost path(int from, int to) const;
  // The relation path() keys its costs by: same NPU, chip, server, SDMA
  // domain, leaf of each fabric, one bit each.
  std::uint64_t relation(int from, int to) const;
  // Each flow's rate (bytes per ps) when `flows` run at once: max-min fair
  // shares of the channels they cross (progressive filling, as the detailed
  // flow model), each flow capped by `cap` (and by the write caps of its
  // links when `write`). Memoized under `key` (a step pattern's name: what
  // the flows are does not depend on the data size), so a sweep solves
  // each pattern once.
  // `sdma`: the flows are SDMA tasks, each also capped by its links' SDMA
  // caps (sdma_read_rate / sdma_write_rate; none on A2), applied to each
  // flow's share after the solve (exact when the flows sharing a channel
  // have the same cap, as the A3 switch paths do).
  const std::vector<double>& flow_rates(const std::string& key,
                                        const std::function<void(std::vector<FlowPair>&)>& flows, double cap,
                                        bool write, bool sdma = true) const;
  // The same solve in two parts and not memoized, for a caller that solves
  // lists sharing flows and keeps only part of each result (a step with
  // its neighbours'): routing (appended to `out`), and the solve with each
  // flow's weight (empty: every flow counts fully).
  void route_flows(const std::vector<FlowPair>& flows, RoutedFlows& out) const;
  // How many flows route_flows (and so flow_rates) routed so far: a sweep
  // that keeps its solves routes its flows at the first point only (a test
  // holds the forms to that).
  std::uint64_t flows_routed() const { return flows_routed_; }
  // route_flows for flows that all cross one leaf/spine fabric, each NPU
  // sending at most one and receiving at most one (a pairwise step): only
  // the hops between the leaves are listed (none under one leaf). Returns
  // the rate of every flow's first and last hop (its NPUs' links to their
  // leaves, which no other flow crosses), when they are all the same and
  // no hop between the leaves is slower; else 0, with `out` left empty.
  // A solve of such parts (SolveJob::edge_rate) walks a half to a quarter
  // of the hops: the links to the leaves can never fill there.
  // (Routed from RouteFinder::leaf_spine_routes' flat arrays, made at the
  // first call: through the memoizing route search, a quarter of a
  // million flows at a 1024-NPU AlltoAll's first point cost 190
  // instructions each.)
  double route_between_leaves(const std::vector<FlowPair>& flows, RoutedFlows& out) const;
  // With `whole`, the forms route every hop of every flow instead (the
  // tests compare the two: the same rates to the bit).
  void route_whole_paths(bool whole) { route_whole_paths_ = whole; }
  bool routes_whole_paths() const { return route_whole_paths_; }
  std::vector<double> solve_routed(const RoutedFlows& flows, const std::vector<double>& weight, double cap,
                                   bool write, SlowestOfGroups only = {}) const;
  // The same over the flows of several parts, listed in order.
  std::vector<double> solve_routed(const std::vector<const RoutedFlows*>& parts, const std::vector<double>& weight,
                                   double cap, bool write, SlowestOfGroups only = {}) const;
  // A solve's rates kept under `key` ("solved/" + key in flow_rates'
  // memo), computed by `solve` the first time: for a form that routes its
  // flows itself (to reuse the routes of flows that several solves share)
  // and still solves each pattern once per sweep.
  const std::vector<double>& kept_rates(const std::string& key, const std::function<std::vector<double>()>& solve) const;
  // Each channel the flows cross, with how many hops cross it (`solver`'s
  // working memory: the thread's own).
  ChannelCounts count_channels(MaxMinShares& solver, const RoutedFlows& flows, HopPlaces& places) const;
  // One solve_routed, as a job of a SolveBatch.
  struct SolveJob {
    std::vector<const RoutedFlows*> parts;
    // Per part (empty: none), its channel counts: a solve by groups whose
    // flows all count `share` then fills from the counts
    // (fill_groups_by_counts).
    std::vector<const CountedPart*> counts;
    std::vector<double> weight;  // empty: every flow counts `share`
    double share = 1;            // (one value, not a list per job: 3,000-24,000 flows each)
    double cap = 0;
    bool write = false;
    SlowestOfGroups only;
    std::size_t kept = 0;  // the rates of the first `kept` flows are returned (0: all)
    // > 0: the parts are route_between_leaves', and this the rate it gave
    // them all (so every flow's narrowest channel is of this rate); the
    // flows must all count `share` <= 1 / parts (their links to the leaves
    // then never fill), with no weight, groups or write caps.
    double edge_rate = 0;
    bool least = false;    // only the least rate, as shared_rate finds it (one value)
  };
  // solve_routed for each job added, the rates in the order added. The
  // jobs share nothing but the fabric's constants, so they run on up to
  // solve_threads() threads, each with working memory of its own (a
  // form's first point solves a hundred step patterns at once: a pairwise
  // AlltoAll on 1024 NPUs), while the caller lists (and routes) the next
  // ones: the other threads take each job as it is added, and the
  // caller's thread joins them at finish(). The rates are the same bit for
  // bit on any number of threads (a test holds this). One batch of a
  // fabric at a time; a job's routes must stay where they are until
  // finish(), and the caller must not solve with the fabric meanwhile
  // except through flow_rates and solve_routed (the caller's own memory).
  class SolveBatch {
    friend class EstimateFabric;  // (its solve threads serve a batch through work())

   public:
    explicit SolveBatch(const EstimateFabric& fabric);
    ~SolveBatch();  // without finish(): the jobs not started are dropped
    SolveBatch(const SolveBatch&) = delete;
    SolveBatch& operator=(const SolveBatch&) = delete;
    void add(SolveJob job);
    // More than one job will be added: the other threads start on the
    // first as it is added rather than at the second (which a batch of
    // one never reaches, so that its caller solves it without waking them).
    void expect_several() { several_ = true; }
    std::vector<std::vector<double>> finish();  // the rates, in the order added
    // finish(), calling progress(n) on this thread between its jobs each
    // time the first n jobs added are all solved (n rising to every job):
    // their rates (rates_of) may then be read, or moved from. So that
    // the caller works on what the first jobs give while the others are
    // solved, instead of after the last. (progress keeps the caller's rule
    // above: the helpers are still solving.)
    std::vector<std::vector<double>> finish(const std::function<void(std::size_t)>& progress);
    std::vector<double>& rates_of(std::size_t job);  // job < the last n given to progress

   private:
    struct State;
    void start_helpers();
    void served();  // once the fabric's solve threads are back from this batch
    void work(MaxMinShares& solver, std::size_t thread);
    bool solve(MaxMinShares& solver, std::size_t thread, std::size_t job, std::vector<double>& shares);
    std::unique_ptr<State> state_;
    bool several_ = false;
  };
  // kept_rates for each key: job(i) (called on this thread, in order) for
  // each key not kept yet, solved in a SolveBatch while the next are
  // listed; `meanwhile` runs on this thread once they are all listed,
  // while the others solve them.
  std::vector<const std::vector<double>*> kept_rates_each(const std::vector<std::string>& keys,
                                                         const std::function<SolveJob(std::size_t)>& job,
                                                         const std::function<void()>& meanwhile = {}) const;
  // Threads for a SolveBatch: the machine's cores by default (at most 8); 1
  // solves on the caller's thread.
  void set_solve_threads(int threads);
  int solve_threads() const { return solve_threads_; }
  // The other solve threads are started once, by the first batch that
  // wants them (a batch of one job starts none), and kept for the later
  // batches; this starts them now: on this VM a thread takes 0.5-1 ms to
  // begin, which a form's first point otherwise waits for (perf's
  // estimate runs call it as they load the topology).
  void start_solve_threads() const;
  // Once the threads started have made their working memory (slot maps,
  // the NPUs' places), so that
  // the points timed after it do not fault it in; at once if none were.
  // (start_solve_threads makes the caller's slot map itself.)
  void await_solve_threads() const;
  // each(thread, threads) on every solve thread at once (this one is
  // thread 0), returning when all are done (the first error rethrown
  // here): for a form's loop over parts that do not touch each other.
  // Not while a SolveBatch is open.
  void on_solve_threads(const std::function<void(std::size_t thread, std::size_t threads)>& each) const;
  // Threads started so far: once per fabric, and again after set_solve_threads.
  std::uint64_t threads_started() const { return threads_started_; }
  // The solves by groups that ended in their first round found from their
  // parts' channel counts (fill_groups_by_counts), on any thread.
  std::uint64_t first_rounds_by_counts() const { return first_rounds_by_counts_; }
  // The solves by groups that went past their first round and ended from
  // the counts too (fill_groups_by_counts), on any thread.
  std::uint64_t later_rounds_by_counts() const { return later_rounds_by_counts_; }
  // The solves taken by solve_alike_flows, on any thread.
  std::uint64_t alike_solves() const { return alike_solves_; }
  // The channels a transfer from `from` to `to` crosses (as the detailed
  // model routes it), and a channel's rate in bytes per ps (channels past
  // the links' are the NPUs' memory), for forms that follow flows starting
  // and draining one by one.
  const std::vector<int>& route(int from, int to) const;  // memoized
  double channel_rate(int channel) const {  // (inline: a solve asks it of every channel it meets)
    const auto link = static_cast<std::size_t>(channel) / 2;
    return link < link_rates_.size() ? link_rates_[link] : costs_.local_rate;
  }
  // The slowest of them: a step ends with its slowest flow.
  double shared_rate(const std::string& key, const std::function<void(std::vector<FlowPair>&)>& flows, double cap,
                     bool write, bool sdma = true) const;
  // shared_rate for several steps: each step's flows listed and routed on
  // this thread, in order, and its least share found by a SolveBatch while
  // the next is listed; memoized as shared_rate's. A pairwise exchange
  // over 100,000 NPUs takes 128 such steps at its first point.
  struct RateQuery {
    std::string key;
    std::function<void(std::vector<FlowPair>&)> flows;
    double cap = 0;
    bool write = false;
    bool sdma = true;
  };
  std::vector<double> shared_rates(const std::vector<RateQuery>& queries) const;
  // True the first time `key` is asked about: a form that prepares its
  // first point's work at once skips looking it up again at every point.
  bool first_time(const std::string& key) const { return seen_.insert(key).second; }
  // The distinct paths (by latency, rates, RDMA, same chip) that the pairs
  // of `flows` take: a step whose pairs cross different links (inside a
  // server and between servers) costs what its slowest kind of pair costs.
  // Memoized under `key` like shared_rate.
  const std::vector<PathCost>& path_kinds(const std::string& key, const std::function<void(PairRuns&)>& pairs) const;
  // For the pairs `pairs` lists, the path of each as an index into
  // `kinds`: built once per key, so a form that visits every pair at every
  // size (a pairwise AlltoAll followed rank by rank) looks paths up by a byte.
  struct PairTable {
    std::vector<PathCost> kinds;
    std::vector<std::uint8_t> kind_of;  // in the order listed
  };
  const PairTable& pair_table(const std::string& key, const std::function<void(PairRuns&)>& pairs) const;
  // One step of a form followed rank by rank in which member x sends one
  // flow: its path, paths->kinds[paths->kind_of[x]] (a pointer into the
  // memo above), and its rate, rate[x]; or, for a step that takes another
  // step's shares (`rate` empty), that step's rate[(x + turn) % members],
  // the step being the form's `shares_of`-th.
  struct RankStep {
    const PairTable* paths = nullptr;
    std::vector<double> rate;
    std::size_t shares_of = 0;
    std::size_t turn = 0;
  };
  // A form's steps, built once per key by `build`: a pairwise exchange
  // visits a thousand steps at every size and finds them by one lookup.
  const std::vector<RankStep>& rank_steps(const std::string& key,
                                          const std::function<std::vector<RankStep>()>& build) const;

 private:
  // `flows` listed, routed and weighed (weight empty while every flow
  // counts fully). The last list is kept with its routes: a step whose
  // pairs take two kinds of path (SDMA and RDMA) is solved under two caps,
  // one after the other, and its flows are routed once.
  struct Listed {
    std::vector<FlowPair> flows;
    RoutedFlows routed;
    std::vector<double> weight;
  };
  const Listed& listed(const std::function<void(std::vector<FlowPair>&)>& flows) const;
  // Routed flows in `solver`'s dense form (its Work's `dense`); returns each
  // flow's limit. `demand`: each flow's bound and its demand on its channels
  // too, as progressive_filling's first pass finds them.
  std::vector<double> densify(MaxMinShares& solver, const std::vector<const RoutedFlows*>& parts,
                              const std::vector<double>& weight, double cap, bool write, bool demand) const;
  // `solver`'s map from a channel to its dense slot (-1 between uses), one
  // entry per channel of the fabric.
  std::vector<int>& slot_map(MaxMinShares& solver) const;
  // A solve by groups (`job.only`) whose flows all count job.share and whose
  // parts' channel counts are known: each channel's load is then the share
  // added once per crossing hop, whatever the flows' order, and the first
  // round's level follows from the counts alone. If a flow of every group
  // freezes at it (every_group_in_first_round), `out` gets the level for
  // the job's kept flows and true is returned, the filling's result
  // without listing the flows' slots; else the rounds go on from the
  // counts (rounds_by_counts). False, with nothing changed, when the job is
  // not of that kind or takes too many rounds.
  bool fill_groups_by_counts(MaxMinShares& solver, const SolveJob& job, std::vector<double>& out) const;
  // The filling's rounds from the first, for fill_groups_by_counts (its
  // merged slots in `w`, its parts' counts in `counted`): a round takes the same room (the share x the
  // level) and load (the share) from each channel per hop that freezes,
  // whatever the order, so the rounds follow from the counts, each round's
  // freezing flows found through the parts' lists of the flows crossing
  // each full channel. fill_progressively's rules, its rates bit for bit.
  bool rounds_by_counts(MaxMinShares& solver, const SolveJob& job, const std::vector<const ChannelCounts*>& counted,
                        std::size_t flows, double weight, std::vector<double>& out) const;

  // A solve of every share (no groups, no write caps) whose flows all count
  // job.share, all cross a channel and all have the same narrowest channel
  // (a pairwise step's RDMA writes with its neighbours'): every flow's
  // bound and demand are then one value, so a pass counting each channel's
  // hops decides which channels can fill, and only the flows crossing one
  // are listed for the filling (progressive_filling's reduced problem,
  // without densify's lists). `out` gets the job's kept rates, the same as
  // solve_with's, and true is returned; else false, `out` unchanged.
  bool solve_alike_flows(MaxMinShares& solver, const SolveJob& job, std::vector<double>& out) const;
  // A job's rates (its first `kept`) into `out`; `shares`: room for its one share per flow.
  void solve_job(MaxMinShares& solver, const SolveJob& job, std::vector<double>& out, std::vector<double>& shares) const;
  // solve_routed with `solver`'s working memory (the rates are its, until its next solve).
  const std::vector<double>& solve_with(MaxMinShares& solver, const std::vector<const RoutedFlows*>& parts,
                                 const std::vector<double>& weight, double cap, bool write, SlowestOfGroups only) const;
  // The least of solve_routed's rates for `flows`, without the filling
  // (with `solver`'s working memory).
  double slowest_routed(const RoutedFlows& flows, const std::vector<double>& weight, double cap, bool write) const {
    return slowest_with(solver_, flows, weight, cap, write);
  }
  double slowest_with(MaxMinShares& solver, const RoutedFlows& flows, const std::vector<double>& weight, double cap,
                      bool write) const;
  // The ids relation() compares, level by level (chip, server, SDMA
  // domain, leaf of each fabric), each level an array over the NPUs (places_).
  const std::vector<int>& places() const;
  // Each pair's kind of path (into `kinds`, appended to), into `kind_of` unless null.
  void classify(const PairRuns& pairs, std::vector<PathCost>& kinds, std::vector<std::uint8_t>* kind_of) const;

  const TopologySpec& spec_;  // the caller's: 100,000 NPUs' links are not copied
  mutable std::vector<int> places_;  // places()'s, built on first use (on any thread, once)
  mutable std::once_flag places_built_;
  // Per level of places_, the size of the blocks of consecutive NPUs that
  // share an id there (each NPU's id its block's, the blocks' ids rising),
  // or 0 when the level is not so: a run of pairs a constant distance apart
  // then differs at that level when the distance is a block or more.
  mutable std::vector<int> blocks_;
  mutable std::vector<std::uint32_t> codes_;  // classify()'s relation codes
  StepCosts costs_;
  RouteFinder routes_;
  // route_between_leaves' routes, with the rate of each kind's links to
  // the leaves (0 when they differ, or a hop between the leaves is slower).
  struct BetweenLeaves {
    const RouteFinder::LeafSpineRoutes* routes = nullptr;
    std::array<double, 2> edge_rate{0, 0};
  };
  const BetweenLeaves& between_leaves() const;  // made at the first call
  mutable std::once_flag between_leaves_made_;
  mutable BetweenLeaves between_leaves_;
  std::vector<double> link_rates_;  // per link: its channels' rate, worked out once (8 bytes a link)
  bool sdma_caps_ = false;          // a link has an SDMA read or write cap (A3's switch ports)
  // One SDMA flow's cap on its path (its PathCost's rate or write_rate), kUnlimited on one NPU.
  double sdma_cap(const FlowPair& f, bool write) const;
  // The least SDMA cap (read or write) on the routes of `flows`, kUnlimited without.
  double least_sdma_cap(const std::vector<FlowPair>& flows, bool write) const;
  void cap_sdma(const std::vector<FlowPair>& flows, bool write, std::vector<double>& rates) const;
  mutable std::map<std::string, std::vector<double>> rates_;  // key + cap + write -> each flow's rate
  mutable std::map<std::string, double> slowest_;  // shared_rate's, by key + cap + write
  mutable Listed listed_;  // listed()'s last
  mutable std::map<std::string, std::vector<PathCost>> kinds_;
  mutable std::vector<std::pair<std::uint64_t, PathCost>> paths_;  // path(), by the pair's relation
  mutable std::map<std::uint64_t, std::vector<int>> routed_;  // route(), by (from, to)
  mutable std::map<std::string, PairTable> tables_;  // by relation of the two NPUs (path())
  mutable std::map<std::string, std::vector<RankStep>> rank_steps_;
  mutable std::set<std::string> seen_;  // first_time()'s
  mutable MaxMinShares solver_;  // solve_routed's working memory
  mutable std::vector<MaxMinShares> helpers_;  // a SolveBatch's other threads'
  struct SolveThreads;  // those threads, serving one batch at a time (estimate.cpp)
  mutable std::unique_ptr<SolveThreads> solve_pool_;
  SolveThreads& solve_pool() const;  // started if not yet
  void stop_solve_threads() const;
  int solve_threads_;
  mutable std::uint64_t threads_started_ = 0;
  mutable std::atomic<std::uint64_t> first_rounds_by_counts_{0};
  mutable std::atomic<std::uint64_t> later_rounds_by_counts_{0};
  mutable std::atomic<std::uint64_t> alike_solves_{0};
  bool follow_every_slice_ = false;
  mutable std::uint64_t slices_added_at_once_ = 0;
  bool solve_every_step_ = false;
  mutable std::uint64_t steps_drawn_ = 0;
  bool general_step_loops_ = false;
  bool route_whole_paths_ = false;
  mutable std::uint64_t flows_routed_ = 0;
};


// An executor's closed form: the collective's time in ps. Each is
// registered with its executor (Executor::estimate, sim/executors); the
// forms of sim/executors/*_estimate.cpp are attached there by name.
using EstimateFn = std::function<double(const CollectiveSpec&, const ExecContext&, const AlgoPlan&, const EstimateFabric&)>;

}  // namespace hcclsim

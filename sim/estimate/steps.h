// Step primitives shared by the closed forms (sim/executors/*_estimate.cpp): the
// stream rules of the scheduler applied to one representative rank whose
// peers are exactly as far along as it is. Times are ps from the start of
// the collective. A "free" time is when a stream's previous task ended: its
// next task starts one dispatch gap later.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "sim/estimate/estimate.h"

namespace hcclsim {

// What `period` repeats of a max-plus map (a ring's slice, a loop over the
// buffer: sums and maxima of the streams' free times) add to every time,
// if the latest two runs of `period` each added the same amount to all of
// them, bit for bit; `history` holds the states after each repeat, newest
// last. Then every further repeat would add it too.
inline std::optional<double> steady_step(const std::deque<std::vector<double>>& history, std::size_t period) {
  if (history.size() < 2 * period + 1) return std::nullopt;
  const std::vector<double>& now = history[history.size() - 1];
  const std::vector<double>& mid = history[history.size() - 1 - period];
  const std::vector<double>& old = history[history.size() - 1 - 2 * period];
  if (now.empty()) return std::nullopt;
  const double moved = now[0] - mid[0];
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (now[i] - mid[i] != moved || mid[i] - old[i] != moved) return std::nullopt;
  }
  return moved;
}

// Every ordered pair of one server's p ranks: the flows of a full-mesh
// phase, which the forms solve under the key "mesh/<p>" (one key, one list).
inline void mesh_pairs(int p, std::vector<FlowPair>& flows) {
  for (int r = 0; r < p; ++r)
    for (int q = 0; q < p; ++q)
      if (q != r) flows.push_back(FlowPair{r, q});
}

// One transfer task on a stream free at `free` (SDMA; `rate` the flow's
// rate in its step, already capped): dispatch, set-up, bytes, latency.
inline double sdma_task(const StepCosts& c, double free, double fixed, double bytes, double rate, double latency) {
  return free + c.dispatch + fixed + (bytes > 0 ? bytes / rate + latency : 0.0);
}

// A guarded transfer of the level-1 emitter (sim/executors/level1.cpp)
// between two ranks on one stream each, every rank both sending and
// receiving the same way: the receiver records "ready", the sender waits
// for it, writes `bytes` (at `rate`) and records "done", the receiver
// waits for "done" and, for a reduction, reduces CCL_OUT into CCL_IN.
// Across SDMA domains the write and the records are RDMA work requests
// (posted, then moving on their own; a record lands after the writes
// posted before it on the queue pair). Returns when the stream is free.
inline double guarded_step(const StepCosts& c, double free, double bytes, double rate, const PathCost& path,
                           bool reduce) {
  const double d = c.dispatch;
  double t;
  if (path.rdma) {
    const double notify_flight = c.rdma_notify_bytes / path.rate + path.latency;
    const double ready_posted = free + d + c.rdma_post;
    t = c.wait_end(ready_posted + d, ready_posted + notify_flight);
    const double write_posted = t + d + c.rdma_post;
    const double arrived = bytes > 0 ? write_posted + bytes / rate + path.latency : write_posted;
    const double done_posted = write_posted + d + c.rdma_post;
    t = c.wait_end(done_posted + d, std::max(done_posted + notify_flight, arrived));
  } else {
    const double record = path.same_chip ? c.record_local : c.record_remote;
    const double ready = free + d + record;
    t = c.wait_end(ready + d, ready);
    t = sdma_task(c, t, c.sdma_fixed + path.write_extra, bytes, rate, path.latency);
    const double done = t + d + record;
    t = c.wait_end(done + d, done);
  }
  if (reduce && bytes > 0) t = sdma_task(c, t, c.sdma_fixed, bytes, std::min(c.local_rate, c.reduce_rate), c.local_latency);
  return t;
}

// One fork / handshake / body / handshake / join phase of the mesh
// templates (sim/executors/exec_builder.h) on a representative rank:
// Main records "go" to k slave streams in turn (slave i free at
// first + (i+1)(d + Rl)); stream i is paired with stream partner(i) of its
// peer (which, every rank alike, is free when this rank's stream
// partner(i) is); if Main takes part it is stream k, after its records.
// `body(i, free)` returns when stream i's transfer ends; `main_work(free)`
// what Main does while the slaves work (identity for nothing). Returns
// when Main has waited for every slave.
struct MeshPhase {
  int k = 0;
  bool main_takes_part = false;
  bool ack = false;   // TxAck / RxAck before the body
  bool data = false;  // TxDataSignal / RxDataSignal after it
  double record = 0;  // a handshake record's duration (remote or same chip)
  std::function<int(int)> partner;
  std::function<double(int, double)> body;
  std::function<double(double)> main_work = [](double free) { return free; };
};

inline double mesh_phase(const StepCosts& c, const MeshPhase& ph, double first_free) {
  const double d = c.dispatch;
  const int m = ph.k + (ph.main_takes_part ? 1 : 0);
  std::vector<double> t(static_cast<std::size_t>(m));
  double main_free = first_free;
  for (int i = 0; i < ph.k; ++i) {
    main_free += d + c.record_local;
    t[static_cast<std::size_t>(i)] = main_free;
  }
  if (ph.main_takes_part) t[static_cast<std::size_t>(ph.k)] = main_free;
  auto handshake = [&]() {
    std::vector<double> landed(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) landed[i] = t[i] + d + ph.record;
    for (std::size_t i = 0; i < t.size(); ++i) {
      t[i] = c.wait_end(landed[i] + d, landed[static_cast<std::size_t>(ph.partner(static_cast<int>(i)))]);
    }
  };
  if (ph.ack) handshake();
  for (int i = 0; i < m; ++i) t[static_cast<std::size_t>(i)] = ph.body(i, t[static_cast<std::size_t>(i)]);
  if (ph.data) handshake();
  double main_t = ph.main_takes_part ? t[static_cast<std::size_t>(ph.k)] : ph.main_work(main_free);
  for (int i = 0; i < ph.k; ++i) main_t = c.wait_end(main_t + d, t[static_cast<std::size_t>(i)] + d + c.record_local);
  return main_t;
}

}  // namespace hcclsim

// Shared machinery of the executors' task graphs: per-rank streams (the
// main stream and HCCL's "slave" streams), the main/slave fork and join
// (MainRecordSub / SubWaitMain, SubRecordMain / MainWaitSub), the per-link
// handshakes of HCCL's transports (TxAck / RxAck before a transfer,
// TxDataSignal / RxDataSignal after it), and notify indices handed out by
// one allocator so that nothing assumes a register count.
#pragma once

#include <string>
#include <vector>

#include "sim/executors/plan.h"

namespace hcclsim {

// Hands out notify (and flag) indices; the same index on every rank.
class NotifyAllocator {
 public:
  int take(int count) {
    const int base = next_;
    next_ += count;
    return base;
  }
  int used() const { return next_; }

 private:
  int next_ = 0;
};

// One handshake region: rank r's register `ack + p` is set by peer p's
// TxAck, `data + p` by its TxDataSignal. A region is used by one stream per
// (rank, peer): phases whose streams differ take regions of their own.
struct Handshake {
  int ack = 0;
  int data = 0;
};

class ExecBuilder : public PlanBuilder {
 public:
  // `slaves` slave streams per rank besides the main stream.
  ExecBuilder(const CollectiveSpec& spec, int slaves) : PlanBuilder(spec) {
    for (int r = 0; r < p_; ++r) {
      main_.push_back(graph_.add_thread(r, "Main"));
      slave_.emplace_back();
      for (int i = 0; i < slaves; ++i) slave_[static_cast<std::size_t>(r)].push_back(graph_.add_thread(r, "Plane" + std::to_string(i)));
    }
    fork_ = notifies_.take(slaves);
    join_ = notifies_.take(slaves);
  }

 protected:
  ThreadId main(int r) const { return main_[static_cast<std::size_t>(r)]; }
  ThreadId slave(int r, int i) const { return slave_[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]; }
  int slaves() const { return slave_.empty() ? 0 : static_cast<int>(slave_.front().size()); }

  Handshake new_handshake() { return Handshake{notifies_.take(p_), notifies_.take(p_)}; }
  void tx_ack(ThreadId t, int me, int peer, const Handshake& h, const std::string& label) {
    graph_.record(t, peer, h.ack + me, handshake_labels(label).tx_ack);
  }
  void rx_ack(ThreadId t, int peer, const Handshake& h, const std::string& label) {
    graph_.wait(t, h.ack + peer, handshake_labels(label).rx_ack);
  }
  void tx_data(ThreadId t, int me, int peer, const Handshake& h, const std::string& label) {
    graph_.record(t, peer, h.data + me, handshake_labels(label).tx_data);
  }
  void rx_data(ThreadId t, int peer, const Handshake& h, const std::string& label) {
    graph_.wait(t, h.data + peer, handshake_labels(label).rx_data);
  }
  // Both sides ready / both sides done, on the stream `t` of `me` towards `peer`.
  void ack_pair(ThreadId t, int me, int peer, const Handshake& h, const std::string& label) {
    tx_ack(t, me, peer, h, label);
    rx_ack(t, peer, h, label);
  }
  void data_pair(ThreadId t, int me, int peer, const Handshake& h, const std::string& label) {
    tx_data(t, me, peer, h, label);
    rx_data(t, peer, h, label);
  }

  // The main stream releases the first `n` slave streams / waits for them.
  void fork(int r, int n) {
    for (int i = 0; i < n; ++i) {
      graph_.record(main(r), r, fork_ + i, "MainRecordSub");
      graph_.wait(slave(r, i), fork_ + i, "SubWaitMain");
    }
  }
  void join(int r, int n) {
    for (int i = 0; i < n; ++i) graph_.record(slave(r, i), r, join_ + i, "SubRecordMain");
    for (int i = 0; i < n; ++i) graph_.wait(main(r), join_ + i, "MainWaitSub");
  }
  // HCCL's templates put a 0-byte D2D copy on the main stream between phases:
  // a real SDMA task (dispatch and fixed cost), no data.
  void placeholder_copy(int r) { graph_.copy(main(r), ccl_in(r, 0), ccl_in(r, 0), 0, "0-byte copy"); }

  NotifyAllocator notifies_;
  std::vector<ThreadId> main_;
  std::vector<std::vector<ThreadId>> slave_;
  int fork_ = 0;
  int join_ = 0;

 private:
  // A handshake's four labels for `label`, kept for the label last asked
  // for: builders run thousands of handshakes under one label, and
  // composing the label per task allocated a string per task.
  struct HandshakeLabels {
    std::string base, tx_ack, rx_ack, tx_data, rx_data;
  };
  const HandshakeLabels& handshake_labels(const std::string& label) {
    if (!handshake_labels_.tx_ack.empty() && handshake_labels_.base == label) return handshake_labels_;
    handshake_labels_ = HandshakeLabels{label, label + " TxAck", label + " RxAck", label + " TxDataSignal",
                                        label + " RxDataSignal"};
    return handshake_labels_;
  }
  HandshakeLabels handshake_labels_;
};

// Slice j of n elements over `parts`, each slice ceil(n / parts) rounded up
// to `align` elements (HCCL's mesh templates align slices to 16 KiB on
// 910B, ring templates to 128 B); the last slices may be short or empty.
inline Span aligned_slice(std::uint64_t n, int parts, int j, std::uint64_t align) {
  const std::uint64_t p = static_cast<std::uint64_t>(parts);
  align = std::max<std::uint64_t>(align, 1);
  std::uint64_t size = (n + p - 1) / p;
  size = (size + align - 1) / align * align;
  const std::uint64_t first = std::min(n, size * static_cast<std::uint64_t>(j));
  return Span{first, std::min(size, n - first)};
}

}  // namespace hcclsim

// A pool of identical units (SDMA engines, AIC or AIV cores) handed out in
// first-come first-served order. Passive: the stream engine drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

namespace hcclsim {

class ResourcePool {
 public:
  explicit ResourcePool(int units = 0) : free_(units), total_(units) {}

  int total() const { return total_; }
  int free() const { return free_; }

  // Takes `n` units for `who` now if nobody is queued ahead and enough are
  // free; otherwise queues `who` and returns false.
  bool acquire(std::uint32_t who, int n) {
    if (waiting_.empty() && free_ >= n) {
      free_ -= n;
      return true;
    }
    waiting_.emplace_back(who, n);
    return false;
  }

  // Returns `n` units; `granted(who)` is called for each queued requester that
  // now fits, in arrival order.
  template <typename Granted>
  void release(int n, Granted&& granted) {
    free_ += n;
    while (!waiting_.empty() && free_ >= waiting_.front().second) {
      auto [who, need] = waiting_.front();
      waiting_.pop_front();
      free_ -= need;
      granted(who);
    }
  }

 private:
  int free_;
  int total_;
  std::deque<std::pair<std::uint32_t, int>> waiting_;
};

}  // namespace hcclsim

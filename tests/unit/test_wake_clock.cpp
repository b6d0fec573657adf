// Unit tests for models/wake_clock: the order in which models are stepped
// at one simulated time (timed requests, then delta rounds), which every
// same-time interaction of engines and the flow network relies on.
// SystemC elaborates once per process: one clock per TEST_CASE.
#include <catch2/catch.hpp>

#include <cstdint>
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "models/wake_clock.h"

using namespace hcclsim;

namespace {

// A model that logs "<name>@<time>:clock|delta" on every step and runs an
// optional action then.
class Probe : public Clocked {
 public:
  Probe(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {}
  std::function<void(std::uint64_t)> on_clock_action;
  std::function<void()> on_delta_action;

  void on_clock(std::uint64_t at) override {
    log_.push_back(name_ + "@" + std::to_string(now()) + ":clock" + (at == now() ? "" : "(late)"));
    if (on_clock_action) on_clock_action(at);
  }
  void on_delta() override {
    log_.push_back(name_ + "@" + std::to_string(now()) + ":delta");
    if (on_delta_action) on_delta_action();
  }

 private:
  static std::uint64_t now() { return sc_core::sc_time_stamp().value(); }
  std::string name_;
  std::vector<std::string>& log_;
};

}  // namespace

TEST_CASE("wake clock: at one time, timed requests first, then delta rounds in the order asked",
          "[wake_clock]") {
  std::vector<std::string> log;
  WakeClock clock("clock");
  Probe a("a", log), b("b", log), c("c", log), d("d", log);
  // At 100: a and b are due (b asked first); a's step wakes d then c for a
  // delta round; d's delta step asks for a timed wake-up of c at the
  // current time and a delta round of b. c's timed request made during the
  // first round runs before the second round.
  a.on_clock_action = [&](std::uint64_t) {
    clock.wake_delta(&d);
    clock.wake_delta(&c);
  };
  d.on_delta_action = [&] {
    clock.wake(&c, sc_core::sc_time_stamp().value());
    clock.wake_delta(&b);
  };
  clock.wake(&b, 100);
  clock.wake(&a, 100);
  clock.wake(&d, 250);
  sc_core::sc_start();

  const std::vector<std::string> expected = {
      "b@100:clock", "a@100:clock",                 // timed, in request order
      "d@100:delta", "c@100:delta",                 // round 1, in the order a asked
      "c@100:clock",                                // timed for now, asked in round 1
      "b@100:delta",                                // round 2
      "d@250:clock",                                // the next time
  };
  CHECK(log == expected);
  CHECK(sc_core::sc_time_stamp().value() == 250);
}

TEST_CASE("wake clock: a delta round asked before the simulation starts runs at time zero; a later "
          "timed request runs at its time",
          "[wake_clock]") {
  std::vector<std::string> log;
  WakeClock clock("clock");
  Probe a("a", log), b("b", log);
  clock.wake(&b, 40);
  clock.wake_delta(&a);  // an earlier wake-up than the one already held
  sc_core::sc_start();
  const std::vector<std::string> expected = {"a@0:delta", "b@40:clock"};
  CHECK(log == expected);
}

TEST_CASE("wake queue: earliest first and in the order asked at one time (requests before the time looked at too)",
          "[wake_clock]") {
  // Against a plain ordered list of (time, order asked). Times are drawn
  // near the current one (many equal, bits differing low and high) and,
  // now and then, before the time the queue last looked at, as a request
  // made from outside the clock's run can be.
  WakeQueue queue;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> expected;  // (at, order asked), kept sorted
  std::vector<std::string> unused;
  std::vector<std::unique_ptr<Probe>> owned;
  for (int i = 0; i < 8; ++i) owned.push_back(std::make_unique<Probe>("m" + std::to_string(i), unused));
  std::uint64_t now = 1000;
  std::uint64_t asked = 0;
  std::uint64_t seed = 12345;
  auto next_random = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return seed >> 33;
  };
  for (int op = 0; op < 20000; ++op) {
    const std::uint64_t roll = next_random() % 10;
    if (roll < 6 || queue.empty()) {
      std::uint64_t at = now;
      const std::uint64_t kind = next_random() % 4;
      if (kind == 1) at = now + next_random() % 8;
      if (kind == 2) at = now + (next_random() % 4) * (std::uint64_t{1} << (next_random() % 40));
      if (kind == 3 && now > 50 && next_random() % 8 == 0) at = now - 1 - next_random() % 50;  // before the time looked at
      const std::size_t m = static_cast<std::size_t>(asked % owned.size());
      queue.push(at, owned[m].get());
      expected.insert(std::upper_bound(expected.begin(), expected.end(), std::make_pair(at, asked)), {at, asked});
      ++asked;
    } else if (roll < 8) {
      REQUIRE(queue.next_at() == expected.front().first);
    } else {
      const WakeQueue::Request r = queue.pop();
      REQUIRE(r.at == expected.front().first);
      REQUIRE(r.model == owned[static_cast<std::size_t>(expected.front().second % owned.size())].get());
      expected.erase(expected.begin());
      now = std::max(now, r.at);
    }
  }
  while (!queue.empty()) {
    const WakeQueue::Request r = queue.pop();
    REQUIRE(r.at == expected.front().first);
    REQUIRE(r.model == owned[static_cast<std::size_t>(expected.front().second % owned.size())].get());
    expected.erase(expected.begin());
  }
  CHECK(expected.empty());
}

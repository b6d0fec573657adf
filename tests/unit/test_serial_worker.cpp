// sim/serial_worker.h: the thread the data check replays its copy log on.
// Jobs run in the order handed over, at most `max_queued` wait, and a job's
// error reaches the caller.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sim/serial_worker.h"

using namespace hcclsim;

TEST_CASE("serial worker: jobs run one after the other in the order handed over", "[serial_worker]") {
  std::vector<int> ran;  // written by the worker only, read after finish()
  SerialWorker<std::vector<int>> worker([&ran](std::vector<int>& job) { ran.insert(ran.end(), job.begin(), job.end()); },
                                        3);
  std::vector<int> expected;
  for (int i = 0; i < 500; ++i) {
    worker.hand_over(std::vector<int>{2 * i, 2 * i + 1});
    expected.push_back(2 * i);
    expected.push_back(2 * i + 1);
  }
  worker.finish();
  CHECK(ran == expected);
  worker.hand_over(std::vector<int>{-1});  // usable again after finish()
  worker.finish();
  REQUIRE(ran.size() == expected.size() + 1);
  CHECK(ran.back() == -1);
}

TEST_CASE("serial worker: a hand-over waits while max_queued jobs wait and not before", "[serial_worker]") {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;  // the first job blocks until the test opens it
  std::atomic<int> started{0};
  SerialWorker<int> worker(
      [&](int&) {
        ++started;
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return open; });
      },
      2);
  worker.hand_over(1);
  while (started.load() == 0) std::this_thread::yield();  // job 1 is running, none waits
  worker.hand_over(2);
  worker.hand_over(3);  // two wait now: the next hand-over must block
  std::atomic<bool> fourth_in{false};
  std::thread caller([&] {
    worker.hand_over(4);
    fourth_in = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(fourth_in.load());  // held back while job 1 runs (a wrong bound lets it in at once)
  {
    std::lock_guard<std::mutex> lock(m);
    open = true;
  }
  cv.notify_all();
  caller.join();
  CHECK(fourth_in.load());
  worker.finish();
  CHECK(started.load() == 4);
}

TEST_CASE("serial worker: a job's error is thrown to the caller and the jobs after it are dropped", "[serial_worker]") {
  std::vector<int> ran;
  std::mutex m;
  std::condition_variable cv;
  bool open = false;  // job 1 waits until all five are handed over
  SerialWorker<int> worker(
      [&](int& job) {
        if (job == 1) {
          std::unique_lock<std::mutex> lock(m);
          cv.wait(lock, [&] { return open; });
        }
        if (job == 3) throw std::runtime_error("job 3 failed");
        ran.push_back(job);
      },
      8);
  for (int i = 1; i <= 5; ++i) worker.hand_over(i);
  {
    std::lock_guard<std::mutex> lock(m);
    open = true;
  }
  cv.notify_all();
  CHECK_THROWS_WITH(worker.finish(), "job 3 failed");
  CHECK(ran == std::vector<int>{1, 2});
  worker.finish();  // thrown once
  // Once a job failed, later ones are dropped.
  worker.hand_over(6);
  worker.finish();
  CHECK(ran == std::vector<int>{1, 2});
}

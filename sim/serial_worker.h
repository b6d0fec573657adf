// Jobs run on one thread of their own, one after the other in the order
// they were handed over, while the caller goes on (the data check replays
// its copy log this way beside the simulation, sim/scheduler.cpp). At most
// `max_queued` jobs wait: handing over one more waits for the oldest to
// start, so a worker that falls behind holds a bounded amount of work. A
// job that throws stops the worker; the exception is thrown again to the
// caller at its next hand-over or at finish().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace hcclsim {

template <class Job>
class SerialWorker {
 public:
  // `run` is called on the worker's thread with each job, in order.
  SerialWorker(std::function<void(Job&)> run, std::size_t max_queued)
      : run_(std::move(run)), max_queued_(max_queued == 0 ? 1 : max_queued), thread_([this] { work(); }) {}
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;
  // Stops once the jobs handed over are done (their errors are dropped: a
  // caller that wants them calls finish()).
  ~SerialWorker() { stop(); }

  void hand_over(Job job) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return queued_.size() < max_queued_ || error_; });
    rethrow(lock);
    queued_.push_back(std::move(job));
    changed_.notify_all();
  }

  // Waits until every job handed over is done; throws the first job's error.
  void finish() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return (queued_.empty() && !busy_) || error_; });
    rethrow(lock);
  }

 private:
  void rethrow(std::unique_lock<std::mutex>& lock) {
    if (!error_) return;
    std::exception_ptr error = std::exchange(error_, nullptr);
    lock.unlock();
    std::rethrow_exception(error);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      changed_.notify_all();
    }
    thread_.join();
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return !queued_.empty() || stopping_; });
      if (queued_.empty()) return;  // stopping, nothing left
      Job job = std::move(queued_.front());
      queued_.pop_front();
      const bool skip = failed_;  // after an error the rest is dropped
      busy_ = true;
      changed_.notify_all();  // room for one more
      lock.unlock();
      std::exception_ptr error;
      if (!skip) {
        try {
          run_(job);
        } catch (...) {
          error = std::current_exception();
        }
      }
      job = Job{};  // freed here, not under the lock
      lock.lock();
      busy_ = false;
      if (error) {
        failed_ = true;
        error_ = error;
      }
      changed_.notify_all();
    }
  }

  std::function<void(Job&)> run_;
  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a job queued, started or done; stopping
  std::deque<Job> queued_;
  bool busy_ = false;
  bool stopping_ = false;
  bool failed_ = false;
  std::exception_ptr error_;  // the first error, until thrown to the caller
  std::thread thread_;        // last: started once everything above is set up
};

}  // namespace hcclsim

// Errors that reach the user. InputError is bad input (exit code 2): it
// names where the fault is (a file and a JSON path, or a command-line option)
// and what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace hcclsim {

class InputError : public std::runtime_error {
 public:
  // where: "configs/x.json at $.npu.sdma.engines" or "option -b".
  InputError(const std::string& where, const std::string& message)
      : std::runtime_error(where.empty() ? message : where + ": " + message),
        where_(where),
        message_(message) {}
  const std::string& where() const { return where_; }
  const std::string& message() const { return message_; }

 private:
  std::string where_;
  std::string message_;
};

// Input asking for a run larger than hcclsim will start (over --max-memory,
// or more operations than a plan holds); still exit code 2. `hcclsim step
// --model auto` takes the estimate instead when the detailed run is refused so.
class TooLargeError : public InputError {
 public:
  using InputError::InputError;
};

// A task graph that is malformed (validation) or cannot finish (deadlock).
class GraphError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An operation HCCL itself would fail on this hardware (a scenario's link
// down with no other path, every plane lost): a failed run, exit code 1,
// with the reason.
class OperationFailed : public GraphError {
 public:
  using GraphError::GraphError;
};

}  // namespace hcclsim

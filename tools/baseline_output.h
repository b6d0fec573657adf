// --save-baseline FILE of perf and run: the path is checked before the run (a
// bad path fails at once) and the file written, whole, only when the command
// succeeded; a failed run leaves the path as it was.
#pragma once

#include <string>
#include <vector>

#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {

// The command a baseline stores: the words minus the options that do not
// change the results and must not act again when `check` re-runs it
// (--save-baseline, --trace, --out with their values; --stats).
std::vector<std::string> replayable_command(const std::vector<std::string>& words);

class BaselineOutput {
 public:
  explicit BaselineOutput(const std::string& path);
  // Writes the baseline of `record`, run from `words` with the input files read so far.
  void write(const std::vector<std::string>& words, const RunRecord& record);
  BaselineOutput(const BaselineOutput&) = delete;
  BaselineOutput& operator=(const BaselineOutput&) = delete;

 private:
  std::string path_;
};

}  // namespace hcclsim

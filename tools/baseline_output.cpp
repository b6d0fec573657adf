#include "tools/baseline_output.h"

#include "base/input_files.h"

namespace hcclsim {

std::vector<std::string> replayable_command(const std::vector<std::string>& words) {
  static const std::vector<std::string> with_value{"--save-baseline", "--trace", "--out", "--links"};
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    bool drop = w == "--stats";
    for (const std::string& option : with_value) {
      if (w == option) {
        drop = true;
        ++i;  // and its value
      } else if (w.rfind(option + "=", 0) == 0) {
        drop = true;
      }
    }
    if (!drop) kept.push_back(w);
  }
  return kept;
}

BaselineOutput::BaselineOutput(const std::string& path) : path_(path) {
  claim_output_path("--save-baseline", path_);
  check_replaceable("--save-baseline", path_);
}

void BaselineOutput::write(const std::vector<std::string>& words, const RunRecord& record) {
  Baseline b;
  b.version = hcclsim_version();
  b.command = replayable_command(words);
  b.inputs = input_files_read();
  b.command_kind = record.command_kind;
  b.items = record.items;
  // (a temporary file beside the path, renamed over it once written whole)
  write_file_atomically("--save-baseline", path_, baseline_json(b));
}

}  // namespace hcclsim

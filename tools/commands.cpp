// The list of subcommands. A new one (validate, moe, ...) is one line here
// plus its tools/cmd_NAME.cpp.
#include "tools/command.h"

namespace hcclsim {

std::vector<std::unique_ptr<Command>> make_commands() {
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(make_perf_command());
  commands.push_back(make_run_command());
  commands.push_back(make_sweep_command());
  commands.push_back(make_recommend_command());
  commands.push_back(make_check_command());
  commands.push_back(make_executors_command());
  commands.push_back(make_validate_command());
  commands.push_back(make_import_command());
  commands.push_back(make_calibrate_command());
  commands.push_back(make_moe_command());
  commands.push_back(make_step_command());
  commands.push_back(make_describe_command());
  return commands;
}

}  // namespace hcclsim

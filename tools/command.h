// A subcommand of hcclsim: its options are declared on a CLI11 subcommand,
// through tools/command_options.h (so `hcclsim NAME --help` is generated
// from the same declarations that parse them), then run() does the work and returns the exit code:
// 0 success, 1 the run failed (deadlock, timeout, failed check, regression),
// 2 bad input. Errors are thrown (InputError -> 2, GraphError -> 1) and
// turned into messages and exit codes by the dispatcher (tools/dispatch.h).
//
// To add a subcommand: write tools/cmd_NAME.cpp with a class deriving from
// Command and a make_NAME_command() factory, and list it in tools/commands.cpp.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "sim/report/baseline.h"
#include "sim/report/row_transport.h"

namespace hcclsim {

class CommandOptions;  // tools/command_options.h

// What a command produced, for `--save-baseline` and `hcclsim check`.
struct RunRecord {
  std::string command_kind;             // "perf" or "run"
  std::vector<BaselineItem> items;
};

struct CommandContext {
  std::ostream* out = nullptr;          // results (stdout; discarded when check replays a baseline)
  ProcessGroup* group = nullptr;        // the MPI processes of this run, or one
  RunRecord* record = nullptr;          // when set, perf and run record their results in it
  std::vector<std::string> words;       // the command line after `hcclsim`
  bool replay = false;                  // `check` re-running a baseline: no notes, progress or side files
  bool root() const { return group == nullptr || group->rank() == 0; }
};

class Command {
 public:
  virtual ~Command() = default;
  virtual std::string name() const = 0;
  virtual std::string summary() const = 0;
  virtual void declare(CommandOptions& app) = 0;
  virtual int run(CommandContext& ctx) = 0;
  // Whether every MPI process runs it (perf, sweep split their work);
  // otherwise only rank 0 does.
  virtual bool parallel() const { return false; }
};

// Every subcommand, in the order `hcclsim help` lists them (tools/commands.cpp).
std::vector<std::unique_ptr<Command>> make_commands();

std::unique_ptr<Command> make_perf_command();
std::unique_ptr<Command> make_run_command();
std::unique_ptr<Command> make_check_command();
std::unique_ptr<Command> make_sweep_command();
std::unique_ptr<Command> make_executors_command();
std::unique_ptr<Command> make_validate_command();
std::unique_ptr<Command> make_import_command();
std::unique_ptr<Command> make_calibrate_command();
std::unique_ptr<Command> make_moe_command();
std::unique_ptr<Command> make_recommend_command();
std::unique_ptr<Command> make_step_command();
std::unique_ptr<Command> make_describe_command();

// hcclsim's version: the project VERSION and, when the source was a git
// checkout at configure time, `git describe` ("0.1.0 (3acce5e-dirty)").
std::string hcclsim_version();

}  // namespace hcclsim

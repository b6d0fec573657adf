// `hcclsim executors`: the HCCL executors hcclsim models, each with the HCCL
// source its task structure follows (docs/executors.md: when HCCL picks them).
#include <iostream>

#include "sim/executors/executor.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

class ExecutorsCommand : public Command {
 public:
  std::string name() const override { return "executors"; }
  std::string summary() const override {
    return "the HCCL executors hcclsim models, with their sources and whether --model estimate has a closed form";
  }
  void declare(CommandOptions&) override {}
  int run(CommandContext& ctx) override {
    for (const Executor& e : executors()) {
      *ctx.out << e.name << "\n    " << e.summary << "\n    source: " << e.source << "\n    estimate: "
               << (e.estimate ? "a closed form (--model estimate)" : "none (--model detailed only)") << "\n";
    }
    return 0;
  }
};

}  // namespace

std::unique_ptr<Command> make_executors_command() { return std::make_unique<ExecutorsCommand>(); }

}  // namespace hcclsim

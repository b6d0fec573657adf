// Reads a program file (configs/programs/*.json) by calling the same Program
// methods a C++ user calls. A call that HCCL would refuse becomes an
// InputError naming the file, the JSON path and the HCCL error.
#pragma once

#include <map>
#include <string>

#include "sim/program/program.h"

namespace hcclsim {

struct LoadedProgram {
  std::string name;
  std::map<std::pair<int, int>, std::string> handle_names;  // (domain, handle) -> name in the file
  std::map<std::size_t, std::string> moe_names;             // MoE call index -> "name" in the file
};

LoadedProgram load_program(const std::string& file, Program& program);

}  // namespace hcclsim

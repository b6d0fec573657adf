#include "tools/command.h"

namespace hcclsim {

std::string hcclsim_version() {
  // Both set by CMake for this file only (CMakeLists.txt): the project
  // VERSION, and `git describe --always --dirty` at configure time.
  const std::string describe = HCCLSIM_GIT_DESCRIBE;
  return std::string(HCCLSIM_VERSION) + (describe.empty() ? "" : " (" + describe + ")");
}

}  // namespace hcclsim

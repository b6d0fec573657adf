// hcclsim's entry point: the subcommands live in tools/cmd_*.cpp and are
// dispatched by tools/dispatch.cpp. Every error ends as a message on stderr
// and exit code 2 (bad input) or 1 (a run failed) (run_program); nothing
// escapes to SystemC, whose own handler would print an E549 dump on stdout.
#include <cstdlib>
#include <string>
#include <systemc>   // sc_main's declaration (C linkage), which this file defines
#include <vector>

#include "tools/dispatch.h"

int sc_main(int argc, char* argv[]) {
  const int code = hcclsim::run_program(std::vector<std::string>(argv + 1, argv + argc), /*mpi=*/true);
  // Fast exit: the platform is never torn down (tools/cli_common.h,
  // platform_kept_until_exit), which for 100,000 NPUs would take minutes.
  std::_Exit(code);
}

// Parses a command line with CLI11 and runs the subcommand it names, turning
// every error into a message on stderr and an exit code (0, 1 or 2). Used by
// main and, to re-run a baseline's command in the same process, by `check`.
#pragma once

#include <string>
#include <vector>

#include "tools/command.h"

namespace hcclsim {

// `words`: the command line after the program name.
int dispatch(const std::vector<std::string>& words, CommandContext& ctx);

// Parses `words` as dispatch() does but runs nothing: 0 when the command line
// parses, 2 when it is refused (the fuzzing target, tests/fuzz). Never throws.
int parse_command_line(const std::vector<std::string>& words);

// The whole program around dispatch(), for `hcclsim` and for the Python
// module's child processes: SystemC's errors thrown as exceptions, SIGPIPE
// ignored, every exception a message on stderr, the results flushed (a write
// that fails makes exit 2). `mpi`: under mpirun the MPI processes of the
// run, else one process. Returns the exit code; the caller exits with it.
int run_program(const std::vector<std::string>& words, bool mpi);

// Text of `hcclsim help`: usage, the model's scope, exit codes.
const char* long_usage();

}  // namespace hcclsim

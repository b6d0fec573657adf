// The processes of this run: under `mpirun -n K` (when hcclsim was built with
// MPI) the K MPI ranks, otherwise this one process.
#pragma once

#include <memory>

#include "sim/report/row_transport.h"

namespace hcclsim {

std::unique_ptr<ProcessGroup> make_process_group();

}  // namespace hcclsim

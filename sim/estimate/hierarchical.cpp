#include "sim/estimate/steps.h"

namespace hcclsim {

void register_hierarchical_estimates(std::map<std::string, EstimateFn>&) {}

}  // namespace hcclsim

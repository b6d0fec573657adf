#include "models/params.h"

namespace hcclsim {

const char* product_name(Product product) { return product == Product::A2 ? "A2" : "A3"; }

}  // namespace hcclsim

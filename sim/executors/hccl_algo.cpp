#include "sim/executors/hccl_algo.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace hcclsim {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) out.push_back(part);
  if (!text.empty() && text.back() == sep) out.push_back("");
  return out;
}

const char* hccl_op_name(CollOp op) {
  static const char* names[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce"};
  return names[static_cast<std::size_t>(op)];
}

// "level0:NA;level1:ring" -> the choice per level.
AlgoRequest parse_levels(const std::string& levels, const std::string& whole) {
  AlgoRequest request;
  std::optional<Level0Algo>& level0 = request.level0;
  std::vector<std::string> seen;  // a level given twice would silently keep its last choice
  for (const std::string& item : split(levels, ';')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) {
      throw std::invalid_argument("'" + item + "' in \"" + whole + "\" is not of the form levelN:ALGO");
    }
    const std::string level = item.substr(0, colon);
    const std::string algo = item.substr(colon + 1);
    if (std::find(seen.begin(), seen.end(), level) != seen.end()) {
      throw std::invalid_argument("'" + level + "' is given twice in \"" + whole + "\"; give each level once");
    }
    seen.push_back(level);
    if (level == "level0") {
      if (algo == "NA") {
        level0.reset();
      } else if (algo == "ring") {
        level0 = Level0Algo::Ring;
      } else if (algo == "fullmesh" || algo == "mesh") {
        level0 = Level0Algo::Mesh;
      } else {
        throw std::invalid_argument("level0 algorithm '" + algo + "' is not known; expected NA, fullmesh (mesh) or ring");
      }
    } else if (level == "level1" || level == "level2") {
      std::optional<Level1Algo>& slot = level == "level1" ? request.level1 : request.level2;
      static const std::vector<std::string> unmodelled{"AHC", "AHC_BROKE", "star", "NHR_V1"};
      if (algo == "NA") {
        slot.reset();
        if (level == "level1") request.pipeline = false;
      } else if (algo == "pipeline") {
        if (level != "level1") {
          throw std::invalid_argument(level + " algorithm 'pipeline' is not modelled by hcclsim (only at level1)");
        }
        request.pipeline = true;  // its inner level-1 algorithm stays HCCL's choice
      } else if (const auto parsed = parse_level1_algo(algo)) {
        slot = parsed;
      } else if (std::find(unmodelled.begin(), unmodelled.end(), algo) != unmodelled.end()) {
        throw std::invalid_argument(level + " algorithm '" + algo +
                                    "' exists in HCCL but is not modelled by hcclsim; use ring, H-D_R, NHR, NB, pairwise or NA");
      } else {
        throw std::invalid_argument(level + " algorithm '" + algo +
                                    "' is not known; expected NA, ring, H-D_R, NHR, NB or pairwise");
      }
    } else {
      throw std::invalid_argument("'" + level + "' in \"" + whole + "\" is not a level; expected level0, level1 or level2");
    }
  }
  return request;
}

}  // namespace

AlgoRequest parse_hccl_algo(const std::string& text, CollOp op) {
  if (text.empty()) return {};
  if (text.find('=') == std::string::npos) return parse_levels(text, text);
  AlgoRequest mine;
  for (const std::string& entry : split(text, '/')) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("'" + entry + "' in \"" + text + "\" is not of the form op=level0:ALGO;...");
    }
    const std::string name = entry.substr(0, eq);
    bool known = false;
    for (int o = 0; o <= static_cast<int>(CollOp::Reduce); ++o) known = known || name == hccl_op_name(static_cast<CollOp>(o));
    if (!known) {
      throw std::invalid_argument("'" + name +
                                  "' is not an HCCL op name; expected allreduce, allgather, reducescatter, alltoall, "
                                  "broadcast or reduce");
    }
    const auto choice = parse_levels(entry.substr(eq + 1), text);
    if (name == hccl_op_name(op)) mine = choice;
  }
  return mine;
}

}  // namespace hcclsim

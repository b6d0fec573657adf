#include "models/params.h"

#include <cctype>
#include <stdexcept>

namespace hcclsim {


std::string ProductTraits::cluster_kind() const {
  std::string kind = name;
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return kind;
}

const char* link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::Memory: return "memory";
    case LinkKind::Hccs: return "hccs";
    case LinkKind::Sio: return "sio";
    case LinkKind::Ub: return "ub";
    case LinkKind::Roce: return "roce";
  }
  return "?";
}

namespace {
// The fabric's link kinds (Memory is a platform's own), in the order names are listed.
constexpr LinkKind kFabricKinds[] = {LinkKind::Hccs, LinkKind::Sio, LinkKind::Ub, LinkKind::Roce};
}  // namespace

const std::vector<std::string>& link_kind_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const LinkKind kind : kFabricKinds) out.push_back(link_kind_name(kind));
    return out;
  }();
  return names;
}

LinkKind parse_link_kind(const std::string& name) {
  for (const LinkKind kind : kFabricKinds) {
    if (name == link_kind_name(kind)) return kind;
  }
  throw std::invalid_argument("unknown link kind '" + name + "'; expected hccs, sio, ub or roce");
}

}  // namespace hcclsim

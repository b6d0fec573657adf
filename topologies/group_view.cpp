#include "topologies/group_view.h"

#include <map>
#include <stdexcept>

namespace hcclsim {

TopologySpec group_view(const TopologySpec& spec, const std::vector<int>& members, const std::string& what) {
  const int n = spec.npus;
  std::vector<int> order = members;
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  for (int r : members) taken[static_cast<std::size_t>(r)] = 1;
  for (int r = 0; r < n; ++r) {
    if (!taken[static_cast<std::size_t>(r)]) order.push_back(r);
  }
  std::vector<int> new_of(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) new_of[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
  TopologySpec v = spec;
  for (LinkSpec& l : v.links) {
    if (l.a < n) l.a = new_of[static_cast<std::size_t>(l.a)];
    if (l.b < n) l.b = new_of[static_cast<std::size_t>(l.b)];
  }
  auto permute = [&](std::vector<int>& per_npu) {
    if (per_npu.size() < static_cast<std::size_t>(n)) return;
    std::vector<int> out = per_npu;
    for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = per_npu[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
    per_npu = std::move(out);
  };
  permute(v.sdma_domain_of);
  for (FabricSpec& f : v.fabrics) {
    permute(f.leaf_of);
    if (f.spines_of.size() >= static_cast<std::size_t>(n)) {
      std::vector<std::vector<int>> out = f.spines_of;
      for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = f.spines_of[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
      f.spines_of = std::move(out);
    }
  }
  std::map<int, int> server_number;
  v.server_of.assign(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const int s = server_of(spec, order[static_cast<std::size_t>(i)]);
    v.server_of[static_cast<std::size_t>(i)] = server_number.emplace(s, static_cast<int>(server_number.size())).first->second;
  }
  int first_server = 0;
  for (int r : members) first_server += server_of(spec, r) == server_of(spec, members.front()) ? 1 : 0;
  v.npus_per_server = first_server;
  if (spec.npus_per_chip > 1) {
    bool kept = true, shared = false;
    const std::size_t p = members.size();
    for (std::size_t i = 0; i < p; ++i) {
      for (std::size_t j = i + 1; j < p; ++j) {
        const bool before = members[i] / spec.npus_per_chip == members[j] / spec.npus_per_chip;
        const bool after = static_cast<int>(i) / spec.npus_per_chip == static_cast<int>(j) / spec.npus_per_chip;
        kept = kept && before == after;
        shared = shared || before;
      }
    }
    if (!kept && shared) {
      throw std::invalid_argument(what + " takes some dies of a chip but not in pairs; hcclsim cannot place it as one "
                                  "HCCL domain (use a group of whole chips or one die per chip)");
    }
    if (!kept) v.npus_per_chip = 1;
  }
  return v;
}

}  // namespace hcclsim

// Import of an HCCL rank table (the JSON file HCCL builds a communicator
// from) into a ClusterLayout and the mapping from the table's rank_id to the
// simulator's rank.
//
// Formats read (hicann/hccl docs/{zh,en}/user_guide/cluster_info_config/):
//   - version "1.0": AI-server mode. Atlas A2 (rank_table_config_a2.md) and
//     the "typical networking" of Atlas A3 (rank_table_config_a3.md).
//   - version "1.2": SuperPoD mode of Atlas A3 (rank_table_config_a3.md),
//     with super_device_id per device and super_pod_list.
// Not read: "1.1" (heterogeneous clusters) and the older 910 format without a
// version key (HCCL calls it "Standard").
//
// Simulator ranks: servers in server_list order, ranks numbered server by
// server (as ClusterLayout requires); inside a server, devices in ascending
// device_id order, so that local index k is the k-th physical device the
// table lists (for A3, dies 2k and 2k+1 stay one chip). sim_rank_of_rank_id
// translates the table's rank_id (HCCL's rank in the communicator) to it; it
// is the identity whenever the rank ids of each server ascend with device_id
// and the servers' rank blocks follow server_list order, as in the
// documented examples.
#pragma once

#include <string>
#include <vector>

#include "topologies/cluster.h"

namespace hcclsim {

struct RankTable {
  ClusterLayout layout;                  // name: the file's stem; kind: the product's ("a2", "a3")
  std::vector<int> sim_rank_of_rank_id;  // index: the table's rank_id
  std::string version;                   // "1.0" or "1.2"
  // A3: the table's super_pod_id of layout superpod k. In AI-server mode
  // (version 1.0, or 1.2 without super_pod_list) every server is a superpod
  // of its own (RoCE between servers) and this holds its server_id.
  // A2: empty (every server has superpod 0).
  std::vector<std::string> superpod_ids;
};

// Reads `file` as a rank table of `product` (its profile's npu.product: the
// versions, devices per server and dies per chip it allows). Throws InputError
// naming the file, the JSON path and the reason for every table HCCL would
// refuse, and for the few the simulator cannot model (an A3 server listing
// one die of a chip without the other).
RankTable load_rank_table(const std::string& file, const ProductTraits& product);

// Same for JSON text in memory; `file` only names it in messages.
RankTable rank_table_from_text(const std::string& text, const std::string& file, const ProductTraits& product);

}  // namespace hcclsim

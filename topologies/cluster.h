// Clusters built from a layout: A2 servers joined by a RoCE leaf/spine
// fabric, A3 servers joined into supernodes by UB switches (CloudMatrix384)
// and supernodes joined by RoCE. Used by the topology presets (a "cluster"
// object in the topology JSON) and by the rank table import.
#pragma once

#include <string>
#include <vector>

#include "topologies/config.h"
#include "topologies/platform.h"

namespace hcclsim {

// A RoCE leaf/spine (Clos) fabric. NPU NICs attach to leaves, `npus_per_leaf`
// each, in rank order; every leaf links to every spine. The uplinks of a leaf
// together carry (NICs under it x NIC rate) / oversubscription.
struct RoceFabricOptions {
  int npus_per_leaf = 64;
  int spines = 8;
  double oversubscription = 1.0;   // 1 = non-blocking, 2 = half the uplink capacity, ...
};

// The UB fabric of one A3 supernode: each server's switch (L1) links to every
// L2 switch of the supernode.
struct UbFabricOptions {
  int l2_switches = 7;
};

struct ServerLayout {
  std::string id;       // as in the rank table ("server_id"), for messages
  int devices = 8;      // NPUs (A2) or dies (A3) of the server, ranks in order
  int superpod = 0;     // A3: the supernode it belongs to
};

struct ClusterLayout {
  std::string name;
  std::string kind = "a2";             // its product's cluster kind ("a2", "a3"; npu.product.name in lower case)
  std::vector<ServerLayout> servers;   // ranks are numbered server by server
  RoceFabricOptions roce;              // A2: between servers; A3: between supernodes
  UbFabricOptions ub;                  // A3 only
};

// Throws std::invalid_argument with the reason for an impossible layout
// (no servers, a server without devices, an A3 server with an odd number of
// dies, a profile lacking a link kind the layout needs).
TopologySpec make_cluster(const ClusterLayout& layout, const HardwareProfile& profile);

// `supernodes` x `servers_per_supernode` servers of the product's
// devices_per_server ranks (a product without supernodes: one, of all the
// servers), as a topology's "cluster" object builds them.
ClusterLayout product_cluster_layout(const ProductTraits& product, int supernodes, int servers_per_supernode,
                                     const RoceFabricOptions& roce = {}, const UbFabricOptions& ub = {});

}  // namespace hcclsim

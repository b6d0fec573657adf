// Chakra execution traces (MLCommons Chakra, schema/protobuf/et_def.proto):
// the per-rank workload files ASTRA-sim and PARAM run. A directory holds one
// file per rank, PREFIX.<rank>.et, each a stream of messages, every one
// preceded by its length as a varint: a GlobalMetadata, then the Nodes.
// An optional comm_group.json beside them maps a process group's id (a
// node's "pg_name" attribute) to its ranks, as ASTRA-sim's
// --comm-group-configuration file does; without one a collective spans
// every rank.
//
// Only the fields hcclsim uses are kept; the rest are skipped by wire type.
// The protobuf wire format is read and written here directly (the schema's
// field numbers are its facts), so no code generator is needed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hcclsim {

// et_def.proto's NodeType and CollectiveCommType numbers.
enum class ChakraNodeType : int {
  Invalid = 0, Metadata = 1, MemLoad = 2, MemStore = 3, Comp = 4, CommSend = 5, CommRecv = 6, CommColl = 7
};
enum class ChakraCollective : int {
  AllReduce = 0, Reduce = 1, AllGather = 2, Gather = 3, Scatter = 4, Broadcast = 5, AllToAll = 6,
  ReduceScatter = 7, ReduceScatterBlock = 8, Barrier = 9
};

struct ChakraNode {
  std::uint64_t id = 0;
  std::string name;
  int type = 0;                          // ChakraNodeType
  std::vector<std::uint64_t> ctrl_deps, data_deps;
  std::uint64_t duration_micros = 0;
  // Integer attributes (comm_type, comm_size, comm_src, comm_dst, comm_tag,
  // ...; any integer or bool kind of the schema) and string ones (pg_name).
  std::map<std::string, std::int64_t> ints;
  std::map<std::string, std::string> strings;
};

struct ChakraTrace {
  std::string file;                      // where it was read (errors name it)
  std::string version;                   // GlobalMetadata.version
  std::vector<ChakraNode> nodes;
};

struct ChakraWorkload {
  std::string dir;
  std::vector<ChakraTrace> ranks;        // index = rank
  std::map<std::string, std::vector<int>> groups;   // comm_group.json: pg id -> ranks
};

// Reads DIR: every PREFIX.<rank>.et (one prefix, ranks 0..n-1 all present)
// and comm_group.json if present. Malformed input throws InputError naming
// the file and the message or node.
ChakraWorkload read_chakra_dir(const std::string& dir);

// One trace's bytes, and their reading back (`file` names them in errors).
std::string encode_chakra(const ChakraTrace& trace);
ChakraTrace decode_chakra(const std::string& bytes, const std::string& file);

// comm_group.json's text for `groups` (ASTRA-sim's format: {"id": [ranks]}).
std::string encode_comm_groups(const std::map<std::string, std::vector<int>>& groups);

}  // namespace hcclsim

#include "sim/collectives/collective.h"

#include <stdexcept>

namespace hcclsim {

namespace {
template <typename E>
std::optional<E> find_name(const std::vector<std::string>& names, const std::string& name) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}
}  // namespace

const std::vector<std::string>& coll_op_names() {
  static const std::vector<std::string> names{"all_reduce", "all_gather", "reduce_scatter",
                                              "alltoall",   "broadcast",  "reduce"};
  return names;
}
std::optional<CollOp> parse_coll_op(const std::string& name) { return find_name<CollOp>(coll_op_names(), name); }
std::string coll_op_name(CollOp op) { return coll_op_names()[static_cast<std::size_t>(op)]; }
std::string coll_op_title(CollOp op) {
  static const char* titles[] = {"AllReduce", "AllGather", "ReduceScatter", "AlltoAll", "Broadcast", "Reduce"};
  return titles[static_cast<std::size_t>(op)];
}

const std::vector<std::string>& data_type_names() {
  static const std::vector<std::string> names{"fp32", "fp16", "bf16", "int8", "int16", "int32", "int64"};
  return names;
}
std::optional<DataType> parse_data_type(const std::string& name) {
  return find_name<DataType>(data_type_names(), name);
}
std::string data_type_name(DataType type) { return data_type_names()[static_cast<std::size_t>(type)]; }
std::uint64_t data_type_size(DataType type) {
  static const std::uint64_t sizes[] = {4, 2, 2, 1, 2, 4, 8};
  return sizes[static_cast<std::size_t>(type)];
}

const std::vector<std::string>& reduce_op_names() {
  static const std::vector<std::string> names{"sum", "prod", "max", "min"};
  return names;
}
std::optional<ReduceOp> parse_reduce_op(const std::string& name) {
  return find_name<ReduceOp>(reduce_op_names(), name);
}
std::string reduce_op_name(ReduceOp op) { return reduce_op_names()[static_cast<std::size_t>(op)]; }
std::string level0_algo_name(Level0Algo algo) {
  switch (algo) {
    case Level0Algo::Mesh: return "fullmesh";  // HCCL_ALGO spelling
    case Level0Algo::Ring: return "ring";
    case Level0Algo::DoubleRing: return "double_ring";
  }
  return "?";
}

bool has_reduction(CollOp op) {
  return op == CollOp::AllReduce || op == CollOp::ReduceScatter || op == CollOp::Reduce;
}

BufferSizes buffer_sizes(const CollectiveSpec& spec) {
  if (spec.op == CollOp::AlltoAll && !spec.alltoallv_counts.empty()) {
    BufferSizes largest;
    for (int r = 0; r < spec.ranks; ++r) {
      std::uint64_t in = 0;
      std::uint64_t out = 0;
      for (int j = 0; j < spec.ranks; ++j) {
        in += spec.pair_count(r, j);
        out += spec.pair_count(j, r);
      }
      largest.input = std::max(largest.input, in * data_type_size(spec.dtype));
      largest.output = std::max(largest.output, out * data_type_size(spec.dtype));
    }
    return largest;
  }
  const std::uint64_t unit = spec.count * data_type_size(spec.dtype);
  const std::uint64_t p = static_cast<std::uint64_t>(spec.ranks);
  switch (spec.op) {
    case CollOp::AllReduce:
    case CollOp::Broadcast:
    case CollOp::Reduce: return {unit, unit};
    case CollOp::AllGather: return {unit, unit * p};
    case CollOp::ReduceScatter: return {unit * p, unit};
    case CollOp::AlltoAll: return {unit * p, unit * p};
  }
  return {};
}

std::vector<Piece> expected_output(const CollectiveSpec& spec, int rank) {
  const std::uint64_t unit = spec.count * data_type_size(spec.dtype);
  const RankSet everyone = RankSet::all(spec.ranks);
  std::vector<Piece> out;
  if (unit == 0 && spec.alltoallv_counts.empty()) return out;
  switch (spec.op) {
    case CollOp::AllReduce: out.push_back(Piece::value(unit, 0, everyone)); break;
    case CollOp::Reduce:
      if (rank == spec.root) out.push_back(Piece::value(unit, 0, everyone));
      break;
    case CollOp::Broadcast: out.push_back(Piece::value(unit, 0, RankSet::single(spec.root))); break;
    case CollOp::ReduceScatter:
      out.push_back(Piece::value(unit, unit * static_cast<std::uint64_t>(rank), everyone));
      break;
    case CollOp::AllGather:
      for (int j = 0; j < spec.ranks; ++j) out.push_back(Piece::value(unit, 0, RankSet::single(j)));
      break;
    case CollOp::AlltoAll: {
      const std::uint64_t esz = data_type_size(spec.dtype);
      for (int j = 0; j < spec.ranks; ++j) {
        std::uint64_t displ = 0;  // where rank j's block for `rank` starts in j's input
        for (int k = 0; k < rank; ++k) displ += spec.pair_count(j, k);
        const std::uint64_t n = spec.pair_count(j, rank);
        if (n > 0) out.push_back(Piece::value(n * esz, displ * esz, RankSet::single(j)));
      }
      break;
    }
  }
  return out;
}

Level0Algo default_level0(CollOp) {
  // On an A2 server HCCL runs every op over the full mesh ("level0:NA").
  return Level0Algo::Mesh;
}

}  // namespace hcclsim

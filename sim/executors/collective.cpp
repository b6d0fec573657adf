#include "sim/executors/collective.h"

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

std::string hccl_test_op_name(const std::string& name) {
  const std::string suffix = "_test";
  const bool binary = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return binary ? name.substr(0, name.size() - suffix.size()) : name;
}
std::optional<DataType> parse_hccl_test_data_type(const std::string& name) {
  return parse_data_type(name == "bfp16" ? "bf16" : name);
}
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

ExpectedOutputs::ExpectedOutputs(const CollectiveSpec& spec, RankSetTable& sets)
    : spec_(spec), everyone_(sets.intern(RankSet::all(spec.ranks))) {}

void ExpectedOutputs::value(std::uint64_t unit, std::uint64_t origin, RankSetTable::Id from, std::uint32_t count) {
  DataSpan s;
  s.unit = unit;
  s.origin = origin;
  s.from = from;
  s.count = count;
  s.step = count > 1 ? 1 : 0;
  s.state = Piece::State::Value;
  spans_.push_back(s);
}

const std::vector<DataSpan>& ExpectedOutputs::of(int rank) {
  spans_.clear();
  const std::uint64_t esz = data_type_size(spec_.dtype);
  const std::uint64_t unit = spec_.count * esz;
  const auto ranks = static_cast<std::uint32_t>(spec_.ranks);
  if (spec_.op == CollOp::AlltoAll && !spec_.alltoallv_counts.empty()) {
    if (starts_.empty() || rank < displaced_rank_) {
      starts_.assign(ranks, 0);
      displaced_rank_ = 0;
    }
    for (; displaced_rank_ < rank; ++displaced_rank_) {
      for (int j = 0; j < spec_.ranks; ++j) starts_[static_cast<std::size_t>(j)] += spec_.pair_count(j, displaced_rank_);
    }
    for (int j = 0; j < spec_.ranks; ++j) {
      const std::uint64_t n = spec_.pair_count(j, rank);
      if (n > 0) value(n * esz, starts_[static_cast<std::size_t>(j)] * esz, static_cast<RankSetTable::Id>(j));
    }
    return spans_;
  }
  if (unit == 0) return spans_;
  const auto r = static_cast<std::uint64_t>(rank);
  switch (spec_.op) {
    case CollOp::AllReduce: value(unit, 0, everyone_); break;
    case CollOp::Reduce:
      if (rank == spec_.root) value(unit, 0, everyone_);
      break;
    case CollOp::Broadcast: value(unit, 0, static_cast<RankSetTable::Id>(spec_.root)); break;
    case CollOp::ReduceScatter: value(unit, unit * r, everyone_); break;
    case CollOp::AllGather: value(unit, 0, 0, ranks); break;             // rank j's input in block j
    case CollOp::AlltoAll: value(unit, unit * r, 0, ranks); break;       // j's block for `rank`, in block j
  }
  return spans_;
}

std::vector<Piece> expected_output(const CollectiveSpec& spec, int rank) {
  RankSetTable sets(spec.ranks);
  ExpectedOutputs expected(spec, sets);
  std::vector<Piece> out;
  for (const DataSpan& s : expected.of(rank)) {
    for (std::uint32_t k = 0; k < s.count; ++k) {
      out.push_back(Piece::value(s.unit, s.origin_at(k), sets.get(s.from + k * static_cast<std::uint32_t>(s.step))));
    }
  }
  return out;
}

Level0Algo default_level0(CollOp) {
  // On an A2 server HCCL runs every op over the full mesh ("level0:NA").
  return Level0Algo::Mesh;
}

}  // namespace hcclsim

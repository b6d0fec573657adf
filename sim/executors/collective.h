// Collective operations as hccl_test names them, and their expansion into
// task graphs by the level-0 (inside one server) algorithms. No SystemC here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/data_check.h"
#include "sim/task_graph.h"

namespace hcclsim {

enum class CollOp : std::uint8_t { AllReduce, AllGather, ReduceScatter, AlltoAll, Broadcast, Reduce };
enum class ReduceOp : std::uint8_t { Sum, Prod, Max, Min };
enum class DataType : std::uint8_t { Fp32, Fp16, Bf16, Int8, Int16, Int32, Int64 };
// Level-0 forms: HCCL's full mesh (A2), single ring and double ring (A3).
enum class Level0Algo : std::uint8_t { Mesh, Ring, DoubleRing };

// Names as hccl_test spells them ("all_reduce", "fp16", "sum"); parse_* return
// nullopt for an unknown name.
const std::vector<std::string>& coll_op_names();
std::optional<CollOp> parse_coll_op(const std::string& name);
std::string coll_op_name(CollOp op);
std::string coll_op_title(CollOp op);   // "AllReduce"
const std::vector<std::string>& data_type_names();
std::optional<DataType> parse_data_type(const std::string& name);
std::string data_type_name(DataType type);
std::uint64_t data_type_size(DataType type);
const std::vector<std::string>& reduce_op_names();
std::optional<ReduceOp> parse_reduce_op(const std::string& name);
std::string reduce_op_name(ReduceOp op);
std::string level0_algo_name(Level0Algo algo);
bool has_reduction(CollOp op);
// hccl_test's own spellings: a binary's name ("all_reduce_test") is the op
// without "_test" (other names come back unchanged), and -d's "bfp16" is bf16.
std::string hccl_test_op_name(const std::string& name);
std::optional<DataType> parse_hccl_test_data_type(const std::string& name);

struct CollectiveSpec {
  CollOp op = CollOp::AllReduce;
  int ranks = 8;                   // ranks 0..ranks-1 of the platform
  DataType dtype = DataType::Fp16;
  ReduceOp reduce_op = ReduceOp::Sum;
  std::uint64_t count = 0;         // elements, as hccl_test's count (per rank; see docs/user-guide.md)
  int root = 0;                    // Broadcast, Reduce
  std::uint64_t buffer_bytes = 0;  // HCCL_BUFFSIZE: the CCL_IN and CCL_OUT areas hold this much each
  // Where the data lives, so that stages of a hierarchical collective can
  // work on each other's results: the input and output areas, and the start
  // of the CCL_IN / CCL_OUT areas (2 x buffer_bytes) inside the HCCL buffer.
  BufferKind input_buffer = BufferKind::Input;
  std::uint64_t input_offset = 0;
  BufferKind output_buffer = BufferKind::Output;
  std::uint64_t output_offset = 0;
  std::uint64_t scratch_offset = 0;
  // Stage forms used by hierarchical collectives (level 0, mesh only):
  // - segments S > 1: ReduceScatter's input holds S x ranks blocks of
  //   `count`, block (t, j) at (t * ranks + j) * count, and rank r keeps the S
  //   blocks (t, r) at t * count; AllGather the reverse.
  // - chunked: ReduceScatter / AllGather of `count` elements in total, rank r
  //   owning chunk(count, r) in place (sizes differ by at most one element);
  //   must fit the HCCL buffer (no loops).
  // - chunked Broadcast: the scatter alone (rank r ends with chunk(count, r)
  //   of the root's input in place); chunked Reduce: the gather alone (rank r
  //   holds chunk r of the reduced data in place, the root collects them).
  int segments = 1;
  std::uint64_t block_stride = 0;   // segments: elements between blocks on the strided side (0: count)
  bool chunked = false;
  // Level-1 Broadcast form: the whole data along a binomial tree, HCCL's
  // small-data templates (BroadcastNHROneshot for NHR: halving distances;
  // BroadcastNBBinary for NB: doubling distances) instead of scatter + all-gather.
  bool one_shot = false;
  // AlltoAllV: elements rank r sends to rank j, [r][j]; empty for AlltoAll.
  // Blocks sit back to back in rank order in the input and the output.
  std::vector<std::vector<std::uint64_t>> alltoallv_counts;
  std::uint64_t pair_count(int from, int to) const {
    return alltoallv_counts.empty() ? count : alltoallv_counts[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
  }
};

// A stage of a composition: `op` over `ranks` ranks of `count` elements with
// an HCCL buffer of `buffer_bytes`, in `whole`'s dtype and reduction, on the
// default buffers (the hierarchies then point it at theirs).
inline CollectiveSpec stage_spec(const CollectiveSpec& whole, CollOp op, int ranks, std::uint64_t count,
                                 std::uint64_t buffer_bytes) {
  CollectiveSpec s;
  s.op = op;
  s.ranks = ranks;
  s.dtype = whole.dtype;
  s.reduce_op = whole.reduce_op;
  s.count = count;
  s.buffer_bytes = buffer_bytes;
  return s;
}

// Per-rank buffer sizes of a collective, in bytes.
struct BufferSizes {
  std::uint64_t input = 0;
  std::uint64_t output = 0;
};
// (AlltoAllV: the largest over the ranks.)
BufferSizes buffer_sizes(const CollectiveSpec& spec);

// What each rank's output must hold afterwards (nothing for a Reduce
// non-root, whose output is not defined; also for AlltoAllV), as spans whose
// sets are ids of `sets`: an AllGather's or AlltoAll's output is one run
// however many ranks there are. Ranks asked in increasing order cost O(ranks)
// each: AlltoAllV's block starts are kept running, not summed again per rank.
class ExpectedOutputs {
 public:
  ExpectedOutputs(const CollectiveSpec& spec, RankSetTable& sets);
  const std::vector<DataSpan>& of(int rank);

 private:
  void value(std::uint64_t unit, std::uint64_t origin, RankSetTable::Id from, std::uint32_t count = 1);
  const CollectiveSpec& spec_;
  RankSetTable::Id everyone_;
  int displaced_rank_ = 0;                    // the rank starts_ are for
  std::vector<std::uint64_t> starts_;         // AlltoAllV: where j's block for displaced_rank_ starts in j's input
  std::vector<DataSpan> spans_;
};

// The same as pieces, one per element (for tests and messages).
std::vector<Piece> expected_output(const CollectiveSpec& spec, int rank);

// Expands the collective. Throws std::invalid_argument when the algorithm
// does not support the op (e.g. AlltoAll on a ring), like HCCL refuses it.
TaskGraph build_collective(const CollectiveSpec& spec, Level0Algo algo);

// Notify indices a level-0 form uses on `ranks` ranks (for any op and size):
// the size of the notify region a composition gives its level-0 stages.
int level0_notifies(int ranks, Level0Algo algo);

// The algorithm HCCL picks on one A2 server when HCCL_ALGO leaves level 0 unset.
Level0Algo default_level0(CollOp op);

}  // namespace hcclsim

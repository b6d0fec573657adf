// Unit tests for sim/data_check: the interned rank sets, the flat span lists
// of BufferContents against a byte-by-byte reference model (random reads,
// writes and reductions on many ranks), and that the compact representation
// still catches every kind of error the check exists for — stale data from a
// missing synchronisation, a wrong offset, a rank counted twice, a rank
// missing — on trackers of up to 1024 ranks and on level-1 collectives of
// 72 ranks (more than one 64-bit word of ranks) with one task broken.
#include <catch2/catch.hpp>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <random>
#include <string>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/executors/level1.h"
#include "sim/data_check.h"
#include "sim/scheduler.h"
#include "topologies/cluster.h"
#include "topologies/config.h"
#include "topologies/platform.h"

using namespace hcclsim;

namespace {

std::vector<DataSpan> read(const DataTracker& t, int rank, BufferKind kind, std::uint64_t offset,
                           std::uint64_t bytes) {
  std::vector<DataSpan> out;
  t.read(BufferRef{rank, kind, offset}, bytes, out);
  return out;
}

RankSet range_set(int first, int last) {
  RankSet s;
  for (int r = first; r <= last; ++r) s.add(r);
  return s;
}

// ---- the reference: one entry per byte ----

struct RefByte {
  Piece::State state = Piece::State::Uninitialized;
  std::uint64_t origin = 0;  // input offset of this very byte
  RankSet from;
};

struct Reference {
  std::vector<std::vector<RefByte>> buffers;  // rank * 3 + kind
  bool idempotent;

  Reference(int ranks, std::uint64_t input, std::uint64_t output, std::uint64_t scratch, bool idem)
      : idempotent(idem) {
    for (int r = 0; r < ranks; ++r) {
      std::vector<RefByte> in(input);
      for (std::uint64_t i = 0; i < input; ++i) in[i] = RefByte{Piece::State::Value, i, RankSet::single(r)};
      buffers.push_back(in);
      buffers.emplace_back(output);
      buffers.emplace_back(scratch);
    }
  }
  std::vector<RefByte>& at(int rank, BufferKind kind) {
    return buffers[static_cast<std::size_t>(rank) * 3 + static_cast<std::size_t>(kind)];
  }
  std::vector<RefByte> read(int rank, BufferKind kind, std::uint64_t offset, std::uint64_t bytes) {
    const std::vector<RefByte>& b = at(rank, kind);
    return std::vector<RefByte>(b.begin() + static_cast<std::ptrdiff_t>(offset),
                                b.begin() + static_cast<std::ptrdiff_t>(offset + bytes));
  }
  void write(int rank, BufferKind kind, std::uint64_t offset, const std::vector<RefByte>& data) {
    std::vector<RefByte>& b = at(rank, kind);
    for (std::size_t i = 0; i < data.size(); ++i) b[offset + i] = data[i];
  }
  void reduce(int rank, BufferKind kind, std::uint64_t offset, const std::vector<RefByte>& data) {
    std::vector<RefByte>& b = at(rank, kind);
    for (std::size_t i = 0; i < data.size(); ++i) {
      RefByte& d = b[offset + i];
      const RefByte& s = data[i];
      if (d.state != Piece::State::Value || s.state != Piece::State::Value || d.origin != s.origin ||
          (!idempotent && d.from.intersects(s.from))) {
        d = RefByte{Piece::State::Corrupt, 0, RankSet{}};
      } else {
        d.from.unite(s.from);
      }
    }
  }
  // Bytes grouped into pieces as the check defines them.
  std::vector<Piece> pieces(int rank, BufferKind kind) {
    std::vector<Piece> out;
    for (const RefByte& byte : at(rank, kind)) {
      if (!out.empty()) {
        Piece& last = out.back();
        const bool same_state = last.state == byte.state;
        const bool continues = same_state && (byte.state != Piece::State::Value ||
                                              (last.from == byte.from && last.origin + last.length == byte.origin));
        if (continues) {
          ++last.length;
          continue;
        }
      }
      Piece p;
      p.length = 1;
      p.state = byte.state;
      if (byte.state == Piece::State::Value) {
        p.origin = byte.origin;
        p.from = byte.from;
      }
      out.push_back(p);
    }
    return out;
  }
};

// The error messages name what was found and what was expected.
bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A RoCE cluster of `servers` one-NPU A2 servers.
TopologySpec one_npu_cluster(int servers) {
  ClusterLayout layout;
  layout.name = "data-check-test";
  layout.kind = "a2";
  for (int s = 0; s < servers; ++s) layout.servers.push_back(ServerLayout{"s" + std::to_string(s), 1, 0});
  return make_cluster(layout,
                      load_profile(std::string(HCCLSIM_SOURCE_DIR) + "/configs/profiles/a2-910b.json"));
}

// Runs `graph` with a tracker; "" when every rank's output is what `spec` must give.
// With `release`, as a run that frees the graph's tasks as it compiles them
// (Scheduler::run_releasing, on a copy; `graph` serves as its rebuild).
std::string check_run(Scheduler& sched, const TaskGraph& graph, const CollectiveSpec& spec, bool release = false) {
  const BufferSizes sizes = buffer_sizes(spec);
  DataTracker tracker(spec.ranks, sizes.input, sizes.output, 2 * spec.buffer_bytes, false);
  const RunResult r = release ? sched.run_releasing(graph, [&] { return graph; }, &tracker) : sched.run(graph, &tracker);
  if (!r.failure.empty()) return "did not finish: " + r.failure.substr(0, 200);
  if (!r.check_error.empty()) return r.check_error;
  for (int rank = 0; rank < spec.ranks; ++rank) {
    if (spec.op == CollOp::Reduce && rank != spec.root) continue;
    const std::vector<Piece> expected = expected_output(spec, rank);
    const std::string diff = tracker.compare(rank, BufferKind::Output, 0, expected);
    // The fast comparison says what the slow one says.
    CHECK(diff == compare_pieces(tracker.buffer(rank, BufferKind::Output).normalized(0, sizes.output), expected));
    if (!diff.empty()) return "rank " + std::to_string(rank) + " output " + diff;
  }
  return {};
}

// `graph` with its tasks passed through `edit` (which may drop a task by
// returning false, or change it); a Delay of `lateness` heads `late`'s first thread.
template <typename Edit>
TaskGraph edited(const TaskGraph& graph, Edit edit, int late = -1, Time lateness = Time{}) {
  TaskGraph g;
  for (const Thread& th : graph.threads()) g.add_thread(th.rank, th.name);
  for (ThreadId t = 0; t < graph.threads().size(); ++t) {
    if (graph.thread(t).rank != late) continue;
    Task d;
    d.kind = TaskKind::Delay;
    d.thread = t;
    d.duration = lateness;
    d.label = g.intern("late start");
    g.add(d);
    break;
  }
  std::vector<std::int64_t> new_id(graph.tasks().size(), -1);
  for (TaskId id = 0; id < graph.tasks().size(); ++id) {
    std::vector<Task> out = edit(graph, id);
    for (Task t : out) {
      t.label = g.intern(graph.label(t));  // the edit's tasks carry `graph`'s label ids
      new_id[id] = g.add(t);
    }
  }
  for (const auto& [before, after] : graph.dependencies()) {
    if (new_id[before] >= 0 && new_id[after] >= 0) {
      g.add_dependency(static_cast<TaskId>(new_id[before]), static_cast<TaskId>(new_id[after]));
    }
  }
  return g;
}

CollectiveSpec spec_of(CollOp op, int ranks, std::uint64_t count) {
  CollectiveSpec spec;
  spec.op = op;
  spec.ranks = ranks;
  spec.dtype = DataType::Fp16;
  spec.count = count;
  spec.buffer_bytes = 1 << 20;
  return spec;
}

}  // namespace

TEST_CASE("rank sets are interned: one id per set, unions remembered, overlaps told", "[data_check]") {
  for (const int ranks : {1, 8, 64, 65, 1024}) {
    INFO(ranks << " ranks");
    RankSetTable sets(ranks);
    for (int r = 0; r < ranks; ++r) CHECK(sets.intern(RankSet::single(r)) == sets.single(r));
    CHECK(sets.size() == static_cast<std::size_t>(ranks));
    const RankSetTable::Id everyone = sets.intern(RankSet::all(ranks));
    CHECK(sets.get(everyone) == RankSet::all(ranks));
    CHECK(sets.find(RankSet::all(ranks)) == everyone);
    if (ranks < 2) continue;
    bool overlap = true;
    const RankSetTable::Id pair = sets.unite(sets.single(0), sets.single(ranks - 1), overlap);
    CHECK_FALSE(overlap);
    RankSet expect = RankSet::single(0);
    expect.add(ranks - 1);
    CHECK(sets.get(pair) == expect);
    CHECK(sets.intern(expect) == pair);
    // The same union again, either way round: the same id, from the cache.
    const std::size_t stored = sets.size();
    CHECK(sets.unite(sets.single(ranks - 1), sets.single(0), overlap) == pair);
    CHECK(sets.size() == stored);
    // A rank counted twice: the union is the same set, and the overlap is told.
    CHECK(sets.unite(pair, sets.single(0), overlap) == pair);
    CHECK(overlap);
    CHECK(sets.unite(pair, pair, overlap) == pair);
    CHECK(overlap);
    // A set that was never made is not found; one naming a rank beyond the table is refused.
    CHECK(sets.find(range_set(0, ranks - 2)) == (ranks == 2 ? sets.single(0) : RankSetTable::kNone));
    CHECK(sets.find(RankSet::single(ranks)) == RankSetTable::kNone);
    CHECK_THROWS_AS(sets.intern(RankSet::single(ranks)), std::out_of_range);
  }
}

TEST_CASE("RankSet prints ranges and answers membership", "[data_check]") {
  RankSet s = range_set(5, 7);
  s.add(0);
  s.add(1);
  s.add(1000);
  CHECK(s.to_string() == "{0-1,5-7,1000}");
  CHECK(s.contains(1000));
  CHECK_FALSE(s.contains(999));
  CHECK_FALSE(s.contains(4000));
}

namespace {

struct Walk {
  int ranks;
  bool idempotent;
  std::uint64_t input, output, scratch;
  std::uint64_t small;   // most copies move at most this many bytes,
  std::uint64_t big_every;  // one in big_every up to a whole buffer
  int steps;
  // 0: offsets mostly multiples of 4. Else most offsets and sizes are
  // multiples of half this unit, and inputs one unit long: whole and half
  // blocks of ranks' inputs put side by side, as collectives do, so that
  // runs of elements form, grow, split and merge.
  std::uint64_t unit = 0;
};

struct WalkSeen {
  std::size_t corrupt = 0, reduced = 0, most_spans = 0;
  std::size_t compressed = 0;  // buffers held in fewer entries than pieces
};

// The pieces of `spans` (runs expanded), merged where they continue each other.
std::vector<Piece> pieces_of(const DataTracker& t, const std::vector<DataSpan>& spans) {
  std::vector<Piece> out;
  for (const DataSpan& d : spans) {
    for (std::uint64_t k = 0; k < d.count; ++k) {
      Piece p;
      p.length = d.unit;
      p.state = d.state;
      if (d.state == Piece::State::Value) {
        p.origin = d.origin_at(k);
        p.from = t.sets().get(static_cast<RankSetTable::Id>(static_cast<std::int64_t>(d.from) +
                                                             static_cast<std::int64_t>(k) * d.step));
      }
      const bool continues = !out.empty() && out.back().state == p.state &&
                             (p.state != Piece::State::Value ||
                              (out.back().from == p.from && out.back().origin + out.back().length == p.origin));
      if (continues) {
        out.back().length += p.length;
      } else {
        out.push_back(p);
      }
    }
  }
  return out;
}

// Random copies and reductions between the buffers of ranks 0..3 (sources
// from any rank), the same on a tracker and on the reference; every 50 steps
// and at the end every buffer of ranks 0..3 must hold the same pieces.
WalkSeen random_walk(const Walk& w, std::uint64_t seed) {
  DataTracker tracker(w.ranks, w.input, w.output, w.scratch, w.idempotent);
  Reference ref(w.ranks, w.input, w.output, w.scratch, w.idempotent);
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return static_cast<std::uint64_t>(rng() % n); };
  const BufferKind kinds[] = {BufferKind::Input, BufferKind::Output, BufferKind::Scratch};
  auto size_of = [&](BufferKind k) { return k == BufferKind::Input ? w.input : k == BufferKind::Output ? w.output : w.scratch; };
  WalkSeen seen;
  for (int step = 0; step < w.steps; ++step) {
    // Offsets mostly multiples of 4, so that reductions often line up (and sometimes do not).
    const BufferKind sk = kinds[pick(3)];
    const BufferKind dk = pick(4) == 0 ? BufferKind::Scratch : BufferKind::Output;
    const std::uint64_t most = std::min(size_of(sk), size_of(dk));
    std::uint64_t bytes = 1 + pick(pick(w.big_every) == 0 ? most : std::min(most, w.small));
    const std::uint64_t align = pick(8) == 0 ? 1 : w.unit > 0 ? w.unit / 2 : 4;
    if (w.unit > 0 && align > 1) bytes = std::min(most / align, (bytes + align - 1) / align) * align;
    const std::uint64_t so = pick(size_of(sk) - bytes + 1) / align * align;
    const std::uint64_t dof = pick(size_of(dk) - bytes + 1) / align * align;
    const int sr = static_cast<int>(pick(static_cast<std::uint64_t>(w.ranks)));
    const int dr = static_cast<int>(pick(std::min<std::uint64_t>(4, static_cast<std::uint64_t>(w.ranks))));
    const std::vector<DataSpan> spans = read(tracker, sr, sk, so, bytes);
    const std::vector<RefByte> bytes_read = ref.read(sr, sk, so, bytes);
    if (pick(3) == 0) {
      tracker.reduce(BufferRef{dr, dk, dof}, spans);
      ref.reduce(dr, dk, dof, bytes_read);
    } else {
      tracker.write(BufferRef{dr, dk, dof}, spans);
      ref.write(dr, dk, dof, bytes_read);
    }
    if (step % 50 != 0 && step != w.steps - 1) continue;
    INFO("ranks " << w.ranks << " idempotent " << w.idempotent << " step " << step);
    for (int r = 0; r < std::min(4, w.ranks); ++r) {
      for (const BufferKind k : kinds) {
        const std::vector<Piece> want = ref.pieces(r, k);
        const std::vector<Piece> got = tracker.buffer(r, k).normalized(0, size_of(k));
        REQUIRE(compare_pieces(got, want) == "");
        // The stored list is already merged: one entry per piece.
        // Stored as at most one entry per piece (fewer where runs form).
        CHECK(tracker.buffer(r, k).span_count() <= want.size());
        seen.compressed += tracker.buffer(r, k).span_count() < want.size() ? 1 : 0;
        // No two stored neighbours could have been one entry (reading merges them).
        CHECK(read(tracker, r, k, 0, size_of(k)).size() == tracker.buffer(r, k).span_count());
        seen.most_spans = std::max(seen.most_spans, want.size());
        for (const Piece& p : want) {
          seen.corrupt += p.state == Piece::State::Corrupt ? 1 : 0;
          const std::string set = p.from.to_string();
          seen.reduced += p.state == Piece::State::Value &&
                          (set.find(',') != std::string::npos || set.find('-') != std::string::npos);
        }
        // Reading any range gives the reference's bytes.
        const std::uint64_t o = pick(size_of(k) + 1);
        const std::uint64_t n = pick(size_of(k) - o + 1);
        const std::vector<Piece> part = pieces_of(tracker, read(tracker, r, k, o, n));
        std::vector<Piece> want_part;
        std::uint64_t at_byte = 0;
        for (const Piece& p : want) {
          const std::uint64_t b = std::max(at_byte, o), e = std::min(at_byte + p.length, o + n);
          if (b < e) {
            Piece q = p;
            q.length = e - b;
            if (q.state == Piece::State::Value) q.origin += b - at_byte;
            want_part.push_back(q);
          }
          at_byte += p.length;
        }
        REQUIRE(compare_pieces(part, want_part) == "");
      }
    }
  }
  return seen;
}

}  // namespace

TEST_CASE("span lists match a byte-by-byte reference under random copies and reductions", "[data_check]") {
  for (const bool idempotent : {false, true}) {
    for (const int ranks : {3, 70, 130}) {
      const WalkSeen seen = random_walk(Walk{ranks, idempotent, 48, 96, 64, 96, 16, 3000},
                                        static_cast<std::uint64_t>(ranks) * 2 + (idempotent ? 1 : 0));
      // The walk reached both kinds of outcome it is meant to compare.
      CHECK(seen.corrupt > 0);
      CHECK(seen.reduced > 0);
    }
  }
}

TEST_CASE("runs of blocks of many ranks (gathers, all-to-alls) match the reference", "[data_check]") {
  // Whole and half inputs of 16 bytes from 90 ranks placed on 8-byte
  // boundaries of a 40-block output: runs form, are split by partial
  // copies and reductions, and merge again.
  for (const bool idempotent : {false, true}) {
    const WalkSeen seen =
        random_walk(Walk{90, idempotent, 16, 16 * 40, 16 * 12, 16, 40, 6000, 16}, idempotent ? 21 : 22);
    CHECK(seen.compressed > 0);
    CHECK(seen.corrupt > 0);
    CHECK(seen.reduced > 0);
  }
}

TEST_CASE("an all-gather whose blocks arrive in halves ends as one run", "[data_check]") {
  // As a double ring delivers them: every block's first half, then the
  // second halves in rank order (each completed block joins the run before it).
  const int ranks = 96;
  const std::uint64_t block = 64, half = block / 2;
  for (const bool descending : {false, true}) {
    DataTracker t(ranks, block, block * ranks, 0, false);
    std::vector<Piece> expected;
    for (int j = 0; j < ranks; ++j) {
      expected.push_back(Piece::value(block, 0, RankSet::single(j)));
      t.write(BufferRef{7, BufferKind::Output, block * static_cast<std::uint64_t>(j)},
              read(t, j, BufferKind::Input, 0, half));
    }
    for (int i = 0; i < ranks; ++i) {
      const int j = descending ? ranks - 1 - i : i;
      t.write(BufferRef{7, BufferKind::Output, block * static_cast<std::uint64_t>(j) + half},
              read(t, j, BufferKind::Input, half, half));
    }
    INFO((descending ? "descending" : "ascending"));
    CHECK(t.compare(7, BufferKind::Output, 0, expected) == "");
    CHECK(t.buffer(7, BufferKind::Output).span_count() == 1);
    // A block read back from the middle of the run is that rank's input.
    CHECK(compare_pieces(pieces_of(t, read(t, 7, BufferKind::Output, block * 50 + 3, block)),
                         {Piece::value(block - 3, 3, RankSet::single(50)), Piece::value(3, 0, RankSet::single(51))}) ==
          "");
  }
}

TEST_CASE("a buffer keeps every field of a span at its limits, and refuses offsets of 32 TiB", "[data_check]") {
  // A buffer's entries pack a span in 32 bytes: the begin and the origin
  // below 2^45, the state and a 32-bit step in their top bits, a 22-bit
  // origin step above the unit and the origin.
  const std::uint64_t limit = std::uint64_t{1} << 45;
  RankSetTable sets(4);
  BufferContents b(&sets, limit);
  const std::int32_t most = DataSpan::kMaxOriginStep;
  for (const std::int32_t step : {INT32_MIN, -200000, -1, 1, 131072, INT32_MAX}) {
    for (const std::int32_t origin_step : {-most, -(1 << 18), -1, 0, 1, 1 << 18, most}) {
      DataSpan run;
      run.unit = 16;
      run.from = 4000000000u;
      run.step = step;
      run.count = 3;
      run.origin_step = origin_step;
      // Every element's origin below 2^45 (the first's at the limit where the step allows).
      run.origin = origin_step > 0 ? limit - 1 - 2 * run.unit * static_cast<std::uint64_t>(origin_step)
                   : origin_step < 0 ? 2 * run.unit * static_cast<std::uint64_t>(-origin_step)
                                     : limit - 1;
      run.state = Piece::State::Value;
      const std::uint64_t at = limit - 64;
      b.write(at, {run});
      std::vector<DataSpan> back;
      b.read(at, run.bytes(), back);
      INFO("step " << step << " origin step " << origin_step);
      REQUIRE(back.size() == 1);
      CHECK(back[0].unit == run.unit);
      CHECK(back[0].origin == run.origin);
      CHECK(back[0].from == run.from);
      CHECK(back[0].step == run.step);
      CHECK(back[0].count == run.count);
      CHECK(back[0].origin_step == run.origin_step);
      CHECK(back[0].state == run.state);
      CHECK(back[0].origin_at(2) == run.origin + 2 * run.unit * static_cast<std::uint64_t>(std::int64_t{origin_step}));
    }
  }
  DataSpan corrupt;
  corrupt.unit = 8;
  corrupt.state = Piece::State::Corrupt;
  b.write(0, {corrupt});
  std::vector<DataSpan> head;
  b.read(0, 8, head);
  REQUIRE(head.size() == 1);
  CHECK(head[0].state == Piece::State::Corrupt);
  CHECK(head[0].unit == 8);
  // Beyond what a checked run allows (Scheduler::kMaxCheckedOffset): refused, not wrapped.
  DataSpan far;
  far.unit = 8;
  far.origin = limit;
  far.state = Piece::State::Value;
  CHECK_THROWS_AS(b.write(64, {far}), std::length_error);
  BufferContents larger(&sets, limit + 64);
  DataSpan value;
  value.unit = 8;
  value.state = Piece::State::Value;
  CHECK_THROWS_AS(larger.write(limit, {value}), std::length_error);
  // A unit of the whole 32 TiB.
  value.unit = limit;
  b.write(0, {value});
  std::vector<DataSpan> all;
  b.read(0, limit, all);
  REQUIRE(all.size() == 1);
  CHECK(all[0].unit == limit);
  CHECK(all[0].origin == 0);
}

// A hierarchical ReduceScatter first stages each rank's input so that each
// server's blocks lie together: block j of server s (input block s * 8 + j)
// goes to place j * servers + s. Consecutive places then hold blocks whose
// origins step by 8 blocks, and a buffer keeps them as one run per j, not
// one entry per block (a 1024-NPU ReduceScatter's staging buffers held
// 1,025 entries each).
TEST_CASE("staged blocks whose origins step evenly are one run each, read and reduced as the blocks", "[data_check]") {
  const int servers = 16, npus = 8;
  const std::uint64_t unit = 64, blocks = static_cast<std::uint64_t>(servers) * npus;
  for (const bool descending : {false, true}) {
    INFO((descending ? "servers in descending order" : "servers in ascending order"));
    DataTracker t(2, unit * blocks, 0, unit * blocks, false);
    auto source_block = [&](std::uint64_t place) {
      const std::uint64_t s = place % servers, j = place / servers;
      return (descending ? servers - 1 - s : s) * npus + j;
    };
    std::vector<Piece> expected0, expected_sum;
    for (std::uint64_t place = 0; place < blocks; ++place) {
      const std::uint64_t origin = source_block(place) * unit;
      for (int r = 0; r < 2; ++r) {
        t.write(BufferRef{r, BufferKind::Scratch, place * unit}, read(t, r, BufferKind::Input, origin, unit));
      }
      expected0.push_back(Piece::value(unit, origin, RankSet::single(0)));
      expected_sum.push_back(Piece::value(unit, origin, range_set(0, 1)));
    }
    CHECK(t.compare(0, BufferKind::Scratch, 0, expected0) == "");
    CHECK(t.buffer(0, BufferKind::Scratch).span_count() == npus);
    // A read from inside one block to inside a block of the next run.
    const std::uint64_t from = (servers - 2) * unit + 5, length = 3 * unit;
    std::vector<Piece> part;
    part.push_back(Piece::value(unit - 5, source_block(servers - 2) * unit + 5, RankSet::single(0)));
    part.push_back(Piece::value(unit, source_block(servers - 1) * unit, RankSet::single(0)));
    part.push_back(Piece::value(unit, source_block(servers) * unit, RankSet::single(0)));
    part.push_back(Piece::value(5, source_block(servers + 1) * unit, RankSet::single(0)));
    CHECK(compare_pieces(pieces_of(t, read(t, 0, BufferKind::Scratch, from, length)), part) == "");
    // Rank 1's staged blocks reduced into rank 0's, run onto run.
    t.reduce(BufferRef{0, BufferKind::Scratch, 0}, read(t, 1, BufferKind::Scratch, 0, unit * blocks));
    CHECK(t.compare(0, BufferKind::Scratch, 0, expected_sum) == "");
    CHECK(t.buffer(0, BufferKind::Scratch).span_count() == npus);
    // Reduced onto a block of another origin, a block is corrupt.
    t.reduce(BufferRef{1, BufferKind::Scratch, unit}, read(t, 0, BufferKind::Input, 0, unit));
    CHECK(t.buffer(1, BufferKind::Scratch).normalized(unit, unit)[0].state == Piece::State::Corrupt);
  }
  // Origins further apart than a run's step can say (2^21 - 1 units): two entries, as pieces.
  const std::uint64_t most = static_cast<std::uint64_t>(DataSpan::kMaxOriginStep);
  for (const std::uint64_t apart : {most, most + 1}) {
    INFO("origins " << apart << " units apart");
    DataTracker t(1, 8 * (apart + 1), 0, 16, false);
    t.write(BufferRef{0, BufferKind::Scratch, 0}, read(t, 0, BufferKind::Input, 0, 8));
    t.write(BufferRef{0, BufferKind::Scratch, 8}, read(t, 0, BufferKind::Input, 8 * apart, 8));
    CHECK(t.buffer(0, BufferKind::Scratch).span_count() == (apart == most ? 1u : 2u));
    CHECK(t.compare(0, BufferKind::Scratch, 0,
                    {Piece::value(8, 0, RankSet::single(0)), Piece::value(8, 8 * apart, RankSet::single(0))}) == "");
  }
}

TEST_CASE("span lists of thousands of pieces (several blocks) match the reference", "[data_check]") {
  // Small copies from 200 ranks into a 3000-byte output: hundreds of pieces
  // that do not merge, split and joined again by the occasional large copy.
  for (const bool idempotent : {false, true}) {
    const WalkSeen seen = random_walk(Walk{200, idempotent, 64, 3000, 700, 12, 300, 6000}, idempotent ? 7 : 8);
    CHECK(seen.most_spans > 4 * 64);  // several blocks of BufferContents
    CHECK(seen.corrupt > 0);
    CHECK(seen.reduced > 0);
  }
}

TEST_CASE("on 1024 ranks the check still catches stale data, wrong offsets, double and missing ranks",
          "[data_check]") {
  const int ranks = 1024;
  const std::uint64_t unit = 4096;
  const std::uint64_t size = unit * 4;
  DataTracker tracker(ranks, size, size, size, false);
  const std::vector<Piece> everyone = {Piece::value(size, 0, RankSet::all(ranks))};

  SECTION("a correct all-reduce into rank 0's output checks") {
    tracker.write(BufferRef{0, BufferKind::Output, 0}, read(tracker, 0, BufferKind::Input, 0, size));
    for (int r = 1; r < ranks; ++r) {
      tracker.reduce(BufferRef{0, BufferKind::Output, 0}, read(tracker, r, BufferKind::Input, 0, size));
    }
    CHECK(tracker.compare(0, BufferKind::Output, 0, everyone) == "");
    CHECK(tracker.buffer(0, BufferKind::Output).span_count() == 1);
  }
  SECTION("a rank missing") {
    tracker.write(BufferRef{0, BufferKind::Output, 0}, read(tracker, 0, BufferKind::Input, 0, size));
    for (int r = 1; r < ranks; ++r) {
      if (r == 777) continue;
      tracker.reduce(BufferRef{0, BufferKind::Output, 0}, read(tracker, r, BufferKind::Input, 0, size));
    }
    const std::string diff = tracker.compare(0, BufferKind::Output, 0, everyone);
    INFO(diff);
    CHECK(mentions(diff, "rank(s) {0-776,778-1023}"));
  }
  SECTION("a rank counted twice, and the same with an idempotent reduction") {
    for (const bool idempotent : {false, true}) {
      DataTracker t(ranks, size, size, size, idempotent);
      t.write(BufferRef{0, BufferKind::Output, 0}, read(t, 0, BufferKind::Input, 0, size));
      for (int r = 1; r < ranks; ++r) {
        t.reduce(BufferRef{0, BufferKind::Output, 0}, read(t, r, BufferKind::Input, 0, size));
      }
      // Rank 512's second block again.
      t.reduce(BufferRef{0, BufferKind::Output, unit}, read(t, 512, BufferKind::Input, unit, unit));
      const std::string diff = t.compare(0, BufferKind::Output, 0, everyone);
      INFO(diff);
      if (idempotent) {
        CHECK(diff == "");  // max(x, x) = x
      } else {
        CHECK(mentions(diff, "at offset 0 found 4096 bytes of rank(s) {0-1023}"));
        const std::vector<Piece> got = t.buffer(0, BufferKind::Output).normalized(0, size);
        REQUIRE(got.size() == 3);
        CHECK(got[1].state == Piece::State::Corrupt);
        CHECK(got[1].length == unit);
      }
    }
  }
  SECTION("a wrong offset: a block copied from the wrong place, or reduced onto a misaligned one") {
    tracker.write(BufferRef{0, BufferKind::Output, 0}, read(tracker, 0, BufferKind::Input, 0, size));
    tracker.write(BufferRef{0, BufferKind::Output, 2 * unit}, read(tracker, 0, BufferKind::Input, 3 * unit, unit));
    std::string diff = tracker.compare(0, BufferKind::Output, 0, {Piece::value(size, 0, RankSet::single(0))});
    INFO(diff);
    CHECK(mentions(diff, "at offset 0 found 8192 bytes of rank(s) {0} input from offset 0, expected 16384 bytes"));
    const std::vector<Piece> got = tracker.buffer(0, BufferKind::Output).normalized(0, size);
    REQUIRE(got.size() == 3);
    CHECK(got[1].origin == 3 * unit);
    tracker.reduce(BufferRef{0, BufferKind::Output, 0}, read(tracker, 9, BufferKind::Input, 2, unit));
    diff = tracker.compare(0, BufferKind::Output, 0, {Piece::value(size, 0, RankSet::single(0))});
    CHECK(mentions(diff, "at offset 0 found 4096 corrupt bytes"));
  }
  SECTION("stale data: a copy that read before the data arrived carries what was there") {
    // Rank 1 reads its scratch (not yet filled) and only then does rank 0's data land there.
    const std::vector<DataSpan> early = read(tracker, 1, BufferKind::Scratch, 0, size);
    tracker.write(BufferRef{1, BufferKind::Scratch, 0}, read(tracker, 0, BufferKind::Input, 0, size));
    tracker.write(BufferRef{1, BufferKind::Output, 0}, early);
    const std::string diff =
        tracker.compare(1, BufferKind::Output, 0, {Piece::value(size, 0, RankSet::single(0))});
    INFO(diff);
    CHECK(mentions(diff, "found 16384 uninitialized bytes"));
    // A reduction onto uninitialized bytes is corrupt, whatever lands later.
    tracker.reduce(BufferRef{2, BufferKind::Output, 0}, read(tracker, 3, BufferKind::Input, 0, size));
    CHECK(mentions(tracker.compare(2, BufferKind::Output, 0, {Piece::value(size, 0, RankSet::single(3))}),
                   "corrupt"));
  }
  SECTION("an all-gather layout: every block in its place, then one block swapped") {
    std::vector<Piece> expected;
    const std::uint64_t block = 16;
    DataTracker t(ranks, block, block * ranks, 0, false);
    for (int j = 0; j < ranks; ++j) {
      expected.push_back(Piece::value(block, 0, RankSet::single(j)));
      t.write(BufferRef{5, BufferKind::Output, block * static_cast<std::uint64_t>(j)},
              read(t, j, BufferKind::Input, 0, block));
    }
    CHECK(t.compare(5, BufferKind::Output, 0, expected) == "");
    CHECK(t.buffer(5, BufferKind::Output).span_count() == 1);  // one run of 1024 blocks
    t.write(BufferRef{5, BufferKind::Output, block * 1000}, read(t, 1001, BufferKind::Input, 0, block));
    const std::string diff = t.compare(5, BufferKind::Output, 0, expected);
    INFO(diff);
    CHECK(mentions(diff, "at offset 16000 found 16 bytes of rank(s) {1001} input from offset 0, expected 16 "
                         "bytes of rank(s) {1000}"));
    // A buffer shorter than what is expected fails, never reads beyond it.
    expected.push_back(Piece::value(block, 0, RankSet::single(0)));
    CHECK_FALSE(t.compare(6, BufferKind::Output, 0, expected).empty());
  }
}

TEST_CASE("expected outputs as spans: AlltoAllV block starts in any order of ranks, and compare on spans",
          "[data_check]") {
  CollectiveSpec spec;
  spec.op = CollOp::AlltoAll;
  spec.ranks = 6;
  spec.dtype = DataType::Int32;
  std::mt19937 rng(11);
  spec.alltoallv_counts.assign(6, std::vector<std::uint64_t>(6));
  for (auto& row : spec.alltoallv_counts) {
    for (auto& n : row) n = rng() % 5;  // zeros included: a rank sending nothing to a peer
  }
  RankSetTable sets(spec.ranks);
  ExpectedOutputs expected(spec, sets);
  // Backwards, repeated and skipping: the running starts must follow.
  for (const int rank : {3, 1, 1, 5, 0, 4, 2}) {
    std::vector<DataSpan> want;  // rank j's block for `rank`, from where j's blocks for lower ranks end
    for (int j = 0; j < spec.ranks; ++j) {
      std::uint64_t start = 0;
      for (int k = 0; k < rank; ++k) start += spec.alltoallv_counts[j][k];
      const std::uint64_t n = spec.alltoallv_counts[j][rank];
      if (n > 0) want.push_back(DataSpan{n * 4, start * 4, static_cast<RankSetTable::Id>(j), 0, 1, Piece::State::Value});
    }
    const std::vector<DataSpan>& got = expected.of(rank);
    INFO("rank " << rank);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].unit == want[i].unit);
      CHECK(got[i].origin == want[i].origin);
      CHECK(got[i].from == want[i].from);
      CHECK(got[i].count == 1);
    }
  }

  // An AllGather's expectation is one run; the tracker compares it element by element.
  CollectiveSpec gather;
  gather.op = CollOp::AllGather;
  gather.ranks = 300;
  gather.count = 4;
  gather.dtype = DataType::Fp16;
  const std::uint64_t block = 8;
  DataTracker t(gather.ranks, block, block * 300, 0, false);
  ExpectedOutputs gathered(gather, t.sets());
  REQUIRE(gathered.of(7).size() == 1);
  CHECK(gathered.of(7)[0].count == 300);
  for (int j = 299; j >= 0; --j) {  // last block first: the buffer ends as one run all the same
    t.write(BufferRef{7, BufferKind::Output, block * static_cast<std::uint64_t>(j)},
            read(t, j, BufferKind::Input, 0, block));
  }
  CHECK(t.compare(7, BufferKind::Output, 0, gathered.of(7)) == "");
  t.write(BufferRef{7, BufferKind::Output, block * 200}, read(t, 201, BufferKind::Input, 0, block));
  CHECK(t.compare(7, BufferKind::Output, 0, gathered.of(7)) ==
        "at offset 1600 found 8 bytes of rank(s) {201} input from offset 0, expected 8 bytes of rank(s) {200} "
        "input from offset 0");
  CHECK_FALSE(t.compare(8, BufferKind::Output, 0, gathered.of(8)).empty());  // nothing written there
}

// One platform per TEST_CASE (SystemC elaborates once per process); 72 ranks
// are two 64-bit words of ranks.
namespace {
constexpr int kLevel1Ranks = 72;
std::vector<Task> keep(const TaskGraph& g, TaskId id) { return {g.task(id)}; }
}  // namespace

TEST_CASE("on 72 ranks an NHR all_reduce missing a rank or counting one twice fails the check",
          "[data_check][level1]") {
  const int ranks = kLevel1Ranks;
  Platform platform(one_npu_cluster(ranks));
  Scheduler sched(platform);
  {
    const CollectiveSpec spec = spec_of(CollOp::AllReduce, ranks, 72 * 64);
    const TaskGraph graph = build_level1(spec, Level1Algo::NHR);
    CHECK(check_run(sched, graph, spec).empty());  // the control
    bool done = false;
    const TaskGraph missing = edited(graph, [&](const TaskGraph& g, TaskId id) {
      if (!done && g.task(id).kind == TaskKind::ReduceInline) {
        done = true;
        return std::vector<Task>{};
      }
      return keep(g, id);
    });
    REQUIRE(done);
    std::string diff = check_run(sched, missing, spec);
    INFO(diff);
    CHECK_FALSE(diff.empty());
    done = false;
    const TaskGraph twice = edited(graph, [&](const TaskGraph& g, TaskId id) {
      if (!done && g.task(id).kind == TaskKind::ReduceInline) {
        done = true;
        return std::vector<Task>{g.task(id), g.task(id)};
      }
      return keep(g, id);
    });
    REQUIRE(done);
    diff = check_run(sched, twice, spec);
    INFO(diff);
    CHECK(mentions(diff, "corrupt"));
  }
}

TEST_CASE("a copy beyond its buffer is reported, the first to start of several, and the others still land",
          "[data_check]") {
  Platform platform(one_npu_cluster(2));
  Scheduler sched(platform);
  const std::uint64_t size = 1 << 20;
  // Each thread: a good copy of `lead` bytes of its input into its output,
  // then a copy whose end passes the output's (rank 0) or the input's (rank 1).
  auto graph_with = [&](std::uint64_t lead0, std::uint64_t lead1) {
    TaskGraph g;
    const ThreadId t0 = g.add_thread(0, "Main");
    const ThreadId t1 = g.add_thread(1, "Main");
    g.copy(t0, BufferRef{0, BufferKind::Input, 0}, BufferRef{0, BufferKind::Output, 0}, lead0, "good 0");
    g.copy(t0, BufferRef{0, BufferKind::Input, 0}, BufferRef{0, BufferKind::Output, size - 100}, 4096, "past output");
    g.copy(t1, BufferRef{1, BufferKind::Input, 0}, BufferRef{1, BufferKind::Output, 0}, lead1, "good 1");
    g.copy(t1, BufferRef{1, BufferKind::Input, size - 10}, BufferRef{1, BufferKind::Output, 0}, 4096, "past input");
    return g;
  };
  {
    DataTracker tracker(2, size, size, 0, false);
    const RunResult r = sched.run(graph_with(size / 2, 4096), &tracker);  // rank 1 reaches its bad copy first
    INFO(r.check_error);
    CHECK(mentions(r.check_error, "rank 1 thread 'Main' task #1"));
    CHECK(mentions(r.check_error, "past input"));
    CHECK(mentions(r.check_error, "rank 1 input [1048566, 1052662) overruns the buffer of 1048576 bytes"));
    // The good copies landed; the bad ones moved nothing.
    CHECK(tracker.compare(0, BufferKind::Output, 0, {Piece::value(size / 2, 0, RankSet::single(0)),
                                                    Piece{size / 2, Piece::State::Uninitialized, 0, {}}}) == "");
    CHECK(tracker.compare(1, BufferKind::Output, 0, {Piece::value(4096, 0, RankSet::single(1)),
                                                    Piece{size - 4096, Piece::State::Uninitialized, 0, {}}}) == "");
  }
  {
    DataTracker tracker(2, size, size, 0, false);
    const RunResult r = sched.run(graph_with(4096, size / 2), &tracker);  // now rank 0's
    INFO(r.check_error);
    CHECK(mentions(r.check_error, "rank 0 thread 'Main' task #1"));
    CHECK(mentions(r.check_error, "rank 0 output [1048476, 1052572) overruns the buffer of 1048576 bytes"));
  }
}

TEST_CASE("on 72 ranks a ring all_gather with a copy from a wrong offset or a copy missing fails the check",
          "[data_check][level1]") {
  const int ranks = kLevel1Ranks;
  Platform platform(one_npu_cluster(ranks));
  Scheduler sched(platform);
  {
    const CollectiveSpec spec = spec_of(CollOp::AllGather, ranks, 256);
    const TaskGraph graph = build_level1(spec, Level1Algo::Ring);
    CHECK(check_run(sched, graph, spec).empty());
    bool done = false;
    const TaskGraph shifted = edited(graph, [&](const TaskGraph& g, TaskId id) {
      Task t = g.task(id);
      if (!done && t.kind == TaskKind::Memcpy && t.src.offset() >= 2) {
        done = true;
        t.src.set_offset(t.src.offset() - 2);  // one fp16 element off
      }
      return std::vector<Task>{t};
    });
    REQUIRE(done);
    std::string diff = check_run(sched, shifted, spec);
    INFO(diff);
    CHECK_FALSE(diff.empty());
    int seen = 0;
    const TaskGraph dropped = edited(graph, [&](const TaskGraph& g, TaskId id) {
      if (g.task(id).kind == TaskKind::Memcpy && ++seen == 100) return std::vector<Task>{};
      return keep(g, id);
    });
    REQUIRE(seen >= 100);
    diff = check_run(sched, dropped, spec);
    INFO(diff);
    CHECK_FALSE(diff.empty());
  }
}

TEST_CASE("on 72 ranks a ring reduce_scatter whose receiver does not wait for the data reads stale data",
          "[data_check][level1]") {
  const int ranks = kLevel1Ranks;
  Platform platform(one_npu_cluster(ranks));
  Scheduler sched(platform);
  // 128 KiB per block: a write takes microseconds to land.
  CollectiveSpec spec = spec_of(CollOp::ReduceScatter, ranks, 64 * 1024);
  spec.buffer_bytes = 4 << 20;  // several loops through the HCCL buffer
  const TaskGraph graph = build_level1(spec, Level1Algo::Ring);
  CHECK(check_run(sched, graph, spec).empty());  // the control
  // Rank 6's first "done" wait and rank 5's record for it removed (as a pair,
  // so no notify is left set): rank 6 reduces its CCL_OUT before rank 5's
  // write has landed there.
  auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::string label;
  for (TaskId id = 0; id < graph.tasks().size() && label.empty(); ++id) {
    const Task& t = graph.task(id);
    if (t.kind == TaskKind::NotifyWait && graph.rank_of(id) == 6 && ends_with(graph.label(t), " done")) label = graph.label(t);
  }
  REQUIRE_FALSE(label.empty());
  bool wait_dropped = false, record_dropped = false;
  const TaskGraph unsynced = edited(graph, [&](const TaskGraph& g, TaskId id) {
    const Task& t = g.task(id);
    if (g.label(t) == label && t.kind == TaskKind::NotifyWait && g.rank_of(id) == 6 && !wait_dropped) {
      wait_dropped = true;
      return std::vector<Task>{};
    }
    if (g.label(t) == label && t.kind == TaskKind::NotifyRecord && g.rank_of(id) == 5 && t.peer == 6 &&
        !record_dropped) {
      record_dropped = true;
      return std::vector<Task>{};
    }
    return keep(g, id);
  });
  REQUIRE(wait_dropped);
  REQUIRE(record_dropped);
  const std::string diff = check_run(sched, unsynced, spec);
  INFO(diff);
  CHECK(diff.rfind("rank ", 0) == 0);  // finished, with a wrong output
  CHECK(mentions(diff, "corrupt"));    // a reduction of bytes that had not arrived
  // The copies are replayed in batches: a copy read in one batch and landed
  // in the next, or batches of one event, give the same verdicts.
  for (const std::size_t batch : {1, 2, 7}) {
    INFO("batch " << batch);
    sched.check_batch(batch);
    CHECK(check_run(sched, graph, spec).empty());
    CHECK(check_run(sched, unsynced, spec) == diff);
  }
}

TEST_CASE("a checked run that frees its graph while compiling finds what a run keeping it finds",
          "[data_check][release]") {
  const int ranks = 8;
  Platform platform(one_npu_cluster(ranks));
  Scheduler sched(platform);
  for (const CollOp op : {CollOp::AllGather, CollOp::ReduceScatter}) {
    const CollectiveSpec spec = spec_of(op, ranks, 4096);
    const TaskGraph graph = build_level1(spec, Level1Algo::Ring);
    CHECK(check_run(sched, graph, spec, true).empty());
    bool done = false;
    const TaskGraph shifted = edited(graph, [&](const TaskGraph& g, TaskId id) {
      Task t = g.task(id);
      if (!done && (t.kind == TaskKind::Memcpy || t.kind == TaskKind::ReduceInline) && t.src.offset() >= 2) {
        done = true;
        t.src.set_offset(t.src.offset() - 2);  // one fp16 element off
      }
      return std::vector<Task>{t};
    });
    REQUIRE(done);
    const std::string kept = check_run(sched, shifted, spec);
    INFO(kept);
    CHECK_FALSE(kept.empty());
    CHECK(check_run(sched, shifted, spec, true) == kept);
  }

  // A copy beyond its buffer is named from the rebuilt graph.
  const std::uint64_t size = 1 << 20;
  auto past_output = [&] {
    TaskGraph g;
    const ThreadId t0 = g.add_thread(0, "Main");
    g.copy(t0, BufferRef{0, BufferKind::Input, 0}, BufferRef{0, BufferKind::Output, 0}, 4096, "good");
    g.copy(t0, BufferRef{0, BufferKind::Input, 0}, BufferRef{0, BufferKind::Output, size - 100}, 4096, "past output");
    return g;
  };
  std::string kept;
  {
    DataTracker tracker(ranks, size, size, 0, false);
    kept = sched.run(past_output(), &tracker).check_error;
  }
  int rebuilt = 0;
  DataTracker tracker(ranks, size, size, 0, false);
  const RunResult r = sched.run_releasing(past_output(), [&] {
    ++rebuilt;
    return past_output();
  }, &tracker);
  CHECK(rebuilt == 1);
  CHECK(mentions(r.check_error, "rank 0 output [1048476, 1052572) overruns the buffer of 1048576 bytes"));
  CHECK(r.check_error == kept);
  CHECK(tracker.compare(0, BufferKind::Output, 0, {Piece::value(4096, 0, RankSet::single(0)),
                                                  Piece{size - 4096, Piece::State::Uninitialized, 0, {}}}) == "");
}

// A checked run keeps each copy's ends in 16 bytes (Scheduler::CopyEnds):
// ranks below 2^17 and offsets below 32 TiB. A run with larger buffers is
// refused before it starts, naming the limit and --no-check; one whose
// buffers are exactly 32 TiB runs (the buffers are symbolic: no memory).
TEST_CASE("a checked run with buffers beyond 32 TiB is refused by name and one of 32 TiB runs", "[data_check]") {
  const int ranks = 2;
  Platform platform(one_npu_cluster(ranks));
  Scheduler sched(platform);
  const CollectiveSpec spec = spec_of(CollOp::AllGather, ranks, 4096);
  const TaskGraph graph = build_level1(spec, Level1Algo::Ring);
  const std::uint64_t limit = std::uint64_t{1} << 45;
  DataTracker fits(ranks, limit, limit, limit, false);
  const RunResult r = sched.run(graph, &fits);
  CHECK(r.failure.empty());
  CHECK(r.check_error.empty());
  DataTracker beyond(ranks, limit, limit + 1, limit, false);
  CHECK_THROWS_WITH(sched.run(graph, &beyond), Catch::Matchers::Contains("buffers of at most 32 TiB") &&
                                                   Catch::Matchers::Contains("use --no-check"));
}

// A copy's read is replayed when the copy lands (Scheduler::SlotRead), or
// earlier, when another copy lands on the bytes it reads: either way it
// moves what its source held when it started. With more readers of one
// buffer than the replay keeps pending (16), the rest read at once.
TEST_CASE("a copy lands what its source held when it started, though another copy overwrote it meanwhile",
          "[data_check]") {
  ClusterLayout layout;
  layout.name = "data-check-test";
  layout.kind = "a2";
  layout.servers.push_back(ServerLayout{"s0", 8, 0});
  Platform platform(make_cluster(layout, load_profile(std::string(HCCLSIM_SOURCE_DIR) + "/configs/profiles/a2-910b.json")));
  Scheduler sched(platform);
  const std::uint64_t n = 4 << 20;
  for (const int readers : {1, 20}) {
    INFO(readers << " reader(s)");
    // Rank 0's Main fills its output from its input, then lets each reader
    // (three to a peer at most) copy that output into its rank's scratch
    // and, last, lets rank 0's Side overwrite the output's first quarter
    // with other input bytes.
    const int per_rank = (readers + 6) / 7;
    auto rank_of = [](int k) { return 1 + k % 7; };
    auto place_of = [&](int k) { return static_cast<std::uint64_t>(k / 7) * n; };
    TaskGraph g;
    const ThreadId main = g.add_thread(0, "Main");
    const ThreadId side = g.add_thread(0, "Side");
    std::vector<TaskId> reads;
    g.copy(main, BufferRef{0, BufferKind::Input, 0}, BufferRef{0, BufferKind::Output, 0}, n, "fill");
    for (int k = 0; k < readers; ++k) {
      const ThreadId reader = g.add_thread(rank_of(k), "Reader" + std::to_string(k));
      g.record(main, rank_of(k), k);
      g.wait(reader, k);
      reads.push_back(g.copy(reader, BufferRef{0, BufferKind::Output, 0},
                             BufferRef{rank_of(k), BufferKind::Scratch, place_of(k)}, n, "read"));
    }
    g.record(main, 0, readers);
    g.wait(side, readers);
    const TaskId overwrite =
        g.copy(side, BufferRef{0, BufferKind::Input, n}, BufferRef{0, BufferKind::Output, 0}, n / 4, "overwrite");
    DataTracker tracker(8, 2 * n, n, static_cast<std::uint64_t>(per_rank) * n, false);
    const RunResult r = sched.run(g, &tracker);
    REQUIRE(r.failure.empty());
    REQUIRE(r.check_error.empty());
    // The case meant: every read started before the overwrite landed, which was before any read landed.
    for (const TaskId id : reads) {
      REQUIRE(r.timings[id].start <= r.timings[overwrite].start);
      REQUIRE(r.timings[overwrite].end < r.timings[id].end);
    }
    for (int k = 0; k < readers; ++k) {
      INFO("reader " << k);
      CHECK(tracker.compare(rank_of(k), BufferKind::Scratch, place_of(k), {Piece::value(n, 0, RankSet::single(0))}) ==
            "");
    }
    CHECK(tracker.compare(0, BufferKind::Output, 0,
                          {Piece::value(n / 4, n, RankSet::single(0)), Piece::value(n - n / 4, n / 4, RankSet::single(0))}) ==
          "");
  }
}

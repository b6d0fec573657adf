// `hcclsim sweep GRID.json`: a grid of topologies (with server counts), ops,
// sizes, dtypes, HCCL_ALGO strings and HCCL buffer sizes, one perf row per
// point. The grid is read strictly (unknown keys refused, errors name the
// file and JSON path); file paths in it are relative to the grid file.
//
// SystemC elaborates one platform per process, so each topology of the grid
// runs in a child process of its own (fork), which streams its rows back
// over a pipe; under MPI the points are split into contiguous blocks so that
// each process meets few topologies, and rank 0 writes every row in point
// order (docs/user-guide.md "Sweeps").
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/executors/collective.h"
#include "sim/perf/perf.h"
#include "sim/report/row_transport.h"
#include "topologies/platform.h"

namespace hcclsim {

// One platform of the grid: a topology file (with an optional profile and
// server count) or a rank table with its profile.
struct SweepTopology {
  std::string label;          // the file as the grid names it (the rank table for rank tables)
  std::string topology_file;  // resolved paths ("" when absent)
  std::string profile_file;
  std::string rank_table_file;
  int servers = -1;           // -1: as the topology says
  std::string where;          // JSON location, for errors
};

// One run_perf call: every size of one combination of the other axes.
struct SweepSeries {
  std::size_t topology = 0;
  std::string op_name;        // hccl_test's name ("alltoallv" included)
  CollOp op = CollOp::AllReduce;
  DataType dtype = DataType::Fp16;
  std::string algo;           // HCCL_ALGO text; "" = HCCL's choice
  std::optional<std::uint64_t> buffsize;  // unset: the profile's
  std::size_t first_point = 0;  // index of its first size among all points
};

struct SweepGrid {
  std::string file;
  std::vector<SweepTopology> topologies;
  std::vector<SweepSeries> series;     // topology-major, then op, dtype, algo, buffsize
  std::vector<std::uint64_t> sizes;    // every series runs every size (sizes vary fastest)
  ReduceOp reduce_op = ReduceOp::Sum;
  bool check = true;
  bool estimate = false;               // "model": "estimate": closed forms, no SystemC, no data check
  std::size_t points() const { return series.size() * sizes.size(); }
};

SweepGrid load_sweep_grid(const std::string& file);
// Loads every topology (JSON only, no SystemC) and checks that each point
// can run: sizes against dtypes and ranks, algorithms against ops. Throws
// InputError naming the grid path.
void validate_sweep_grid(const SweepGrid& grid);

struct SweepRow {
  std::size_t point = 0;
  const SweepSeries* series = nullptr;
  const SweepTopology* topology = nullptr;
  std::uint64_t size_request = 0;
  PerfRow row;
};

std::vector<std::string> sweep_csv_columns();
std::vector<std::string> sweep_csv_fields(const SweepRow& row);
nlohmann::json sweep_row_json(const SweepRow& row);

// Runs the series assigned to this process, each topology in a forked child,
// and calls on_point(point, row) as each point finishes, in increasing point
// order. A failure in a child becomes InputError (exit 2) or GraphError (1).
void run_sweep_series(const SweepGrid& grid, const std::vector<std::size_t>& series,
                      const std::function<void(std::size_t point, const PerfRow& row)>& on_point);

// Which process runs each point: contiguous blocks of series.
std::vector<int> sweep_point_owners(const SweepGrid& grid, int processes);

}  // namespace hcclsim

// `hcclsim sweep GRID.json`: one perf row per point of a grid (topologies x
// servers x ops x dtypes x algorithms x buffer sizes x sizes), as CSV or JSON.
// Under mpirun the points are spread over the processes and rank 0 writes
// the same bytes a single process writes (sim/report/sweep.h).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "sim/report/row_writer.h"
#include "sim/report/sweep.h"
#include "tools/cli_common.h"
#include "tools/command.h"

namespace hcclsim {
namespace {

class SweepCommand : public Command {
 public:
  std::string name() const override { return "sweep"; }
  std::string summary() const override {
    return "a grid of topologies, servers, ops, sizes, dtypes, algorithms and buffer sizes: one perf row per point "
           "(schema in docs/user-guide.md, Sweeps; example configs/sweeps/example.json); \"model\": \"estimate\" answers from the "
           "closed forms (configs/sweeps/capacity-estimate.json: 192 points up to 100,000 NPUs in seconds)";
  }
  bool parallel() const override { return true; }
  void declare(CommandOptions& app) override {
    app.add_option("grid", grid_file_, "grid JSON")->type_name("GRID.json")->required();
    app.add_option("--format", format_, "csv | json (default csv)")->type_name("F");
    app.add_option("--out", out_file_, "write the table to FILE instead of stdout")->type_name("FILE");
  }

  int run(CommandContext& ctx) override {
    if (format_ != "csv" && format_ != "json") {
      throw InputError("option --format", "unknown format '" + format_ + "'; expected csv or json");
    }
    const SweepGrid grid = load_sweep_grid(grid_file_);
    validate_sweep_grid(grid);
    ProcessGroup& group = *ctx.group;
    std::optional<OutputFile> out_file;
    if (ctx.root() && !out_file_.empty()) out_file.emplace("--out", out_file_);
    std::ostream& out = out_file ? out_file->stream() : *ctx.out;

    const std::vector<int> owners = sweep_point_owners(grid, group.size());
    std::vector<std::size_t> mine;
    for (std::size_t s = 0; s < grid.series.size(); ++s) {
      if (owners[grid.series[s].first_point] == group.rank()) mine.push_back(s);
    }
    Progress progress("sweep", grid.points(), ctx.root());
    JsonArrayStream json(out);
    if (ctx.root() && format_ == "csv") {
      out << join_fields(sweep_csv_columns()) << "\n";
      out.flush();
    }
    bool failed_check = false;
    OrderedGather gather(group, owners, [&](std::size_t point, const std::string& text) {
      SweepRow row;
      row.point = point;
      row.series = &grid.series[point / grid.sizes.size()];
      row.topology = &grid.topologies[row.series->topology];
      row.size_request = grid.sizes[point % grid.sizes.size()];
      row.row = deserialize_perf_row(text);
      if (format_ == "csv") {
        out << join_fields(sweep_csv_fields(row)) << "\n";
        out.flush();
      } else {
        json.add(sweep_row_json(row));
      }
      if (row.row.check.rfind("fail", 0) == 0) failed_check = true;
      progress.step("point " + std::to_string(point));
    });
    std::optional<OrderedGather::Failure> failure;
    try {
      run_sweep_series(grid, mine, [&](std::size_t point, const PerfRow& row) {
        gather.local(point, serialize_perf_row(row));
      });
      failure = gather.finish();
    } catch (const InputError& e) {
      failure = gather.fail(2, e.what());
      if (!failure) return 2;
    } catch (const GraphError& e) {
      failure = gather.fail(1, e.what());
      if (!failure) return 1;
    } catch (const std::exception& e) {
      failure = gather.fail(2, e.what());
      if (!failure) return 2;
    }
    progress.done();
    if (failure) {
      if (failure->exit_code == 2) throw InputError("", failure->message);
      throw GraphError(failure->message);
    }
    if (!ctx.root()) return 0;
    if (format_ == "json") json.finish();
    if (out_file) out_file->close();
    std::fprintf(stderr, "sweep: %zu points (%zu topologies) in %.2f s on %d process%s%s\n", grid.points(),
                 grid.topologies.size(), progress.seconds(), group.size(), group.size() == 1 ? "" : "es",
                 out_file ? (", written to " + out_file_).c_str() : "");
    return failed_check ? 1 : 0;
  }

 private:
  static std::string join_fields(const std::vector<std::string>& fields) {
    std::string line;
    for (std::size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
    return line;
  }
  std::string grid_file_;
  std::string format_ = "csv";
  std::string out_file_;
};

}  // namespace

std::unique_ptr<Command> make_sweep_command() { return std::make_unique<SweepCommand>(); }

}  // namespace hcclsim

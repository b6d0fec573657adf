#include "sim/program/program_json.h"

#include <climits>
#include <filesystem>
#include <limits>
#include <regex>

#include "base/json_reader.h"

namespace hcclsim {

namespace {

// A program's transfer size: at most what the task graph addresses (32 TiB),
// so that no transfer is too large to time (a size near 2^64 was free).
std::uint64_t transfer_bytes(ObjectReader& r) {
  const std::uint64_t bytes = r.required_size("bytes");
  constexpr std::uint64_t kMax = std::uint64_t{1} << 45;
  if (bytes > kMax) r.location_of("bytes").fail("a transfer of " + std::to_string(bytes) + " bytes; expected at most 32 TiB");
  return bytes;
}


using nlohmann::json;

void check(HcclResult r, const Program& program, const JsonLocation& where) {
  if (r != HCCL_SUCCESS) where.fail(program.last_error());
}

// Ranks given as a list of integers.
std::vector<int> read_ranks(ObjectReader& r, const std::string& key) {
  std::vector<int> out;
  const json& arr = r.required_array(key);
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const JsonLocation where = r.location_of(key).index(i);
    if (!arr[i].is_number_integer()) where.fail("expected a rank number");
    // A rank is an int: anything outside it is refused here, not truncated.
    if (arr[i].is_number_unsigned() ? arr[i].get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX)
                                    : (arr[i].get<std::int64_t>() < INT_MIN || arr[i].get<std::int64_t>() > INT_MAX)) {
      where.fail("rank " + arr[i].dump() + " is out of range");
    }
    out.push_back(arr[i].get<int>());
  }
  return out;
}

// Thread names per (domain, rank): a group name -> its handles.
using ThreadNames = std::map<std::tuple<int, int, std::string>, std::vector<ThreadHandle>>;

ThreadHandle resolve_thread(const ThreadNames& names, int domain, int rank, const std::string& ref,
                            const JsonLocation& where) {
  static const std::regex form(R"(([A-Za-z_][A-Za-z0-9_]*)(\[(\d+)\])?)");
  std::smatch m;
  if (!std::regex_match(ref, m, form)) {
    where.fail("expected a thread name like \"t\" or \"t[2]\", got \"" + printable(ref) + "\"");
  }
  const auto found = names.find({domain, rank, m[1].str()});
  if (found == names.end()) {
    where.fail("no thread named '" + m[1].str() + "' on rank " + std::to_string(rank) + " of domain " +
               std::to_string(domain));
  }
  // At most 9 digits parse without overflow; a longer index is past any group anyway.
  const std::size_t index =
      !m[3].matched ? 0 : m[3].length() > 9 ? found->second.size() : std::stoul(m[3].str());
  if (index >= found->second.size()) {
    where.fail("thread group '" + m[1].str() + "' has " + std::to_string(found->second.size()) + " threads");
  }
  return found->second[index];
}

CoreKind core_of(const std::string& key) { return key == "aic" ? CoreKind::Aic : CoreKind::Aiv; }

// The parameters of a moe_dispatch / moe_combine step, with the defaults of
// `hcclsim moe`; `ep` defaults to the kernel's rank count and must equal it.
// A routing file is found relative to the program file.
MoeParams read_moe_params(ObjectReader& step, const std::vector<int>& ranks, const JsonLocation& ranks_loc,
                          const std::string& program_file, int npus) {
  MoeParams p;
  p.ep = static_cast<int>(ranks.size());
  if (step.has("ep")) {
    const int ep = step.required_int32("ep");
    if (ep != p.ep) {
      step.location_of("ep").fail("ep " + std::to_string(ep) + " but the kernel runs on " + std::to_string(p.ep) +
                                  " ranks (" + ranks_loc.path + "); an MoE call runs on the kernel's ranks, so ep must "
                                  "equal their count");
    }
  }
  p.tokens = step.required_int32("tokens");
  p.hidden = step.required_int32("hidden");
  p.topk = step.required_int32("topk");
  p.experts = step.required_int32("experts");
  p.mode = step.choice_or("mode", {"normal", "low_latency"}, "normal") == "normal" ? MoeMode::Normal : MoeMode::LowLatency;
  p.int8 = step.choice_or("dtype", {"int8", "bf16"}, "int8") == "int8";
  p.routing = step.string_or("routing", "uniform");
  p.seed = static_cast<std::uint64_t>(step.int_in_or("seed", 0, std::numeric_limits<std::int64_t>::max(), 1));
  if (const auto problem = moe_params_problem(p, npus)) step.location_of(problem->param).fail(problem->why);
  if (p.routing.rfind("file:", 0) == 0) {
    const std::filesystem::path routing_file(p.routing.substr(5));
    const std::filesystem::path dir = std::filesystem::path(program_file).parent_path();
    if (routing_file.is_relative() && !dir.empty()) p.routing = "file:" + (dir / routing_file).string();
  }
  return p;
}

}  // namespace

LoadedProgram load_program(const std::string& file, Program& program) {
  const json doc = load_json_file(file);
  ObjectReader root(doc, JsonLocation{file});
  LoadedProgram loaded;
  loaded.name = printable(root.required_string("name"));  // printed in headings: no control characters
  root.optional_string("description");

  std::map<int, std::vector<int>> domains;
  {
    const json& arr = root.required_array("domains");
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const JsonLocation loc = root.location_of("domains").index(i);
      ObjectReader d(arr[i], loc);
      const int id = static_cast<int>(d.required_int_in("id", 0, 1 << 20));
      const std::vector<int> ranks = read_ranks(d, "ranks");
      d.finish();
      check(program.add_domain(id, ranks), program, loc);
      domains[id] = ranks;
    }
  }

  // Host blocks: declare every thread first so that ops may name threads of other ranks.
  ThreadNames names;
  struct HostBlock {
    int domain;
    std::vector<int> ranks;
    const json* ops;
    JsonLocation ops_loc;
  };
  std::vector<HostBlock> blocks;
  if (const json* host = root.optional_value("host")) {
    if (!host->is_array()) root.location_of("host").fail("expected an array");
    for (std::size_t b = 0; b < host->size(); ++b) {
      const JsonLocation loc = root.location_of("host").index(b);
      ObjectReader block((*host)[b], loc);
      const int domain = block.required_int32("domain");
      if (!domains.count(domain)) block.location_of("domain").fail("domain " + std::to_string(domain) + " is not defined");
      const std::vector<int> ranks = read_ranks(block, "ranks");
      const json& threads = block.required_array("threads");
      for (int rank : ranks) {
        HcclComm comm = program.comm(domain, rank);
        if (comm == nullptr) block.location_of("ranks").fail("rank " + std::to_string(rank) + " is not in domain " + std::to_string(domain));
        for (std::size_t t = 0; t < threads.size(); ++t) {
          const JsonLocation tloc = block.location_of("threads").index(t);
          ObjectReader decl(threads[t], tloc);
          const std::string name = decl.required_string("name");
          // References ("t", "t[2]") can only name identifiers; anything else could never be used.
          static const std::regex identifier(R"([A-Za-z_][A-Za-z0-9_]*)");
          if (!std::regex_match(name, identifier)) {
            decl.location_of("name").fail("thread name \"" + printable(name) +
                                          "\" is not an identifier (letters, digits, '_', not starting with a digit)");
          }
          const std::string engine_name = decl.required_string("engine");
          const auto engine = parse_comm_engine(engine_name);
          if (!engine) decl.location_of("engine").fail("unknown engine '" + engine_name + "'; expected CPU, CPU_TS, AICPU, AICPU_TS, AIV or CCU");
          std::vector<ThreadHandle> handles;
          if (decl.has("export")) {
            const std::string source = decl.required_string("export");
            const auto src = names.find({domain, rank, source});
            if (src == names.end()) decl.location_of("export").fail("no thread group named '" + source + "' to export");
            handles.resize(src->second.size());
            check(program.thread_export(comm, static_cast<std::uint32_t>(src->second.size()), src->second.data(), *engine,
                                        handles.data()),
                  program, tloc);
          } else {
            const std::string how = decl.required_choice("acquire", {"threads", "with_stream"});
            const auto count = static_cast<std::uint32_t>(decl.int_in_or("count", 0, 1 << 16, 1));
            handles.resize(count);
            if (how == "threads") {
              const auto notifies = static_cast<std::uint32_t>(decl.required_int_in("notifies_per_thread", 0, 1 << 16));
              check(program.thread_acquire(comm, *engine, count, notifies, handles.data()), program, tloc);
            } else {
              check(program.thread_acquire_with_stream(comm, *engine, count, handles.data()), program, tloc);
            }
          }
          decl.finish();
          if (!names.emplace(std::tuple{domain, rank, name}, handles).second) {
            decl.location_of("name").fail("thread group '" + name + "' is declared twice on rank " + std::to_string(rank));
          }
        }
      }
      blocks.push_back(HostBlock{domain, ranks, &block.required_array("ops"), block.location_of("ops")});
      block.finish();
    }
  }
  for (const HostBlock& block : blocks) {
    const auto& members = domains.at(block.domain);
    for (int rank : block.ranks) {
      for (std::size_t i = 0; i < block.ops->size(); ++i) {
        const JsonLocation loc = block.ops_loc.index(i);
        ObjectReader op((*block.ops)[i], loc);
        const ThreadHandle t = resolve_thread(names, block.domain, rank, op.required_string("thread"), op.location_of("thread"));
        const std::string kind = op.required_choice(
            "op", {"notify_record", "notify_wait", "channel_notify_wait", "local_copy", "local_reduce", "write", "read",
                   "write_with_notify", "channel_notify_record", "compute"});
        auto notify = [&] { return static_cast<std::uint32_t>(op.required_int_in("notify", 0, 1 << 20)); };
        auto peer = [&] { return static_cast<int>(op.required_int_in("peer", 0, static_cast<std::int64_t>(members.size()) - 1)); };
        auto remote = [&](int peer_rank) {
          return resolve_thread(names, block.domain, members[static_cast<std::size_t>(peer_rank)],
                                op.required_string("remote_thread"), op.location_of("remote_thread"));
        };
        HcclResult r = HCCL_SUCCESS;
        if (kind == "notify_record") {
          const ThreadHandle dst = resolve_thread(names, block.domain, rank, op.required_string("dst_thread"), op.location_of("dst_thread"));
          r = program.notify_record(t, dst, notify());
        } else if (kind == "notify_wait" || kind == "channel_notify_wait") {
          const std::uint32_t n = notify();
          r = program.notify_wait(t, n, op.time_or("timeout", Time{}));
        } else if (kind == "local_copy") {
          r = program.local_copy(t, transfer_bytes(op));
        } else if (kind == "local_reduce") {
          r = program.local_reduce(t, transfer_bytes(op));
        } else if (kind == "write" || kind == "read") {
          const int p = peer();
          const std::uint64_t bytes = transfer_bytes(op);
          r = kind == "write" ? program.write(t, p, bytes) : program.read(t, p, bytes);
        } else if (kind == "write_with_notify") {
          const int p = peer();
          const std::uint64_t bytes = transfer_bytes(op);
          const ThreadHandle rt = remote(p);
          r = program.write_with_notify(t, p, bytes, rt, notify());
        } else if (kind == "channel_notify_record") {
          const int p = peer();
          const ThreadHandle rt = remote(p);
          r = program.channel_notify_record(t, p, rt, notify());
        } else {
          const std::string unit = op.required_choice("unit", {"aic", "aiv"});
          const int cores = op.required_int32("cores");
          r = program.thread_compute(t, core_of(unit), cores, op.required_time("duration"));
        }
        op.finish();
        check(r, program, loc);
      }
    }
  }

  // Kernels: per rank, the AIC and AIV step lists.
  if (const json* kernels = root.optional_value("kernels")) {
    if (!kernels->is_array()) root.location_of("kernels").fail("expected an array");
    for (std::size_t k = 0; k < kernels->size(); ++k) {
      const JsonLocation loc = root.location_of("kernels").index(k);
      ObjectReader kernel((*kernels)[k], loc);
      const std::vector<int> ranks = read_ranks(kernel, "ranks");
      std::vector<std::pair<std::string, const json*>> lists;
      for (const std::string core : {"aic", "aiv"}) {
        if (kernel.has(core)) lists.push_back({core, &kernel.required_array(core)});
      }
      if (lists.empty()) loc.fail("a kernel needs an \"aic\" or an \"aiv\" step list");
      kernel.finish();
      for (int rank : ranks) {
        std::map<std::pair<int, std::string>, HcclHandle> handles;  // (context, name)
        std::map<int, int> domain_of_context;
        for (const auto& [core_key, steps] : lists) {
          const CoreKind core = core_of(core_key);
          for (std::size_t i = 0; i < steps->size(); ++i) {
            const JsonLocation sloc = loc.key(core_key).index(i);
            ObjectReader step((*steps)[i], sloc);
            const std::string op = step.required_choice(
                "op", {"init", "set_tiling", "prepare", "commit", "wait", "query", "inter_group_sync", "iterate",
                       "finalize", "matmul", "vector", "moe_dispatch", "moe_combine", "cross_core_set",
                       "cross_core_wait"});
            auto context = [&] { return step.required_int32("context"); };
            auto handle = [&](int ctx, const std::string& key) {
              const std::string name = step.required_string(key);
              const auto found = handles.find({ctx, name});
              if (found == handles.end()) {
                step.location_of(key).fail("no handle named '" + name + "' was prepared on context " + std::to_string(ctx));
              }
              return found->second;
            };
            HcclResult r = HCCL_SUCCESS;
            if (op == "init") {
              const int ctx = context();
              const int domain = step.required_int32("domain");
              r = program.hccl_init(rank, core, ctx, domain);
              domain_of_context[ctx] = domain;
            } else if (op == "set_tiling") {
              r = program.hccl_set_tiling(rank, core, context());
            } else if (op == "prepare") {
              const int ctx = context();
              Program::PrepareArgs args;
              const std::string coll = step.required_choice(
                  "collective", {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "batch_write"});
              const std::string name = printable(step.required_string("handle"));  // printed in the table
              args.repeat = static_cast<int>(step.int_in_or("repeat", 1, 1 << 20, 1));
              if (coll == "batch_write") {
                args.batch_write = true;
                const json& writes = step.required_array("writes");
                for (std::size_t w = 0; w < writes.size(); ++w) {
                  ObjectReader item(writes[w], step.location_of("writes").index(w));
                  args.batch.push_back({item.required_int32("peer"), transfer_bytes(item)});
                  item.finish();
                }
              } else {
                args.alltoallv = coll == "alltoallv";
                args.op = args.alltoallv ? CollOp::AlltoAll : *parse_coll_op(coll);
                const std::string dtype = step.required_choice("dtype", data_type_names());
                args.dtype = *parse_data_type(dtype);
                args.reduce_op = *parse_reduce_op(step.choice_or("reduce_op", reduce_op_names(), "sum"));
                args.stride_count = static_cast<std::uint64_t>(step.int_in_or("stride_count", 0, kMaxProgramDimension, 0));
                if (args.alltoallv) {
                  const json& counts = step.required_array("send_counts");
                  for (std::size_t c = 0; c < counts.size(); ++c) {
                    if (!counts[c].is_number_unsigned()) step.location_of("send_counts").index(c).fail("expected a count of elements");
                    args.send_counts.push_back(counts[c].get<std::uint64_t>());
                  }
                } else {
                  args.count = static_cast<std::uint64_t>(step.required_int_in("count", 0, kMaxProgramDimension));
                }
              }
              const HcclHandle h = program.hccl_prepare(rank, core, ctx, args, &r);
              if (r == HCCL_SUCCESS) {
                if (!handles.emplace(std::pair{ctx, name}, h).second) step.location_of("handle").fail("handle name '" + name + "' is used twice");
                loaded.handle_names[{domain_of_context[ctx], h}] = name;
              }
            } else if (op == "commit" || op == "wait" || op == "query") {
              const int ctx = context();
              const HcclHandle h = handle(ctx, "handle");
              r = op == "commit" ? program.hccl_commit(rank, core, ctx, h)
                  : op == "wait" ? program.hccl_wait(rank, core, ctx, h)
                                 : program.hccl_query(rank, core, ctx, h);
            } else if (op == "inter_group_sync") {
              const int ctx = context();
              const int src = step.required_int32("src_group");
              r = program.hccl_inter_group_sync(rank, core, ctx, src, handle(src, "src_handle"));
            } else if (op == "iterate") {
              r = program.hccl_iterate(rank, core, context());
            } else if (op == "finalize") {
              r = program.hccl_finalize(rank, core, context());
            } else if (op == "matmul") {
              if (core != CoreKind::Aic) step.location_of("op").fail("a matmul runs on AIC cores: put it in the \"aic\" list");
              r = program.kernel_matmul(rank, static_cast<std::uint64_t>(step.required_int_in("m", 1, kMaxProgramDimension)),
                                        static_cast<std::uint64_t>(step.required_int_in("n", 1, kMaxProgramDimension)),
                                        static_cast<std::uint64_t>(step.required_int_in("k", 1, kMaxProgramDimension)),
                                        step.required_int32("cores"));
            } else if (op == "moe_dispatch" || op == "moe_combine") {
              if (core != CoreKind::Aiv) {
                step.location_of("op").fail("an MoE call runs on the AIV cores: put it in the \"aiv\" list");
              }
              const MoeParams p = read_moe_params(step, ranks, loc.key("ranks"), file, program.ranks());
              const auto name = step.optional_string("name");
              std::size_t call = 0;
              r = program.kernel_moe(rank, ranks, op == "moe_dispatch" ? MoePhase::Dispatch : MoePhase::Combine, p, &call);
              if (r == HCCL_SUCCESS && name) loaded.moe_names.emplace(call, printable(*name));
            } else if (op == "cross_core_set" || op == "cross_core_wait") {
              const int flag = static_cast<int>(step.required_int_in("flag", 0, Program::kCrossCoreFlags - 1));
              r = op == "cross_core_set" ? program.kernel_cross_core_set(rank, core, flag)
                                         : program.kernel_cross_core_wait(rank, core, flag);
            } else {
              if (core != CoreKind::Aiv) step.location_of("op").fail("a vector op runs on AIV cores: put it in the \"aiv\" list");
              r = program.kernel_vector(rank, transfer_bytes(step), step.required_int32("cores"));
            }
            step.finish();
            check(r, program, sloc);
          }
        }
      }
    }
  }
  root.finish();
  return loaded;
}

}  // namespace hcclsim

#include "sim/trace.h"

#include <nlohmann/json.hpp>

namespace hcclsim {

namespace {
// Microseconds with picosecond precision, as a JSON number written exactly.
std::string ts(Time t) { return format_us(t, 6); }

std::string link_label(Platform& platform, const Task& t) {
  if (t.bytes == 0) return {};
  std::string label;
  for (Channel* ch : platform.route(t.src.rank, t.dst.rank)) {
    if (!label.empty()) label += " | ";
    label += ch->label();
  }
  return label;
}
}  // namespace

int TraceWriter::track(int rank, const std::string& name) {
  auto found = tracks_.find({rank, name});
  if (found != tracks_.end()) return found->second;
  const int tid = tracks_per_rank_[rank]++;
  tracks_.emplace(std::pair{rank, name}, tid);
  nlohmann::json meta{{"ph", "M"}, {"name", "thread_name"}, {"pid", rank}, {"tid", tid}, {"args", {{"name", name}}}};
  events_.push_back(meta.dump());
  nlohmann::json order{{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", rank}, {"tid", tid},
                       {"args", {{"sort_index", tid}}}};
  events_.push_back(order.dump());
  if (tid == 0) {
    nlohmann::json proc{{"ph", "M"}, {"name", "process_name"}, {"pid", rank}, {"tid", 0},
                        {"args", {{"name", "rank " + std::to_string(rank)}}}};
    events_.push_back(proc.dump());
  }
  return tid;
}

void TraceWriter::add_run(const TaskGraph& graph, const RunResult& result, Platform& platform,
                          const std::string& run_label) {
  for (TaskId id = 0; id < graph.tasks().size(); ++id) {
    const TaskTiming& timing = result.timings[id];
    if (!timing.started) continue;
    const Task& t = graph.task(id);
    const int rank = graph.rank_of(id);
    const int tid = track(rank, graph.thread(t.thread).name);
    const Time end = timing.finished ? timing.end : result.end;
    nlohmann::json args{{"run", run_label}, {"task", id}};
    if (!t.label.empty()) args["label"] = t.label;
    switch (t.kind) {
      case TaskKind::NotifyRecord:
        args["peer"] = t.peer;
        args["notify"] = t.notify;
        break;
      case TaskKind::NotifyWait: args["notify"] = t.notify; break;
      case TaskKind::FlagSet:
        args["peer"] = t.peer;
        args["flag"] = t.notify;
        break;
      case TaskKind::FlagWait:
        args["flag"] = t.notify;
        args["count"] = t.count;
        break;
      case TaskKind::Memcpy:
      case TaskKind::ReduceInline:
        args["size"] = t.bytes;
        args["peer"] = t.src.rank == rank ? t.dst.rank : t.src.rank;
        args["src"] = std::string(buffer_kind_name(t.src.buffer)) + "@" + std::to_string(t.src.rank) + "+" +
                      std::to_string(t.src.offset);
        args["dst"] = std::string(buffer_kind_name(t.dst.buffer)) + "@" + std::to_string(t.dst.rank) + "+" +
                      std::to_string(t.dst.offset);
        args["link"] = link_label(platform, t);
        args["mover"] = t.mover == Mover::Aiv ? "AIV" : "SDMA";
        args["direction"] = t.src.rank == t.dst.rank ? "local" : (t.src.rank == rank ? "write" : "read");
        break;
      case TaskKind::Compute:
        args["cores"] = t.cores;
        args["core_kind"] = t.core_kind == CoreKind::Aic ? "AIC" : "AIV";
        break;
      case TaskKind::Delay: break;
    }
    // ts and dur are spliced in as exact decimals.
    // Kernel API calls and markers are Delay tasks: their label is the better name.
    std::string name = t.kind == TaskKind::Delay && !t.label.empty() ? t.label : task_kind_name(t.kind);
    const bool rdma = (t.kind == TaskKind::NotifyRecord && platform.rdma_between(rank, t.peer)) ||
                      (t.kind == TaskKind::Memcpy && platform.rdma_between(t.src.rank, t.dst.rank));
    if (rdma) name = "RDMASend";
    // An AIV core's copy is a load/store loop, its reduction an atomic store.
    if (t.mover == Mover::Aiv) name = t.kind == TaskKind::ReduceInline ? "AIV AtomicAdd" : "AIV Copy";
    std::string event = "{\"ph\":\"X\",\"name\":" + nlohmann::json(name).dump() +
                        ",\"pid\":" + std::to_string(rank) + ",\"tid\":" + std::to_string(tid) +
                        ",\"ts\":" + ts(timing.start) + ",\"dur\":" + ts(end - timing.start) +
                        ",\"args\":" + args.dump() + "}";
    events_.push_back(std::move(event));

    if ((t.kind == TaskKind::NotifyWait || t.kind == TaskKind::FlagWait) && timing.released_by >= 0) {
      const TaskId rec = static_cast<TaskId>(timing.released_by);
      const TaskTiming& rt = result.timings[rec];
      const int rrank = graph.rank_of(rec);
      const int rtid = track(rrank, graph.thread(graph.task(rec).thread).name);
      const int flow = next_flow_id_++;
      events_.push_back("{\"ph\":\"s\",\"name\":\"notify\",\"cat\":\"notify\",\"id\":" + std::to_string(flow) +
                        ",\"pid\":" + std::to_string(rrank) + ",\"tid\":" + std::to_string(rtid) +
                        ",\"ts\":" + ts(rt.start) + "}");
      events_.push_back("{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"notify\",\"cat\":\"notify\",\"id\":" +
                        std::to_string(flow) + ",\"pid\":" + std::to_string(rank) + ",\"tid\":" +
                        std::to_string(tid) + ",\"ts\":" + ts(end) + "}");
    }
  }
}

void TraceWriter::write(std::ostream& out) const {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events_.size(); ++i) out << events_[i] << (i + 1 < events_.size() ? ",\n" : "\n");
  out << "]}\n";
}

}  // namespace hcclsim

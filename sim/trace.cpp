#include "sim/trace.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "models/link/channel.h"

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
    if (t.label != 0) args["label"] = graph.label(t);
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
                      std::to_string(t.src.offset());
        args["dst"] = std::string(buffer_kind_name(t.dst.buffer)) + "@" + std::to_string(t.dst.rank) + "+" +
                      std::to_string(t.dst.offset());
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
    std::string name = t.kind == TaskKind::Delay && t.label != 0 ? graph.label(t) : task_kind_name(t.kind);
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
  add_link_counters(graph, result, platform);
}

void TraceWriter::add_link_counters(const TaskGraph& graph, const RunResult& result, Platform& platform) {
  const std::uint64_t span = result.end.ps - result.begin.ps;
  if (span == 0) return;
  const std::size_t buckets = kLinkBuckets;
  const std::uint64_t width = (span + buckets - 1) / buckets;  // ps per bucket
  struct Series {
    const Channel* channel;
    double bytes = 0;
    std::vector<double> direct;  // partial buckets
    std::vector<double> diff;    // whole buckets, as a difference array
  };
  std::vector<Series> series;
  std::unordered_map<const Channel*, std::size_t> index;
  for (TaskId id = 0; id < graph.tasks().size(); ++id) {
    const Task& t = graph.task(id);
    const TaskTiming& timing = result.timings[id];
    if ((t.kind != TaskKind::Memcpy && t.kind != TaskKind::ReduceInline) || t.bytes == 0 || !timing.started) continue;
    const std::uint64_t s = timing.start.ps - result.begin.ps;
    const std::uint64_t e = (timing.finished ? timing.end.ps : result.end.ps) - result.begin.ps;
    const std::size_t bs = std::min<std::size_t>(s / width, buckets - 1);
    const std::size_t be = std::min<std::size_t>(e / width, buckets - 1);
    for (const Channel* ch : platform.route(t.src.rank, t.dst.rank)) {
      auto [it, fresh] = index.emplace(ch, series.size());
      if (fresh) series.push_back(Series{ch, 0, std::vector<double>(buckets, 0.0), std::vector<double>(buckets + 1, 0.0)});
      Series& ser = series[it->second];
      const double bytes = static_cast<double>(t.bytes);
      ser.bytes += bytes;
      if (bs == be || e <= s) {
        ser.direct[bs] += bytes;
        continue;
      }
      const double rate = bytes / static_cast<double>(e - s);  // bytes per ps
      ser.direct[bs] += rate * static_cast<double>((bs + 1) * width - s);
      ser.direct[be] += rate * static_cast<double>(e - be * width);
      ser.diff[bs + 1] += rate * static_cast<double>(width);
      ser.diff[be] -= rate * static_cast<double>(width);
    }
  }
  if (series.empty()) return;
  std::stable_sort(series.begin(), series.end(), [](const Series& a, const Series& b) { return a.bytes > b.bytes; });
  if (series.size() > kMaxTracedLinks) series.resize(kMaxTracedLinks);
  std::sort(series.begin(), series.end(),
            [](const Series& a, const Series& b) { return a.channel->label() < b.channel->label(); });
  if (!links_named_) {
    links_named_ = true;
    events_.push_back("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(kLinksPid) +
                      ",\"tid\":0,\"args\":{\"name\":\"links (GB/s)\"}}");
  }
  for (const Series& ser : series) {
    const std::string head = "{\"ph\":\"C\",\"name\":" + nlohmann::json(ser.channel->label()).dump() +
                             ",\"pid\":" + std::to_string(kLinksPid) + ",\"ts\":";
    double running = 0;
    std::string last;
    for (std::size_t i = 0; i < buckets && i * width < span; ++i) {
      running += ser.diff[i];
      const double bytes = ser.direct[i] + running;
      const std::uint64_t bucket_end = std::min<std::uint64_t>((i + 1) * width, span);
      const double gbps = bytes / static_cast<double>(bucket_end - i * width) * 1e3;  // bytes/ps -> GB/s
      char value[32];
      std::snprintf(value, sizeof value, "%.3f", gbps < 0.0005 ? 0.0 : gbps);
      if (value == last) continue;
      last = value;
      events_.push_back(head + ts(Time{result.begin.ps + i * width}) + ",\"args\":{\"GBps\":" + value + "}}");
    }
    events_.push_back(head + ts(result.end) + ",\"args\":{\"GBps\":0}}");
  }
}

void TraceWriter::add_slice(int rank, const std::string& track_name, const std::string& name, Time start, Time duration,
                            const std::map<std::string, std::string>& args) {
  const int tid = track(rank, track_name);
  events_.push_back("{\"ph\":\"X\",\"name\":" + nlohmann::json(name).dump() + ",\"pid\":" + std::to_string(rank) +
                    ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + ts(start) + ",\"dur\":" + ts(duration) +
                    ",\"args\":" + nlohmann::json(args).dump() + "}");
}

void TraceWriter::write(std::ostream& out) const {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events_.size(); ++i) out << events_[i] << (i + 1 < events_.size() ? ",\n" : "\n");
  out << "]}\n";
}

}  // namespace hcclsim

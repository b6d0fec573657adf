#include "sim/task_graph.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>
#include <limits>
#include <map>
#include <sstream>

#include "base/error.h"

namespace hcclsim {

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::NotifyRecord: return "Notify Record";
    case TaskKind::NotifyWait: return "Notify Wait";
    case TaskKind::Memcpy: return "Memcpy";
    case TaskKind::ReduceInline: return "Reduce_Inline";
    case TaskKind::Compute: return "Compute";
    case TaskKind::Delay: return "Delay";
    case TaskKind::FlagSet: return "Flag Set";
    case TaskKind::FlagWait: return "Flag Wait";
  }
  return "?";
}

const char* buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::Input: return "input";
    case BufferKind::Output: return "output";
    case BufferKind::Scratch: return "hccl_buffer";
  }
  return "?";
}

ThreadId TaskGraph::add_thread(int rank, std::string name) {
  threads_.push_back(Thread{rank, std::move(name), {}});
  return static_cast<ThreadId>(threads_.size() - 1);
}

// The most tasks one graph may hold: 2^25 (33.5 M), about 15 GiB at
// kBytesPerTask: a larger run is refused with the reason instead of ending
// in std::bad_alloc.
constexpr std::size_t kMaxTasks = std::size_t{1} << 25;

TaskId TaskGraph::add(Task task) {
  if (tasks_.size() >= kMaxTasks) {
    throw InputError("", "too large: the run needs more than " + std::to_string(kMaxTasks) +
                             " tasks, about " + std::to_string(kMaxTasks * kBytesPerTask >> 30) +
                             " GiB or more (the limit); use fewer ranks or sizes, or a larger --buffsize (fewer loops)");
  }
  if (task.label >= labels_.size()) {
    throw GraphError("a task's label id " + std::to_string(task.label) + " is not one of this graph's (intern it here)");
  }
  const TaskId id = static_cast<TaskId>(tasks_.size());
  threads_.at(task.thread).tasks.push_back(id);
  tasks_.push_back(std::move(task));
  return id;
}

LabelId TaskGraph::intern(const std::string& key) {
  if (key.empty()) return 0;
  // Builders give runs of tasks one label (a step's records, waits and
  // copies): the last one is compared before anything is hashed.
  if (labels_[last_label_] == key) return last_label_;
  const auto found = label_ids_.find(key);
  if (found != label_ids_.end()) return last_label_ = found->second;
  const auto id = static_cast<LabelId>(labels_.size());
  labels_.push_back(key);
  label_ids_.emplace(key, id);
  return last_label_ = id;
}

void TaskGraph::add_dependency(TaskId before, TaskId after) { dependencies_.emplace_back(before, after); }

TaskId TaskGraph::record(ThreadId thread, int peer, int notify, const std::string& label) {
  Task t;
  t.kind = TaskKind::NotifyRecord;
  t.thread = thread;
  t.peer = peer;
  t.notify = notify;
  t.label = intern(label);
  return add(std::move(t));
}

TaskId TaskGraph::wait(ThreadId thread, int notify, const std::string& label, Time timeout) {
  Task t;
  t.kind = TaskKind::NotifyWait;
  t.thread = thread;
  t.notify = notify;
  t.duration = timeout;
  t.label = intern(label);
  return add(std::move(t));
}

// Whose register or flag a signalling task touches.
static int owner_of(const Task& t, int rank) {
  return t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::FlagSet || t.kind == TaskKind::FlagWait ? t.peer : rank;
}

static Task data_task(TaskKind kind, ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes,
                      LabelId label) {
  Task t;
  t.kind = kind;
  t.thread = thread;
  t.src = src;
  t.dst = dst;
  t.bytes = bytes;
  t.label = label;
  return t;
}

TaskId TaskGraph::copy(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes, const std::string& label) {
  return add(data_task(TaskKind::Memcpy, thread, src, dst, bytes, intern(label)));
}

TaskId TaskGraph::delay(ThreadId thread, Time duration, const std::string& label) {
  Task t;
  t.kind = TaskKind::Delay;
  t.thread = thread;
  t.label = intern(label);
  t.duration = duration;
  return add(t);
}

TaskId TaskGraph::reduce(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes,
                         const std::string& label) {
  return add(data_task(TaskKind::ReduceInline, thread, src, dst, bytes, intern(label)));
}

TaskId TaskGraph::aiv_move(ThreadId thread, BufferRef src, BufferRef dst, std::uint64_t bytes, bool reduce,
                           const std::string& label, int cores) {
  Task t = data_task(reduce ? TaskKind::ReduceInline : TaskKind::Memcpy, thread, src, dst, bytes, intern(label));
  t.mover = Mover::Aiv;
  t.cores = cores;
  return add(std::move(t));
}

TaskId TaskGraph::flag_set(ThreadId thread, int peer, int flag, const std::string& label) {
  Task t;
  t.kind = TaskKind::FlagSet;
  t.thread = thread;
  t.peer = peer;
  t.notify = flag;
  t.label = intern(label);
  return add(std::move(t));
}

TaskId TaskGraph::flag_wait(ThreadId thread, int owner, int flag, std::uint32_t value, const std::string& label) {
  Task t;
  t.kind = TaskKind::FlagWait;
  t.thread = thread;
  t.peer = owner;
  t.notify = flag;
  t.count = value;
  t.label = intern(label);
  return add(std::move(t));
}

std::vector<TaskId> TaskGraph::append(const TaskGraph& part, const std::vector<int>& rank_map, int notify_base,
                                      const std::string& thread_prefix, ThreadIndex* reuse) {
  noted_.merge(part.noted_);
  std::vector<ThreadId> thread_map;
  for (const Thread& th : part.threads_) {
    const std::pair<int, std::string> key{rank_map.at(static_cast<std::size_t>(th.rank)), thread_prefix + th.name};
    if (reuse == nullptr) {
      thread_map.push_back(add_thread(key.first, key.second));
      continue;
    }
    auto found = reuse->find(key);
    if (found == reuse->end()) found = reuse->emplace(key, add_thread(key.first, key.second)).first;
    thread_map.push_back(found->second);
  }
  std::vector<LabelId> label_map(part.labels_.size(), 0);
  for (LabelId l = 1; l < part.labels_.size(); ++l) label_map[l] = intern(part.labels_[l]);
  std::vector<TaskId> ids;
  ids.reserve(part.tasks_.size());
  for (const Task& original : part.tasks_) {
    Task t = original;
    t.thread = thread_map[original.thread];
    t.label = label_map[original.label];
    const bool signal = t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::NotifyWait ||
                        t.kind == TaskKind::FlagSet || t.kind == TaskKind::FlagWait;
    if (signal) t.notify += notify_base;
    if (t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::FlagSet || t.kind == TaskKind::FlagWait) {
      t.peer = rank_map.at(t.peer);
    }
    if (t.kind == TaskKind::Memcpy || t.kind == TaskKind::ReduceInline) {
      t.src.rank = rank_map.at(t.src.rank);
      t.dst.rank = rank_map.at(t.dst.rank);
    }
    ids.push_back(add(std::move(t)));
  }
  for (const auto& [before, after] : part.dependencies_) add_dependency(ids[before], ids[after]);
  return ids;
}

int TaskGraph::notifies_used() const {
  int used = 0;
  for (const Task& t : tasks_) {
    if (t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::NotifyWait) used = std::max(used, t.notify + 1);
  }
  return used;
}

int TaskGraph::flags_used() const {
  int used = 0;
  for (const Task& t : tasks_) {
    if (t.kind == TaskKind::FlagSet || t.kind == TaskKind::FlagWait) used = std::max(used, t.notify + 1);
  }
  return used;
}

std::string TaskGraph::describe(TaskId id) const {
  const Task& t = tasks_[id];
  const Thread& th = threads_[t.thread];
  const auto pos = std::find(th.tasks.begin(), th.tasks.end(), id) - th.tasks.begin();
  std::ostringstream os;
  os << "rank " << th.rank << " thread '" << th.name << "' task #" << pos << " (" << task_kind_name(t.kind);
  if (t.kind == TaskKind::NotifyRecord) os << " to notify " << t.notify << " of rank " << t.peer;
  if (t.kind == TaskKind::NotifyWait) os << " on notify " << t.notify;
  if (t.kind == TaskKind::FlagSet) os << " to flag " << t.notify << " of rank " << t.peer;
  if (t.kind == TaskKind::FlagWait) os << " for " << t.count << " on flag " << t.notify << " of rank " << t.peer;
  if (t.label != 0) os << ", " << label(t);
  os << ")";
  return os.str();
}

namespace {
constexpr TaskId kNoTask = std::numeric_limits<TaskId>::max();
}  // namespace

void TaskGraph::validate(int ranks) const {
  check_references(ranks);
  check_cycles(ranks);
}

// Records and waits per notify (rank, index), group by group in the order
// (rank, index): `visit(owner, notify, records, waits)`, each list in id order.
template <class Visit>
void TaskGraph::for_each_notify(int ranks, Visit visit) const {
  // Grouped by owner rank in a counting pass (collected in id order, so
  // each rank's part stays in id order), then each rank's part ordered by
  // index: 8 bytes a notify task and one rank's worth of scratch. (A flat
  // (rank, index, task) sort needed two copies of 16-byte entries: 150 MiB
  // on top of the graph for a 1 GiB CloudMatrix384 AllReduce.)
  struct NotifyTask {
    std::uint32_t index;
    TaskId id;
  };
  auto is_notify = [](const Task& t) { return t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::NotifyWait; };
  std::vector<std::size_t> start(static_cast<std::size_t>(ranks) + 1, 0);
  std::uint32_t indices = 0;
  for (TaskId id = 0; id < tasks_.size(); ++id) {
    const Task& t = tasks_[id];
    if (!is_notify(t)) continue;
    ++start[static_cast<std::size_t>(owner_of(t, rank_of(id))) + 1];
    indices = std::max(indices, static_cast<std::uint32_t>(t.notify) + 1);
  }
  for (std::size_t r = 0; r < static_cast<std::size_t>(ranks); ++r) start[r + 1] += start[r];
  std::vector<NotifyTask> items(start.back());
  {
    std::vector<std::size_t> fill(start.begin(), start.end() - 1);
    for (TaskId id = 0; id < tasks_.size(); ++id) {
      const Task& t = tasks_[id];
      if (!is_notify(t)) continue;
      items[fill[static_cast<std::size_t>(owner_of(t, rank_of(id)))]++] =
          NotifyTask{static_cast<std::uint32_t>(t.notify), id};
    }
  }
  // One rank's part by (index, task): a stable counting pass where the
  // indices are few against its size, else a sort (sparse indices, as a
  // hand-written program may use).
  std::vector<NotifyTask> scratch;
  std::vector<std::size_t> bucket;
  auto order_part = [&](NotifyTask* first, NotifyTask* last) {
    const auto n = static_cast<std::size_t>(last - first);
    if (n < 2) return;
    if (indices > 4 * n + 64) {
      std::sort(first, last, [](const NotifyTask& x, const NotifyTask& y) {
        return x.index != y.index ? x.index < y.index : x.id < y.id;
      });
      return;
    }
    bucket.assign(indices + 1, 0);
    for (const NotifyTask* t = first; t != last; ++t) ++bucket[t->index + 1];
    for (std::size_t i = 0; i < indices; ++i) bucket[i + 1] += bucket[i];
    scratch.resize(n);
    for (const NotifyTask* t = first; t != last; ++t) scratch[bucket[t->index]++] = *t;
    std::copy(scratch.begin(), scratch.end(), first);
  };
  std::vector<TaskId> records;
  std::vector<TaskId> waits;
  for (int owner = 0; owner < ranks; ++owner) {
    NotifyTask* const first = items.data() + start[static_cast<std::size_t>(owner)];
    NotifyTask* const last = items.data() + start[static_cast<std::size_t>(owner) + 1];
    order_part(first, last);
    for (const NotifyTask* group = first; group != last;) {
      records.clear();
      waits.clear();
      const NotifyTask* end = group;
      for (; end != last && end->index == group->index; ++end) {
        (tasks_[end->id].kind == TaskKind::NotifyRecord ? records : waits).push_back(end->id);
      }
      visit(owner, static_cast<int>(group->index), records, waits);
      group = end;
    }
  }
}

bool TaskGraph::one_recorder(const std::vector<TaskId>& records) const {
  for (TaskId r : records) {
    if (tasks_[r].thread != tasks_[records.front()].thread) return false;
  }
  return true;
}

void TaskGraph::check_references(int ranks) const {
  for (ThreadId th = 0; th < threads_.size(); ++th) {
    if (threads_[th].rank < 0 || threads_[th].rank >= ranks) {
      throw GraphError("thread '" + threads_[th].name + "' is on rank " + std::to_string(threads_[th].rank) +
                       ", outside 0.." + std::to_string(ranks - 1));
    }
  }
  struct FlagUse {
    std::uint64_t sets = 0;
    std::uint64_t asked = 0;   // the largest value any wait polls for
    TaskId first_wait = 0;
  };
  std::map<std::pair<int, int>, FlagUse> flags;
  for (TaskId id = 0; id < tasks_.size(); ++id) {
    const Task& t = tasks_[id];
    const int rank = rank_of(id);
    const bool notify = t.kind == TaskKind::NotifyRecord || t.kind == TaskKind::NotifyWait;
    const bool flag = t.kind == TaskKind::FlagSet || t.kind == TaskKind::FlagWait;
    if (notify || flag) {
      const int owner = owner_of(t, rank);
      if (owner < 0 || owner >= ranks) {
        throw GraphError(describe(id) + " targets rank " + std::to_string(owner) + ", which does not exist");
      }
      if (t.notify < 0) {
        throw GraphError(describe(id) + " uses " + (notify ? "notify " : "flag ") + std::to_string(t.notify) +
                         "; indices start at 0");
      }
    }
    if (flag) {
      FlagUse& use = flags[{owner_of(t, rank), t.notify}];
      if (t.kind == TaskKind::FlagSet) {
        ++use.sets;
      } else {
        if (t.count > use.asked) {
          use.asked = t.count;
          use.first_wait = id;
        }
      }
    }
    if (t.kind == TaskKind::Memcpy || t.kind == TaskKind::ReduceInline) {
      for (const BufferRef& b : {t.src, t.dst}) {
        if (b.rank < 0 || b.rank >= ranks) {
          throw GraphError(describe(id) + " touches rank " + std::to_string(b.rank) + ", which does not exist");
        }
      }
      if (t.src.rank != rank && t.dst.rank != rank) {
        throw GraphError(describe(id) + " moves data between two other ranks; one end must be its own rank");
      }
    }
  }
  for (const auto& [before, after] : dependencies_) {
    if (before >= tasks_.size() || after >= tasks_.size()) throw GraphError("a dependency names a task that does not exist");
  }

  for (const auto& [key, use] : flags) {
    if (use.asked > use.sets) {
      throw GraphError(describe(use.first_wait) + " polls flag " + std::to_string(key.second) + " of rank " +
                       std::to_string(key.first) + " for " + std::to_string(use.asked) + ", but only " +
                       std::to_string(use.sets) + " flag set(s) ever add to it");
    }
  }
  for_each_notify(ranks, [this](int owner, int notify, const std::vector<TaskId>& records,
                                 const std::vector<TaskId>& waits) {
    if (!waits.empty() && records.empty()) {
      throw GraphError(describe(waits.front()) + " waits on notify " + std::to_string(notify) + " of rank " +
                       std::to_string(owner) + ", but no task records it");
    }
    for (TaskId w : waits) {
      if (tasks_[w].thread != tasks_[waits.front()].thread) {
        throw GraphError(describe(waits.front()) + " and " + describe(w) +
                         " wait on the same notify from two threads; a notify belongs to one thread");
      }
    }
    if (one_recorder(records) && waits.size() > records.size()) {
      throw GraphError(describe(waits[records.size()]) + " has no record to release it: notify " +
                       std::to_string(notify) + " of rank " + std::to_string(owner) + " is waited on " +
                       std::to_string(waits.size()) + " times but recorded " + std::to_string(records.size()) +
                       " times");
    }
  });
}

void TaskGraph::check_cycles(int ranks) const {
  // Edges beyond each thread's order: explicit dependencies, and each
  // notify's k-th record -> k-th wait where one thread records it (with one
  // recording thread that pairing is static and joins the cycle check).
  std::vector<std::pair<TaskId, TaskId>> edges = dependencies_;
  for_each_notify(ranks, [&](int, int, const std::vector<TaskId>& records, const std::vector<TaskId>& waits) {
    if (!one_recorder(records)) return;
    for (std::size_t k = 0; k < waits.size() && k < records.size(); ++k) edges.emplace_back(records[k], waits[k]);
  });

  // Cycle check: Kahn's topological order over the threads' order and the
  // edges (flat arrays, linear time); only a graph that has a cycle pays
  // for Boost's strongly connected components, which name its tasks.
  const std::size_t n = tasks_.size();
  std::vector<TaskId> next_in_thread(n, kNoTask);
  std::vector<std::uint32_t> indegree(n, 0);
  for (const Thread& th : threads_) {
    for (std::size_t i = 1; i < th.tasks.size(); ++i) {
      next_in_thread[th.tasks[i - 1]] = th.tasks[i];
      ++indegree[th.tasks[i]];
    }
  }
  std::vector<std::uint32_t> first_edge(n + 1, 0);
  for (const auto& e : edges) {
    ++first_edge[e.first + 1];
    ++indegree[e.second];
  }
  for (std::size_t i = 0; i < n; ++i) first_edge[i + 1] += first_edge[i];
  std::vector<TaskId> targets(edges.size());
  {
    std::vector<std::uint32_t> fill(first_edge.begin(), first_edge.end() - 1);
    for (const auto& e : edges) targets[fill[e.first]++] = e.second;
  }
  std::vector<TaskId> ready;
  for (TaskId id = 0; id < n; ++id) {
    if (indegree[id] == 0) ready.push_back(id);
  }
  std::size_t ordered = 0;
  while (!ready.empty()) {
    const TaskId id = ready.back();
    ready.pop_back();
    ++ordered;
    if (next_in_thread[id] != kNoTask && --indegree[next_in_thread[id]] == 0) ready.push_back(next_in_thread[id]);
    for (std::uint32_t k = first_edge[id]; k < first_edge[id + 1]; ++k) {
      if (--indegree[targets[k]] == 0) ready.push_back(targets[k]);
    }
  }
  if (ordered == n) return;

  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph g(n);
  for (const Thread& th : threads_) {
    for (std::size_t i = 1; i < th.tasks.size(); ++i) boost::add_edge(th.tasks[i - 1], th.tasks[i], g);
  }
  for (const auto& [before, after] : edges) boost::add_edge(before, after, g);
  std::vector<std::size_t> component(tasks_.size());
  const std::size_t count = boost::strong_components(g, component.data());
  if (count == tasks_.size()) return;
  std::vector<std::size_t> size(count, 0);
  for (std::size_t c : component) ++size[c];
  for (TaskId id = 0; id < tasks_.size(); ++id) {
    if (size[component[id]] < 2) continue;
    std::ostringstream os;
    os << "the task graph has a cycle; these tasks wait on each other:";
    int listed = 0;
    for (TaskId other = 0; other < tasks_.size() && listed < 12; ++other) {
      if (component[other] == component[id]) {
        os << "\n  " << describe(other);
        ++listed;
      }
    }
    if (size[component[id]] > 12) os << "\n  ... and " << size[component[id]] - 12 << " more";
    throw GraphError(os.str());
  }
}

}  // namespace hcclsim

#include "sim/report/row_transport.h"

#include "sim/report/link_stats.h"
#include "sim/report/row_writer.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace hcclsim {


std::string serialize_perf_row(const PerfRow& r) {
  nlohmann::json j{{"op_name", r.op_name},
                         {"op", coll_op_name(r.op)},
                         {"ranks", r.ranks},
                         {"dtype", data_type_name(r.dtype)},
                         {"reduce_op", reduce_op_name(r.reduce_op)},
                         {"algo", r.algo},
                         {"executor", r.executor},
                         {"executor_rule", r.executor_rule},
                         {"count", r.count},
                         {"input_bytes", r.input_bytes},
                         {"output_bytes", r.output_bytes},
                         {"data_size", r.data_size},
                         {"time_ps", r.time.ps},
                         {"algbw_gbps", r.algbw_gbps},
                         {"busbw_gbps", r.busbw_gbps},
                         {"check", r.check},
                         {"model", r.model},
                         {"tasks", r.tasks},
                         {"activations", r.activations},
                         {"link_summary", link_summary_json(r.link_summary)},
                         {"links", link_usages_json(r.links)},
                         {"assumed", r.assumed}};
  if (r.scenario) j["scenario"] = scenario_json(*r.scenario);  // its times in us to the ps: exact
  return j.dump();  // nlohmann writes doubles with 17 significant digits: they read back exactly
}

PerfRow deserialize_perf_row(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    PerfRow r{};
    r.op_name = j.at("op_name").get<std::string>();
    const auto op = parse_coll_op(j.at("op").get<std::string>());
    const auto dtype = parse_data_type(j.at("dtype").get<std::string>());
    const auto reduce_op = parse_reduce_op(j.at("reduce_op").get<std::string>());
    if (!op || !dtype || !reduce_op) throw std::invalid_argument("unknown op, dtype or reduce_op");
    r.op = *op;
    r.dtype = *dtype;
    r.reduce_op = *reduce_op;
    r.ranks = j.at("ranks").get<int>();
    r.algo = j.at("algo").get<std::string>();
    r.executor = j.at("executor").get<std::string>();
    r.executor_rule = j.at("executor_rule").get<std::string>();
    r.count = j.at("count").get<std::uint64_t>();
    r.input_bytes = j.at("input_bytes").get<std::uint64_t>();
    r.output_bytes = j.at("output_bytes").get<std::uint64_t>();
    r.data_size = j.at("data_size").get<std::uint64_t>();
    r.time = Time{j.at("time_ps").get<std::uint64_t>()};
    r.algbw_gbps = j.at("algbw_gbps").get<double>();
    r.busbw_gbps = j.at("busbw_gbps").get<double>();
    r.check = j.at("check").get<std::string>();
    r.model = j.at("model").get<std::string>();
    r.tasks = j.at("tasks").get<std::uint64_t>();
    r.activations = j.at("activations").get<std::uint64_t>();
    r.link_summary = link_summary_from_json(j.at("link_summary"));
    r.links = link_usages_from_json(j.at("links"));
    r.assumed = j.at("assumed").get<std::vector<std::string>>();
    if (j.contains("scenario")) r.scenario = scenario_from_json(j.at("scenario"));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed row from a worker: ") + e.what());
  }
}

void SingleProcess::send_to_root(const std::string&) {
  throw std::logic_error("a single process has no root to send to");
}
std::string SingleProcess::receive_from(int) { throw std::logic_error("a single process has no one to receive from"); }

std::vector<int> assign_blocks(std::size_t n, int processes) {
  std::vector<int> owner(n);
  const std::size_t p = static_cast<std::size_t>(processes);
  for (std::size_t i = 0; i < n; ++i) owner[i] = static_cast<int>(i * p / (n == 0 ? 1 : n));
  return owner;
}

std::vector<int> assign_round_robin(std::size_t n, int processes) {
  std::vector<int> owner(n);
  for (std::size_t i = 0; i < n; ++i) owner[i] = static_cast<int>(i % static_cast<std::size_t>(processes));
  return owner;
}

OrderedGather::OrderedGather(ProcessGroup& group, std::vector<int> owner,
                             std::function<void(std::size_t, const std::string&)> emit)
    : group_(group), owner_(std::move(owner)), emit_(std::move(emit)), ended_(static_cast<std::size_t>(group.size())) {
  ended_[0] = true;
}

// Messages: "R<item>", "D" (this process is done), "E<exit code> <message>".
void OrderedGather::local(std::size_t index, const std::string& item) {
  if (group_.rank() != 0) {
    group_.send_to_root("R" + item);
    return;
  }
  receive_until(index);
  if (failure_) return;  // another process failed: the output stops at the failure
  emit_(index, item);
  next_ = index + 1;
}

void OrderedGather::receive_until(std::size_t index) {
  while (next_ < index && !failure_) {
    const int from = owner_.at(next_);
    if (from == 0) throw std::logic_error("OrderedGather: rank 0 skipped its own item " + std::to_string(next_));
    const std::string message = group_.receive_from(from);
    if (!message.empty() && message[0] == 'R') {
      emit_(next_, message.substr(1));
      ++next_;
      continue;
    }
    ended_[static_cast<std::size_t>(from)] = true;
    Failure f;
    if (!message.empty() && message[0] == 'E') {
      const std::size_t space = message.find(' ');
      f.exit_code = std::stoi(message.substr(1, space - 1));
      f.message = space == std::string::npos ? "" : message.substr(space + 1);
    } else {
      f.message = "process " + std::to_string(from) + " ended before item " + std::to_string(next_);
    }
    failure_ = f;
    drain();
  }
}

void OrderedGather::drain() {
  for (int r = 1; r < group_.size(); ++r) {
    while (!ended_[static_cast<std::size_t>(r)]) {
      const std::string message = group_.receive_from(r);
      if (message.empty() || message[0] == 'R') continue;
      ended_[static_cast<std::size_t>(r)] = true;
      if (message[0] == 'E' && !failure_) {
        const std::size_t space = message.find(' ');
        failure_ = Failure{std::stoi(message.substr(1, space - 1)),
                           space == std::string::npos ? "" : message.substr(space + 1)};
      }
    }
  }
}

std::optional<OrderedGather::Failure> OrderedGather::finish() {
  if (group_.rank() != 0) {
    group_.send_to_root("D");
    return std::nullopt;
  }
  receive_until(owner_.size());
  drain();
  return failure_;
}

std::optional<OrderedGather::Failure> OrderedGather::fail(int exit_code, const std::string& message) {
  if (group_.rank() != 0) {
    group_.send_to_root("E" + std::to_string(exit_code) + " " + message);
    return std::nullopt;
  }
  if (!failure_) failure_ = Failure{exit_code, message};
  drain();
  return failure_;
}

}  // namespace hcclsim

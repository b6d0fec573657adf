// How transfers cross the channels of a platform: the one interface the stream
// engines use, with two models behind it.
//
// - Segment: a flow crosses its path as segments that step every channel
//   (models/link/channel): round-robin interleaving at segment granularity.
// - Flow (default): a fluid model (models/link/flow_network): a flow's rate is
//   its max-min fair share of the channels it crosses, capped by its own
//   rate_cap, recomputed only when a flow starts or drains; a flow costs
//   two events (drained, arrived) whatever its size.
//
// Both call FlowListener::flow_finished when a flow's last byte has arrived,
// and both keep Channel::bytes_carried() and busy_time().
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hcclsim {

struct Flow;

enum class NetworkModel : std::uint8_t { Segment, Flow };

// The flow model's one approximation, for very large coupled components
// (thousands of AIV flows of a MoE kernel sharing every die's port): a
// component of at least `large_component` flows is not solved again on
// every start and drain but at the next multiple of `quantum` (every
// component is solved at those instants). Until then flows that started
// wait at rate 0 and bandwidth a drained flow frees stays idle, so a
// transfer can start up to one quantum late and finish no earlier than
// exactly; deterministic (the instants depend on simulated time only).
// `large_component` 0 solves every change at once (exact).
struct FlowBatching {
  std::uint32_t large_component = 1024;
  std::uint64_t quantum_ps = 1'000'000;  // 1 us
};

inline const char* network_model_name(NetworkModel m) { return m == NetworkModel::Segment ? "segment" : "flow"; }
inline std::optional<NetworkModel> parse_network_model(const std::string& text) {
  if (text == "segment") return NetworkModel::Segment;
  if (text == "flow") return NetworkModel::Flow;
  return std::nullopt;
}

class Network {
 public:
  virtual ~Network() = default;
  // `flow` (bytes > 0, a non-empty path, a listener) starts now.
  virtual void start_flow(Flow& flow) = 0;
  // Work done so far beyond what the channels count themselves (see Platform::activations).
  virtual std::uint64_t activations() const = 0;
};

// The segment model: the channels move the segments; this only hands the
// flow to the first one.
class SegmentNetwork final : public Network {
 public:
  void start_flow(Flow& flow) override;
  std::uint64_t activations() const override { return 0; }
};

}  // namespace hcclsim

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

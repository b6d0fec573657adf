// The flow network and the estimate share one max-min solver
// (models/link/max_min): on the same channels, paths and caps, the rates
// the network gives its flows are the shares max_min_shares computes. The
// network solves only the channels that can fill, by component; a wrong
// reduction there (a channel left out that could fill, a component cut
// short) shows as a rate that differs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <systemc>
#include <vector>

#include "models/link/channel.h"
#include "models/link/flow_network.h"
#include "models/link/max_min.h"
#include "models/wake_clock.h"

using namespace hcclsim;

namespace {

struct Ignore final : FlowListener {
  void flow_finished(Flow&) override {}
};

}  // namespace

TEST_CASE("flow network: the rates of flows started together are max_min_shares' shares of the same problem",
          "[flow][max-min]") {
  WakeClock clock("clock");
  FlowNetwork network("network", clock);
  const std::vector<std::uint64_t> capacities{1'000'000'000, 2'000'000'000, 3'000'000'000, 8'000'000'000,
                                              25'000'000'000};
  const std::vector<std::uint64_t> caps{0, 700'000'000, 2'500'000'000};  // 0: no cap
  std::mt19937 random(20261207);
  constexpr int kChannels = 12;
  constexpr int kFlows = 40;
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<double> capacity;
  for (int c = 0; c < kChannels; ++c) {
    ChannelParams params;
    params.bandwidth = Bandwidth{capacities[random() % capacities.size()]};
    channels.push_back(std::make_unique<Channel>(("ch" + std::to_string(c)).c_str(), params, "ch", clock));
    network.add_channel(*channels.back());
    capacity.push_back(static_cast<double>(params.bandwidth.bytes_per_s));
  }
  Ignore listener;
  std::vector<std::vector<Channel*>> routes(kFlows);
  std::vector<std::vector<int>> paths(kFlows);
  std::vector<double> limit(kFlows);
  std::vector<Flow> flows(kFlows);
  for (int i = 0; i < kFlows; ++i) {
    const int hops = 1 + static_cast<int>(random() % 4);
    for (int h = 0; h < hops; ++h) {
      const int c = static_cast<int>(random() % kChannels);
      if (std::find(paths[i].begin(), paths[i].end(), c) != paths[i].end()) continue;
      paths[i].push_back(c);
      routes[i].push_back(channels[static_cast<std::size_t>(c)].get());
    }
    const std::uint64_t cap = caps[random() % caps.size()];
    limit[i] = cap == 0 ? kNoLimit : static_cast<double>(cap);
    Flow& f = flows[static_cast<std::size_t>(i)];
    f.bytes = 1ULL << 40;  // none drains within the run
    f.rate_cap = Bandwidth{cap};
    f.path = &routes[static_cast<std::size_t>(i)];
    f.listener = &listener;
    f.tag = static_cast<std::uint64_t>(i);
  }
  for (Flow& f : flows) network.start_flow(f);
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_NS));

  std::vector<const std::vector<int>*> refs;
  for (const auto& p : paths) refs.push_back(&p);
  const std::vector<double> shares = max_min_shares(refs, limit, capacity);
  for (int i = 0; i < kFlows; ++i) {
    INFO("flow " << i);
    CHECK(FlowNetwork::rate_of(flows[static_cast<std::size_t>(i)]) == Approx(shares[static_cast<std::size_t>(i)]).epsilon(1e-12));
  }
}

#include "sim/link_usage.h"

#include "models/link/channel.h"

namespace hcclsim {

std::string link_kind(const std::string& label) {
  static const std::string memory = " local memory";
  if (label.size() >= memory.size() && label.compare(label.size() - memory.size(), memory.size(), memory) == 0) {
    return "memory";
  }
  return label.substr(0, label.find(' '));
}

LinkMeter::LinkMeter(Platform& platform) {
  for (int n = 0; n < platform.npus(); ++n) mutable_.push_back(&platform.local_memory(n));
  for (const auto& ch : platform.channels()) mutable_.push_back(ch.get());
  for (Channel* ch : mutable_) {
    channels_.push_back(ch);
    kinds_.push_back(link_kind(ch->label()));
  }
  base_.resize(channels_.size());
}

void LinkMeter::start() {
  for (std::size_t i = 0; i < mutable_.size(); ++i) {
    mutable_[i]->reset_peak_flows();
    base_[i] = mutable_[i]->stats();
  }
}

std::vector<LinkUsage> LinkMeter::stop(Time elapsed) const {
  std::vector<LinkUsage> out;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    const LinkStats now = channels_[i]->stats();
    LinkUsage u;
    u.bytes = now.bytes - base_[i].bytes;
    u.busy = now.busy - base_[i].busy;
    if (u.bytes == 0 && u.busy.ps == 0) continue;
    u.label = channels_[i]->label();
    u.kind = kinds_[i];
    u.utilization = busy_fraction(u.busy, elapsed);
    u.peak_flows = now.peak_flows;
    out.push_back(std::move(u));
  }
  return out;
}

LinkSummary LinkMeter::summary(Time elapsed) const {
  LinkSummary s;
  Time busiest;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    const LinkStats now = channels_[i]->stats();
    s.bytes_by_kind[kinds_[i]] += now.bytes - base_[i].bytes;
    const Time busy = now.busy - base_[i].busy;
    if (busy > busiest) {
      busiest = busy;
      s.busiest = channels_[i]->label();
    }
  }
  s.busiest_utilization = busy_fraction(busiest, elapsed);
  return s;
}

LinkSummary summarize_links(const std::vector<LinkUsage>& links) {
  LinkSummary s;
  const LinkUsage* best = nullptr;
  for (const LinkUsage& u : links) {
    s.bytes_by_kind[u.kind] += u.bytes;
    if (best == nullptr || u.busy > best->busy) best = &u;
  }
  if (best != nullptr) {
    s.busiest = best->label;
    s.busiest_utilization = best->utilization;
  }
  return s;
}

}  // namespace hcclsim

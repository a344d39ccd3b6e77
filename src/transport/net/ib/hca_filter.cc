#include "transport/net/ib/hca_filter.h"

#include <charconv>

namespace loom::net::ib {

bool HcaFilter::matches(const std::string& device, int port) const {
  if (entries.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries) {
    const bool name = exact ? device == e.device : device.compare(0, e.device.size(), e.device) == 0;
    if (name && (e.port < 0 || e.port == port)) listed = true;
  }
  return exclude ? !listed : listed;
}

Status parseHcaFilter(const std::string& spec, HcaFilter* out) {
  HcaFilter f;
  std::string rest = spec;
  if (!rest.empty() && rest[0] == '^') f.exclude = true, rest.erase(0, 1);
  if (!rest.empty() && rest[0] == '=') f.exact = true, rest.erase(0, 1);
  size_t start = 0;
  while (start <= rest.size() && !rest.empty()) {
    const size_t comma = std::min(rest.find(',', start), rest.size());
    const std::string item = rest.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    HcaFilter::Entry e;
    const size_t colon = item.find(':');
    e.device = item.substr(0, colon);
    if (e.device.empty()) return invalidArgument("LOOM_IB_HCA '{}': an entry without a device name", spec);
    if (colon != std::string::npos) {
      const size_t end = std::min(item.find(':', colon + 1), item.size());
      const std::string port = item.substr(colon + 1, end - colon - 1);
      if (!port.empty()) {
        const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
        if (ec != std::errc() || ptr != port.data() + port.size() || e.port < 1 || e.port > 255)
          return invalidArgument("LOOM_IB_HCA '{}': port '{}' of {} is not a port number", spec, port, e.device);
      }
    }
    if (f.entries.size() == kMaxHcaEntries)
      return invalidArgument("LOOM_IB_HCA '{}': more than {} entries", spec, kMaxHcaEntries);
    f.entries.push_back(e);
  }
  *out = std::move(f);
  return Status::Ok();
}

}  // namespace loom::net::ib

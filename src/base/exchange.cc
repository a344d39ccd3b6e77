#include "base/exchange.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace loom {

Status shareFailure(PeerExchange& exchange, const std::vector<int32_t>& codes, const Status& mine,
                    const std::string& failed, const std::string& context) {
  const auto first = std::find_if(codes.begin(), codes.end(), [](int32_t c) { return c != loomSuccess; });
  if (first == codes.end()) return Status::Ok();
  using Reason = std::array<char, 480>;
  Reason why{};
  std::snprintf(why.data(), why.size(), "%s", mine.message().c_str());
  std::vector<Reason> reasons(codes.size());
  LOOM_TRY(exchange.allGather(why.data(), reasons.data(), why.size()).withContext(context));
  if (!mine.ok()) return mine;
  const size_t r = static_cast<size_t>(first - codes.begin());
  reasons[r].back() = '\0';
  return errorStatus(loomRemoteError, "rank {} {}: {}", r, failed, reasons[r].data());
}

}  // namespace loom

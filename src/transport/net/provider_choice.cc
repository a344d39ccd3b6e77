#include "transport/net/provider_choice.h"

#include "base/log.h"

namespace loom::net {

namespace {

// Makes `kind`'s provider, or says why this build cannot.
Status makeKind(const ProviderKind& kind, const ProviderRequest& request, MadeProvider* made) {
  if (!kind.compiledIn) return systemError("{}", kind.missing);
  return kind.make(request, made);
}

// A provider that starts but offers no device is as good as none.
Status requireDevices(const std::unique_ptr<Provider>& provider) {
  if (provider->deviceCount() > 0) return Status::Ok();
  return systemError("network provider '{}' has no device", provider->name());
}

Status makeNamed(const ProviderRequest& request, std::unique_ptr<Provider>* out) {
  const ProviderKind& kind = providerKindNamed(request.name);
  MadeProvider made;
  Status st = makeKind(kind, request, &made);
  if (st.ok()) st = requireDevices(made.provider);
  if (st.ok()) {
    *out = std::move(made.provider);
    return Status::Ok();
  }
  return st.withContext("LOOM_NET=" + request.name);
}

}  // namespace

Status makeProvider(const ProviderRequest& request, std::unique_ptr<Provider>* out, std::vector<std::string>* passedOver) {
  if (!request.name.empty()) return makeNamed(request, out);

  // The best available, in the table's order, each one passed over logged; the last is the fallback.
  const std::span<const ProviderKind> kinds = providerKinds();
  for (size_t i = 0; i + 1 < kinds.size(); ++i) {
    const ProviderKind& kind = kinds[i];
    MadeProvider made;
    Status st = makeKind(kind, request, &made);  // request.name is "": a plugin is the configured one
    if (st.ok() && made.notTheDefault.empty() && (st = requireDevices(made.provider)).ok()) {
      *out = std::move(made.provider);
      return Status::Ok();
    }
    const std::string why = st.ok() ? made.notTheDefault : st.message();
    const LogLevel level = kind.passOverLog(st.ok() ? systemError("{}", why) : st);
    if (level != LogLevel::None) logAt(level, LogSubsys::Net, "{} not used: {}; trying the next provider", kind.name, why);
    if (passedOver) passedOver->push_back(std::string(kind.name) + ": " + why);
  }
  MadeProvider fallback;
  LOOM_TRY(makeKind(kinds.back(), request, &fallback));
  *out = std::move(fallback.provider);
  return Status::Ok();
}

}  // namespace loom::net

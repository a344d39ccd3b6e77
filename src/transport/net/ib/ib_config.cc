#include "transport/net/ib/ib_config.h"

#include "base/settings.h"

namespace loom::net::ib {

namespace {

// A setting whose range base/settings.def gives: a bad value is the provider's error, naming it.
Status readInRange(Setting setting, int* out) {
  LOOM_TRY(checkSetting(setting));
  *out = static_cast<int>(settingInt(setting));
  return Status::Ok();
}

}  // namespace

Status readIbConfig(IbConfig* out) {
  IbConfig c;
  c.hcaSpec = settingText(Setting::IbHca);
  LOOM_TRY(parseHcaFilter(c.hcaSpec, &c.hca));
  LOOM_TRY(readInRange(Setting::IbGidIndex, &c.gidIndex));
  LOOM_TRY(readInRange(Setting::IbQpsPerConnection, &c.qpsPerConnection));  // at most kMaxQpsPerConnection
  LOOM_TRY(readInRange(Setting::IbTimeout, &c.timeout));
  LOOM_TRY(readInRange(Setting::IbRetryCnt, &c.retryCount));
  LOOM_TRY(readInRange(Setting::IbTc, &c.trafficClass));
  LOOM_TRY(readInRange(Setting::IbSl, &c.serviceLevel));
  int flag = 0;
  LOOM_TRY(readInRange(Setting::DmabufEnable, &flag));
  c.dmabufEnable = flag != 0;
  LOOM_TRY(readInRange(Setting::GdrFlushDisable, &flag));
  c.gdrFlushDisable = flag != 0;
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace loom::net::ib

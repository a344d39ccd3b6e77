// The settings table (base/settings.h, settings.def): every setting's default, a valid value and an
// invalid one (an error naming it and what it allows where its reader checks it, or a logged fallback
// to the default), the table's own consistency, its C API (loomParam*), and where a communicator's
// values came from. Typed settings (integer, flag, choice) are checked generically from the table;
// text settings, whose invalid values are invalid only where they are used (a missing file, an unknown
// interface), each have a case below that runs the public API in a child process, and a test fails
// when a text setting has none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "base/log.h"
#include "base/nccl_values.h"
#include "base/settings.h"
#include "base/settings_files.h"
#include "core/communicator.h"
#include "loom.h"
#include "transport/net/gdr_choice.h"
#include "transport/net/socket/socket_provider.h"
#ifdef LOOM_HAVE_IBVERBS
#include "transport/net/ib/ib_config.h"
#endif
#include "../../api/scoped_env.h"

namespace loom {
namespace {

using loomtest::ScopedEnv;

constexpr const char* kComputed = "(computed)";

bool parseInt(const std::string& text, int64_t* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno || end == text.c_str() || *end) return false;
  *out = v;
  return true;
}

struct Range {
  std::optional<int64_t> lo, hi;
};

Range rangeOf(const SettingSpec& spec) {
  if (spec.kind == SettingKind::Flag) return Range{0, 1};
  const std::string allowed = spec.allowed;
  const size_t dots = allowed.find("..");
  Range r;
  int64_t v = 0;
  if (dots == std::string::npos) return r;
  if (parseInt(allowed.substr(0, dots), &v)) r.lo = v;
  if (parseInt(allowed.substr(dots + 2), &v)) r.hi = v;
  return r;
}

std::vector<std::string> wordsOf(const SettingSpec& spec) {
  std::vector<std::string> words;
  std::string allowed = spec.allowed;
  for (size_t at = 0; at <= allowed.size();) {
    const size_t bar = std::min(allowed.find('|', at), allowed.size());
    words.push_back(allowed.substr(at, bar - at));
    at = bar + 1;
  }
  return words;
}

bool typed(const SettingSpec& spec) { return spec.kind != SettingKind::Text; }
bool computed(const SettingSpec& spec) { return std::string(spec.defaultText) == kComputed; }

// A valid value other than the default.
std::string validValue(const SettingSpec& spec) {
  const std::string deflt = spec.defaultText;
  switch (spec.kind) {
    case SettingKind::Flag: return deflt == "1" ? "0" : "1";
    case SettingKind::Choice:
      for (const std::string& w : wordsOf(spec))
        if (w != deflt) return w;
      return deflt;
    case SettingKind::Integer: {
      const Range r = rangeOf(spec);
      for (std::optional<int64_t> candidate : {r.lo, r.hi, r.lo ? std::optional<int64_t>(*r.lo + 1) : std::nullopt})
        if (candidate && std::to_string(*candidate) != deflt) return std::to_string(*candidate);
      return "7";
    }
    case SettingKind::Text: return "some-text";
  }
  return "";
}

// Values the setting's syntax refuses.
std::vector<std::string> invalidValues(const SettingSpec& spec) {
  switch (spec.kind) {
    case SettingKind::Flag: return {"2", "yes", "-1"};
    case SettingKind::Choice: return {"no-such-value"};
    case SettingKind::Integer: {
      std::vector<std::string> bad = {"twelve", "12abc", "3T"};
      const Range r = rangeOf(spec);
      if (r.lo && *r.lo > std::numeric_limits<int64_t>::min()) bad.push_back(std::to_string(*r.lo - 1));
      if (r.hi && *r.hi < std::numeric_limits<int64_t>::max()) bad.push_back(std::to_string(*r.hi + 1));
      return bad;
    }
    case SettingKind::Text: return {};
  }
  return {};
}

// The readers that refuse a bad value of an Error setting, so that a bad value fails where it is read.
std::map<std::string, std::function<Status()>> errorReaders() {
  std::map<std::string, std::function<Status()>> readers;
  auto comm = [] {
    CommSettings s;
    return readCommSettings(nullptr, &s);
  };
  // (LOOM_ALGO is text: its rules' parser refuses a bad value at init, text_settings_test.cc.)
  for (const char* name : {"LOOM_TIMEOUT_MS", "LOOM_CHUNK_BYTES", "LOOM_NCHANNELS", "LOOM_FIFO_SLOTS",
                           "LOOM_RANKS_PER_NODE", "LOOM_TRANSPORT", "LOOM_NET_CONNECT"})
    readers[name] = comm;
  auto socket = [] {
    net::socket::SocketConfig c;
    return net::socket::readSocketConfig(&c);
  };
  for (const char* name : {"LOOM_SOCKET_NTHREADS", "LOOM_NSOCKS_PERTHREAD", "LOOM_SOCKET_BUFFER"}) readers[name] = socket;
  readers["LOOM_NET_GDR_LEVEL"] = [] {
    net::GdrLevel level;
    return net::gdrLevelFromEnvironment(&level);
  };
#ifdef LOOM_HAVE_IBVERBS
  auto ib = [] {
    net::ib::IbConfig c;
    return net::ib::readIbConfig(&c);
  };
  for (const char* name : {"LOOM_IB_GID_INDEX", "LOOM_IB_QPS_PER_CONNECTION", "LOOM_IB_TIMEOUT", "LOOM_IB_RETRY_CNT",
                           "LOOM_IB_TC", "LOOM_IB_SL", "LOOM_DMABUF_ENABLE", "LOOM_GDR_FLUSH_DISABLE"})
    readers[name] = ib;
#endif
  return readers;
}

bool ibOnly(const SettingSpec& spec) {
  const std::string name = spec.name;
  return name.rfind("LOOM_IB_", 0) == 0 || name == "LOOM_DMABUF_ENABLE" || name == "LOOM_GDR_FLUSH_DISABLE";
}

TEST(SettingsTable, IsWellFormed) {
  std::set<std::string> names;
  for (const SettingSpec& spec : allSettings()) {
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(names.insert(spec.name).second) << "declared twice";
    EXPECT_EQ(std::string(spec.name).rfind("LOOM_", 0), 0u);
    EXPECT_EQ(&specOf(spec.id), &spec);
    EXPECT_GT(std::string(spec.meaning).size(), 10u);
    EXPECT_FALSE(std::string(spec.subsystem).empty());
    const std::string deflt = spec.defaultText;
    if (deflt.empty() || deflt == kComputed) continue;
    if (spec.kind == SettingKind::Choice) {
      const std::vector<std::string> words = wordsOf(spec);
      EXPECT_NE(std::find(words.begin(), words.end(), deflt), words.end()) << "the default is not allowed";
    } else if (typed(spec)) {
      ScopedEnv env(spec.name, deflt);
      EXPECT_TRUE(checkSetting(spec.id).ok()) << "the default is not allowed: " << checkSetting(spec.id).message();
    }
  }
  EXPECT_EQ(findSetting("LOOM_TIMEOUT_MS"), &specOf(Setting::TimeoutMs));
  EXPECT_EQ(findSetting("timeout_ms"), &specOf(Setting::TimeoutMs));
  EXPECT_EQ(findSetting("Timeout_Ms"), &specOf(Setting::TimeoutMs));
  EXPECT_EQ(findSetting("LOOM_NO_SUCH_SETTING"), nullptr);
  EXPECT_EQ(findSetting("NCCL_SOCKET_IFNAME"), &specOf(Setting::SocketIfname)) << "an honoured NCCL name";
  EXPECT_EQ(findSetting("NCCL_BUFFSIZE"), nullptr) << "an NCCL name Loom does not read";
  EXPECT_EQ(findSetting(""), nullptr);
}

TEST(SettingsTable, EveryDefault) {
  for (const SettingSpec& spec : allSettings()) {
    SCOPED_TRACE(spec.name);
    ScopedEnv env(spec.name, std::nullopt);
    EXPECT_FALSE(settingIsSet(spec.id));
    EXPECT_STREQ(settingSource(spec.id), "default");
    EXPECT_TRUE(checkSetting(spec.id).ok());
    EXPECT_EQ(settingEffective(spec.id), spec.defaultText);
    if (computed(spec)) {
      EXPECT_EQ(settingInt(spec.id, 1234), 1234) << "a computed default comes from the reader";
      EXPECT_EQ(settingText(spec.id), "");
    } else if (spec.kind == SettingKind::Integer || spec.kind == SettingKind::Flag) {
      int64_t expected = 0;
      ASSERT_TRUE(parseInt(spec.defaultText, &expected));
      EXPECT_EQ(settingInt(spec.id), expected);
    } else {
      EXPECT_EQ(settingText(spec.id), spec.defaultText);
      if (spec.kind == SettingKind::Choice) {
        EXPECT_EQ(settingChoice(spec.id), spec.defaultText);
      }
    }
    // An empty value is no value.
    ScopedEnv empty(spec.name, "");
    EXPECT_STREQ(settingSource(spec.id), "default");
  }
}

TEST(SettingsTable, EveryValidValue) {
  const auto readers = errorReaders();
  for (const SettingSpec& spec : allSettings()) {
    SCOPED_TRACE(spec.name);
    const std::string value = validValue(spec);
    ScopedEnv env(spec.name, value);
    EXPECT_TRUE(settingIsSet(spec.id));
    EXPECT_STREQ(settingSource(spec.id), "environment");
    EXPECT_TRUE(checkSetting(spec.id).ok()) << checkSetting(spec.id).message();
    EXPECT_EQ(settingEffective(spec.id), value);
    EXPECT_EQ(settingText(spec.id), value);
    if (spec.kind == SettingKind::Integer || spec.kind == SettingKind::Flag) {
      int64_t expected = 0;
      ASSERT_TRUE(parseInt(value, &expected));
      EXPECT_EQ(settingInt(spec.id, -42), expected);
    }
    if (spec.kind == SettingKind::Choice) {
      EXPECT_EQ(settingChoice(spec.id), value);
      std::string otherCase = value;
      for (char& c : otherCase) c = static_cast<char>(std::islower(c) ? std::toupper(c) : std::tolower(c));
      ScopedEnv swapped(spec.name, otherCase);
      EXPECT_EQ(settingChoice(spec.id), value) << "choices are read in any case, given as the table spells them";
    }
    if (auto reader = readers.find(spec.name); reader != readers.end()) {
      EXPECT_TRUE(reader->second().ok()) << reader->second().message();
    }
  }
}

TEST(SettingsTable, EveryInvalidValue) {
  ASSERT_TRUE(logEnabled(LogLevel::Warn, LogSubsys::Init)) << "run with LOOM_DEBUG=WARN (meson sets it)";
  const auto readers = errorReaders();
  for (const SettingSpec& spec : allSettings()) {
    if (!typed(spec)) continue;
    for (const std::string& bad : invalidValues(spec)) {
      SCOPED_TRACE(std::string(spec.name) + "=" + bad);
      ScopedEnv env(spec.name, bad);
      const Status checked = checkSetting(spec.id);
      ASSERT_EQ(checked.code(), loomInvalidArgument);
      EXPECT_NE(checked.message().find(spec.name), std::string::npos) << checked.message();
      EXPECT_NE(checked.message().find("allows"), std::string::npos) << checked.message();
      if (spec.onInvalid == OnInvalid::Error) {
        // Refused where it is read.
        auto reader = readers.find(spec.name);
        if (reader == readers.end()) {
          ASSERT_TRUE(ibOnly(spec)) << "an Error setting without a reader that checks it";
          continue;
        }
        const Status read = reader->second();
        EXPECT_EQ(read.code(), loomInvalidArgument) << read.message();
        EXPECT_NE(read.message().find(spec.name), std::string::npos) << read.message();
        continue;
      }
      // Fallback: the default, and a warning (LOOM_DEBUG=WARN, set by meson for this test) naming both.
      testing::internal::CaptureStderr();
      const int64_t used = spec.kind == SettingKind::Choice ? 0 : settingInt(spec.id, 99);
      const std::string choice = spec.kind == SettingKind::Choice ? settingChoice(spec.id) : "";
      const std::string log = testing::internal::GetCapturedStderr();
      EXPECT_NE(log.find(std::string("ignoring ") + spec.name + "=" + bad), std::string::npos) << log;
      if (spec.kind == SettingKind::Choice) {
        EXPECT_EQ(choice, spec.defaultText);
      } else if (computed(spec)) {
        EXPECT_EQ(used, 99);
      } else {
        int64_t expected = 0;
        ASSERT_TRUE(parseInt(spec.defaultText, &expected));
        EXPECT_EQ(used, expected);
      }
    }
  }
}

TEST(SettingsTable, IntegerSyntax) {
  ScopedEnv env("LOOM_PINNED_CACHE", "0x10");
  EXPECT_EQ(settingInt(Setting::PinnedCache), 16);
  setenv("LOOM_PINNED_CACHE", "4K", 1);
  EXPECT_EQ(settingInt(Setting::PinnedCache), 4096);
  setenv("LOOM_PINNED_CACHE", "3m", 1);
  EXPECT_EQ(settingInt(Setting::PinnedCache), 3 << 20);
  setenv("LOOM_PINNED_CACHE", "2G", 1);
  EXPECT_EQ(settingInt(Setting::PinnedCache), int64_t{2} << 30);
  setenv("LOOM_PINNED_CACHE", "99999999999G", 1);  // overflows
  EXPECT_EQ(checkSetting(Setting::PinnedCache).code(), loomInvalidArgument);
}

// Where a communicator's values came from: the environment, the default, or its loomConfig_t.
// The tests expect defaults where they set nothing: NCCL variables the table reads, left in the
// environment that runs this binary, are cleared before any test.
const bool ncclVariablesCleared = [] {
  for (const SettingSpec& spec : allSettings())
    if (spec.ncclUse != NcclUse::None) unsetenv(spec.nccl);
  return true;
}();

// Nor do the machine's settings files count: the user's are named away (/dev/null is an empty file),
// the system's looked for where there are none. Tests of the files read their own
// (settings_files_test.cc).
const bool settingsFilesLeftOut = [] {
  setenv("LOOM_CONF_FILE", "/dev/null", 1);
  setenv("NCCL_CONF_FILE", "/dev/null", 1);
  rereadSettingsFiles("/nonexistent-loom-dir");
  return true;
}();

// NCCL's variables (settings.def's last column): an honoured one is read when the LOOM_ one is unset,
// with the source naming it; the LOOM_ one wins; a value Loom cannot use is ignored, never an error; a
// Similar one is not read.
TEST(NcclVariables, HonouredOnesAreReadWhenLoomsIsUnset) {
  int honoured = 0;
  for (const SettingSpec& spec : allSettings()) {
    if (spec.ncclUse != NcclUse::Honoured) continue;
    SCOPED_TRACE(spec.nccl);
    ++honoured;
    const std::string value = validValue(spec);
    ScopedEnv loom(spec.name, std::nullopt);
    ScopedEnv nccl(spec.nccl, value);
    EXPECT_TRUE(settingIsSet(spec.id));
    EXPECT_EQ(std::string(settingSource(spec.id)), std::string("environment (") + spec.nccl + ")");
    EXPECT_EQ(settingText(spec.id), value);
    EXPECT_EQ(settingEffective(spec.id), value);
    EXPECT_TRUE(checkSetting(spec.id).ok());
    if (spec.kind == SettingKind::Integer || spec.kind == SettingKind::Flag) {
      int64_t expected = 0;
      ASSERT_TRUE(parseInt(value, &expected));
      EXPECT_EQ(settingInt(spec.id, -42), expected);
    }
    if (spec.kind == SettingKind::Choice) {
      EXPECT_EQ(settingChoice(spec.id), value);
    }
  }
  EXPECT_GE(honoured, 20) << "NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_DEBUG... are honoured";
}

TEST(NcclVariables, LoomsWins) {
  for (const SettingSpec& spec : allSettings()) {
    if (spec.ncclUse != NcclUse::Honoured) continue;
    SCOPED_TRACE(spec.nccl);
    const std::string mine = validValue(spec);
    const std::string theirs = spec.kind == SettingKind::Text ? "other-text" : spec.defaultText;
    if (theirs.empty() || theirs == mine || computed(spec)) continue;
    ScopedEnv loom(spec.name, mine);
    ScopedEnv nccl(spec.nccl, theirs);
    EXPECT_STREQ(settingSource(spec.id), "environment");
    EXPECT_EQ(settingText(spec.id), mine);
  }
  ScopedEnv loom("LOOM_SOCKET_IFNAME", "eth1");
  ScopedEnv nccl("NCCL_SOCKET_IFNAME", "eth0");
  EXPECT_EQ(settingText(Setting::SocketIfname), "eth1");
}

TEST(NcclVariables, UnusableValuesAreIgnoredNotErrors) {
  for (const SettingSpec& spec : allSettings()) {
    if (spec.ncclUse != NcclUse::Honoured || !typed(spec)) continue;
    for (const std::string& bad : invalidValues(spec)) {
      SCOPED_TRACE(std::string(spec.nccl) + "=" + bad);
      ScopedEnv loom(spec.name, std::nullopt);
      ScopedEnv nccl(spec.nccl, bad);
      EXPECT_FALSE(settingIsSet(spec.id));
      EXPECT_STREQ(settingSource(spec.id), "default");
      EXPECT_TRUE(checkSetting(spec.id).ok()) << checkSetting(spec.id).message();
    }
  }
}

// NCCL_ALGO, NCCL_PROTO, NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_RUNTIME_CONNECT are read in NCCL's syntax and translated where
// a LOOM_ value says the same; otherwise not read (the reason is logged at first init).
TEST(NcclVariables, TranslatedOnesSpeakNcclsSyntax) {
  struct Case {
    const char* variable;
    const char* ncclValue;
    Setting setting;
    const char* loomValue;  // "": not read
  };
  const Case cases[] = {
      {"NCCL_ALGO", "Ring", Setting::Algo, "ring"},
      {"NCCL_ALGO", "tree", Setting::Algo, "tree"},
      {"NCCL_ALGO", "^Ring,NVLS,NVLSTree,PAT,CollnetDirect,CollnetChain", Setting::Algo, "tree"},
      {"NCCL_ALGO", "Ring,NVLS", Setting::Algo, "ring"},
      {"NCCL_ALGO", "Ring,Tree", Setting::Algo, ""},         // the tuner's choice
      {"NCCL_ALGO", "^NVLS", Setting::Algo, ""},             // ring and tree left: the tuner's choice
      {"NCCL_ALGO", "NVLS", Setting::Algo, ""},              // nothing Loom has
      {"NCCL_ALGO", "Rings", Setting::Algo, ""},             // no such algorithm
      // NCCL 2.24's per-collective sections become LOOM_ALGO's rules; what Loom cannot say is left out.
      {"NCCL_ALGO", "allreduce:ring", Setting::Algo, "allreduce:ring"},
      {"NCCL_ALGO", "allreduce:tree,ring;Broadcast:Ring", Setting::Algo, "broadcast:ring"},
      {"NCCL_ALGO", "allgather:^tree,NVLS,PAT,CollnetDirect,CollnetChain,NVLSTree;Tree", Setting::Algo,
       "tree,allgather:ring"},
      {"NCCL_ALGO", "allreduce:NVLS;sendrecv:ring", Setting::Algo, ""},
      {"NCCL_PROTO", "Simple", Setting::DeviceLlBytes, "0"},
      {"NCCL_PROTO", "^LL,LL128", Setting::DeviceLlBytes, "0"},
      {"NCCL_PROTO", "LL128,simple", Setting::DeviceLlBytes, "0"},
      {"NCCL_PROTO", "LL,Simple", Setting::DeviceLlBytes, ""},  // Loom's default
      {"NCCL_PROTO", "LL", Setting::DeviceLlBytes, ""},         // every message as LL: not possible
      {"NCCL_PROTO", "^LL,LL128,Simple", Setting::DeviceLlBytes, ""},
      {"NCCL_DEBUG", "INFO", Setting::Debug, "INFO"},
      {"NCCL_DEBUG", "trace", Setting::Debug, "TRACE"},
      {"NCCL_DEBUG", "VERSION", Setting::Debug, "WARN"},
      {"NCCL_DEBUG", "ABORT", Setting::Debug, "WARN"},
      {"NCCL_DEBUG", "NONE", Setting::Debug, ""},
      {"NCCL_DEBUG_SUBSYS", "INIT,NET", Setting::DebugSubsys, "init,net"},
      {"NCCL_DEBUG_SUBSYS", "GRAPH,TUNING,ENV,INIT", Setting::DebugSubsys, "topo,graph,tune,init"},
      {"NCCL_DEBUG_SUBSYS", "^PROXY,COLL", Setting::DebugSubsys, "^coll"},
      {"NCCL_DEBUG_SUBSYS", "ALL", Setting::DebugSubsys, "ALL"},
      {"NCCL_DEBUG_SUBSYS", "ALLOC,PROXY", Setting::DebugSubsys, ""},
      {"NCCL_RUNTIME_CONNECT", "0", Setting::NetConnect, "eager"},
      {"NCCL_RUNTIME_CONNECT", "1", Setting::NetConnect, "lazy"},
      {"NCCL_RUNTIME_CONNECT", "yes", Setting::NetConnect, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.variable) + "=" + c.ncclValue);
    const SettingSpec& spec = specOf(c.setting);
    EXPECT_EQ(spec.ncclUse, NcclUse::Translated);
    EXPECT_STREQ(spec.nccl, c.variable);
    ScopedEnv loom(spec.name, std::nullopt);
    ScopedEnv nccl(c.variable, c.ncclValue);
    const NcclTranslation t = translateNcclValue(c.setting, c.ncclValue);
    EXPECT_EQ(t.value, c.loomValue);
    EXPECT_EQ(t.whyNot.empty(), *c.loomValue != '\0') << t.whyNot;
    EXPECT_EQ(settingIsSet(c.setting), *c.loomValue != '\0');
    EXPECT_TRUE(checkSetting(c.setting).ok());
    if (*c.loomValue) {
      EXPECT_EQ(settingText(c.setting), c.loomValue);
      if (c.setting == Setting::Algo) {  // rules a communicator takes
        AlgorithmRules rules;
        EXPECT_TRUE(AlgorithmRules::parse(t.value, &rules).ok());
      }
      EXPECT_EQ(std::string(settingSource(c.setting)), std::string("environment (") + c.variable + ")");
    } else {
      EXPECT_STREQ(settingSource(c.setting), "default");
    }
  }
  ScopedEnv loomAlgo("LOOM_ALGO", "direct");  // Loom's own wins
  ScopedEnv ncclAlgo("NCCL_ALGO", "Ring");
  EXPECT_EQ(settingText(Setting::Algo), "direct");
  // A value translated in part says what it left out.
  const NcclTranslation part = translateNcclValue(Setting::Algo, "allreduce:tree,ring;broadcast:ring");
  EXPECT_NE(part.leftOut.find("allreduce:tree,ring (it allows both ring and tree"), std::string::npos) << part.leftOut;
  EXPECT_EQ(findSetting("NCCL_PROTO"), &specOf(Setting::DeviceLlBytes));
}

TEST(NcclVariables, SimilarOnesAreNotRead) {
  int similar = 0;
  for (const SettingSpec& spec : allSettings()) {
    if (spec.ncclUse != NcclUse::Similar) continue;
    SCOPED_TRACE(spec.nccl);
    ++similar;
    ScopedEnv loom(spec.name, std::nullopt);
    ScopedEnv nccl(spec.nccl, validValue(spec));
    EXPECT_FALSE(settingIsSet(spec.id));
  }
  EXPECT_GE(similar, 1);
  for (const SettingSpec& spec : allSettings())
    EXPECT_EQ(spec.ncclUse == NcclUse::None, std::string(spec.nccl).empty()) << spec.name;
}

// Run in a child (a death test): the log reads its settings once per process.
[[noreturn]] void logUnreadInChild() {
  setenv("LOOM_DEBUG", "INFO", 1);
  setenv("NCCL_NTHREADS", "512", 1);
  setenv("NCCL_BUFFSIZE", "4194304", 1);
  setenv("NCCL_ALGO", "^NVLS", 1);
  setenv("NCCL_PROTO", "Simple", 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("LOOM_SOCKET_IFNAME", "eth0", 1);
  setenv("NCCL_IB_HCA", "mlx5_0", 1);
  logUnreadNcclVariables();
  logUnreadNcclVariables();  // once per process
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(NcclVariables, UnreadOnesAreLoggedOnceAtInfo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(logUnreadInChild(), ::testing::ExitedWithCode(0), "NCCL_NTHREADS=512 is set; Loom does not read it");
  EXPECT_EXIT(logUnreadInChild(), ::testing::ExitedWithCode(0),
              "NCCL_BUFFSIZE=4194304 is set; Loom does not read it \\(LOOM_DEVICE_CHUNK_BYTES");
  EXPECT_EXIT(logUnreadInChild(), ::testing::ExitedWithCode(0),
              "NCCL_ALGO=\\^NVLS is set; not read: it allows both ring and tree");
  EXPECT_EXIT(logUnreadInChild(), ::testing::ExitedWithCode(0), "NCCL_PROTO=Simple is read as LOOM_DEVICE_LL_BYTES=0");
  EXPECT_EXIT(logUnreadInChild(), ::testing::ExitedWithCode(0),
              "NCCL_SOCKET_IFNAME=lo is set; LOOM_SOCKET_IFNAME is set too and wins");
}

TEST(SettingsTable, CommunicatorRecordsSources) {
  ScopedEnv chunk("LOOM_CHUNK_BYTES", "65536");
  ScopedEnv timeout("LOOM_TIMEOUT_MS", "5000");
  ScopedEnv channels("LOOM_NCHANNELS", std::nullopt);
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = 7000;
  CommSettings s;
  ASSERT_TRUE(readCommSettings(&config, &s).ok());
  EXPECT_EQ(s.timeoutMs, 7000);
  std::map<std::string, SettingOrigin> byName;
  for (const SettingOrigin& o : s.origins) byName[specOf(o.id).name] = o;
  EXPECT_EQ(byName["LOOM_TIMEOUT_MS"].source, "loomConfig_t.timeoutMs");
  EXPECT_EQ(byName["LOOM_TIMEOUT_MS"].value, "7000");
  EXPECT_EQ(byName["LOOM_CHUNK_BYTES"].source, "environment");
  EXPECT_EQ(byName["LOOM_CHUNK_BYTES"].value, "65536");
  EXPECT_EQ(byName["LOOM_NCHANNELS"].source, "default");
  EXPECT_EQ(byName["LOOM_NCHANNELS"].value, "2");
  EXPECT_EQ(s.chunkBytes, 65536u);
}

// ---- the C API (loomParam*)

TEST(SettingsCApi, BindAndRead) {
  ScopedEnv env("LOOM_NCHANNELS", "3");
  loomParamHandle_t h = nullptr;
  ASSERT_EQ(loomParamBind(&h, "LOOM_NCHANNELS"), loomSuccess);
  int32_t i32 = 0;
  ASSERT_EQ(loomParamGetI32(h, &i32), loomSuccess);
  EXPECT_EQ(i32, 3);
  uint8_t u8 = 0;
  ASSERT_EQ(loomParamGetU8(h, &u8), loomSuccess);
  EXPECT_EQ(u8, 3);
  const char* text = nullptr;
  ASSERT_EQ(loomParamGetStr(h, &text), loomSuccess);
  EXPECT_STREQ(text, "3");
  char buffer[8];
  int len = 0;
  ASSERT_EQ(loomParamGet(h, buffer, sizeof buffer, &len), loomSuccess);
  EXPECT_STREQ(buffer, "3");
  EXPECT_EQ(len, 2);
  EXPECT_EQ(loomParamGet(h, buffer, 1, &len), loomInvalidArgument);
  EXPECT_EQ(len, 2);
  // Any case, with or without the prefix.
  loomParamHandle_t same = nullptr;
  ASSERT_EQ(loomParamBind(&same, "nchannels"), loomSuccess);
  EXPECT_EQ(same, h);
  const char* value = nullptr;
  int valueLen = 0;
  ASSERT_EQ(loomParamGetParameter("loom_nchannels", &value, &valueLen), loomSuccess);
  EXPECT_STREQ(value, "3");
  EXPECT_EQ(valueLen, 1);
}

TEST(SettingsCApi, Refusals) {
  loomParamHandle_t h = nullptr;
  EXPECT_EQ(loomParamBind(&h, "LOOM_NO_SUCH_SETTING"), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_NO_SUCH_SETTING"), std::string::npos);
  EXPECT_EQ(loomParamBind(nullptr, "LOOM_NCHANNELS"), loomInvalidArgument);
  int32_t v = 0;
  EXPECT_EQ(loomParamGetI32(nullptr, &v), loomInvalidArgument);
  // A text setting has no integer value.
  ASSERT_EQ(loomParamBind(&h, "LOOM_TOPO_FILE"), loomSuccess);
  EXPECT_EQ(loomParamGetI32(h, &v), loomInvalidArgument);
  // 8 GiB does not fit 8 bits.
  ScopedEnv unset("LOOM_PINNED_CACHE", std::nullopt);
  ASSERT_EQ(loomParamBind(&h, "LOOM_PINNED_CACHE"), loomSuccess);
  int8_t small = 0;
  EXPECT_EQ(loomParamGetI8(h, &small), loomInvalidArgument);
  uint64_t big = 0;
  ASSERT_EQ(loomParamGetU64(h, &big), loomSuccess);
  EXPECT_EQ(big, uint64_t{8} << 30);
  // An invalid value is refused, named.
  ScopedEnv bad("LOOM_PINNED_CACHE", "lots");
  EXPECT_EQ(loomParamGetU64(h, &big), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("LOOM_PINNED_CACHE=lots"), std::string::npos);
  // A computed default has no value until set.
  ScopedEnv spin("LOOM_SPIN_US", std::nullopt);
  ASSERT_EQ(loomParamBind(&h, "LOOM_SPIN_US"), loomSuccess);
  EXPECT_EQ(loomParamGetI32(h, &v), loomInvalidUsage);
  const char* text = nullptr;
  ASSERT_EQ(loomParamGetStr(h, &text), loomSuccess);
  EXPECT_STREQ(text, kComputed);
}

TEST(SettingsCApi, AllKeys) {
  const char** keys = nullptr;
  int n = 0;
  ASSERT_EQ(loomParamGetAllParameterKeys(&keys, &n), loomSuccess);
  ASSERT_EQ(n, static_cast<int>(allSettings().size()));
  for (int i = 0; i < n; ++i) EXPECT_STREQ(keys[i], allSettings()[static_cast<size_t>(i)].name);
  testing::internal::CaptureStderr();
  loomParamDumpAll();
  const std::string dump = testing::internal::GetCapturedStderr();
  for (const SettingSpec& spec : allSettings()) EXPECT_NE(dump.find(std::string(spec.name) + "="), std::string::npos) << spec.name;
}

}  // namespace
}  // namespace loom

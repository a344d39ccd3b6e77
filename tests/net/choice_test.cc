// Choosing a provider (LOOM_NET) from the table of providers, finding plugins as NCCL does, and what a user sees when it goes
// wrong: an unknown name is loomInvalidArgument, a plugin that cannot load or a provider that fails
// at init is an error naming it (or, when nothing was asked for, a logged fallback), and communicator
// init reports it on every rank instead of crashing or waiting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../api/harness.h"
#include "base/settings.h"
#include "core/build_info.h"
#include "loom.h"
#include "plugin_files.h"
#include "transport/net/plugin/plugin_loader.h"
#include "transport/net/provider_choice.h"
#include "transport/net/provider_table.h"

namespace loom::net {
namespace {

using Env = loomtest::ScopedEnv;

TEST(ProviderChoice, NamedProviders) {
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"socket", ""}, &p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p->name(), "socket");
  st = makeProvider({"SOCKET", ""}, &p);  // names are case-insensitive, as NCCL_NET's
  ASSERT_TRUE(st.ok()) << st.message();
  st = makeProvider({"ucx", ""}, &p);
  if (providerKindNamed("ucx").compiledIn) {
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(p->name(), "ucx");
  } else {
    EXPECT_EQ(st.code(), loomSystemError) << st.message();
  }
}

// The table names every provider LOOM_NET accepts: each word of the table's is its entry (made as
// this build has it, or refused saying why it is missing), any other word is a plugin's name, and
// settings.def's LOOM_NET hint lists the table's words.
TEST(ProviderTable, NamesEveryProviderLoomNetAccepts) {
  Env plugin("LOOM_NET_PLUGIN", "none");
  int pluginEntries = 0;
  std::set<std::string> words;
  for (const ProviderKind& kind : providerKinds()) {
    SCOPED_TRACE(kind.name);
    EXPECT_GT(std::string(kind.description).size(), 10u);
    EXPECT_NE(kind.passOverLog, nullptr);
    EXPECT_EQ(kind.make != nullptr, kind.compiledIn) << "a factory exactly when compiled in";
    if (kind.anyOtherName) {
      ++pluginEntries;
      continue;
    }
    words.insert(kind.name);
    EXPECT_EQ(&providerKindNamed(kind.name), &kind);
    std::unique_ptr<Provider> p;
    const Status st = makeProvider({kind.name, ""}, &p);
    if (!kind.compiledIn) {
      EXPECT_EQ(st.code(), loomSystemError);
      EXPECT_NE(st.message().find(kind.missing), std::string::npos) << st.message();
    } else if (st.ok()) {
      EXPECT_EQ(p->name(), kind.name);
    } else {
      // Compiled in but not usable here (ib without an ACTIVE port): an error, never another provider.
      EXPECT_NE(st.message().find("LOOM_NET=" + std::string(kind.name)), std::string::npos) << st.message();
    }
  }
  EXPECT_EQ(pluginEntries, 1);
  EXPECT_TRUE(words.count("socket"));
  EXPECT_TRUE(providerKinds().back().compiledIn) << "the default choice's fallback is always there";
  EXPECT_STREQ(providerKinds().back().name, "socket");
  // Any other word is a plugin's name.
  EXPECT_TRUE(providerKindNamed("warpdrive").anyOtherName);
  EXPECT_TRUE(providerKindNamed("plugin").anyOtherName) << "plugins are named by the name they report";
  // settings.def cannot ask the table (base is below transport): its hint must list the same words.
  std::set<std::string> declared;
  std::string allowed = specOf(Setting::Net).allowed;
  for (size_t at = 0; at <= allowed.size();) {
    const size_t bar = std::min(allowed.find('|', at), allowed.size());
    declared.insert(allowed.substr(at, bar - at));
    at = bar + 1;
  }
  EXPECT_EQ(declared.erase("<plugin name>"), 1u) << allowed;
  EXPECT_EQ(declared, words) << allowed;
  for (const std::string& word : words) EXPECT_NE(providerWords().find(word), std::string::npos);
  // The build's list (loom-info's) is the table's entries compiled in.
  std::vector<std::string> built;
  for (const ProviderKind& kind : providerKinds())
    if (kind.compiledIn) built.push_back(kind.name);
  EXPECT_EQ(buildInfo().netProviders, built);
}

TEST(ProviderChoice, UnknownNameIsInvalidArgument) {
  Env plugin("LOOM_NET_PLUGIN", "none");
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"warpdrive", ""}, &p);
  EXPECT_EQ(st.code(), loomInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("warpdrive"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("libnccl-net-warpdrive.so"), std::string::npos) << st.message();
}

TEST(ProviderChoice, PluginsAreFoundAsNcclFindsThem) {
  // A full path, by name through NCCL_NET_PLUGIN, newest table first.
  plugin::LoadedPlugin* v8 = nullptr;
  plugin::LoadedPlugin* v12 = nullptr;
  ASSERT_TRUE(plugin::openPlugin(pluginFile(8), &v8).ok());
  ASSERT_TRUE(plugin::openPlugin(pluginFile(12), &v12).ok());
  EXPECT_EQ(v8->version, 8);
  EXPECT_EQ(v12->version, 12);
  EXPECT_STREQ(v12->calls->name(), "loomsock");
  Env unset("LOOM_NET_PLUGIN", nullptr);
  Env nccl("NCCL_NET_PLUGIN", pluginFile(12).c_str());
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"", ""}, &p);  // the best available: the configured plugin
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p->name(), "loomsock");
  st = makeProvider({"LoomSock", ""}, &p);
  ASSERT_TRUE(st.ok()) << st.message();
}

TEST(ProviderChoice, PluginThatCannotLoad) {
  Env plugin("LOOM_NET_PLUGIN", "/nonexistent/libnccl-net-nothing.so");
  std::unique_ptr<Provider> p;
  // Asked for by name: an error naming the file and why.
  Status st = makeProvider({"nothing", ""}, &p);
  EXPECT_NE(st.code(), loomSuccess);
  EXPECT_NE(st.message().find("/nonexistent/libnccl-net-nothing.so"), std::string::npos) << st.message();
  // Not asked for: a logged fallback to the next provider.
  st = makeProvider({"", ""}, &p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(p->name() == "socket" || p->name() == "ucx") << p->name();
}

// A build without libibverbs' headers (-Dibverbs=disabled, or libibverbs-dev absent) says so.
TEST(ProviderChoice, BuildWithoutIbSaysSo) {
  if (providerKindNamed("ib").compiledIn) GTEST_SKIP() << "this build has the ib provider";
  Env plugin("LOOM_NET_PLUGIN", "none");
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"ib", ""}, &p);
  EXPECT_EQ(st.code(), loomSystemError);
  EXPECT_NE(st.message().find("this build has no ib provider (built without libibverbs headers)"), std::string::npos)
      << st.message();
  st = makeProvider({"", ""}, &p);  // the default choice goes on without it
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(p->name(), "ib");
}

TEST(ProviderChoice, LibraryWithoutPluginTables) {
  plugin::LoadedPlugin* p = nullptr;
  Status st = plugin::openPlugin("libm.so.6", &p);
  EXPECT_EQ(st.code(), loomSystemError);
  EXPECT_NE(st.message().find("ncclNetPlugin_v8..v12"), std::string::npos) << st.message();
}

TEST(ProviderChoice, PluginThatFailsAtInit) {
  Env plugin("LOOM_NET_PLUGIN", pluginFile(11).c_str());
  Env bad("LOOM_SOCKET_NTHREADS", "99");  // the plugin's own init refuses this
  std::unique_ptr<Provider> p;
  Status st = makeProvider({"loomsock", ""}, &p);
  EXPECT_EQ(st.code(), loomInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("init"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("LOOM_SOCKET_NTHREADS"), std::string::npos) << st.message();
}

// Through the API: every rank's init fails with the reason; none waits for the others.
TEST(ProviderChoice, CommunicatorInitReportsAnUnknownProvider) {
  Env net("LOOM_NET", "warpdrive");
  Env plugin("LOOM_NET_PLUGIN", "none");
  Env transport("LOOM_TRANSPORT", "net");
  Env timeout("LOOM_TIMEOUT_MS", "20000");
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomResult_t> results(3, loomSuccess);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      loomComm_t comm = nullptr;
      results[r] = loomCommInitRank(&comm, 3, id, r);
      errors[r] = loomGetLastError(comm);
      if (comm) loomCommDestroy(comm);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[r], loomInvalidArgument) << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find("warpdrive"), std::string::npos) << "rank " << r << ": " << errors[r];
  }
}

}  // namespace
}  // namespace loom::net

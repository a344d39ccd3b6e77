// The settings files below the environment (base/settings_files.h, base/conf_file.h): their syntax,
// where they are looked for, their order (the environment, then Loom's loom.conf, then NCCL's files; the
// user's over the system's), the source a value from them names, and a bad line of Loom's files named by
// file and line where a communicator starts, in loomParam* and in loomGetLastError. Each test writes
// its files into a directory of its own and has them read again (rereadSettingsFiles), the system's
// files looked for there too; what starts a communicator or logs runs in a child process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "../../api/scoped_env.h"
#include "base/conf_file.h"
#include "base/settings.h"
#include "base/settings_files.h"
#include "core/communicator.h"
#include "loom.h"

namespace loom {
namespace {

using loomtest::ScopedEnv;
namespace fs = std::filesystem;

// A directory of the test's own, removed after it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "loom-settings-files-XXXXXX").string();
    if (mkdtemp(pattern.data())) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `text` to `name` under the directory (making its folders) and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = fs::path(path_) / name;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  std::string path_;
};

// The variables that say where the files are, cleared for a test, with the LOOM_ and NCCL_ ones the
// tests below set; the files are read again from `dir` (the system's there too) when it starts and
// when it ends.
class SettingsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    reread();
  }
  void TearDown() override { rereadSettingsFiles(dir_.path() + "/no-system-files"); }

  void reread() const { rereadSettingsFiles(dir_.path()); }
  std::string write(const std::string& name, const std::string& text) const { return dir_.write(name, text); }
  const std::string& dir() const { return dir_.path(); }

 private:
  ScratchDir dir_;
  std::vector<std::unique_ptr<ScopedEnv>> cleared_ = [] {
    std::vector<std::unique_ptr<ScopedEnv>> env;
    for (const char* name : {"LOOM_CONF_FILE", "NCCL_CONF_FILE", "XDG_CONFIG_HOME", "LOOM_NCHANNELS", "LOOM_FIFO_SLOTS",
                             "LOOM_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "LOOM_IB_TC", "NCCL_IB_TC", "LOOM_IB_SL",
                             "NCCL_IB_SL", "LOOM_ALGO", "NCCL_ALGO", "LOOM_DEVICE_LL_BYTES", "NCCL_PROTO",
                             "LOOM_CHUNK_BYTES", "NCCL_BUFFSIZE", "LOOM_TIMEOUT_MS"})
      env.push_back(std::make_unique<ScopedEnv>(name, std::nullopt));
    // HOME: a directory without either user file, so that the user's own stay out of the tests.
    env.push_back(std::make_unique<ScopedEnv>("HOME", "/nonexistent-loom-home"));
    return env;
  }();
};

std::string sourceOf(Setting s) { return settingSource(s); }

// ---- the syntax of one file

TEST(ConfFileSyntax, NameValueCommentsAndBlankLines) {
  const ConfFile f = parseConfText("a.conf",
                                   "# a comment\n"
                                   "\n"
                                   "LOOM_A=1\n"
                                   "  LOOM_B = two words  \n"
                                   "not a setting\n"
                                   "=no name\n"
                                   "9LIVES=1\n"
                                   "LOOM_C=\n"
                                   "LOOM_D=a=b#c\r\n"
                                   "   # indented comment\n"
                                   "\t\n"
                                   "LOOM_E=last, no newline");
  ASSERT_EQ(f.entries.size(), 5u);
  const std::vector<std::tuple<std::string, std::string, int>> expected = {
      {"LOOM_A", "1", 3}, {"LOOM_B", "two words", 4}, {"LOOM_C", "", 8}, {"LOOM_D", "a=b#c", 9},
      {"LOOM_E", "last, no newline", 12}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(f.entries[i].name, std::get<0>(expected[i]));
    EXPECT_EQ(f.entries[i].value, std::get<1>(expected[i]));
    EXPECT_EQ(f.entries[i].line, std::get<2>(expected[i]));
  }
  ASSERT_EQ(f.malformed.size(), 3u);
  EXPECT_EQ(f.malformed[0].line, 5);
  EXPECT_EQ(f.malformed[0].text, "not a setting");
  EXPECT_EQ(f.malformed[1].line, 6);
  EXPECT_EQ(f.malformed[2].line, 7);
  EXPECT_TRUE(parseConfText("empty", "").entries.empty());
}

TEST(ConfFileSyntax, MissingUnreadableAndEmptyFiles) {
  ScratchDir dir;
  ConfFile f;
  bool exists = true;
  EXPECT_TRUE(readConfFile(dir.path() + "/absent.conf", &f, &exists).ok());
  EXPECT_FALSE(exists);
  const Status directory = readConfFile(dir.path(), &f, &exists);
  EXPECT_EQ(directory.code(), loomInvalidArgument);
  EXPECT_NE(directory.message().find(dir.path()), std::string::npos) << directory.message();
  ASSERT_TRUE(readConfFile("/dev/null", &f, &exists).ok());
  EXPECT_TRUE(exists);
  EXPECT_TRUE(f.entries.empty());
  ASSERT_TRUE(readConfFile(dir.write("x.conf", "LOOM_NCHANNELS=3\n"), &f, &exists).ok());
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].value, "3");
}

// ---- where the files are

TEST_F(SettingsFilesTest, WhereTheyAreLookedFor) {
  auto paths = [&] {
    std::vector<std::string> found;
    for (const SettingsFileLocation& at : settingsFileLocations(dir())) found.push_back(at.path);
    return found;
  };
  const std::string sys = dir();
  {
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(paths(), (std::vector<std::string>{"/home/someone/.config/loom/loom.conf", sys + "/loom.conf",
                                                 "/home/someone/.nccl.conf", sys + "/nccl.conf"}));
    ScopedEnv xdg("XDG_CONFIG_HOME", "/xdg");
    EXPECT_EQ(paths()[0], "/xdg/loom/loom.conf");
    ScopedEnv relative("XDG_CONFIG_HOME", "relative/dir");  // the XDG rules ignore it
    EXPECT_EQ(paths()[0], "/home/someone/.config/loom/loom.conf");
  }
  ScopedEnv loom("LOOM_CONF_FILE", "/x/mine.conf");
  ScopedEnv nccl("NCCL_CONF_FILE", "/y/theirs.conf");
  EXPECT_EQ(paths(), (std::vector<std::string>{"/x/mine.conf", sys + "/loom.conf", "/y/theirs.conf", sys + "/nccl.conf"}));
  const std::vector<SettingsFileLocation> at = settingsFileLocations(dir());
  ASSERT_EQ(at.size(), 4u);
  EXPECT_STREQ(at[0].namedBy, "LOOM_CONF_FILE");
  EXPECT_EQ(at[0].kind, SettingsFileKind::Loom);
  EXPECT_STREQ(at[2].namedBy, "NCCL_CONF_FILE");
  EXPECT_EQ(at[2].kind, SettingsFileKind::Nccl);
  EXPECT_STREQ(at[3].namedBy, "");
  // The system's file named as the user's is read once.
  ScopedEnv system("LOOM_CONF_FILE", sys + "/loom.conf");
  EXPECT_EQ(paths(), (std::vector<std::string>{sys + "/loom.conf", "/y/theirs.conf", sys + "/nccl.conf"}));
}

TEST_F(SettingsFilesTest, UsersFilesThroughHomeAndXdg) {
  ScopedEnv home("HOME", dir() + "/home");
  write("home/.config/loom/loom.conf", "LOOM_NCHANNELS=3\n");
  write("home/.nccl.conf", "NCCL_IB_TC=96\n");
  reread();
  EXPECT_EQ(settingInt(Setting::NChannels), 3);
  EXPECT_EQ(sourceOf(Setting::NChannels), dir() + "/home/.config/loom/loom.conf:1");
  EXPECT_EQ(settingInt(Setting::IbTc), 96);
  EXPECT_EQ(sourceOf(Setting::IbTc), dir() + "/home/.nccl.conf:1 (NCCL_IB_TC)");

  ScopedEnv xdg("XDG_CONFIG_HOME", dir() + "/xdg");
  write("xdg/loom/loom.conf", "LOOM_NCHANNELS=5\n");
  reread();
  EXPECT_EQ(settingInt(Setting::NChannels), 5);
  EXPECT_EQ(sourceOf(Setting::NChannels), dir() + "/xdg/loom/loom.conf:1");
}

// ---- their order, and the source they name

TEST_F(SettingsFilesTest, EnvironmentOverLoomsFileOverNcclsFiles) {
  const std::string loomConf = write("mine/loom.conf", "LOOM_SOCKET_IFNAME=eth1\nLOOM_NCHANNELS=3\n");
  const std::string ncclConf = write("theirs/nccl.conf", "NCCL_SOCKET_IFNAME=eth2\nNCCL_IB_SL=4\n");
  ScopedEnv loom("LOOM_CONF_FILE", loomConf);
  ScopedEnv nccl("NCCL_CONF_FILE", ncclConf);
  reread();
  // loom.conf over NCCL's file.
  EXPECT_EQ(settingText(Setting::SocketIfname), "eth1");
  EXPECT_EQ(sourceOf(Setting::SocketIfname), loomConf + ":1");
  EXPECT_TRUE(settingIsSet(Setting::SocketIfname));
  // NCCL's file where loom.conf says nothing.
  EXPECT_EQ(settingInt(Setting::IbSl), 4);
  EXPECT_EQ(sourceOf(Setting::IbSl), ncclConf + ":2 (NCCL_IB_SL)");
  EXPECT_EQ(settingEffective(Setting::IbSl), "4");
  // The environment over both: NCCL's variable too, as NCCL has the environment over its files.
  {
    ScopedEnv ncclEnv("NCCL_SOCKET_IFNAME", "eth3");
    EXPECT_EQ(settingText(Setting::SocketIfname), "eth3");
    EXPECT_EQ(sourceOf(Setting::SocketIfname), "environment (NCCL_SOCKET_IFNAME)");
    ScopedEnv loomEnv("LOOM_SOCKET_IFNAME", "eth4");
    EXPECT_EQ(settingText(Setting::SocketIfname), "eth4");
    EXPECT_EQ(sourceOf(Setting::SocketIfname), "environment");
  }
  {
    ScopedEnv loomEnv("LOOM_NCHANNELS", "7");
    EXPECT_EQ(settingInt(Setting::NChannels), 7);
    EXPECT_EQ(sourceOf(Setting::NChannels), "environment");
  }
  EXPECT_EQ(settingInt(Setting::NChannels), 3);
  // A communicator's record of where its values came from.
  CommSettings s;
  ASSERT_TRUE(readCommSettings(nullptr, &s).ok());
  EXPECT_EQ(s.nchannels, 3);
  EXPECT_EQ(s.forcedChannels, 3) << "a value from a file is set as one from the environment is";
  for (const SettingOrigin& o : s.origins) {
    if (o.id == Setting::NChannels) {
      EXPECT_EQ(o.source, loomConf + ":2");
      EXPECT_EQ(o.value, "3");
    }
  }
  // loomParam* reads through the same layers.
  loomParamHandle_t h = nullptr;
  ASSERT_EQ(loomParamBind(&h, "NCCL_IB_SL"), loomSuccess);
  int32_t sl = 0;
  ASSERT_EQ(loomParamGetI32(h, &sl), loomSuccess);
  EXPECT_EQ(sl, 4);
  const char* text = nullptr;
  ASSERT_EQ(loomParamGetParameter("LOOM_SOCKET_IFNAME", &text, nullptr), loomSuccess);
  EXPECT_STREQ(text, "eth1");
}

TEST_F(SettingsFilesTest, UsersOverSystems) {
  ScopedEnv home("HOME", dir() + "/home");
  write("home/.config/loom/loom.conf", "LOOM_NCHANNELS=3\n");
  write("loom.conf", "# the system's\nLOOM_NCHANNELS=4\nLOOM_FIFO_SLOTS=8\n");
  write("home/.nccl.conf", "NCCL_IB_TC=96\n");
  write("nccl.conf", "NCCL_IB_TC=32\nNCCL_IB_SL=3\n");
  reread();
  EXPECT_EQ(settingInt(Setting::NChannels), 3);
  EXPECT_EQ(settingInt(Setting::FifoSlots), 8);
  EXPECT_EQ(sourceOf(Setting::FifoSlots), dir() + "/loom.conf:3");
  EXPECT_EQ(settingInt(Setting::IbTc), 96);
  EXPECT_EQ(settingInt(Setting::IbSl), 3);
  EXPECT_EQ(sourceOf(Setting::IbSl), dir() + "/nccl.conf:2 (NCCL_IB_SL)");
  // A named file replaces the user's, not the system's.
  ScopedEnv loom("LOOM_CONF_FILE", write("named.conf", "LOOM_TIMEOUT_MS=5000\n"));
  ScopedEnv nccl("NCCL_CONF_FILE", write("named-nccl.conf", "# nothing\n"));
  reread();
  EXPECT_EQ(settingInt(Setting::NChannels), 4);
  EXPECT_EQ(settingInt(Setting::TimeoutMs), 5000);
  EXPECT_EQ(settingInt(Setting::IbTc), 32);
}

TEST_F(SettingsFilesTest, LaterLineWinsAndEmptyValuesSetNothing) {
  ScopedEnv loom("LOOM_CONF_FILE",
                 write("named/loom.conf", "LOOM_NCHANNELS=3\n\n# more\nLOOM_NCHANNELS=5\nLOOM_FIFO_SLOTS=\n"));
  reread();
  EXPECT_EQ(settingInt(Setting::NChannels), 5);
  EXPECT_EQ(sourceOf(Setting::NChannels), dir() + "/named/loom.conf:4");
  EXPECT_FALSE(settingIsSet(Setting::FifoSlots));
  EXPECT_STREQ(settingSource(Setting::FifoSlots), "default");
  EXPECT_TRUE(checkSettingsFiles().ok()) << checkSettingsFiles().message();
}

TEST_F(SettingsFilesTest, DevNullIsNoFile) {
  ScopedEnv home("HOME", dir() + "/home");
  write("home/.config/loom/loom.conf", "LOOM_NCHANNELS=3\n");
  ScopedEnv loom("LOOM_CONF_FILE", "/dev/null");
  reread();
  EXPECT_EQ(settingInt(Setting::NChannels), 2);
  EXPECT_TRUE(checkSettingsFiles().ok());
}

// NCCL's files are read as the environment's NCCL variables are: Translated ones in NCCL's syntax, a
// value Loom cannot use or a name it does not read passed over (logged at init, below), never an error.
TEST_F(SettingsFilesTest, NcclsFilesSpeakNcclsNames) {
  ScopedEnv nccl("NCCL_CONF_FILE", write("named/nccl.conf",
                                          "NCCL_ALGO=Ring\n"
                                          "NCCL_PROTO=LL\n"          // every message as LL: not possible
                                          "NCCL_IB_TC=lots\n"        // not a number
                                          "NCCL_BUFFSIZE=4194304\n"  // Similar: not read
                                          "NCCL_NTHREADS=512\n"      // not read at all
                                          "LOOM_NCHANNELS=3\n"       // Loom's names go in loom.conf
                                          "FI_PROVIDER=efa\n"        // another program's variable
                                          "this is not a setting\n"));
  reread();
  EXPECT_EQ(settingText(Setting::Algo), "ring");
  EXPECT_EQ(sourceOf(Setting::Algo), dir() + "/named/nccl.conf:1 (NCCL_ALGO)");
  EXPECT_FALSE(settingIsSet(Setting::DeviceLlBytes));
  EXPECT_FALSE(settingIsSet(Setting::IbTc));
  EXPECT_EQ(settingInt(Setting::IbTc), 0);
  EXPECT_FALSE(settingIsSet(Setting::ChunkBytes));
  EXPECT_FALSE(settingIsSet(Setting::NChannels));
  EXPECT_TRUE(settingsFileProblems().empty()) << settingsFileProblems()[0];
  EXPECT_TRUE(checkSettingsFiles().ok());
  // A missing NCCL_CONF_FILE is passed over as NCCL passes it over.
  ScopedEnv missing("NCCL_CONF_FILE", dir() + "/absent.conf");
  reread();
  EXPECT_TRUE(checkSettingsFiles().ok());
}

// ---- a bad line of Loom's files

TEST_F(SettingsFilesTest, BadLinesAreNamedByFileAndLine) {
  const std::string conf = write("named/loom.conf",
                                 "# line 1\n"
                                 "LOOM_NCHANNELS=3\n"
                                 "not a setting\n"             // 3
                                 "LOOM_NO_SUCH_SETTING=1\n"    // 4
                                 "NCCL_SOCKET_IFNAME=eth0\n"   // 5: NCCL's name
                                 "timeout_ms=5\n"              // 6: another spelling
                                 "LOOM_CONF_FILE=other.conf\n" // 7: environment only
                                 "LOOM_LIBRARY=libloom.so\n"   // 8: environment only
                                 "LOOM_FIFO_SLOTS=99\n"        // 9: out of range
                                 "LOOM_TRANSPORT=pigeon\n"     // 10: not a choice
                                 "LOOM_SPIN_US=-1\n"           // 11: a Fallback setting: an error in a file too
                                 "LOOM_TOPO_FILE=\n");         // 12: empty, sets nothing
  ScopedEnv loom("LOOM_CONF_FILE", conf);
  reread();
  const std::vector<std::string> problems = settingsFileProblems();
  const std::vector<std::string> expected = {
      conf + ":3: not NAME=VALUE: not a setting",
      conf + ":4: no setting named LOOM_NO_SUCH_SETTING (loom-info --settings lists them)",
      conf + ":5: no setting named NCCL_SOCKET_IFNAME: this file takes LOOM_SOCKET_IFNAME",
      conf + ":6: no setting named timeout_ms: this file takes LOOM_TIMEOUT_MS",
      conf + ":7: LOOM_CONF_FILE is read from the environment only: it names the file",
      conf + ":8: LOOM_LIBRARY is read from the environment only: the Python package reads it before it loads Loom",
      conf + ":9: LOOM_FIFO_SLOTS=99 is out of range: LOOM_FIFO_SLOTS allows 2..16",
      conf + ":10: LOOM_TRANSPORT=pigeon is not one of the allowed values: LOOM_TRANSPORT allows one of shm,net,socket",
      conf + ":11: LOOM_SPIN_US=-1 is out of range: LOOM_SPIN_US allows 0..",
  };
  EXPECT_EQ(problems, expected);
  // A bad line gives no value; the good ones still do.
  EXPECT_EQ(settingInt(Setting::FifoSlots), 4);
  EXPECT_STREQ(settingSource(Setting::FifoSlots), "default");
  EXPECT_EQ(settingInt(Setting::NChannels), 3);
  // The first is the error of communicator init and of loomParam*, with how many more there are.
  const Status checked = checkSettingsFiles();
  EXPECT_EQ(checked.code(), loomInvalidArgument);
  EXPECT_EQ(checked.message(), expected[0] + " (and 8 more: loom-info --settings lists them)");
  CommSettings s;
  const Status init = readCommSettings(nullptr, &s);
  EXPECT_EQ(init.code(), loomInvalidArgument);
  EXPECT_NE(init.message().find(conf + ":3: "), std::string::npos) << init.message();
  loomParamHandle_t h = nullptr;
  ASSERT_EQ(loomParamBind(&h, "LOOM_NCHANNELS"), loomSuccess);
  int32_t v = 0;
  EXPECT_EQ(loomParamGetI32(h, &v), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("loomParamGetI32: " + conf + ":3: "), std::string::npos)
      << loomGetLastError(nullptr);
  const char* text = nullptr;
  EXPECT_EQ(loomParamGetParameter("LOOM_NCHANNELS", &text, nullptr), loomInvalidArgument);
}

TEST_F(SettingsFilesTest, NamedFileMustBeThere) {
  ScopedEnv loom("LOOM_CONF_FILE", dir() + "/absent.conf");
  reread();
  EXPECT_EQ(settingsFileProblems(), std::vector<std::string>{"LOOM_CONF_FILE=" + dir() + "/absent.conf: no such file"});
  EXPECT_EQ(checkSettingsFiles().code(), loomInvalidArgument);
  // The user's file in its default place is optional; a directory there is not a file.
  ScopedEnv unset("LOOM_CONF_FILE", std::nullopt);
  ScopedEnv xdg("XDG_CONFIG_HOME", dir() + "/xdg");
  fs::create_directories(dir() + "/xdg/loom");
  reread();
  EXPECT_TRUE(checkSettingsFiles().ok());
  fs::create_directories(dir() + "/xdg/loom/loom.conf");
  reread();
  ASSERT_EQ(settingsFileProblems().size(), 1u);
  EXPECT_EQ(settingsFileProblems()[0], "cannot read " + dir() + "/xdg/loom/loom.conf: it is a directory");
}

// ---- in a child process: a communicator, and the log (read once per process)

// Writes `loomConf` and `ncclConf` into a directory of its own, names them, starts a communicator of one
// rank, and exits with its result (loomGetLastError on stderr).
[[noreturn]] void startCommunicatorInChild(const std::string& loomConf, const std::string& ncclConf) {
  setenv("LOOM_DEBUG", "INFO", 1);
  unsetenv("LOOM_NCHANNELS");
  unsetenv("NCCL_IB_SL");
  int rc = 99;
  {
    ScratchDir dir;
    setenv("LOOM_CONF_FILE", dir.write("loom.conf", loomConf).c_str(), 1);
    setenv("NCCL_CONF_FILE", dir.write("nccl.conf", ncclConf).c_str(), 1);
    rereadSettingsFiles(dir.path() + "/no-system-files");
    loomUniqueId id;
    loomComm_t comm = nullptr;
    rc = loomGetUniqueId(&id);
    if (rc == loomSuccess) rc = loomCommInitRank(&comm, 1, id, 0);
    if (comm) loomCommDestroy(comm);
    std::fprintf(stderr, "result %d: %s\n", rc, loomGetLastError(nullptr));
    std::fflush(stderr);
  }
  std::_Exit(rc);
}

TEST(SettingsFilesInChild, CommunicatorInitNamesABadLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(startCommunicatorInChild("LOOM_NCHANNELS=2\n\nLOOM_NCHANNELS=lots\n", ""),
              ::testing::ExitedWithCode(loomInvalidArgument),
              "result 4: .*/loom.conf:3: LOOM_NCHANNELS=lots is not a number: LOOM_NCHANNELS allows 1..16");
}

TEST(SettingsFilesInChild, CommunicatorLogsTheFileAsTheSource) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(startCommunicatorInChild("# mine\nLOOM_NCHANNELS=3\n", ""), ::testing::ExitedWithCode(0),
              "LOOM_NCHANNELS=3 \\(from .*/loom.conf:2\\)");
}

TEST(SettingsFilesInChild, NcclsFileLinesNotReadAreLogged) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string ncclConf =
      "NCCL_NTHREADS=512\n"
      "garbage line\n"
      "NCCL_PROTO=Simple\n"
      "FI_PROVIDER=efa\n"
      "LOOM_TIMEOUT_MS=5\n"
      "NCCL_IB_SL=3\n";
  const auto child = [&] { startCommunicatorInChild("LOOM_IB_SL=4\n", ncclConf); };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "nccl.conf:1: NCCL_NTHREADS=512 is set; Loom does not read it");
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "nccl.conf:2: not NAME=VALUE, ignored: garbage line");
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "nccl.conf:3: NCCL_PROTO=Simple is read as LOOM_DEVICE_LL_BYTES=0");
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0),
              "nccl.conf:4: FI_PROVIDER=efa is not read: Loom reads NCCL_\\* names from NCCL's files");
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0),
              "nccl.conf:5: LOOM_TIMEOUT_MS=5 is not read: Loom's settings go in loom.conf");
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0),
              "nccl.conf:6: NCCL_IB_SL=3 is set; LOOM_IB_SL comes from .*/loom.conf:1");
}

}  // namespace
}  // namespace loom

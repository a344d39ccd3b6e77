// A rank's state (core/observe/comm_state.h): its JSON, which loomCommDumpState returns and tools read,
// keeps its keys and comes back as it went; a hand-made state needs only the flight record's part;
// and a flight record fills one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/observe/comm_state.h"
#include "core/observe/flight_record.h"

namespace {

loom::CommState filledState() {
  loom::CommState s;
  s.comm = "trainer \"main\"";
  s.rank = 3;
  s.nranks = 8;
  s.host = "node-7";
  s.pid = 4321;
  s.lastIssued = 12;
  s.completedUpTo = 11;
  s.waitingOn = 5;
  s.timedOut = true;
  s.failure = "rank 5 closed its connection";
  s.entries = {{11, "AllReduce", 1000, "float", -1, 250000}, {12, "Broadcast", 500, "float", 0, 1200}};
  s.connections = {1, 2, 4, 24, 6};
  return s;
}

TEST(CommState, ComesBackFromItsJson) {
  const loom::CommState sent = filledState();
  loom::CommState back;
  ASSERT_TRUE(loom::parseCommState(loom::commStateText(sent), &back).ok());
  EXPECT_EQ(back.comm, sent.comm);
  EXPECT_EQ(back.rank, sent.rank);
  EXPECT_EQ(back.nranks, sent.nranks);
  EXPECT_EQ(back.host, sent.host);
  EXPECT_EQ(back.pid, sent.pid);
  EXPECT_EQ(back.lastIssued, sent.lastIssued);
  EXPECT_EQ(back.completedUpTo, sent.completedUpTo);
  EXPECT_EQ(back.waitingOn, sent.waitingOn);
  EXPECT_EQ(back.timedOut, sent.timedOut);
  EXPECT_EQ(back.failure, sent.failure);
  EXPECT_EQ(back.connections.localPeers, 1);
  EXPECT_EQ(back.connections.shmPeers, 2);
  EXPECT_EQ(back.connections.netPeers, 4);
  EXPECT_EQ(back.connections.netConnections, 24);
  EXPECT_EQ(back.connections.memoryConnections, 6);
  ASSERT_EQ(back.entries.size(), sent.entries.size());
  for (size_t i = 0; i < sent.entries.size(); ++i) {
    EXPECT_EQ(back.entries[i].seq, sent.entries[i].seq);
    EXPECT_EQ(back.entries[i].op, sent.entries[i].op);
    EXPECT_EQ(back.entries[i].count, sent.entries[i].count);
    EXPECT_EQ(back.entries[i].dtype, sent.entries[i].dtype);
    EXPECT_EQ(back.entries[i].peer, sent.entries[i].peer);
    EXPECT_EQ(back.entries[i].ageUs, sent.entries[i].ageUs);
  }
}

// loomCommDumpState's output is public: its keys (and their order) stay as they were.
TEST(CommState, KeepsLoomCommDumpStatesKeys) {
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(loom::commStateText(filledState()));
  std::vector<std::string> keys, entryKeys;
  for (const auto& [key, value] : j.items()) keys.push_back(key);
  for (const auto& [key, value] : j["entries"][0].items()) entryKeys.push_back(key);
  EXPECT_EQ(keys, std::vector<std::string>({"comm", "rank", "nranks", "host", "pid", "completed_up_to", "entries",
                                            "failure", "last_issued", "timed_out", "waiting_on", "connections"}));
  EXPECT_EQ(entryKeys, std::vector<std::string>({"age_us", "count", "dtype", "op", "peer", "seq"}));
}

TEST(CommState, NeedsOnlyTheFlightRecordsCountersAndEntries) {
  loom::CommState s;
  ASSERT_TRUE(loom::parseCommState(R"({"last_issued": 2, "completed_up_to": 1,
      "entries": [{"seq": 2, "op": "AllReduce", "count": 4, "dtype": "float", "peer": -1}]})", &s).ok());
  EXPECT_EQ(s.lastIssued, 2u);
  EXPECT_EQ(s.waitingOn, -1);
  EXPECT_FALSE(s.timedOut);
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].ageUs, 0);
  for (const char* bad : {"{\"not\": \"a state\"}", "[]", "not json",
                          R"({"last_issued": 1, "completed_up_to": 1, "entries": [{"seq": 1}]})"})
    EXPECT_EQ(loom::parseCommState(bad, &s).code(), loomInvalidArgument) << bad;
}

TEST(CommState, IsWhatTheFlightRecordHolds) {
  loom::FlightRecord record;
  record.issued(1, loom::Collective::AllReduce, 1000, loomFloat32, -1);
  record.issued(2, loom::Collective::Broadcast, 10, loomInt32, 2);
  record.completedUpTo(1);
  record.waitingOn(2);
  record.failed("first");
  record.failed("second");
  loom::CommState s;
  record.snapshot(&s);
  EXPECT_EQ(s.lastIssued, 2u);
  EXPECT_EQ(s.completedUpTo, 1u);
  EXPECT_EQ(s.waitingOn, 2);
  EXPECT_FALSE(s.timedOut);
  EXPECT_EQ(s.failure, "first");
  ASSERT_EQ(s.entries.size(), 2u);
  EXPECT_EQ(s.entries[0].seq, 1u);
  EXPECT_EQ(s.entries[0].op, "AllReduce");
  EXPECT_EQ(s.entries[1].op, "Broadcast");
  EXPECT_EQ(s.entries[1].peer, 2);
  EXPECT_EQ(s.entries[1].count, 10u);
}

}  // namespace

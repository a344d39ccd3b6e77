// What loom-doctor and the state service say to each other (core/observe/doctor_protocol.h): lines
// read a chunk at a time (a line that comes in pieces, two lines in one recv, a line over the cap, a
// deadline), the socket files' names and the request lines.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "base/socket.h"
#include "core/observe/doctor_protocol.h"

namespace {

using loom::Deadline;
using loom::LineReader;
using loom::Socket;

// Two connected ends: the test writes into `writer`, the reader reads `reader`.
struct ConnectedPair {
  ConnectedPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    reader = Socket(fds[0]);
    writer = Socket(fds[1]);
  }
  void write(const std::string& bytes) { ASSERT_EQ(::write(writer.fd(), bytes.data(), bytes.size()), ssize_t(bytes.size())); }
  Socket reader, writer;
};

TEST(LineReader, JoinsALineThatComesInPieces) {
  ConnectedPair pair;
  LineReader lines(1 << 16);
  std::optional<std::string> line;
  pair.write("{\"request\": ");
  ASSERT_TRUE(lines.readAvailable(pair.reader, &line).ok());
  EXPECT_FALSE(line);
  pair.write("\"list\"}\n");
  ASSERT_TRUE(lines.readAvailable(pair.reader, &line).ok());
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "{\"request\": \"list\"}");
  // Longer than one recv's chunk.
  const std::string longLine(3 * LineReader::kChunkBytes + 7, 'x');
  pair.write(longLine + "\n");
  std::string read;
  ASSERT_TRUE(lines.readLine(pair.reader, Deadline::afterMs(5000), &read).ok());
  EXPECT_EQ(read, longLine);
}

TEST(LineReader, KeepsTheSecondLineOfOneRecvForTheNextCall) {
  ConnectedPair pair;
  LineReader lines(1 << 16);
  pair.write("one\ntwo\nthr");
  pair.writer.close();  // the second line must come from what the first call read
  std::string line;
  ASSERT_TRUE(lines.readLine(pair.reader, Deadline::afterMs(5000), &line).ok());
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(lines.readLine(pair.reader, Deadline::afterMs(5000), &line).ok());
  EXPECT_EQ(line, "two");
  const loom::Status cut = lines.readLine(pair.reader, Deadline::afterMs(5000), &line);
  EXPECT_EQ(cut.code(), loomRemoteError) << cut.message();  // "thr" and then the end
}

TEST(LineReader, RefusesALineOverTheCap) {
  LineReader lines(16);
  ConnectedPair fits;
  fits.write(std::string(16, 'a') + "\n");
  std::string line;
  ASSERT_TRUE(lines.readLine(fits.reader, Deadline::afterMs(5000), &line).ok());
  EXPECT_EQ(line, std::string(16, 'a'));

  ConnectedPair endless;  // no newline yet, but already too long
  endless.write(std::string(17, 'b'));
  std::optional<std::string> partial;
  const loom::Status refused = LineReader(16).readAvailable(endless.reader, &partial);
  EXPECT_EQ(refused.code(), loomInvalidArgument);
  EXPECT_NE(refused.message().find("longer than 16 bytes"), std::string::npos) << refused.message();

  ConnectedPair whole;  // a whole line, too long, in one recv
  whole.write(std::string(20, 'c') + "\nshort\n");
  EXPECT_EQ(LineReader(16).readLine(whole.reader, Deadline::afterMs(5000), &line).code(), loomInvalidArgument);
}

TEST(LineReader, GivesUpAtTheDeadline) {
  ConnectedPair pair;
  pair.write("no newline");
  LineReader lines(1 << 16);
  std::string line;
  const auto start = std::chrono::steady_clock::now();
  const loom::Status late = lines.readLine(pair.reader, Deadline::afterMs(100), &line);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(late.code(), loomTimeout) << late.message();
  EXPECT_GE(waited, std::chrono::milliseconds(90));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // What came stays: the rest of the line completes it.
  pair.write(" after all\n");
  ASSERT_TRUE(lines.readLine(pair.reader, Deadline::afterMs(5000), &line).ok());
  EXPECT_EQ(line, "no newline after all");
}

TEST(LineReader, ReadsWhatWriteLineWrote) {
  ConnectedPair pair;
  ASSERT_TRUE(loom::writeLine(pair.writer, "{}", Deadline::afterMs(5000)).ok());
  std::string line;
  ASSERT_TRUE(LineReader(16).readLine(pair.reader, Deadline::afterMs(5000), &line).ok());
  EXPECT_EQ(line, "{}");
}

TEST(DoctorProtocol, NamesEachProcessSocketByItsPid) {
  EXPECT_EQ(loom::processSocketPath("/run/user/7/loom", 4242), "/run/user/7/loom/4242.sock");
  EXPECT_EQ(loom::processSocketPid("4242.sock"), 4242);
  EXPECT_FALSE(loom::processSocketPid("4242.sock.old"));
  EXPECT_FALSE(loom::processSocketPid("x.sock"));
  EXPECT_FALSE(loom::processSocketPid(".sock"));
  EXPECT_FALSE(loom::processSocketPid("12x.sock"));
}

TEST(DoctorProtocol, ParsesTheRequestsItWrites) {
  loom::DoctorRequest request;
  ASSERT_TRUE(loom::parseRequest(loom::requestLine({"report", "00ff"}), &request).ok());
  EXPECT_EQ(request.what, loom::kReportRequest);
  EXPECT_EQ(request.job, "00ff");
  EXPECT_EQ(loom::requestLine({"list", ""}), "{\"request\":\"list\"}");
  const loom::Status unknown = loom::parseRequest("{\"request\": \"reboot\"}", &request);
  EXPECT_NE(unknown.message().find("unknown request 'reboot' (list, report)"), std::string::npos) << unknown.message();
  EXPECT_NE(loom::parseRequest("not json", &request).message().find("bad request"), std::string::npos);
}

}  // namespace

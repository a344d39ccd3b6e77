// The job's table of ranks as the bootstrap moves it: a host table (each host's identity and the rank
// that leads it), an address table (the distinct listen IPs, usually one per host) and a 32-byte
// record per rank, instead of a full RankInfo (about 120 bytes, mostly the host name) per rank. Every
// rank decodes it into RankInfo once; ranks that are threads of one process share one decoded copy
// (1024 rank threads would otherwise hold 1024 copies of a 1024-entry table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "bootstrap/wire.h"

namespace loom {

struct RankTable {
  uint64_t id = 0;  // random, made by the rendezvous: one table of one communicator
  std::vector<RankInfo> ranks;
  std::vector<int32_t> hostOfRank;    // index into leaderOfHost, numbered by the rendezvous
  std::vector<int32_t> leaderOfHost;  // the rank that leads each host's part of the bootstrap

  int nranks() const { return static_cast<int>(ranks.size()); }
  int nhosts() const { return static_cast<int>(leaderOfHost.size()); }
};

// Encodes `ranks` (every rank's RankInfo) with each rank's host index and each host's leader.
std::vector<char> encodeRankTable(uint64_t id, const std::vector<RankInfo>& ranks, const std::vector<int32_t>& hostOfRank,
                                  const std::vector<int32_t>& leaderOfHost);

// The size of an encoded table of `nranks` ranks on `nhosts` hosts with `naddresses` distinct listen
// addresses (the bootstrap's cost model, src/model/bootstrap_model.h, counts the bytes it moves).
size_t encodedRankTableBytes(size_t nranks, size_t nhosts, size_t naddresses);

// Checks and decodes a table for `nranks` ranks. Pure (no I/O), so that it can be fuzzed: every
// index is checked, every rank has a valid address, every host's leader is one of its ranks.
Status decodeRankTable(const void* bytes, size_t size, int nranks, RankTable* out);

// The decoded table, shared with the other ranks of this process that hold the table of the same id
// for the same communicator (`secret`): only the first decodes it.
Status sharedRankTable(const uint8_t* secret, const void* bytes, size_t size, int nranks,
                       std::shared_ptr<const RankTable>* out);
// The table of that id when a rank of this process decoded it and still holds it; null otherwise.
std::shared_ptr<const RankTable> findSharedRankTable(const uint8_t* secret, uint64_t id);

}  // namespace loom

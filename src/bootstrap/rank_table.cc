#include "bootstrap/rank_table.h"

#include <cstring>
#include <map>
#include <mutex>
#include <string>


namespace loom {
namespace {

struct TableHeader {
  uint64_t id = 0;
  uint32_t nranks = 0;
  uint32_t nhosts = 0;
  uint32_t naddresses = 0;
  uint32_t reserved = 0;
};

struct HostRecord {
  uint64_t hostHash = 0;
  char hostname[sizeof(ProcessIdentity::hostname)] = {0};
  int32_t leader = -1;
  uint32_t reserved = 0;
};

struct RankRecord {
  uint32_t host = 0;
  uint32_t address = 0;  // index into the address table (its port is the record's)
  int32_t pid = 0;
  int32_t cudaDevice = -1;
  uint64_t nonce = 0;
  uint16_t port = 0;
  uint16_t statePort = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(RankRecord) == 32, "a rank's record is 32 bytes on the wire");

std::string addressKey(const SocketAddress& a) {
  std::string key(reinterpret_cast<const char*>(&a.family), sizeof(a.family));
  key.append(reinterpret_cast<const char*>(a.addr), sizeof(a.addr));
  return key;
}

template <class T>
void append(std::vector<char>* out, const T& value) {
  // resize and copy rather than insert(end, p, p + n): GCC 12 warns of an overflow on the insert into
  // a reserved empty vector (-Wstringop-overflow, a false positive).
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &value, sizeof(T));
}

}  // namespace

size_t encodedRankTableBytes(size_t nranks, size_t nhosts, size_t naddresses) {
  return sizeof(TableHeader) + nhosts * sizeof(HostRecord) + naddresses * sizeof(SocketAddress) +
         nranks * sizeof(RankRecord);
}

std::vector<char> encodeRankTable(uint64_t id, const std::vector<RankInfo>& ranks, const std::vector<int32_t>& hostOfRank,
                                  const std::vector<int32_t>& leaderOfHost) {
  std::vector<SocketAddress> addresses;
  std::map<std::string, uint32_t> addressIndex;
  std::vector<uint32_t> addressOfRank(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    SocketAddress a = ranks[r].listenAddress;
    a.port = 0;
    auto [it, added] = addressIndex.emplace(addressKey(a), static_cast<uint32_t>(addresses.size()));
    if (added) addresses.push_back(a);
    addressOfRank[r] = it->second;
  }
  TableHeader header{id, static_cast<uint32_t>(ranks.size()), static_cast<uint32_t>(leaderOfHost.size()),
                     static_cast<uint32_t>(addresses.size()), 0};
  std::vector<char> out;
  out.reserve(encodedRankTableBytes(ranks.size(), leaderOfHost.size(), addresses.size()));
  append(&out, header);
  for (int32_t leader : leaderOfHost) {
    HostRecord h;
    const ProcessIdentity& p = ranks[static_cast<size_t>(leader)].process;
    h.hostHash = p.hostHash;
    std::memcpy(h.hostname, p.hostname, sizeof(h.hostname));
    h.leader = leader;
    append(&out, h);
  }
  for (const SocketAddress& a : addresses) append(&out, a);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankInfo& info = ranks[r];
    RankRecord rec;
    rec.host = static_cast<uint32_t>(hostOfRank[r]);
    rec.address = addressOfRank[r];
    rec.pid = info.process.pid;
    rec.cudaDevice = info.cudaDevice;
    rec.nonce = info.process.nonce;
    rec.port = info.listenAddress.port;
    rec.statePort = info.statePort;
    append(&out, rec);
  }
  return out;
}

Status decodeRankTable(const void* bytes, size_t size, int nranks, RankTable* out) {
  const char* p = static_cast<const char*>(bytes);
  TableHeader header;
  if (size < sizeof(header)) return errorStatus(loomRemoteError, "rank table of {} bytes: no header", size);
  std::memcpy(&header, p, sizeof(header));
  if (nranks < 1 || header.nranks != static_cast<uint32_t>(nranks))
    return errorStatus(loomRemoteError, "rank table for {} ranks (expected {})", header.nranks, nranks);
  if (header.nhosts < 1 || header.nhosts > header.nranks || header.naddresses < 1 || header.naddresses > header.nranks)
    return errorStatus(loomRemoteError, "rank table with {} hosts and {} addresses for {} ranks", header.nhosts,
                       header.naddresses, header.nranks);
  const size_t expected = sizeof(header) + header.nhosts * sizeof(HostRecord) +
                          header.naddresses * sizeof(SocketAddress) + header.nranks * sizeof(RankRecord);
  if (size != expected) return errorStatus(loomRemoteError, "rank table of {} bytes (expected {})", size, expected);
  p += sizeof(header);
  std::vector<HostRecord> hosts(header.nhosts);
  std::memcpy(hosts.data(), p, hosts.size() * sizeof(HostRecord));
  p += hosts.size() * sizeof(HostRecord);
  std::vector<SocketAddress> addresses(header.naddresses);
  std::memcpy(addresses.data(), p, addresses.size() * sizeof(SocketAddress));
  p += addresses.size() * sizeof(SocketAddress);
  for (uint32_t a = 0; a < header.naddresses; ++a)
    if (!addresses[a].valid()) return errorStatus(loomRemoteError, "rank table: address {} is not valid", a);

  RankTable t;
  t.id = header.id;
  t.ranks.resize(header.nranks);
  t.hostOfRank.resize(header.nranks);
  t.leaderOfHost.resize(header.nhosts);
  for (uint32_t r = 0; r < header.nranks; ++r) {
    RankRecord rec;
    std::memcpy(&rec, p + r * sizeof(RankRecord), sizeof(rec));
    if (rec.host >= header.nhosts || rec.address >= header.naddresses || rec.port == 0)
      return errorStatus(loomRemoteError, "rank table: rank {} has host {}, address {}, port {}", r, rec.host,
                         rec.address, rec.port);
    RankInfo& info = t.ranks[r];
    const HostRecord& host = hosts[rec.host];
    info.listenAddress = addresses[rec.address];
    info.listenAddress.port = rec.port;
    info.process.hostHash = host.hostHash;
    std::memcpy(info.process.hostname, host.hostname, sizeof(info.process.hostname));
    info.process.hostname[sizeof(info.process.hostname) - 1] = '\0';
    info.process.pid = rec.pid;
    info.process.nonce = rec.nonce;
    info.cudaDevice = rec.cudaDevice;
    info.statePort = rec.statePort;
    t.hostOfRank[r] = static_cast<int32_t>(rec.host);
  }
  for (uint32_t h = 0; h < header.nhosts; ++h) {
    const int32_t leader = hosts[h].leader;
    if (leader < 0 || static_cast<uint32_t>(leader) >= header.nranks || t.hostOfRank[static_cast<size_t>(leader)] != static_cast<int32_t>(h))
      return errorStatus(loomRemoteError, "rank table: host {} is led by rank {}, not one of its ranks", h, leader);
    t.leaderOfHost[h] = leader;
  }
  *out = std::move(t);
  return Status::Ok();
}

namespace {

// The tables that ranks of this process hold, by (secret, id).
struct SharedTables {
  std::mutex mutex;
  std::map<std::pair<std::string, uint64_t>, std::weak_ptr<const RankTable>> tables;
  static SharedTables& get() {
    static SharedTables* shared = new SharedTables();  // never destroyed: ranks may outlive static destructors
    return *shared;
  }
};

std::pair<std::string, uint64_t> tableKey(const uint8_t* secret, uint64_t id) {
  return {std::string(reinterpret_cast<const char*>(secret), kSecretBytes), id};
}

}  // namespace

std::shared_ptr<const RankTable> findSharedRankTable(const uint8_t* secret, uint64_t id) {
  SharedTables& shared = SharedTables::get();
  std::lock_guard<std::mutex> lock(shared.mutex);
  auto it = shared.tables.find(tableKey(secret, id));
  return it == shared.tables.end() ? nullptr : it->second.lock();
}

Status sharedRankTable(const uint8_t* secret, const void* bytes, size_t size, int nranks,
                       std::shared_ptr<const RankTable>* out) {
  TableHeader header;
  if (size >= sizeof(header)) {
    std::memcpy(&header, bytes, sizeof(header));
    if (auto known = findSharedRankTable(secret, header.id); known && known->nranks() == nranks) {
      *out = std::move(known);
      return Status::Ok();
    }
  }
  auto table = std::make_shared<RankTable>();
  LOOM_TRY(decodeRankTable(bytes, size, nranks, table.get()));
  SharedTables& shared = SharedTables::get();
  std::lock_guard<std::mutex> lock(shared.mutex);
  for (auto it = shared.tables.begin(); it != shared.tables.end();)
    it = it->second.expired() ? shared.tables.erase(it) : std::next(it);
  auto& slot = shared.tables[tableKey(secret, table->id)];
  if (auto other = slot.lock()) {  // another rank thread decoded it meanwhile
    *out = std::move(other);
    return Status::Ok();
  }
  slot = table;
  *out = std::move(table);
  return Status::Ok();
}

}  // namespace loom

// The table for a host's ranks in one shared-memory file (POSIX shm) instead of a copy down each
// rank's socket: a leader writes it once, its host's ranks map it (or, when their process already
// holds a table of that id, open nothing). At 16k ranks of 8 per host that is 2k copies of a 512 KiB
// table through the kernel instead of 16k. Where a rank cannot open the file (a container with its
// own /dev/shm on a host that looks the same), its leader sends the bytes after all.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom {

class TableFile {
 public:
  TableFile() = default;
  TableFile(const TableFile&) = delete;
  TableFile& operator=(const TableFile&) = delete;
  ~TableFile();  // unlinks the file (ranks that mapped it keep their mapping)

  // Writes `bytes` to a new file named after the communicator's secret, the table's id and the
  // leader's rank.
  static Status publish(const uint8_t* secret, uint64_t tableId, int leaderRank, const std::vector<char>& bytes,
                        TableFile* out);
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

// Maps the file `name` read-only, checks it holds `bytes`, and hands its contents to `use`.
Status readTableFile(const std::string& name, size_t bytes, const std::function<Status(const void*, size_t)>& use);

}  // namespace loom

// libFuzzer target for everything the bootstrap parses from the network or from a user's id:
// hellos, the rendezvous' rank table and loomUniqueId contents. Built with clang by
// scripts/fuzz.sh (-fsanitize=fuzzer,address,undefined); must never crash, hang or read out of bounds.
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/bootstrap_tree.h"
#include "bootstrap/rank_table.h"
#include "bootstrap/unique_id.h"
#include "bootstrap/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t selector = data[0];
  const int nranks = data[1];
  data += 2;
  size -= 2;
  static const uint8_t secret[loom::kSecretBytes] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  switch (selector % 3) {
    case 0: {
      loom::Hello hello;
      auto kind = static_cast<loom::HelloKind>(1 + (selector / 3) % 5);
      (void)loom::parseHello(data, size, secret, kind, nranks, &hello);
      break;
    }
    case 1: {
      loom::RankTable table;
      if (loom::decodeRankTable(data, size, nranks, &table).ok()) (void)loom::BootstrapTree::of(table, 0);
      break;
    }
    case 2: {
      loomUniqueId id;
      std::memset(&id, 0, sizeof(id));
      std::memcpy(id.internal, data, size < sizeof(id) ? size : sizeof(id));
      loom::UniqueIdData decoded;
      (void)loom::decodeUniqueId(id, &decoded);
      break;
    }
  }
  return 0;
}

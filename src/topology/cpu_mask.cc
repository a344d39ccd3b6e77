#include "topology/cpu_mask.h"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>

namespace loom {
namespace {

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* b) const { hwloc_bitmap_free(b); }
};
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

}  // namespace

std::optional<std::string> ncclMaskToCpuList(const std::string& mask) {
  std::string hex = "0x";
  for (char c : mask) {
    if (c == ',') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
    hex += c;
  }
  if (hex.size() == 2) return std::nullopt;
  Bitmap bits(hwloc_bitmap_alloc());
  if (!bits || hwloc_bitmap_taskset_sscanf(bits.get(), hex.c_str()) != 0) return std::nullopt;
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bits.get()) < 0 || !text) return std::nullopt;
  std::string list(text);
  std::free(text);
  return list;
}

std::optional<std::string> cpuListToNcclMask(const std::string& list, size_t minWords) {
  Bitmap bits(hwloc_bitmap_alloc());
  if (!bits || list.empty() || hwloc_bitmap_list_sscanf(bits.get(), list.c_str()) != 0) return std::nullopt;
  if (hwloc_bitmap_weight(bits.get()) < 0) return std::nullopt;  // infinite sets have no mask form
  char* text = nullptr;
  if (hwloc_bitmap_taskset_asprintf(&text, bits.get()) < 0 || !text) return std::nullopt;
  std::string digits(text + 2);  // drop "0x"
  std::free(text);
  size_t width = std::max((digits.size() + 7) / 8, minWords) * 8;
  std::string hex = std::string(width - digits.size(), '0') + digits;
  std::string mask;
  for (size_t i = 0; i < hex.size(); i += 8) {
    if (i) mask += ',';
    mask.append(hex, i, 8);
  }
  return mask;
}

std::optional<std::set<int>> parseCpuList(const std::string& list) {
  Bitmap bits(hwloc_bitmap_alloc());
  if (!bits || list.empty() || hwloc_bitmap_list_sscanf(bits.get(), list.c_str()) != 0) return std::nullopt;
  if (hwloc_bitmap_weight(bits.get()) < 0) return std::nullopt;
  std::set<int> cpus;
  for (int c = hwloc_bitmap_first(bits.get()); c >= 0; c = hwloc_bitmap_next(bits.get(), c)) cpus.insert(c);
  return cpus;
}

}  // namespace loom

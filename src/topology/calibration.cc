#include "topology/calibration.h"

#include <nlohmann/json.hpp>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/settings.h"
#include "base/log.h"
#include "topology/host_cache.h"

namespace loom {
namespace {

// The FIFO of a default communicator (the settings table's slot size and slots per connection): the
// rate is measured through the FIFO the model's default machine times.
size_t slotBytes() { return static_cast<size_t>(settingDefaultInt(Setting::ChunkBytes)); }
uint64_t slotCount() { return static_cast<uint64_t>(settingDefaultInt(Setting::FifoSlots)); }

// Two CPUs this process may run on, for the writer and the reader: ranks pass messages between cores,
// and two threads left to share one core would pass them through its cache, several times faster. One
// CPU twice where there is only one.
std::pair<int, int> twoCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) return {-1, -1};
  return {cpus.front(), cpus.back()};
}

void pinTo(std::thread& thread, int cpu) {
  if (cpu < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(thread.native_handle(), sizeof one, &one);
}

// One pass of `bytes` through the FIFO: a thread writes slots, another drains them, on two CPUs. GB/s.
double fifoPass(std::vector<char>& src, std::vector<char>& dst, std::vector<char>& fifo) {
  const size_t slot = slotBytes();
  const uint64_t slots = slotCount();
  const uint64_t messages = src.size() / slot;
  std::atomic<uint64_t> head{0}, tail{0};
  std::atomic<bool> go{false};
  std::thread reader([&] {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (uint64_t m = 0; m < messages; ++m) {
      while (tail.load(std::memory_order_acquire) <= m) std::this_thread::yield();
      std::memcpy(dst.data() + m * slot, fifo.data() + (m % slots) * slot, slot);
      head.store(m + 1, std::memory_order_release);
    }
  });
  std::thread writer([&] {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    for (uint64_t m = 0; m < messages; ++m) {
      while (m >= head.load(std::memory_order_acquire) + slots) std::this_thread::yield();
      std::memcpy(fifo.data() + (m % slots) * slot, src.data() + m * slot, slot);
      tail.store(m + 1, std::memory_order_release);
    }
  });
  const auto [writerCpu, readerCpu] = twoCpus();
  pinTo(writer, writerCpu);
  pinTo(reader, readerCpu);
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  writer.join();
  reader.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(src.size()) / seconds / 1e9;
}

// Two significant digits: run-to-run noise below that should not move a plan choice.
double rounded(double gbs) {
  if (!(gbs > 0)) return 0;
  const double scale = std::pow(10.0, std::floor(std::log10(gbs)) - 1);
  return std::round(gbs / scale) * scale;
}

}  // namespace

Status measureCalibration(size_t bytes, int rounds, Calibration* out) {
  if (bytes < slotBytes() || rounds < 1) return invalidArgument("calibration: {} bytes, {} rounds", bytes, rounds);
  const size_t total = bytes / slotBytes() * slotBytes();
  std::vector<char> src(total, 1), dst(total, 2), fifo(slotBytes() * slotCount(), 3);
  fifoPass(src, dst, fifo);  // warm-up: page faults, caches
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) rates.push_back(fifoPass(src, dst, fifo));
  std::sort(rates.begin(), rates.end());
  out->copyGbs = rounded(rates[rates.size() / 2]);
  out->source = "measured";
  return Status::Ok();
}

Status processCalibration(Calibration* out) {
  static std::mutex mutex;
  static Calibration cached;
  static std::string cachedFor;  // the LOOM_CALIBRATION_FILE it came from ("" when measured)
  const std::string file = settingText(Setting::CalibrationFile);
  std::lock_guard<std::mutex> lock(mutex);
  if (cached.copyGbs > 0 && cachedFor == file) {
    *out = cached;
    return Status::Ok();
  }
  Calibration c;
  if (!file.empty()) {
    LOOM_TRY(readCalibrationFile(file, &c));
  } else if (std::optional<Calibration> kept = readCachedCalibration()) {
    c = *kept;
  } else {
    LOOM_TRY(measureCalibration(size_t{16} << 20, 3, &c));
    LOOM_INFO(Topo, "host memory through a FIFO of {} KiB slots: {} GB/s (measured, kept in {})", slotBytes() >> 10,
              c.copyGbs, hostCacheDir().empty() ? "no cache" : hostCacheDir());
    writeCachedCalibration(c);
  }
  cached = c;
  cachedFor = file;
  *out = c;
  return Status::Ok();
}

Status readCalibrationFile(const std::string& path, Calibration* out) {
  std::ifstream in(path);
  // A file the user named that is not there is the user's to fix, as with LOOM_TOPO_FILE.
  if (!in) return invalidArgument("LOOM_CALIBRATION_FILE {}: cannot read it: {}", path, std::strerror(errno));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("copy_gbs") || !j["copy_gbs"].is_number() ||
      !(j["copy_gbs"].get<double>() > 0))
    return invalidArgument("LOOM_CALIBRATION_FILE {}: not a calibration (a JSON object with a positive \"copy_gbs\", "
                           "as `loom-topo --calibrate` writes)",
                           path);
  out->copyGbs = j["copy_gbs"].get<double>();
  out->source = path;
  return Status::Ok();
}

Status writeCalibrationFile(const std::string& path, const Calibration& calibration) {
  nlohmann::ordered_json j;
  j["copy_gbs"] = calibration.copyGbs;
  std::ofstream file(path);
  if (!(file << j.dump(2) << "\n") || !file.flush()) return systemError("cannot write {}", path);
  return Status::Ok();
}

}  // namespace loom

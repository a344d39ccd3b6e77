#include "report.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

namespace loomperf {
namespace {

// nccl-tests' precision: fewer decimals for longer times, so the column stays 7 wide.
std::string formatTime(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string formatMeasurement(const Measurement& m, bool percentiles) {
  const std::string wrong = m.wrong < 0 ? "N/A" : fmt::format("{}", m.wrong);
  std::string text = fmt::format("  {:>7}  {:6.2f}  {:6.2f}  {:>6}", formatTime(m.timeUs), m.algBw, m.busBw, wrong);
  if (percentiles)
    text += fmt::format("  {:>7}  {:>7}  {:>7}", formatTime(m.p50Us), formatTime(m.p99Us), formatTime(m.maxUs));
  return text;
}

std::string versionString() {
  int code = 0;
  if (loomGetVersion(&code) != loomSuccess) return "unknown";
  return fmt::format("{}", code);
}

}  // namespace

Report::Report(const Options& options, int nranks) : options_(options), nranks_(nranks) {}

void Report::header(const std::vector<std::string>& rankLines) {
  const Options& o = options_;
  const std::string step =
      o.stepFactor > 1 ? fmt::format("{}(factor)", o.stepFactor) : fmt::format("{}(bytes)", o.stepBytes);
  fmt::print("# loom-perf version {}.{}.{} loom-headers={} loom-library={}\n", LOOM_MAJOR, LOOM_MINOR,
             LOOM_PATCH, LOOM_VERSION_CODE, versionString());
  fmt::print("# Collective test starting: {}_perf\n", o.collective->name);
  fmt::print(
      "# nProcs {} nThread {} nRanks {} minBytes {} maxBytes {} step: {} warmup iters: {} iters: {} "
      "agg iters: {} validation: {} blocking: {} average: {}\n",
      o.nprocs, o.nthreads, nranks_, o.minBytes, o.maxBytes, step, o.warmupIters, o.iters, o.aggIters,
      o.checkIters, o.blocking, static_cast<int>(o.average));
  fmt::print("#\n# Using devices\n");
  for (const auto& line : rankLines) fmt::print("{}\n", line);
  fmt::print("#\n");
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place\n",
             "", "", "", "", "");
  std::string columns = fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "time", "algbw", "busbw", "#wrong");
  std::string units = fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  if (o.percentiles) {
    columns += fmt::format("  {:>7}  {:>7}  {:>7}", "p50", "p99", "max");
    units += fmt::format("  {:>7}  {:>7}  {:>7}", "(us)", "(us)", "(us)");
  }
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", "size", "count", "type", "redop", "root", columns,
             columns);
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", "(B)", "(elements)", "", "", "", units, units);
  std::fflush(stdout);
}

void Report::row(const ResultRow& r) {
  fmt::print("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", r.bytes, r.count, dataTypeInfo(r.type).name,
             redOpName(r.op), r.root, formatMeasurement(r.outOfPlace, options_.percentiles),
             formatMeasurement(r.inPlace, options_.percentiles));
  printProfile(r.outOfPlace, "out-of-place");
  printProfile(r.inPlace, "in-place");
  std::fflush(stdout);
  for (const Measurement* m : {&r.outOfPlace, &r.inPlace}) {
    busBwSum_ += m->busBw;
    ++busBwCount_;
    if (m->wrong > 0) wrong_ += m->wrong;
  }
  addJson(r, r.outOfPlace, false);
  addJson(r, r.inPlace, true);
}

void Report::addJson(const ResultRow& r, const Measurement& m, bool inPlace) {
  rows_.push_back({{"collective", options_.collective->name},
                   {"bytes", r.bytes},
                   {"count", r.count},
                   {"type", dataTypeInfo(r.type).name},
                   {"redop", redOpName(r.op)},
                   {"root", r.root},
                   {"time_us", m.timeUs},
                   {"algbw_gbs", m.algBw},
                   {"busbw_gbs", m.busBw},
                   {"wrong", m.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(m.wrong)},
                   {"nranks", nranks_},
                   {"inplace", inPlace}});
  if (m.profile.launches > 0) {
    const loomDeviceProfile_t& p = m.profile;
    rows_.back()["profile"] = {{"launches", p.launches}, {"lanes", p.lanes},         {"steps", p.steps},
                               {"bytes", p.bytes},       {"wait_ns", p.waitNs},      {"data_ns", p.dataNs},
                               {"publish_ns", p.publishNs}, {"lane_ns", p.laneNs}};
  }
  if (options_.percentiles) {
    rows_.back()["p50_us"] = m.p50Us;
    rows_.back()["p99_us"] = m.p99Us;
    rows_.back()["max_us"] = m.maxUs;
  }
}

// One comment line under the row: per step of a lane, where its first thread's time went.
void Report::printProfile(const Measurement& m, const char* which) {
  const loomDeviceProfile_t& p = m.profile;
  if (p.launches == 0 || p.steps == 0) return;
  const double steps = static_cast<double>(p.steps);
  const double parts = static_cast<double>(p.waitNs + p.dataNs + p.publishNs);
  auto part = [&](const char* name, uint64_t ns) {
    return fmt::format("{} {:.2f} us ({:.0f}%)", name, static_cast<double>(ns) / steps / 1e3,
                       parts > 0 ? 100.0 * static_cast<double>(ns) / parts : 0.0);
  };
  fmt::print("#   profile {}: {} lanes of {:.1f} steps, {:.0f} KiB a step; per step {}, {}, {}\n", which,
             static_cast<double>(p.lanes) / static_cast<double>(p.launches), steps / static_cast<double>(p.lanes),
             static_cast<double>(p.bytes) / steps / 1024.0, part("wait", p.waitNs), part("data", p.dataNs),
             part("publish", p.publishNs));
}

bool Report::finish() {
  fmt::print("# Out of bounds values : {} {}\n", wrong_, wrong_ ? "FAILED" : "OK");
  fmt::print("# Avg bus bandwidth    : {:g} \n", busBwCount_ ? busBwSum_ / busBwCount_ : 0.0);
  fmt::print("#\n# Collective test concluded: {}_perf\n#\n", options_.collective->name);
  std::fflush(stdout);
  if (options_.jsonFile.empty()) return true;
  std::ofstream out(options_.jsonFile);
  out << rows_.dump(1) << '\n';
  out.close();
  if (!out) {
    std::fprintf(stderr, "loom-perf: cannot write %s\n", options_.jsonFile.c_str());
    return false;
  }
  return true;
}

}  // namespace loomperf

#include "options.h"

#include "device_buffers.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string_view>

namespace loomperf {
namespace {

std::string baseName(std::string_view path) {
  const auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::vector<std::string> withAll(std::vector<std::string> names) {
  names.emplace_back("all");
  return names;
}

// nccl-tests spells the process count "-np" (mpirun style); CLI11 reads a single dash as one
// short flag, so the token is renamed to its long form before parsing.
std::vector<std::string> normalizedArgs(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-np")
      args.emplace_back("--np");
    else if (a.substr(0, 4) == "-np=")
      args.emplace_back("--np=" + std::string(a.substr(4)));
    else
      args.emplace_back(a);
  }
  std::reverse(args.begin(), args.end());  // CLI11's vector form expects the last argument first
  return args;
}

}  // namespace

Options parseOptions(int argc, char** argv) {
  Options o;
  const std::string program = baseName(argc > 0 ? argv[0] : "loom-perf");
  const Collective* implied =
      program.size() > 5 && program.ends_with("_perf") ? findCollective(program) : nullptr;

  CLI::App app{"loom-perf: nccl-tests style benchmark of Loom collectives on host memory"};
  app.name(program);

  std::string collectiveName;
  std::vector<std::string> collectiveNames;
  for (const auto& c : allCollectives()) collectiveNames.emplace_back(c.name);
  auto* positional = app.add_option("collective", collectiveName,
                                    "Collective to test (nccl-tests names; '_perf' suffix allowed)")
                         ->check([](const std::string& s) {
                           return findCollective(s) ? std::string() : "unknown collective '" + s + "'";
                         });
  positional->description("Collective: " + CLI::detail::join(collectiveNames, " "));
  if (!implied) positional->required();

  app.add_option("-b,--minbytes", o.minBytes, "Smallest size (K/M/G suffixes); default 32M")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", o.maxBytes, "Largest size; default 32M")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-i,--stepbytes", o.stepBytes, "Size increment when -f is not given; default 1M")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", o.stepFactor, "Size multiplication factor (overrides -i)")
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--iters", o.iters, "Timed iterations per size; default 20")->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", o.warmupIters, "Untimed iterations before timing; default 1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-m,--agg_iters", o.aggIters, "Operations per iteration, fused by a group; default 1")
      ->check(CLI::PositiveNumber);
  app.add_option("-c,--check", o.checkIters, "Checked runs after timing (0: no check); default 1")
      ->check(CLI::NonNegativeNumber);

  std::string typeName = "float";
  app.add_option("-d,--datatype", typeName, "Data type or 'all'; default float")
      ->check(CLI::IsMember(withAll(dataTypeNames())));
  std::string opName = "sum";
  app.add_option("-o,--op", opName, "Reduction op or 'all'; default sum")
      ->check(CLI::IsMember(withAll(redOpNames())));
  std::string rootName = "0";
  app.add_option("-r,--root", rootName, "Root rank or 'all'; default 0")->check([](const std::string& s) {
    if (s == "all") return std::string();
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    return (*end == '\0' && !s.empty() && v >= 0) ? std::string() : "root must be a rank or 'all'";
  });
  int average = 1;
  app.add_option("-a,--average", average, "Time across ranks: 0 rank 0, 1 mean, 2 min, 3 max; default 1")
      ->check(CLI::Range(0, 3));
  app.add_option("-z,--blocking", o.blocking,
                 "1: barrier after every operation, inside the timing; 0, 2, 3: none (host calls "
                 "already block); default 0")
      ->check(CLI::Range(0, 3));
  app.add_option("--np", o.nprocs, "Fork this many local rank processes (spelled -np too); default 1")
      ->check(CLI::PositiveNumber);
  app.add_option("-t,--nthreads", o.nthreads, "Rank threads per process; default 1")
      ->check(CLI::PositiveNumber);
  int ngpus = 1;
  app.add_option("-g,--ngpus", ngpus, "Accepted for nccl-tests compatibility; must be 1 (use -t)")
      ->check(CLI::Range(1, 1));
  app.add_option("-T,--timeout", o.timeoutSec,
                 "Fail after this many seconds (whole run, and each Loom operation); 0: no limit")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-J,--json,--output_file", o.jsonFile, "Write the result rows as JSON to this file");
  app.add_flag("--percentiles", o.percentiles,
               "Time every iteration and report p50, p99 and max per size (an iteration's time is its "
               "slowest rank's); with -m each iteration is the group of -m operations, with -G cuda each one "
               "waits for its stream");
  std::string device = "host";
  app.add_option("-G,--device,--cudagraph", device,
                 "Buffer memory: host (default) or cuda (cudaMalloc, GPU rank % count); or a number N as "
                 "nccl-tests' -G: cuda, and each size's timed loop captured into a CUDA graph launched N times "
                 "(0: not captured)")
      ->check(CLI::Validator(
          [](const std::string& v) -> std::string {
            if (v == "host" || v == "cuda") return "";
            if (!v.empty() && v.size() < 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
              return "";
            return "'" + v + "' is neither host, cuda nor a number of graph launches";
          },
          "host|cuda|N"));

  try {
    app.parse(normalizedArgs(argc, argv));
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }

  o.collective = collectiveName.empty() ? implied : findCollective(collectiveName);
  if (typeName == "all")
    o.types = allDataTypes();
  else
    o.types = {*parseDataType(typeName)};
  if (opName == "all")
    o.ops = allRedOps();
  else
    o.ops = {*parseRedOp(opName)};
  if (rootName == "all")
    o.allRoots = true;
  else
    o.root = std::atoi(rootName.c_str());
  o.average = static_cast<Average>(average);
  o.cudaDevice = device != "host";
  if (device != "host" && device != "cuda") o.graphLaunches = std::atoi(device.c_str());
  if (o.cudaDevice && !cudaBuild()) {
    std::cerr << program << ": -G " << device << ": this loom-perf was built without CUDA\n";
    std::exit(2);
  }
  if (o.graphLaunches > 0 && o.percentiles) {
    std::cerr << program << ": --percentiles times each iteration, -G " << device
              << " launches them as one graph: use one or the other\n";
    std::exit(2);
  }
  if (o.maxBytes < o.minBytes) {
    std::cerr << program << ": maxbytes (" << o.maxBytes << ") is smaller than minbytes (" << o.minBytes
              << ")\n";
    std::exit(2);
  }
  for (int i = 0; i < argc; ++i) o.commandLine += (i ? " " : "") + std::string(argv[i]);
  return o;
}

std::vector<size_t> testSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.minBytes; size <= o.maxBytes;) {
    sizes.push_back(size);
    const size_t next = o.stepFactor > 1 ? size * o.stepFactor : size + o.stepBytes;
    if (next <= size) break;  // a zero start or step would repeat forever
    size = next;
  }
  return sizes;
}

}  // namespace loomperf

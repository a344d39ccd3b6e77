// loom-perf: nccl-tests' all_reduce_perf & co. in one binary, over Loom's public API.
#include "launcher.h"
#include "options.h"

int main(int argc, char** argv) {
  const loomperf::Options options = loomperf::parseOptions(argc, argv);
  return loomperf::launch(options);
}

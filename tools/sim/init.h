// loom-sim init: the bootstrap's predicted time and load for jobs of several sizes
// (loomModelPredictInit, include/loom_model.h).
#pragma once

namespace loom::sim_tool {

// `loom-sim init ...`: argv[0] is "init".
int runInitCommand(int argc, char** argv);

}  // namespace loom::sim_tool

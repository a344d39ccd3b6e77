// The cost model's default machine is a default communicator's: the slot (the largest message), the
// slots per connection and the host channels that a prediction times are those a communicator made
// with nothing set runs with, on the same host (the model reads them from the settings table's
// defaults, the communicator from the environment; here the environment sets none of them).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "core/communicator.h"
#include "model/job_model.h"
#include "thread_ranks.h"

namespace {

TEST(ModelDefaults, AreADefaultCommunicators) {
  for (const char* name : {"LOOM_CHUNK_BYTES", "LOOM_FIFO_SLOTS", "LOOM_NCHANNELS", "NCCL_BUFFSIZE",
                           "NCCL_MIN_NCHANNELS", "NCCL_STEPS"})
    unsetenv(name);
  constexpr int kRanks = 2;
  loom::model::JobModelOptions options;
  options.world = kRanks;
  options.memory = loom::model::MemoryChoice::Host;
  options.machine["copy_gbs"] = 10;  // no calibration run: the rate does not matter here
  std::unique_ptr<loom::model::JobModel> model;
  ASSERT_TRUE(loom::model::JobModel::create(options, &model).ok());
  loom::MachineModel modelled;
  ASSERT_TRUE(model->machineOf({}, true, &modelled).ok());

  runThreadRanks(kRanks, LOOM_CONFIG_INITIALIZER, [&](int rank, loomComm_t comm) {
    if (rank != 0) return;
    EXPECT_EQ(model->slotBytes(), comm->settings.chunkBytes);
    EXPECT_EQ(comm->transports->slotBytes(), comm->settings.chunkBytes);
    EXPECT_EQ(modelled.fifoSlots, static_cast<int>(comm->settings.nslots));
    EXPECT_EQ(modelled.fifoSlots, comm->tuner->machine().fifoSlots);
    EXPECT_EQ(model->maxChannels(), comm->settings.nchannels);
    EXPECT_EQ(modelled.minChannelBytes, comm->tuner->machine().minChannelBytes);
  });
}

}  // namespace

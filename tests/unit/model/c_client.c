/* include/loom_model.h from C11, as a C program uses it: the initializers, a prediction, an error. */
#include <stdio.h>
#include <string.h>

#include "loom_model.h"

int main(void) {
  loomModelConfig_t config = LOOM_MODEL_CONFIG_INITIALIZER;
  config.world = 16;
  config.ranksPerNode = 8;
  config.topology = "none";
  config.machine = "intra_gbs=100,nic_gbs=25,nics_per_node=8";
  loomModel_t model = NULL;
  if (loomModelCreate(&config, &model) != loomSuccess) {
    fprintf(stderr, "create: %s\n", loomGetLastError(NULL));
    return 1;
  }
  loomModelRequest_t request = LOOM_MODEL_REQUEST_INITIALIZER;
  request.bytes = (size_t)1 << 30;
  loomModelPrediction_t out;
  if (loomModelPredict(model, &request, &out) != loomSuccess || !(out.timeUs > 0) || out.channels < 1) {
    fprintf(stderr, "predict: %s\n", loomGetLastError(NULL));
    return 1;
  }
  printf("all_reduce 1 GiB on 16 ranks: %s, %d channels, %.1f us, busbw %.1f GB/s\n", out.algorithm, out.channels,
         out.timeUs, out.busbwGbs);
  request.algorithm = "nonsense";
  if (loomModelPredict(model, &request, &out) != loomInvalidArgument ||
      strstr(loomGetLastError(NULL), "nonsense") == NULL) {
    fprintf(stderr, "a bad algorithm was not named\n");
    return 1;
  }
  return loomModelDestroy(model) == loomSuccess ? 0 : 1;
}

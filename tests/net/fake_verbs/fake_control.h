// FakeVerbs' control API, for tests (they find it with dlsym in the library the provider loaded).
#pragma once

extern "C" {
// Makes the next `count` occurrences of `fault` fail: "retry_exceeded" (the next RDMA writes complete
// with IBV_WC_RETRY_EXC_ERR, status 12), "rnr_exceeded" (IBV_WC_RNR_RETRY_EXC_ERR, 13),
// "reg_mr_enomem" (ibv_reg_mr fails with ENOMEM), "modify_qp_einval" (ibv_modify_qp to RTR fails with
// EINVAL), "reg_dmabuf_eopnotsupp" (ibv_reg_dmabuf_mr fails with EOPNOTSUPP, as on a NIC or kernel
// without dmabuf support). 0 on success, -1 for an unknown fault.
int fake_verbs_inject(const char* fault, int count);
// Clears every pending fault.
void fake_verbs_reset(void);
// Contexts, PDs, MRs, channels, CQs and QPs made and not yet destroyed.
long fake_verbs_live_objects(void);
}

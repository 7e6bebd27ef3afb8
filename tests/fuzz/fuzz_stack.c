/* fuzz_stack.c — serving-stack profile YAML (nd_stack_load on a file path). An accepted profile
 * has fused rules and a quantizer from the known sets. */
#include "pipeline/stack.h"
#include "numerics/nd_numerics.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_write("stack-fuzz.yaml", data, size);
    nd_stack s;
    nd_err e = {0};
    int rc = nd_stack_load(p, &s, &e);
    fz_check_err(rc, &e, p);
    if (rc) return 0;
    FZ_ASSERT(s.input_fused >= ND_FUSED_OWN && s.input_fused <= ND_FUSED_MIN, "input_fused %d", s.input_fused);
    FZ_ASSERT(s.weight_fused >= ND_FUSED_OWN && s.weight_fused <= ND_FUSED_MIN, "weight_fused %d", s.weight_fused);
    FZ_ASSERT(s.quant_sem == ND_QSEM_KERNEL || s.quant_sem == ND_QSEM_CT, "quant_sem %d", s.quant_sem);
    return 0;
}

/* fuzz_stack.c — serving-stack profile YAML (nd_stack_load on a file path). An accepted profile
 * has fused rules, a quantizer, booleans and runtime behaviours from the known sets. */
#include "pipeline/stack.h"
#include "numerics/nd_numerics.h"
#include "fuzz_common.h"

static int load(const char *path, void *out, nd_err *e) { return nd_stack_load(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nd_stack s;
    if (!fz_parse("stack-fuzz.yaml", data, size, load, &s)) return 0;
    FZ_ASSERT(s.input_fused >= ND_FUSED_OWN && s.input_fused < ND_FUSED_NRULES, "input_fused %d", s.input_fused);
    FZ_ASSERT(s.weight_fused >= ND_FUSED_OWN && s.weight_fused < ND_FUSED_NRULES, "weight_fused %d", s.weight_fused);
    FZ_ASSERT(s.quant_sem == ND_QSEM_KERNEL || s.quant_sem == ND_QSEM_CT, "quant_sem %d", s.quant_sem);
    FZ_ASSERT(s.reciprocal_input == 0 || s.reciprocal_input == 1, "reciprocal_input %d", s.reciprocal_input);
    FZ_ASSERT(s.gate_up_w31 == 0 || s.gate_up_w31 == 1, "gate_up_w31 %d", s.gate_up_w31);
    FZ_ASSERT(s.routed_scaling >= 0 && s.routed_scaling <= 2, "routed_scaling %d", s.routed_scaling);
    FZ_ASSERT(s.epilogue_fp16 == 0 || s.epilogue_fp16 == 1, "epilogue_fp16 %d", s.epilogue_fp16);
    FZ_ASSERT(s.kv_cache_fp8 == 0 || s.kv_cache_fp8 == 1, "kv_cache_fp8 %d", s.kv_cache_fp8);
    FZ_ASSERT(s.kv_scales >= ND_KV_IGNORE && s.kv_scales < ND_KV_NUSES, "kv_scales %d", s.kv_scales);
    return 0;
}

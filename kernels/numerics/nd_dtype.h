/* nd_dtype.h — element types of checkpoint tensors (safetensors dtype strings) and their sizes. */
#ifndef ND_DTYPE_H
#define ND_DTYPE_H

#include <stddef.h>

typedef enum nd_dtype {
    ND_DT_INVALID = 0,
    ND_DT_F64, ND_DT_F32, ND_DT_F16, ND_DT_BF16,
    ND_DT_F8_E4M3, ND_DT_F8_E5M2, ND_DT_F8_E8M0,
    ND_DT_I64, ND_DT_I32, ND_DT_I16, ND_DT_I8, ND_DT_U8, ND_DT_BOOL,
    /* valid safetensors types no stage reads: a file holding one (an unrelated tensor) opens, a
     * stage that would read one refuses its dtype */
    ND_DT_U16, ND_DT_U32, ND_DT_U64, ND_DT_C64,
    ND_DT_COUNT
} nd_dtype;

/* Bytes per element; 0 for ND_DT_INVALID. */
static inline size_t nd_dtype_size(nd_dtype t) {
    static const unsigned char sz[ND_DT_COUNT] = {0, 8, 4, 2, 2, 1, 1, 1, 8, 4, 2, 1, 1, 1, 2, 4, 8, 8};
    return (t > ND_DT_INVALID && t < ND_DT_COUNT) ? sz[t] : 0;
}

/* How an FP8 weight's scale is stored (the checkpoint loader binds it, the dequant ops read it). */
enum nd_fp8_scale_kind {
    ND_FP8_SCALE_TENSOR = 0,   /* one f32 scale */
    ND_FP8_SCALE_CHANNEL = 1,  /* f32 [N] */
    ND_FP8_SCALE_BLOCK_F32 = 2,/* f32 [ceil(N/bn), ceil(K/bk)] (DeepSeek-V3 weight_scale_inv) */
    ND_FP8_SCALE_BLOCK_E8M0 = 3/* e8m0 bytes [ceil(N/bn), ceil(K/bk)] (DeepSeek-V4 .scale) */
};


#endif

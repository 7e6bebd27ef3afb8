/* backend_dtype.h — the element types a backend op reads or writes, as bit flags.
 *
 * kernels/backend.h declares, next to each op, the set of these an op handles (its operands'
 * storage formats: buffers, weights, scales, indices in backend memory); each backend's table
 * (nd_backend.op_dtypes) says which of them it supports, and nd_backend_supports asks it. A block
 * format (NVFP4, MXFP4) is its codes and its scales together; a scale read on its own (an FP8
 * weight's E8M0 block scales) is its own type. */
#ifndef ND_BACKEND_DTYPE_H
#define ND_BACKEND_DTYPE_H

#include "numerics/nd_dtype.h"

/* X(NAME, "name", nd_dtype it is in a checkpoint (ND_DT_INVALID: none), meaning) */
#define ND_OP_DTYPES(X) \
    X(F32, "f32", ND_DT_F32, "IEEE float32: activations, outputs, FP32 scales") \
    X(BF16, "bf16", ND_DT_BF16, "bfloat16: checkpoint tensors (to_f32); GEMM operands exact in BF16 (ND_GEMM_BF16_EXACT)") \
    X(F16, "f16", ND_DT_F16, "IEEE float16: checkpoint tensors (to_f32)") \
    X(E4M3, "fp8_e4m3", ND_DT_F8_E4M3, "FP8 E4M3 bytes: FP8 weights, NVFP4 block scales, FP8 round trips") \
    X(E8M0, "ue8m0", ND_DT_F8_E8M0, "power-of-two scale bytes: DeepSeek-V4 FP8 block scales") \
    X(NVFP4, "nvfp4", ND_DT_INVALID, "E2M1 codes, 16-element blocks with E4M3 scales (and a global divisor)") \
    X(MXFP4, "mxfp4", ND_DT_INVALID, "E2M1 codes, 32-element blocks with UE8M0 scales") \
    X(I32, "i32", ND_DT_I32, "int32 indices in backend memory (expert picks, top-k selections)")

/* bit positions ND_ODT_BIT_<NAME> and flags ND_ODT_<NAME> */
#define ND_ODT_BIT_ENUM(N, s, dt, m) ND_ODT_BIT_##N,
enum nd_op_dtype_bit { ND_OP_DTYPES(ND_ODT_BIT_ENUM) ND_ODT_BIT_COUNT };
#undef ND_ODT_BIT_ENUM
#define ND_ODT_FLAG_ENUM(N, s, dt, m) ND_ODT_##N = 1u << ND_ODT_BIT_##N,
enum nd_op_dtype { ND_OP_DTYPES(ND_ODT_FLAG_ENUM) ND_ODT_NONE = 0 };
#undef ND_ODT_FLAG_ENUM

/* "f32", "nvfp4", ... for a bit position; NULL out of range. */
const char *nd_op_dtype_name(int bit);
/* One line of meaning for a bit position; NULL out of range. */
const char *nd_op_dtype_meaning(int bit);
/* The flag of a checkpoint dtype; 0 when no op reads it. */
unsigned nd_op_dtype_of(nd_dtype t);
/* The names of the flags in mask joined by sep ("f32, bf16"), into buf; buf is returned. */
char *nd_op_dtypes_str(unsigned mask, const char *sep, char *buf, size_t n);

#endif

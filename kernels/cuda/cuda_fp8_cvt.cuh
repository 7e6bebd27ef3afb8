/* cuda_fp8_cvt.cuh — nd_numerics.h's E4M3 conversions done by the FP8 converter of sm_89 and later
 * (cvt.rn.satfinite.e4m3x2.f32 and cvt.rn.f16x2.e4m3x2: one or two instructions where the bit
 * rules take some forty with their branches). Equal to the software definitions for every input
 * they are used on; tests/backend/test_cuda_cvt checks every float and every byte on the GPU. */
#ifndef ND_CUDA_FP8_CVT_CUH
#define ND_CUDA_FP8_CVT_CUH

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include "numerics/nd_numerics.h"

/* nd_e4m3_from_f32_satfinite(x) for every x except a NaN with its sign bit set (the converter
 * gives 0x7f for every NaN; the software keeps the sign, 0xff): callers pass a non-NaN or an
 * unsigned NaN (nd_nan_unsigned). */
__device__ __forceinline__ uint8_t nd_cuda_e4m3_satfinite(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
#else
    return nd_e4m3_from_f32_satfinite(x);
#endif
}

/* nd_e4m3_to_f32(b) for every byte but 0xff (-NaN in the software, +NaN from the converter);
 * every E4M3 value is exact in FP16, so going through FP16 rounds nothing. */
__device__ __forceinline__ float nd_cuda_e4m3_to_f32(uint8_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3)));
#else
    return nd_e4m3_to_f32(b);
#endif
}

#endif

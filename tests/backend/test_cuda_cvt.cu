/* test_cuda_cvt — the CUDA-only shortcuts of nd_numerics.h's bit rules against those rules, on
 * every input: cuda_fp8_cvt.cuh's converter-based E4M3 encode (all 2^32 floats but the NaNs with
 * the sign bit set, which callers never pass) and decode (all 256 bytes; 0x7f/0xff: NaN on both),
 * and nd_e2m1_signs8's byte-permute gather against its per-element loop, plus
 * sign | nd_e2m1_mag_code against nd_e2m1_from_f32 for every non-NaN float. Exit 77 without a GPU. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdint.h>
#include "kernels/cuda/cuda_fp8_cvt.cuh"

#define CK(call)                                                                                       \
    do {                                                                                               \
        cudaError_t rc_ = (call);                                                                      \
        if (rc_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "test_cuda_cvt: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(rc_)); \
            return 1;                                                                                  \
        }                                                                                              \
    } while (0)

enum { BAD_ENC, BAD_E2M1, BAD_SIGNS, BAD_DEC, BAD_N };

/* one thread per 2^32 / (grid * block) floats; first mismatch of each kind kept in first[] */
__global__ void every_float(unsigned long long *bad, unsigned *first) {
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
        const uint32_t u = (uint32_t)i;
        const float x = __uint_as_float(u);
        const bool neg_nan = (u & 0x7fffffffu) > 0x7f800000u && (u >> 31);
        if (!neg_nan && nd_cuda_e4m3_satfinite(x) != nd_e4m3_from_f32_satfinite(x)) {
            if (atomicAdd(&bad[BAD_ENC], 1ull) == 0) first[BAD_ENC] = u;
        }
        const uint32_t a = u & 0x7fffffffu;
        if (a <= 0x7f800000u && (((u >> 28) & 8u) | nd_e2m1_mag_code(a)) != nd_e2m1_from_f32(x)) {
            if (atomicAdd(&bad[BAD_E2M1], 1ull) == 0) first[BAD_E2M1] = u;
        }
        /* eight words made from i: each bit of i's low byte decides one word's sign */
        uint32_t w[8], want = 0;
        for (int j = 0; j < 8; j++) {
            w[j] = (u * 2654435761u + (uint32_t)j * 40503u) ^ (((u >> j) & 1u) << 31);
            want |= (w[j] >> 31) << (4 * j + 3);
        }
        if (nd_e2m1_signs8(w) != want) {
            if (atomicAdd(&bad[BAD_SIGNS], 1ull) == 0) first[BAD_SIGNS] = u;
        }
    }
}

__global__ void every_byte(unsigned long long *bad, unsigned *first) {
    const unsigned b = threadIdx.x;
    const float hw = nd_cuda_e4m3_to_f32((uint8_t)b), sw = nd_e4m3_to_f32((uint8_t)b);
    const bool ok = (b & 0x7fu) == 0x7fu ? (hw != hw && sw != sw) : __float_as_uint(hw) == __float_as_uint(sw);
    if (!ok && atomicAdd(&bad[BAD_DEC], 1ull) == 0) first[BAD_DEC] = b;
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP test_cuda_cvt: no CUDA device\n");
        return 77;
    }
    unsigned long long *bad;
    unsigned *first;
    CK(cudaMalloc(&bad, BAD_N * sizeof *bad));
    CK(cudaMalloc(&first, BAD_N * sizeof *first));
    CK(cudaMemset(bad, 0, BAD_N * sizeof *bad));
    CK(cudaMemset(first, 0, BAD_N * sizeof *first));
    every_float<<<4096, 256>>>(bad, first);
    CK(cudaGetLastError());
    every_byte<<<1, 256>>>(bad, first);
    CK(cudaGetLastError());
    unsigned long long hb[BAD_N];
    unsigned hf[BAD_N];
    CK(cudaMemcpy(hb, bad, sizeof hb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hf, first, sizeof hf, cudaMemcpyDeviceToHost));
    static const char *what[BAD_N] = {"e4m3 encode (converter vs nd_e4m3_from_f32_satfinite), floats",
                                      "e2m1 sign | mag_code vs nd_e2m1_from_f32, floats",
                                      "nd_e2m1_signs8 (byte permutes vs loop), word sets",
                                      "e4m3 decode (converter vs nd_e4m3_to_f32), bytes"};
    int fails = 0;
    for (int k = 0; k < BAD_N; k++) {
        printf("%s %s: %llu mismatches", hb[k] ? "FAIL" : "ok  ", what[k], hb[k]);
        if (hb[k]) printf(" (first at 0x%08x)", hf[k]);
        printf("\n");
        fails += hb[k] != 0;
    }
    return fails ? 1 : 0;
}

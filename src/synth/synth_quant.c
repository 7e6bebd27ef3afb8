/* synth_quant.c — compressed-tensors weight quantization from nd_numerics.h rules (synth_quant.h). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include "numerics/nd_numerics.h"
#include "synth/synth_plan.h"
#include "synth/synth_quant.h"

float sy_amax_bf16(const uint16_t *w, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(nd_bf16_to_f32(w[i]));
        if (a > m) m = a;
    }
    return m;
}

float sy_nvfp4_global_div(float amax) {
    float g = ND_NVFP4_GLOBAL_NUM / amax;
    return isfinite(g) ? g : 1.0f;
}

/* Rows [r0, r1) of sy_nvfp4_quantize. */
typedef struct nvfp4_rows {
    const uint16_t *w;
    int64_t k, r0, r1;
    float gw;
    uint8_t *packed, *sf;
} nvfp4_rows;

static void *nvfp4_rows_run(void *arg) {
    const nvfp4_rows *j = arg;
    const int64_t k = j->k, nb = k / ND_NVFP4_BLOCK;
    const float gw = j->gw;
    const uint8_t eps_byte = nd_e4m3_from_f32_satfinite(0.125f);
    for (int64_t r = j->r0; r < j->r1; r++) {
        const uint16_t *row = j->w + r * k;
        uint8_t *prow = j->packed + r * (k / 2);
        for (int64_t b = 0; b < nb; b++) {
            float x[ND_NVFP4_BLOCK], amax = 0.0f;
            for (int i = 0; i < ND_NVFP4_BLOCK; i++) {
                x[i] = nd_bf16_to_f32(row[b * ND_NVFP4_BLOCK + i]);
                if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
            }
            nd_block_q p = nd_nvfp4_block_params(amax, gw, ND_QSEM_CT);
            /* compressed-tensors stores the scale after replacing 0 by its eps */
            j->sf[r * nb + b] = nd_e4m3_to_f32(p.sf) == 0.0f ? eps_byte : p.sf;
            for (int i = 0; i < ND_NVFP4_BLOCK; i += 2) {
                uint8_t lo = nd_nvfp4_quant_elem(x[i], p, gw, ND_QSEM_CT);
                uint8_t hi = nd_nvfp4_quant_elem(x[i + 1], p, gw, ND_QSEM_CT);
                prow[(b * ND_NVFP4_BLOCK + i) / 2] = (uint8_t)(lo | (hi << 4));
            }
        }
    }
    return NULL;
}

/* Rows are independent, so a large weight is split over threads (ND_SYNTH_THREADS caps them, as
 * for generation); the bytes do not depend on the split. */
void sy_nvfp4_quantize(const uint16_t *w, int64_t n, int64_t k, float gw, uint8_t *packed, uint8_t *sf) {
    enum { MAXT = 64 };
    int threads = n * k >= (1 << 22) ? sy_thread_count() : 1;
    if (threads > MAXT) threads = MAXT;
    if (threads > n) threads = n > 0 ? (int)n : 1;
    nvfp4_rows job[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = {0};
    const int64_t per = (n + threads - 1) / threads;
    for (int t = 0; t < threads; t++) {
        const int64_t r0 = t * per, r1 = r0 + per < n ? r0 + per : n;
        job[t] = (nvfp4_rows){w, k, r0 < n ? r0 : n, r1, gw, packed, sf};
        started[t] = t > 0 && pthread_create(&tid[t], NULL, nvfp4_rows_run, &job[t]) == 0;
    }
    nvfp4_rows_run(&job[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else nvfp4_rows_run(&job[t]); /* no thread: the same rows inline */
    }
}

void sy_fp8_block_quantize(const uint16_t *w, int64_t n, int64_t k, int bn, int bk, uint8_t *q, float *scale) {
    const int64_t gn = (n + bn - 1) / bn, gk = (k + bk - 1) / bk;
    for (int64_t bi = 0; bi < gn; bi++)
        for (int64_t bj = 0; bj < gk; bj++) {
            int64_t r0 = bi * bn, r1 = r0 + bn < n ? r0 + bn : n;
            int64_t c0 = bj * bk, c1 = c0 + bk < k ? c0 + bk : k;
            float amax = 0.0f;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    float a = fabsf(nd_bf16_to_f32(w[r * k + c]));
                    if (a > amax) amax = a;
                }
            float s = amax / ND_E4M3_MAX;
            if (s == 0.0f) s = FLT_EPSILON;
            scale[bi * gk + bj] = s;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    float y = nd_bf16_to_f32(w[r * k + c]) / s;
                    if (y > ND_E4M3_MAX) y = ND_E4M3_MAX;
                    if (y < -ND_E4M3_MAX) y = -ND_E4M3_MAX;
                    q[r * k + c] = nd_e4m3_from_f32_satfinite(y);
                }
        }
}

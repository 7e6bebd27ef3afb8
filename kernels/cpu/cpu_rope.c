/* cpu_rope.c — rotary embedding on a slice of each head, interleaved or half-split, forward or
 * inverse. Angles pos * inv_freq and their cos/sin in FP32 (times mscale), rounded as `steps` says
 * (numerics/nd_bf16_steps.h). */
#include <math.h>
#include "cpu_internal.h"
#include "numerics/nd_bf16_steps.h"

int nd_cpu_rope(nd_backend *b, float *x, int64_t rows, int64_t heads, int64_t d, int64_t rot_off,
                int64_t rot_dim, const int32_t *pos_host, const float *inv_freq_host, int interleaved,
                int inverse, int steps, float mscale, nd_err *e) {
    (void)b;
    const char *op = "rope";
    ND_CPU_SIZES(e, op, rows, heads, d);
    ND_CPU_REQUIRE(rot_off >= 0 && rot_dim >= 0 && rot_off + rot_dim <= d, e, op,
                   "rotary slice [%lld, %lld) outside head dim %lld", (long long)rot_off,
                   (long long)(rot_off + rot_dim), (long long)d);
    ND_CPU_REQUIRE(rot_dim % 2 == 0, e, op, "rot_dim %lld is odd", (long long)rot_dim);
    ND_CPU_REQUIRE(steps >= ND_ROPE_FP32 && steps <= ND_ROPE_BF16_PRODUCTS, e, op, "unknown steps %d", steps);
    if (rows * heads * rot_dim == 0) return 0;
    ND_CPU_REQUIRE(x && pos_host && inv_freq_host, e, op, "NULL buffer");
    const int64_t half = rot_dim / 2;
    for (int64_t r = 0; r < rows; r++) {
        const float p = (float)pos_host[r];
        for (int64_t i = 0; i < half; i++) {
            const float ang = p * inv_freq_host[i];
            const float c = nd_rope_trig(cosf(ang) * mscale, steps), sn = nd_rope_trig(sinf(ang) * mscale, steps);
            const float s = inverse ? -sn : sn;
            const int64_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
            for (int64_t h = 0; h < heads; h++) {
                float *xh = x + (r * heads + h) * d + rot_off;
                nd_rope_pair(xh[i0], xh[i1], c, s, steps, &xh[i0], &xh[i1]);
            }
        }
    }
    return 0;
}

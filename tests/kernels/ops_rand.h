/* ops_rand.h — the random inputs of the CPU op tests: one xorshift64 state, seeded from
 * ND_TEST_SEED or the clock and printed so that a run can be replayed. */
#ifndef ND_OPS_RAND_H
#define ND_OPS_RAND_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rs;
static inline uint64_t rnd64(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static inline double urand(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static inline float frand(float lo, float hi) { return (float)(lo + (hi - lo) * urand()); }
static inline float *fvec(int64_t n, float lo, float hi) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = frand(lo, hi);
    return v;
}

/* the seed: ND_TEST_SEED, else from the clock (never 0), printed */
static inline void rnd_seed(void) {
    const char *s = getenv("ND_TEST_SEED");
    rs = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) * 2654435761u;
    if (!rs) rs = 88172645463325252ull;
    printf("seed %llu (ND_TEST_SEED=%llu replays it)\n", (unsigned long long)rs, (unsigned long long)rs);
}
#endif

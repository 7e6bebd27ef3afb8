/* synth_rng.c — splitmix64 -> uniform -> Box-Muller normal (see synth_rng.h). */
#include <math.h>
#include "synth/synth_rng.h"

uint64_t sy_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t sy_fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void sy_rng_init(sy_rng *r, uint64_t seed, const char *name) {
    uint64_t s = seed ^ sy_fnv1a64(name);
    r->state = sy_splitmix64(&s);
    r->have_spare = 0;
    r->spare = 0.0;
}

double sy_uniform(sy_rng *r) {
    return (double)((sy_splitmix64(&r->state) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

double sy_normal(sy_rng *r) {
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    double u1 = sy_uniform(r), u2 = sy_uniform(r);
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586476925 * u2;
    r->spare = rad * sin(th);
    r->have_spare = 1;
    return rad * cos(th);
}

void sy_rng_skip(sy_rng *r, uint64_t draws) {
    r->state += draws * 0x9e3779b97f4a7c15ull; /* mod 2^64, as the counter itself */
    r->have_spare = 0;
}

uint64_t sy_below(sy_rng *r, uint64_t n) {
    return n ? (uint64_t)(sy_uniform(r) * (double)n) % n : 0;
}

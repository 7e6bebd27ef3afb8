/* synth_rng.h — the seeded generator behind every synthetic weight (documented in docs/synth.md).
 *
 * Each tensor has its own stream: state = splitmix64(seed ^ fnv1a64(tensor name)), so a tensor's
 * values do not depend on which other tensors exist or in which order they are written. Uniforms
 * take the top 53 bits of splitmix64 outputs; normals come from Box-Muller in double precision,
 * both outputs of a pair used in turn. */
#ifndef ND_SYNTH_RNG_H
#define ND_SYNTH_RNG_H

#include <stdint.h>

typedef struct sy_rng {
    uint64_t state;
    int have_spare;
    double spare;
} sy_rng;

uint64_t sy_splitmix64(uint64_t *state);
uint64_t sy_fnv1a64(const char *s);
/* The stream of tensor `name` under `seed`. */
void sy_rng_init(sy_rng *r, uint64_t seed, const char *name);
/* Uniform in (0, 1]: (top 53 bits + 1) * 2^-53. */
double sy_uniform(sy_rng *r);
/* Standard normal (Box-Muller). */
double sy_normal(sy_rng *r);
/* Uniform integer in [0, n). */
uint64_t sy_below(sy_rng *r, uint64_t n);
/* Jump a fresh stream (no spare normal) ahead by `draws` splitmix64 outputs: splitmix64 is a
 * counter (state += gamma per draw), so element 2j of a normal stream starts after 2j draws.
 * This lets a tensor be generated in parallel chunks with the same values. */
void sy_rng_skip(sy_rng *r, uint64_t draws);

#endif

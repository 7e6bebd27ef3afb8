/* synth_plan.h — the list of tensors of a synthetic model (internal to src/synth).
 *
 * The family builder (synth_recipe.c, from a recipe's `synth:` section) turns a size into a plan: every tensor
 * of the unquantized original in file order, how its values are drawn, and how the quantized
 * checkpoint stores it. Values are regenerated from (seed, name) whenever they are needed, so
 * the plan holds no weights. */
#ifndef ND_SYNTH_PLAN_H
#define ND_SYNTH_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "numerics/nd_dtype.h"
#include "synth/synth.h"
#include "util/err.h"

typedef enum sy_init {
    SY_INIT_NORMAL = 0, /* a + b * N(0,1) */
    SY_INIT_CONST,      /* every value = a */
    SY_INIT_HC_BASE,    /* hyper-connection base [(2+n)*n], n = aux: pre logit(1/n), post 0, comb 2*I; + b*N */
    SY_INIT_TID2EID,    /* I32 [V, k]: k distinct experts of aux per row */
} sy_init;

typedef enum sy_qkind { SY_Q_NONE = 0, SY_Q_NVFP4, SY_Q_FP8_BLOCK } sy_qkind;

#define SY_NAME 200

typedef struct sy_param {
    char name[SY_NAME];     /* tensor name in the original, e.g. "model.layers.0.self_attn.q_a_proj.weight" */
    char module[SY_NAME];   /* linear module path ("model.layers.0.self_attn.q_a_proj"); "" otherwise */
    nd_dtype dtype;
    int ndim;
    int64_t shape[3];       /* unused dimensions 1; a third only for plain tensors (sy_add3) */
    sy_init init;
    double a, b;
    int aux;
    sy_qkind quant;
    int fuse;               /* fused-shard group id (shared weight global scale), -1 for none */
    int layer, expert;      /* -1 when not in a layer / not a routed expert */
    char role[16];          /* "gate_proj", "up_proj", "down_proj" for MLP linears, else "" */
    float w_amax;           /* amax of the BF16 weight, filled when the original is written */
    double in_amax;         /* calibrated input amax, filled after calibration (NaN: none) */
    int line;               /* the synth: entry of the recipe file that made it (0: built in) */
} sy_param;

typedef struct sy_plan {
    int n_layers;
    int64_t vocab;
    sy_param *p;
    size_t n, cap;
    int next_fuse;
    void *config;                     /* json_t *: config.json of the original */
    const char *const *ct_ignore;     /* compressed-tensors "ignore" (NULL-terminated) */
    const char *const *mo_exclude;    /* ModelOpt "exclude_modules" (NULL-terminated) */
    const char *recipe;               /* recipe name handed to calibration */
    char recipe_name[512];            /* storage for recipe and the lists (synth_recipe.c) */
    char list_text[2][8][64];
    const char *list_ptr[2][9];
} sy_plan;

void sy_plan_free(sy_plan *pl);
/* Append a tensor; returns it (NULL on allocation failure, recorded in pl as an error). */
sy_param *sy_add(sy_plan *pl, const char *name, nd_dtype dt, int ndim, int64_t d0, int64_t d1,
                 sy_init init, double a, double b);
/* The same with a third dimension d2 (ndim 3: a convolution's [C, 1, K]). */
sy_param *sy_add3(sy_plan *pl, const char *name, nd_dtype dt, int64_t d0, int64_t d1, int64_t d2,
                  sy_init init, double a, double b);
/* A linear module PATH ("model.layers.0.mlp.gate_proj") with weight [n,k], std = gain/sqrt(k). */
sy_param *sy_add_linear(sy_plan *pl, const char *path, int64_t n, int64_t k, double gain, sy_qkind q,
                        int fuse, int layer, int expert);
/* A BF16 RMSNorm weight [n] near 1. */
sy_param *sy_add_norm(sy_plan *pl, const char *name, int64_t n);
int sy_new_fuse(sy_plan *pl);
/* A SwiGLU MLP PREFIX.{gate,up,down}_proj [I, D] [I, D] [D, I], NVFP4, gate and up fused. */
void sy_add_mlp(sy_plan *pl, const char *prefix, int64_t I, int64_t D, int layer, int expert);
/* A family builder's first and last steps. begin: the recipe name, layer count, vocabulary and
 * quantization-config exclusions, then the BF16 embedding [vocab, hidden]. end: the final norm,
 * the unquantized lm_head and config.json (config NULL: out of memory, an internal error). */
void sy_plan_begin(sy_plan *pl, const char *recipe, int64_t layers, int64_t vocab, int64_t hidden,
                   const char *const *ct_ignore, const char *const *mo_exclude);
int sy_plan_end(sy_plan *pl, int64_t hidden, void *config, nd_err *e);
int sy_plan_ok(const sy_plan *pl, nd_err *e);

size_t sy_param_numel(const sy_param *p);
size_t sy_param_bytes(const sy_param *p);
/* Threads for large tensors: the online CPUs, capped by ND_SYNTH_THREADS (1: one pass). */
int sy_thread_count(void);
/* Fill out (sy_param_bytes bytes, in p->dtype) with the parameter's values under seed. */
void sy_generate(const sy_param *p, uint64_t seed, void *out);

/* Family builders: fill the plan and its config for a size (layers 0: the size's default). */
struct nd_recipe;
/* experts > 0: the routed-expert count (the section's experts: count key) overridden. */
int sy_build_recipe(sy_plan *pl, const struct nd_recipe *r, nd_synth_size size, int layers, int experts, nd_err *e);
/* recipe: a recipe name or file with a `synth:` section. 2 with the list of such recipes when it
 * has none. */
int sy_build(sy_plan *pl, const char *recipe, nd_synth_size size, int layers, nd_err *e);
/* The same with the routed-expert count overridden (experts > 0; recipes with synth: experts:). */
int sy_build_ex(sy_plan *pl, const char *recipe, nd_synth_size size, int layers, int experts, nd_err *e);

/* Module path without "model." ("layers.0.self_attn.q_a_proj", "lm_head"). */
const char *sy_stage_name(const char *module_path);
/* The NVFP4 linear whose stage name or module path is `module`; -1 when there is none. */
long sy_find_module(const sy_plan *pl, const char *module);

#endif

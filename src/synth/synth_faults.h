/* synth_faults.h — `--inject FAULT[=VALUE]@MODULE` (SPEC §8): parse, apply to one quantized
 * module while it is written, and record in the side file OUTDIR.faults.json. */
#ifndef ND_SYNTH_FAULTS_H
#define ND_SYNTH_FAULTS_H

#include <stddef.h>
#include <stdint.h>
#include "synth/synth_plan.h"

typedef enum sy_fault_kind {
    SY_F_INPUT_INVERTED = 0, SY_F_INPUT_MUL, SY_F_INPUT_INF, SY_F_WGLOBAL_ZERO, SY_F_WSCALE_NAN,
    SY_F_NIBBLE_SWAP, SY_F_FUSED_MISMATCH, SY_F_MISSING_INPUT,
    SY_F_KV_SCALES, SY_F_KV_MUL, SY_F_KV_INVERTED, /* synth --from only (synth_kv.h) */
    SY_F_WGLOBAL_MUL,
    SY_F_CONFIG_IGNORE, SY_F_DEQUANTIZE, SY_F_SCALE_RENAMED, SY_F_WSCALE_RENAMED, SY_F_SCALE_MISSING_EXPERT,
    SY_F_QUANTIZE, /* synth --from only (synth_static.h) */
    SY_F_SCALE_POW2, SY_F_SCALE_SWIZZLED, SY_F_SCALE_TRANSPOSED, SY_F_SCALE_ENCODING, /* synth_scales.h */
    SY_F_ROUTER_BIAS_OFFSET, /* synth --from only (synth_static.h) */
    SY_F_SCALE_ROW_STRIDE,   /* synth_scales.h: the block scales stored in rows padded to a multiple */
    SY_F_WEIGHT_MUL,         /* the weight times F through its global scale (codes and block scales kept) */
    SY_F_QUANTIZE_UNIGNORED, /* synth_static.h: quantize, and the module's entry dropped from the config's ignore list */
    SY_F_GATE_UP_SWAP,       /* synth_static.h: gate_proj's and up_proj's tensors stored under each other's names */
    SY_F_SCALE_EXPONENT,     /* synth_scales.h: every block scale written with its exponent K too low */
    SY_F_WGLOBAL_NEGATIVE,   /* the weight global scale stored with its sign flipped */
    SY_F_COUNT
} sy_fault_kind;

typedef struct sy_fault {
    sy_fault_kind kind;
    int has_value;
    double value;                  /* F of input-scale-mul / fused-scale-mismatch */
    long param;                    /* index in the plan */
    char module[SY_NAME];          /* stage name ("layers.0.self_attn.q_a_proj") */
    char tensor[SY_NAME + 32];     /* the tensor it changed (filled when applied) */
    double stored;                 /* the new on-disk value of a scalar (NaN when not a scalar) */
    int64_t count;                 /* weight-scale-nan: block scales set to NaN; nibble-swap: bytes */
    int64_t stride;                /* scale-row-stride: the bytes per stored row */
    int applied;
} sy_fault;

typedef struct sy_faults {
    sy_fault *f;
    int n;
} sy_faults;

/* One quantized NVFP4 module as it is about to be written (on-disk values). */
typedef struct sy_qmod {
    uint8_t *packed;     /* [n, k/2] */
    uint8_t *sf;         /* [n, k/16] */
    int64_t n, k;
    float wglobal;       /* CT weight_global_scale or ModelOpt weight_scale_2 */
    float iglobal;       /* CT input_global_scale or ModelOpt input_scale */
    int has_input;       /* 0 when missing-input-scale removed it */
    int64_t sf_cols;     /* the stored scale tensor's columns when scale-row-stride padded its rows
                          * (sf then holds n * sf_cols bytes); 0: k/16 */
} sy_qmod;

const char *sy_fault_name(sy_fault_kind k);
/* Parse "FAULT[=VALUE]@MODULE" alone (the fault, its value, the module text); exit 2 on an unknown
 * fault or a bad value. *module points into spec. */
int sy_fault_parse_spec(const char *spec, sy_fault *f, const char **module, nd_err *e);
/* Parse and validate every spec against the plan; exit 2 on an unknown fault, a bad value, an
 * unknown module or a module the fault cannot apply to. */
int sy_faults_parse(const sy_plan *pl, const char *const *specs, int n, sy_faults *out, nd_err *e);
void sy_faults_free(sy_faults *fs);
/* 1 if a missing-input-scale fault targets the parameter. */
int sy_faults_drop_input(const sy_faults *fs, long param);
/* Apply every fault of `param` to m, in command-line order. prefix = module path. */
void sy_faults_apply(sy_faults *fs, long param, nd_synth_format fmt, const char *prefix, sy_qmod *m);
/* The columns the block-scale tensor of `param` is stored with (nb = K/16 unless a scale-row-stride
 * fault pads its rows): the caller sizes the scale buffer n * this. */
/* exit 2 when a factor fault (input-scale-mul, fused-scale-mismatch, weight-mul,
 * weight-global-scale-mul) applied to param stored a scale outside float's range (Inf or 0) */
int sy_faults_stored_ok(const sy_faults *fs, long param, nd_err *e);
int64_t sy_faults_sf_cols(const sy_faults *fs, long param, int64_t nb);
/* Exit 2 when a fault that reads or writes a module's block scales follows scale-row-stride on the
 * same module (the padded rows are the last representation written). */
int sy_faults_stride_last(const sy_faults *fs, nd_err *e);
/* Write the side file (a JSON list, empty when there are no faults). */
int sy_faults_write(const sy_faults *fs, const char *path, nd_err *e);
/* 1 when path is an earlier fault list (a JSON array of faults): a new synth replaces it. */
int sy_faults_is_ours(const char *path);

#endif

/* synth_faults.c — fault parsing, application and the side file (synth_faults.h).
 *
 * Meaning per fault, identical in both formats in terms of what the checkpoint implies:
 *  input-scale-inverted   the input scale tensor holds the reciprocal of the right value
 *  input-scale-mul=F      the quantizer multiplier the checkpoint implies is F times the right one
 *                         (CT input_global_scale * F; ModelOpt input_scale / F)
 *  input-scale-inf        the input scale tensor is +Inf
 *  weight-global-scale-zero  weight_global_scale (CT) / weight_scale_2 (ModelOpt) is 0
 *  weight-scale-nan       the first block scale of every 8th row (rows 0, 8, ...) is NaN (0x7F)
 *  nibble-swap            the two nibbles of every byte of the packed weight are swapped
 *  fused-scale-mismatch=F this shard's weight global divisor is F times the one its block scales
 *                         were made with (CT weight_global_scale * F; ModelOpt weight_scale_2 / F)
 *  missing-input-scale    the input scale tensor is left out
 *  kv-scales, kv-scale-mul=F, kv-scale-inverted   FP8 KV-cache scales of an attention module, with
 *                         --from only (synth_kv.h)
 *  weight-global-scale-negative  the weight global scale stored with its sign flipped
 *  weight-global-scale-mul=F  the weight global divisor times F (CT weight_global_scale * F; ModelOpt
 *                         weight_scale_2 / F), codes and block scales re-quantized with it
 *                         (synth_static.c: sy_requant_global); F < 1 pushes block scales into subnormals
 *  weight-mul=F           the decoded weight times F through its global scale alone (CT
 *                         weight_global_scale / F; ModelOpt weight_scale_2 * F; codes and block
 *                         scales kept): the module's output is F times larger, a model with massive
 *                         activations (fp16_overflow under an FP16 stack, clean under BF16)
 *  scale-pow2, scale-swizzled, scale-transposed, scale-encoding=E, scale-row-stride=M
 *                         the block scales' representation (synth_scales.h)
 *  config-ignore, dequantize, scale-renamed, weight-scale-renamed, scale-missing-expert, quantize,
 *  quantize-unignored, gate-up-swap
 *                         config, names and precision of a module: --from only (synth_static.h) */
#include "util/suggest.h"
#include <errno.h>
#include <unistd.h>
#include "util/infile.h"
#include "util/outfile.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "synth/synth_faults.h"
#include "synth/synth_scales.h"
#include "pipeline/scale_repr.h"
#include "synth/synth_static.h"

static const struct { const char *name; int needs_value; } KINDS[SY_F_COUNT] = {
    [SY_F_INPUT_INVERTED] = {"input-scale-inverted", 0},
    [SY_F_INPUT_MUL] = {"input-scale-mul", 1},
    [SY_F_INPUT_INF] = {"input-scale-inf", 0},
    [SY_F_WGLOBAL_ZERO] = {"weight-global-scale-zero", 0},
    [SY_F_WSCALE_NAN] = {"weight-scale-nan", 0},
    [SY_F_NIBBLE_SWAP] = {"nibble-swap", 0},
    [SY_F_FUSED_MISMATCH] = {"fused-scale-mismatch", 1},
    [SY_F_MISSING_INPUT] = {"missing-input-scale", 0},
    [SY_F_KV_SCALES] = {"kv-scales", 0},
    [SY_F_KV_MUL] = {"kv-scale-mul", 1},
    [SY_F_KV_INVERTED] = {"kv-scale-inverted", 0},
    [SY_F_WGLOBAL_MUL] = {"weight-global-scale-mul", 1},
    [SY_F_CONFIG_IGNORE] = {"config-ignore", 0},
    [SY_F_DEQUANTIZE] = {"dequantize", 0},
    [SY_F_SCALE_RENAMED] = {"scale-renamed", 0},
    [SY_F_WSCALE_RENAMED] = {"weight-scale-renamed", 0},
    [SY_F_SCALE_MISSING_EXPERT] = {"scale-missing-expert", 0},
    [SY_F_QUANTIZE] = {"quantize", 0},
    [SY_F_SCALE_POW2] = {"scale-pow2", 0},
    [SY_F_SCALE_SWIZZLED] = {"scale-swizzled", 0},
    [SY_F_SCALE_TRANSPOSED] = {"scale-transposed", 0},
    [SY_F_SCALE_ENCODING] = {"scale-encoding", 2}, /* a word: e8m0, u8 */
    [SY_F_ROUTER_BIAS_OFFSET] = {"router-bias-offset", 1},
    [SY_F_QUANTIZE_UNIGNORED] = {"quantize-unignored", 0},
    [SY_F_SCALE_ROW_STRIDE] = {"scale-row-stride", 1},
    [SY_F_WEIGHT_MUL] = {"weight-mul", 1},
    [SY_F_GATE_UP_SWAP] = {"gate-up-swap", 0},
    [SY_F_SCALE_EXPONENT] = {"scale-exponent-shift", 1},
    [SY_F_WGLOBAL_NEGATIVE] = {"weight-global-scale-negative", 0},
};

const char *sy_fault_name(sy_fault_kind k) { return k < SY_F_COUNT ? KINDS[k].name : "?"; }

int sy_fault_parse_spec(const char *spec, sy_fault *f, const char **module, nd_err *e) {
    memset(f, 0, sizeof *f);
    f->stored = NAN;
    const char *at = strrchr(spec, '@');
    if (!at || at == spec || !at[1])
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': expected FAULT[=VALUE]@MODULE", spec);
    char fault[96];
    size_t fl = (size_t)(at - spec);
    if (fl >= sizeof fault) return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': fault name too long", spec);
    memcpy(fault, spec, fl);
    fault[fl] = 0;
    char *eq = strchr(fault, '=');
    if (eq) *eq = 0;
    int k;
    for (k = 0; k < SY_F_COUNT; k++)
        if (!strcmp(fault, KINDS[k].name)) break;
    if (k == SY_F_COUNT) {
        char list[1024] = "";
        for (int i = 0; i < SY_F_COUNT; i++) {
            strncat(list, KINDS[i].name, sizeof list - strlen(list) - 1);
            strncat(list, i + 1 < SY_F_COUNT ? ", " : "", sizeof list - strlen(list) - 1);
        }
        const char *names[SY_F_COUNT];
        for (int i = 0; i < SY_F_COUNT; i++) names[i] = KINDS[i].name;
        const char *best = nd_suggest(fault, names, SY_F_COUNT);
        char hint[128] = "";
        if (best) snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': unknown fault '%s'%s (known: %s)", spec, fault, hint, list);
    }
    f->kind = (sy_fault_kind)k;
    if (KINDS[k].needs_value == 2) {
        if (!eq || !eq[1])
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': %s needs a value (%s=e8m0@MODULE)", spec, fault, fault);
        ND_TRY(sy_scale_fault_value(spec, eq + 1, f, e));
    } else if (KINDS[k].needs_value) {
        char *end = NULL;
        if (!eq || !eq[1])
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': %s needs a factor (%s=F@MODULE)", spec, fault, fault);
        f->value = strtod(eq + 1, &end);
        if (*end || !isfinite(f->value) || f->value <= 0.0)
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': factor '%s' is not a finite number > 0", spec, eq + 1);
        f->has_value = 1;
    } else if (eq) {
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': %s takes no value", spec, fault);
    }
    *module = at + 1;
    snprintf(f->module, sizeof f->module, "%s", at + 1);
    return 0;
}

static int parse_one(const sy_plan *pl, const char *spec, sy_fault *f, nd_err *e) {
    const char *mod;
    ND_TRY(sy_fault_parse_spec(spec, f, &mod, e));
    const char *at = mod - 1;
    if (f->kind >= SY_F_KV_SCALES && f->kind <= SY_F_KV_INVERTED)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': KV-cache scale faults apply to an existing checkpoint "
                       "(synth OUTDIR --from CKPT --inject %s@layers.L.self_attn)", spec, sy_fault_name(f->kind));
    if ((f->kind >= SY_F_CONFIG_IGNORE && f->kind <= SY_F_QUANTIZE) || f->kind == SY_F_ROUTER_BIAS_OFFSET)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': %s changes the config, names or precision of an existing "
                       "checkpoint (synth OUTDIR --from CKPT --inject %s@MODULE)", spec, sy_fault_name(f->kind),
                       sy_fault_name(f->kind));
    long idx = sy_find_module(pl, at + 1);
    if (idx < 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': no module '%s' in this model", spec, at + 1);
    const sy_param *p = &pl->p[idx];
    if (p->quant != SY_Q_NVFP4)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': module '%s' is not an NVFP4 linear", spec, at + 1);
    if (f->kind == SY_F_FUSED_MISMATCH && p->fuse < 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject '%s': module '%s' is not a fused shard", spec, at + 1);
    if (sy_scale_fault(f->kind)) ND_TRY(sy_scale_fault_check(f, p->shape[0], p->shape[1], spec, e));
    f->param = idx;
    snprintf(f->module, sizeof f->module, "%s", sy_stage_name(p->module));
    return 0;
}

int sy_faults_parse(const sy_plan *pl, const char *const *specs, int n, sy_faults *out, nd_err *e) {
    out->f = NULL;
    out->n = 0;
    if (n <= 0) return 0;
    out->f = calloc((size_t)n, sizeof *out->f);
    if (!out->f) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory");
    for (int i = 0; i < n; i++) {
        int rc = parse_one(pl, specs[i], &out->f[i], e);
        if (rc) { sy_faults_free(out); return rc; }
        out->n++;
    }
    int rc = sy_faults_stride_last(out, e);
    if (rc) sy_faults_free(out);
    return rc;
}

void sy_faults_free(sy_faults *fs) {
    free(fs->f);
    fs->f = NULL;
    fs->n = 0;
}

int sy_faults_drop_input(const sy_faults *fs, long param) {
    for (int i = 0; i < fs->n; i++)
        if (fs->f[i].param == param && fs->f[i].kind == SY_F_MISSING_INPUT) return 1;
    return 0;
}

void sy_faults_apply(sy_faults *fs, long param, nd_synth_format fmt, const char *prefix, sy_qmod *m) {
    const int ct = fmt == ND_SYNTH_CT;
    const char *in_name = ct ? "input_global_scale" : "input_scale";
    const char *wg_name = ct ? "weight_global_scale" : "weight_scale_2";
    const char *packed_name = ct ? "weight_packed" : "weight";
    for (int i = 0; i < fs->n; i++) {
        sy_fault *f = &fs->f[i];
        if (f->param != param) continue;
        const char *t = NULL;
        switch (f->kind) {
        case SY_F_INPUT_INVERTED: m->iglobal = 1.0f / m->iglobal; f->stored = m->iglobal; t = in_name; break;
        case SY_F_INPUT_MUL:
            m->iglobal = ct ? (float)(m->iglobal * f->value) : (float)(m->iglobal / f->value);
            f->stored = m->iglobal; t = in_name; break;
        case SY_F_INPUT_INF: m->iglobal = INFINITY; f->stored = m->iglobal; t = in_name; break;
        case SY_F_WGLOBAL_ZERO: m->wglobal = 0.0f; f->stored = 0.0; t = wg_name; break;
        case SY_F_WGLOBAL_NEGATIVE: m->wglobal = -m->wglobal; f->stored = m->wglobal; t = wg_name; break;
        case SY_F_FUSED_MISMATCH:
            m->wglobal = ct ? (float)(m->wglobal * f->value) : (float)(m->wglobal / f->value);
            f->stored = m->wglobal; t = wg_name; break;
        case SY_F_WSCALE_NAN: {
            const int64_t nb = m->k / 16;
            f->count = 0;
            for (int64_t r = 0; r < m->n; r += 8) { m->sf[r * nb] = 0x7f; f->count++; }
            t = "weight_scale";
            break;
        }
        case SY_F_NIBBLE_SWAP: {
            const int64_t nbytes = m->n * (m->k / 2);
            for (int64_t j = 0; j < nbytes; j++) m->packed[j] = (uint8_t)((m->packed[j] >> 4) | (m->packed[j] << 4));
            f->count = nbytes;
            t = packed_name;
            break;
        }
        case SY_F_MISSING_INPUT: m->has_input = 0; t = in_name; break;
        case SY_F_WGLOBAL_MUL:
            sy_requant_global(m->packed, m->sf, m->n, m->k, &m->wglobal, f->value, !ct);
            f->stored = m->wglobal; t = wg_name; break;
        case SY_F_WEIGHT_MUL: /* the decoded weight times F: the divisor / F (ModelOpt's multiplier * F) */
            m->wglobal = ct ? (float)(m->wglobal / f->value) : (float)(m->wglobal * f->value);
            f->stored = m->wglobal; t = wg_name; break;
        case SY_F_SCALE_POW2: case SY_F_SCALE_SWIZZLED: case SY_F_SCALE_TRANSPOSED: case SY_F_SCALE_ENCODING:
        case SY_F_SCALE_ROW_STRIDE: case SY_F_SCALE_EXPONENT:
            t = sy_scale_fault_apply(f, ct, m);
            break;
        default: break;
        }
        snprintf(f->tensor, sizeof f->tensor, "%s.%s", prefix, t ? t : "?");
        f->applied = 1;
    }
}

int sy_faults_stored_ok(const sy_faults *fs, long param, nd_err *e) {
    for (int i = 0; i < fs->n; i++) {
        const sy_fault *f = &fs->f[i];
        if (f->param != param || !f->applied) continue;
        const int factor = f->kind == SY_F_INPUT_MUL || f->kind == SY_F_FUSED_MISMATCH || f->kind == SY_F_WEIGHT_MUL ||
                           f->kind == SY_F_WGLOBAL_MUL;
        /* a factor that takes the stored scale out of float's range stores Inf or 0, which the fault
         * list would call a factor: the faults that store those say so (round 24) */
        if (factor && (!isfinite(f->stored) || f->stored == 0))
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject %s=%g@%s stores %s = %g (past float's range): use "
                           "input-scale-inf or weight-global-scale-zero for such a scale, or a factor that stays in range",
                           KINDS[f->kind].name, f->value, f->module, f->tensor, f->stored);
    }
    return 0;
}

int64_t sy_faults_sf_cols(const sy_faults *fs, long param, int64_t nb) {
    for (int i = 0; i < fs->n; i++)
        if (fs->f[i].param == param && fs->f[i].kind == SY_F_SCALE_ROW_STRIDE)
            return nd_sf_padded_stride(nb, (int64_t)fs->f[i].value);
    return nb;
}

/* a fault that removes, renames, dequantizes, quantizes or exchanges a module's tensors: another
 * fault on that module (but config-ignore, which edits only the config) would be recorded against
 * tensors the checkpoint does not hold */
static int structural(sy_fault_kind k) {
    return k == SY_F_MISSING_INPUT || k == SY_F_DEQUANTIZE || k == SY_F_SCALE_RENAMED ||
           k == SY_F_WSCALE_RENAMED || k == SY_F_SCALE_MISSING_EXPERT || k == SY_F_QUANTIZE || k == SY_F_QUANTIZE_UNIGNORED ||
           k == SY_F_GATE_UP_SWAP;
}

int sy_faults_stride_last(const sy_faults *fs, nd_err *e) {
    /* the fault list is the answer key: every entry must be what the written checkpoint holds */
    for (int j = 0; j < fs->n; j++) {
        const sy_fault *b = &fs->f[j];
        const sy_fault_kind k = b->kind;
        if (b->has_value && b->value == 1.0 &&
            (k == SY_F_INPUT_MUL || k == SY_F_WGLOBAL_MUL || k == SY_F_WEIGHT_MUL || k == SY_F_FUSED_MISMATCH || k == SY_F_KV_MUL))
            return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject %s=1@%s changes nothing: it would be listed as a fault the "
                           "checkpoint does not hold", sy_fault_name(k), b->module);
        for (int i = 0; i < j; i++) {
            const sy_fault *a = &fs->f[i];
            if (strcmp(a->module, b->module)) continue;
            if (a->kind == k)
                return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject %s@%s given twice: give each fault once per module",
                               sy_fault_name(k), b->module);
            if ((structural(a->kind) || structural(k)) && a->kind != SY_F_CONFIG_IGNORE && k != SY_F_CONFIG_IGNORE)
                return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject %s@%s with %s on the same module: %s changes which tensors the "
                               "module holds, so the fault list could not say what the checkpoint holds (plant them in two synth "
                               "--from runs)", sy_fault_name(k), b->module, sy_fault_name(a->kind),
                               sy_fault_name(structural(a->kind) ? a->kind : k));
        }
    }
    for (int i = 0; i < fs->n; i++) {
        if (fs->f[i].kind != SY_F_SCALE_ROW_STRIDE) continue;
        for (int j = i + 1; j < fs->n; j++) {
            sy_fault_kind k = fs->f[j].kind;
            if (fs->f[j].param == fs->f[i].param &&
                (sy_scale_fault(k) || k == SY_F_WSCALE_NAN || k == SY_F_WGLOBAL_MUL))
                return nd_fail(e, ND_EXIT_BADINPUT, "synth: --inject %s@%s after scale-row-stride on the same module: the "
                               "padded rows are the last thing written (give scale-row-stride last)",
                               sy_fault_name(k), fs->f[j].module);
        }
    }
    return 0;
}

static json_t *number_or_word(double v) {
    if (isfinite(v)) return json_real(v);
    return json_string(isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"));
}

int sy_faults_write(const sy_faults *fs, const char *path, nd_err *e) {
    json_t *list = json_array();
    for (int i = 0; i < fs->n; i++) {
        const sy_fault *f = &fs->f[i];
        json_t *o = json_object();
        json_object_set_new(o, "fault", json_string(sy_fault_name(f->kind)));
        json_object_set_new(o, "module", json_string(f->module));
        if (f->kind == SY_F_SCALE_ENCODING) json_object_set_new(o, "value", json_string(nd_sf_encoding_name((int)f->value)));
        else json_object_set_new(o, "value", f->has_value ? json_real(f->value) : json_null());
        json_object_set_new(o, "tensor", json_string(f->tensor));
        if (sy_scale_fault(f->kind)) {
            json_object_set_new(o, "scales_changed", json_integer(f->count));
            if (f->kind == SY_F_SCALE_ROW_STRIDE) json_object_set_new(o, "row_bytes", json_integer(f->stride));
            if (!isnan(f->stored)) json_object_set_new(o, "stored_global", json_real(f->stored));
        } else if (f->kind == SY_F_WSCALE_NAN || f->kind == SY_F_NIBBLE_SWAP)
            json_object_set_new(o, f->kind == SY_F_WSCALE_NAN ? "nan_blocks" : "bytes", json_integer(f->count));
        else if (f->kind != SY_F_MISSING_INPUT)
            json_object_set_new(o, "stored", number_or_word(f->stored));
        json_array_append_new(list, o);
    }
    /* beside the output folder: never through a link, never half-written (util/outfile.h) */
    nd_outtmp ot;
    int fd = -1;
    int rc = nd_out_begin(&ot, path, &fd, e);
    if (!rc && json_dumpfd(list, fd, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
        const int err = errno;
        rc = nd_fail(e, nd_io_exit(err), "%s: cannot write the fault list: %s%s", path, strerror(err), nd_io_hint(err));
    }
    if (fd >= 0 && close(fd) && !rc) rc = nd_fail(e, nd_io_exit(errno), "%s: cannot write the fault list: %s%s", path, strerror(errno), nd_io_hint(errno));
    json_decref(list);
    if (fd >= 0) {
        if (rc) nd_out_abort(&ot);
        else rc = nd_out_commit(&ot, e);
    }
    return rc;
}

int sy_faults_is_ours(const char *path) {
    /* the whole file is one JSON array of the objects sy_faults_write writes: a file that only starts
     * like one (text after "[]") is someone else's and is never replaced without --force */
    char *buf = NULL;
    size_t n = 0;
    nd_err e = {0};
    if (nd_read_text(path, "fault list", 16u << 20, 0, &buf, &n, &e) || !buf) return 0;
    json_error_t je;
    json_t *list = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    int ours = json_is_array(list);
    size_t i;
    json_t *o;
    if (ours)
        json_array_foreach(list, i, o) {
            ours = json_is_object(o) && json_is_string(json_object_get(o, "fault")) && json_is_string(json_object_get(o, "module")) &&
                   json_is_string(json_object_get(o, "tensor"));
            if (!ours) break;
        }
    json_decref(list);
    return ours;
}

/* synth_write.c — safetensors shards, index and configs of one synthetic checkpoint. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "util/outfile.h"
#include "ckpt/ckpt.h"
#include "numerics/nd_numerics.h"
#include "synth/synth_json.h"
#include "synth/synth_quant.h"
#include "synth/synth_write.h"
#include "util/progress.h"

/* One output tensor; a parameter expands to 1 (copy, original) .. 4 (NVFP4) of them. */
typedef enum { T_COPY, T_PACKED, T_SF, T_WGLOBAL, T_IGLOBAL, T_FP8W, T_FP8S } trole;
typedef struct otensor {
    char name[SY_NAME + 32];
    nd_dtype dt;
    int ndim;
    int64_t shape[3];
    size_t nbytes;
    trole role;
} otensor;

float sy_weight_amax(sy_plan *pl, long idx, uint64_t seed) {
    sy_param *p = &pl->p[idx];
    if (p->w_amax >= 0.0f) return p->w_amax;
    uint16_t *w = malloc(sy_param_bytes(p));
    if (!w) return NAN;
    sy_generate(p, seed, w);
    p->w_amax = sy_amax_bf16(w, (int64_t)sy_param_numel(p));
    free(w);
    return p->w_amax;
}

float sy_fused_amax(sy_plan *pl, long idx, uint64_t seed) {
    float amax = sy_weight_amax(pl, idx, seed);
    if (pl->p[idx].fuse >= 0)
        for (size_t i = 0; i < pl->n; i++)
            if (pl->p[i].fuse == pl->p[idx].fuse) {
                float a = sy_weight_amax(pl, (long)i, seed);
                if (a > amax) amax = a;
            }
    return amax;
}

/* The tensors a parameter becomes in this checkpoint. */
static int expand(const sy_wctx *w, long idx, otensor out[4]) {
    const sy_param *p = &w->plan->p[idx];
    const int ct = w->fmt == ND_SYNTH_CT;
    const int64_t n = p->shape[0], k = p->shape[1];
    const char *m = p->module;
    int c = 0;
#define OT(suffix, dtype, nd, d0, d1, bytes, r) do { \
        snprintf(out[c].name, sizeof out[c].name, "%s.%s", m, suffix); \
        out[c].dt = dtype; out[c].ndim = nd; out[c].shape[0] = d0; out[c].shape[1] = d1; \
        out[c].nbytes = (size_t)(bytes); out[c].role = r; c++; } while (0)
    if (!w->quantized || p->quant == SY_Q_NONE) {
        snprintf(out[0].name, sizeof out[0].name, "%s", p->name);
        out[0].dt = p->dtype;
        out[0].ndim = p->ndim;
        out[0].shape[0] = p->shape[0];
        out[0].shape[1] = p->shape[1];
        out[0].shape[2] = p->shape[2];
        out[0].nbytes = sy_param_bytes(p);
        out[0].role = T_COPY;
        return 1;
    }
    if (p->quant == SY_Q_FP8_BLOCK) {
        const int64_t gn = (n + 127) / 128, gk = (k + 127) / 128;
        OT("weight", ND_DT_F8_E4M3, 2, n, k, n * k, T_FP8W);
        /* compressed-tensors float-quantized block: weight_scale; ModelOpt files keep the
         * DeepSeek FP8 convention for the modules they exclude from NVFP4: weight_scale_inv */
        OT(ct ? "weight_scale" : "weight_scale_inv", ND_DT_F32, 2, gn, gk, gn * gk * 4, T_FP8S);
        return c;
    }
    OT(ct ? "weight_packed" : "weight", ND_DT_U8, 2, n, k / 2, n * (k / 2), T_PACKED);
    const int64_t sf_cols = sy_faults_sf_cols(w->faults, idx, k / 16); /* k/16 unless scale-row-stride */
    OT("weight_scale", ND_DT_F8_E4M3, 2, n, sf_cols, n * sf_cols, T_SF);
    /* CT global scales are [1]; ModelOpt's are 0-d scalars */
    OT(ct ? "weight_global_scale" : "weight_scale_2", ND_DT_F32, ct ? 1 : 0, 1, 1, 4, T_WGLOBAL);
    if (!sy_faults_drop_input(w->faults, idx))
        OT(ct ? "input_global_scale" : "input_scale", ND_DT_F32, ct ? 1 : 0, 1, 1, 4, T_IGLOBAL);
#undef OT
    return c;
}

/* Buffers of the shard being written; freed at its close. */
typedef struct bufs {
    void **b;
    size_t n, cap;
} bufs;

static void *keep(bufs *B, size_t bytes) {
    if (B->n == B->cap) {
        size_t nc = B->cap ? B->cap * 2 : 64;
        void **nb = realloc(B->b, nc * sizeof *nb);
        if (!nb) return NULL;
        B->b = nb;
        B->cap = nc;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p) B->b[B->n++] = p;
    return p;
}

static void drop_all(bufs *B) {
    for (size_t i = 0; i < B->n; i++) free(B->b[i]);
    B->n = 0;
}

/* Generate parameter idx and add its tensors to the writer. */
static int emit(sy_wctx *w, long idx, nd_st_writer *st, bufs *B, nd_err *e) {
    sy_param *p = &w->plan->p[idx];
    otensor t[4];
    int nt = expand(w, idx, t);
    void *data[4] = {0};
    if (t[0].role == T_COPY) {
        if (!(data[0] = keep(B, t[0].nbytes))) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory for %s", p->name);
        sy_generate(p, w->seed, data[0]);
        if (p->quant != SY_Q_NONE && p->w_amax < 0.0f)
            p->w_amax = sy_amax_bf16(data[0], (int64_t)sy_param_numel(p));
    } else {
        uint16_t *wt = malloc(sy_param_bytes(p));
        if (!wt) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory for %s", p->name);
        sy_generate(p, w->seed, wt);
        for (int i = 0; i < nt; i++)
            if (!(data[i] = keep(B, t[i].nbytes))) { free(wt); return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory"); }
        const int64_t n = p->shape[0], k = p->shape[1];
        if (p->quant == SY_Q_FP8_BLOCK) {
            sy_fp8_block_quantize(wt, n, k, 128, 128, data[0], data[1]);
        } else {
            const float amax_w = w->unequal_fused ? sy_weight_amax(w->plan, idx, w->seed) : sy_fused_amax(w->plan, idx, w->seed);
            const float gw = sy_nvfp4_global_div(amax_w);
            sy_nvfp4_quantize(wt, n, k, gw, data[0], data[1]);
            const float amax_x = (float)p->in_amax;
            sy_qmod qm = {
                .packed = data[0], .sf = data[1], .n = n, .k = k,
                .wglobal = w->fmt == ND_SYNTH_CT ? gw : amax_w / ND_NVFP4_GLOBAL_NUM,
                .iglobal = w->fmt == ND_SYNTH_CT ? ND_NVFP4_GLOBAL_NUM / amax_x : amax_x / ND_NVFP4_GLOBAL_NUM,
                .has_input = 1,
            };
            sy_faults_apply(w->faults, idx, w->fmt, p->module, &qm);
            if (sy_faults_stored_ok(w->faults, idx, e)) { free(wt); return e->code; }
            *(float *)data[2] = qm.wglobal;
            if (nt > 3) *(float *)data[3] = qm.iglobal;
        }
        free(wt);
    }
    for (int i = 0; i < nt; i++)
        ND_TRY(nd_st_writer_add(st, t[i].name, t[i].dt, t[i].ndim, t[i].shape, data[i], e));
    return 0;
}

static size_t param_bytes(const sy_wctx *w, long idx) {
    otensor t[4];
    int nt = expand(w, idx, t);
    size_t s = 0;
    for (int i = 0; i < nt; i++) s += t[i].nbytes;
    return s;
}

int sy_write_tensors(sy_wctx *w, const char *dir, nd_err *e) {
    const sy_plan *pl = w->plan;
    const unsigned long long cap = w->shard_bytes ? w->shard_bytes : SY_SHARD_BYTES;
    int *shard = malloc((pl->n ? pl->n : 1) * sizeof *shard);
    if (!shard) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory");
    unsigned long long total = 0, cur = 0;
    int ns = 1;
    for (size_t i = 0; i < pl->n; i++) total += param_bytes(w, (long)i);
    /* whole parameters per shard, a new shard when the next one would pass the cap */
    for (size_t i = 0; i < pl->n; i++) {
        size_t b = param_bytes(w, (long)i);
        if (total > cap && cur > 0 && cur + b > cap) { ns++; cur = 0; }
        cur += b;
        shard[i] = ns - 1;
    }
    json_t *wmap = ns > 1 ? json_object() : NULL;
    bufs B = {0};
    int rc = 0;
    size_t i = 0;
    char path[4096], fname[64];
    nd_progress pg; /* inside synth's progress: the tensors written */
    const int pgon = nd_progress_active();
    if (pgon) nd_progress_start(&pg, "write", "tensors", (int64_t)pl->n);
    for (int s = 0; s < ns && !rc; s++) {
        if (ns > 1) snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, ns);
        else snprintf(fname, sizeof fname, "model.safetensors");
        snprintf(path, sizeof path, "%s/%s", dir, fname);
        nd_st_writer *st = NULL;
        if ((rc = nd_st_writer_open(path, &st, e))) break;
        if ((rc = nd_st_writer_meta(st, "format", "pt", e))) { nd_st_writer_abort(st); break; }
        for (; i < pl->n && shard[i] == s; i++) {
            if ((rc = emit(w, (long)i, st, &B, e))) break;
            if (pgon) nd_progress_update(&pg, (int64_t)i + 1, NULL);
            if (wmap) {
                otensor t[4];
                int nt = expand(w, (long)i, t);
                for (int j = 0; j < nt; j++) json_object_set_new(wmap, t[j].name, json_string(fname));
            }
        }
        if (rc) { nd_st_writer_abort(st); break; }
        rc = nd_st_writer_close(st, e);
        drop_all(&B);
    }
    if (pgon) nd_progress_end(&pg);
    drop_all(&B);
    free(B.b);
    free(shard);
    if (!rc && wmap) {
        json_t *idx = json_object(), *meta = json_object();
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
        json_object_set_new(idx, "metadata", meta);
        json_object_set(idx, "weight_map", wmap);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        errno = 0;
        if (json_dump_file(idx, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
            const int err = errno ? errno : EIO;
            rc = nd_fail(e, nd_io_exit(err), "%s: cannot write: %s%s", path, strerror(err), nd_io_hint(err));
        }
        json_decref(idx);
    }
    if (wmap) json_decref(wmap);
    return rc;
}

/* ---- configs ------------------------------------------------------------------------- */

static json_t *nvfp4_args(int activations) {
    json_t *a = json_object();
    sy_ji(a, "num_bits", 4);
    sy_js(a, "type", "float");
    sy_jb(a, "symmetric", 1);
    sy_ji(a, "group_size", 16);
    sy_js(a, "strategy", "tensor_group");
    json_object_set_new(a, "block_structure", json_null());
    if (activations) sy_js(a, "dynamic", "local");
    else sy_jb(a, "dynamic", 0);
    json_object_set_new(a, "actorder", json_null());
    sy_js(a, "observer", activations ? "static_minmax" : "minmax");
    json_object_set_new(a, "observer_kwargs", json_object());
    return a;
}

static json_t *ct_qconfig(const sy_plan *pl) {
    json_t *q = json_object(), *groups = json_object(), *g0 = json_object();
    sy_js(q, "quant_method", "compressed-tensors");
    sy_js(q, "format", "nvfp4-pack-quantized");
    sy_js(q, "quantization_status", "compressed");
    json_t *t0 = json_array();
    json_array_append_new(t0, json_string("Linear"));
    json_object_set_new(g0, "targets", t0);
    json_object_set_new(g0, "weights", nvfp4_args(0));
    json_object_set_new(g0, "input_activations", nvfp4_args(1));
    json_object_set_new(g0, "output_activations", json_null());
    sy_js(g0, "format", "nvfp4-pack-quantized");
    json_object_set_new(groups, "group_0", g0);
    int have_fp8 = 0;
    for (size_t i = 0; i < pl->n; i++) have_fp8 |= pl->p[i].quant == SY_Q_FP8_BLOCK;
    if (have_fp8) {
        /* DeepSeek-V4 o_a_proj: FP8 e4m3 weight-only, 128x128 blocks */
        json_t *g1 = json_object(), *t1 = json_array(), *w = json_object(), *bs = json_array();
        json_array_append_new(t1, json_string("re:.*o_a_proj$"));
        json_object_set_new(g1, "targets", t1);
        sy_ji(w, "num_bits", 8);
        sy_js(w, "type", "float");
        sy_jb(w, "symmetric", 1);
        json_object_set_new(w, "group_size", json_null());
        sy_js(w, "strategy", "block");
        json_array_append_new(bs, json_integer(128));
        json_array_append_new(bs, json_integer(128));
        json_object_set_new(w, "block_structure", bs);
        sy_jb(w, "dynamic", 0);
        json_object_set_new(w, "actorder", json_null());
        sy_js(w, "observer", "minmax");
        json_object_set_new(w, "observer_kwargs", json_object());
        json_object_set_new(g1, "weights", w);
        json_object_set_new(g1, "input_activations", json_null());
        json_object_set_new(g1, "output_activations", json_null());
        sy_js(g1, "format", "float-quantized");
        json_object_set_new(groups, "group_1", g1);
    }
    json_object_set_new(q, "config_groups", groups);
    json_object_set_new(q, "ignore", sy_jstrs(pl->ct_ignore));
    json_object_set_new(q, "kv_cache_scheme", json_null());
    return q;
}

static json_t *mo_producer(void) {
    json_t *p = json_object();
    sy_js(p, "name", "modelopt");
    sy_js(p, "version", "nvfp4dbg-synth");
    return p;
}

static int dump(json_t *j, const char *dir, const char *name, nd_err *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    errno = 0;
    int rc = json_dump_file(j, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    const int err = errno ? errno : EIO; /* an environment error (disk full, quota): exit 2 */
    json_decref(j);
    if (rc) return nd_fail(e, nd_io_exit(err), "%s: cannot write: %s%s", path, strerror(err), nd_io_hint(err));
    return 0;
}

int sy_write_configs(const sy_wctx *w, const char *dir, nd_err *e) {
    json_t *cfg = json_deep_copy((json_t *)w->plan->config);
    if (!cfg) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory");
    if (!w->quantized) return dump(cfg, dir, "config.json", e);
    if (w->fmt == ND_SYNTH_CT) {
        json_object_set_new(cfg, "quantization_config", ct_qconfig(w->plan));
        return dump(cfg, dir, "config.json", e);
    }
    json_t *q = json_object();
    sy_js(q, "quant_method", "modelopt");
    sy_js(q, "quant_algo", "NVFP4");
    sy_ji(q, "group_size", 16);
    json_object_set_new(q, "kv_cache_quant_algo", json_null());
    json_object_set_new(q, "exclude_modules", sy_jstrs(w->plan->mo_exclude));
    json_object_set_new(q, "producer", mo_producer());
    json_object_set_new(cfg, "quantization_config", q);
    ND_TRY(dump(cfg, dir, "config.json", e));
    json_t *hf = json_object(), *qq = json_object();
    json_object_set_new(hf, "producer", mo_producer());
    sy_js(qq, "quant_algo", "NVFP4");
    sy_ji(qq, "group_size", 16);
    json_object_set_new(qq, "kv_cache_quant_algo", json_null());
    json_object_set_new(qq, "exclude_modules", sy_jstrs(w->plan->mo_exclude));
    json_object_set_new(hf, "quantization", qq);
    return dump(hf, dir, "hf_quant_config.json", e);
}

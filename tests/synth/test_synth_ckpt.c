/* test_synth_ckpt.c — write tiny checkpoints of every family and format with nd_synth_run, reopen
 * them with src/ckpt and check: every linear binds with the right format, dequantized weights are
 * within NVFP4 error of the original, global scales are 2688/amax (fused shards share the
 * smallest), input scales follow calibration (and its fallbacks), each fault changes exactly its
 * tensor and is listed in the side file, seeds are reproducible, and bad options are exit 2.
 *
 * Calibration here is a stand-in with known answers (the real one, the reference pipeline, is
 * exercised by the CLI test): each linear gets amax 0.5 + (fnv1a(stage) % 1000) / 500, and it
 * skips what a real run may not report (routed experts >= 4 "unpicked", kv_proj "reported with
 * its fused partner") so that synth's fallbacks are checked against values computed here. */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "nd_test.h"
#include "scratch.h"
#include "backend.h"
#include "ckpt/ckpt.h"
#include "numerics/nd_numerics.h"
#include "synth/synth.h"
#include "synth/synth_rng.h"

static char g_root[512];

static const char *stage(const char *m) { return strncmp(m, "model.", 6) ? m : m + 6; }
static double test_amax(const char *module) { return 0.5 + (double)(sy_fnv1a64(stage(module)) % 1000) / 500.0; }

static int expert_index(const char *m) {
    const char *p = strstr(m, ".experts.");
    return p ? atoi(p + 9) : -1;
}
static int skipped(const char *m) {
    return expert_index(m) >= 4 || strstr(m, "self_attn.kv_proj") != NULL;
}
static int is_linear_weight(const nd_tview *t) {
    size_t l = strlen(t->name);
    return t->ndim == 2 && t->dtype == ND_DT_BF16 && l > 7 && !strcmp(t->name + l - 7, ".weight") &&
           !strstr(t->name, "embed_tokens") && !strstr(t->name, "mlp.gate.weight") &&
           !strstr(t->name, "self_attn.compressor."); /* BF16 in the real releases */
}

static nd_synth_size g_size = ND_SYNTH_TINY;
static int n_calls;
static int fake_calibrate(void *cu, const char *dir, const char *recipe, const int64_t *tok, int64_t ntok,
                          nd_synth_amax_cb cb, void *user, nd_err *e) {
    (void)cu; (void)recipe; (void)tok;
    if (ntok != nd_synth_calib_count(g_size)) return nd_fail(e, ND_EXIT_INTERNAL, "unexpected token count %lld", (long long)ntok);
    nd_ckpt *c;
    ND_TRY(nd_ckpt_open(dir, &c, e));
    for (size_t i = 0; i < nd_ckpt_count(c); i++) {
        const nd_tview *t = nd_ckpt_at(c, i);
        if (!is_linear_weight(t)) continue;
        char m[512];
        snprintf(m, sizeof m, "%.*s", (int)strlen(t->name) - 7, t->name);
        if (skipped(m)) continue;
        cb(user, m, test_amax(m));
        n_calls++;
    }
    nd_ckpt_close(c);
    return 0;
}

/* The input amax synth must have used for module m (see the header comment). */
static double expected_in_amax(const char *m) {
    char buf[512];
    if (strstr(m, "self_attn.kv_proj")) {
        snprintf(buf, sizeof buf, "%.*sq_a_proj", (int)(strstr(m, "kv_proj") - m), m);
        return test_amax(buf);
    }
    int x = expert_index(m);
    if (x < 4) return test_amax(m);
    int layer = atoi(strstr(m, "layers.") + 7);
    if (!strstr(m, "down_proj")) {
        snprintf(buf, sizeof buf, "model.layers.%d.mlp.shared_experts.gate_proj", layer);
        return test_amax(buf);
    }
    double best = 0;
    for (int j = 0; j < 4; j++) {
        snprintf(buf, sizeof buf, "model.layers.%d.mlp.experts.%d.down_proj", layer, j);
        if (test_amax(buf) > best) best = test_amax(buf);
    }
    return best;
}

/* Fused partners (one shared weight global scale) of a module, by leaf names; names of other
 * families that do not exist in the checkpoint are skipped by the caller. */
static int partners(const char *m, char out[4][512]) {
    static const char *const groups[][3] = {
        {"self_attn.q_a_proj", "self_attn.kv_proj", NULL},
        {"self_attn.q_a_proj", "self_attn.kv_a_proj_with_mqa", NULL},
        {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
        {"gate_proj", "up_proj", NULL},
    };
    int n = 0;
    snprintf(out[n++], 512, "%s", m);
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
        for (int i = 0; i < 3 && groups[g][i]; i++) {
            size_t ml = strlen(m), gl = strlen(groups[g][i]);
            if (ml <= gl || strcmp(m + ml - gl, groups[g][i]) || m[ml - gl - 1] != '.') continue;
            for (int j = 0; j < 3 && groups[g][j] && n < 4; j++)
                if (j != i) snprintf(out[n++], 512, "%.*s%s", (int)(ml - gl), m, groups[g][j]);
        }
    return n;
}

static float bf16_amax(const nd_tview *t) {
    float a = 0;
    const uint16_t *d = t->data;
    for (int64_t i = 0; i < t->numel; i++) if (fabsf(nd_bf16_to_f32(d[i])) > a) a = fabsf(nd_bf16_to_f32(d[i]));
    return a;
}

static double rel_l2_nvfp4(const nd_module *m, const nd_tview *orig) {
    const int64_t n = m->out_features, k = m->in_features;
    const uint8_t *p = m->weight->data, *sf = m->weight_scale->data;
    const uint16_t *o = orig->data;
    double ee = 0, rr = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            double d = nd_e2m1_to_f32(nd_nibble(p + r * (k / 2), c)) * nd_e4m3_to_f32(sf[r * (k / 16) + c / 16]) /
                       m->weight_global_div;
            double x = nd_bf16_to_f32(o[r * k + c]);
            ee += (d - x) * (d - x);
            rr += x * x;
        }
    return sqrt(ee / rr);
}

static double rel_l2_fp8(const nd_module *m, const nd_tview *orig) {
    const int64_t n = m->out_features, k = m->in_features, gk = (k + m->bk - 1) / m->bk;
    const uint8_t *q = m->weight->data;
    const float *s = m->weight_scale->data;
    const uint16_t *o = orig->data;
    double ee = 0, rr = 0;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            double d = nd_e4m3_to_f32(q[r * k + c]) * s[(r / m->bn) * gk + c / m->bk];
            double x = nd_bf16_to_f32(o[r * k + c]);
            ee += (d - x) * (d - x);
            rr += x * x;
        }
    return sqrt(ee / rr);
}

static int run(const char *sub, const char *recipe, nd_synth_format fmt, uint64_t seed, const char *const *inj,
               int ninj, unsigned long long shard, char *dir, nd_err *e) {
    snprintf(dir, 1024, "%s/%s", g_root, sub);
    nd_synth_opts o = {.outdir = dir, .recipe = recipe, .size = g_size, .format = fmt, .seed = seed,
                       .injects = inj, .n_injects = ninj, .calibrate = fake_calibrate, .shard_bytes = shard};
    memset(e, 0, sizeof *e);
    return nd_synth_run(&o, e);
}

/* Every linear binds with the right format and numbers; unquantized tensors are copied. */
static void check_checkpoint(const char *dir, nd_synth_format fmt, const char *what, int n_layers) {
    char odir[1100];
    snprintf(odir, sizeof odir, "%s/original", dir);
    nd_ckpt *q = NULL, *o = NULL;
    nd_err e = {0};
    int rc = nd_ckpt_open(dir, &q, &e);
    CHECK(rc == 0, "%s: open: %s", what, e.msg);
    rc |= nd_ckpt_open(odir, &o, &e);
    CHECK(rc == 0, "%s: open original: %s", what, e.msg);
    if (rc) { if (q) nd_ckpt_close(q); return; }
    CHECK(nd_ckpt_format(q) == (fmt == ND_SYNTH_CT ? ND_CKPT_COMPRESSED_TENSORS : ND_CKPT_MODELOPT), "%s: format %s",
          what, nd_ckpt_format_str(q));
    CHECK(nd_ckpt_format(o) == ND_CKPT_UNQUANTIZED, "%s: original format %s", what, nd_ckpt_format_str(o));
    CHECK(nd_ckpt_module_ignored(q, "lm_head"), "%s: lm_head is excluded from quantization", what);
    int n_nvfp4 = 0, bad_bind = 0, bad_rel = 0, bad_gw = 0, bad_in = 0, bad_copy = 0, n_fp8 = 0;
    double worst = 0;
    for (size_t i = 0; i < nd_ckpt_count(o); i++) {
        const nd_tview *t = nd_ckpt_at(o, i);
        if (!is_linear_weight(t)) {
            const nd_tview *c = nd_ckpt_find(q, t->name);
            if (!c || c->nbytes != t->nbytes || memcmp(c->data, t->data, t->nbytes)) {
                bad_copy++;
                fprintf(stderr, "%s: %s is not copied unchanged\n", what, t->name);
            }
            continue;
        }
        char path[512];
        snprintf(path, sizeof path, "%.*s", (int)strlen(t->name) - 7, t->name);
        nd_module m;
        if (nd_ckpt_module(q, path, &m, &e)) { bad_bind++; fprintf(stderr, "%s: %s\n", what, e.msg); continue; }
        if (!strcmp(path, "lm_head")) { bad_bind += m.wfmt != ND_WF_DENSE; continue; }
        if (strstr(path, "o_a_proj")) {
            /* a 1x1 grid of 128x128 blocks is one per-tensor scale, and src/ckpt may bind it so */
            const int one_block = m.out_features <= 128 && m.in_features <= 128;
            const int kind_ok = m.fp8_scale_kind == ND_FP8_SCALE_BLOCK_F32 || (one_block && m.fp8_scale_kind == ND_FP8_SCALE_TENSOR);
            n_fp8++;
            if (m.wfmt != ND_WF_FP8 || !kind_ok || m.bn != 128 || m.bk != 128) {
                bad_bind++;
                fprintf(stderr, "%s: %s binds as wfmt %d scale kind %d block %dx%d\n", what, path, m.wfmt, m.fp8_scale_kind, m.bn, m.bk);
            }
            double r = rel_l2_fp8(&m, t);
            CHECK(r < 0.05, "%s: %s FP8 rel-L2 %.4f", what, path, r);
            continue;
        }
        n_nvfp4++;
        if (m.wfmt != ND_WF_NVFP4 || m.conv != (fmt == ND_SYNTH_CT ? ND_CONV_CT : ND_CONV_MODELOPT) || !m.act_quant) {
            bad_bind++;
            fprintf(stderr, "%s: %s binds as wfmt %d conv %d act_quant %d\n", what, path, m.wfmt, m.conv, m.act_quant);
            continue;
        }
        double r = rel_l2_nvfp4(&m, t);
        if (r > worst) worst = r;
        bad_rel += !(r < 0.15);
        /* weight global: 2688 / max amax over the fused shards, from the original's weights */
        char pp[4][512];
        int np = partners(path, pp);
        float amax = 0;
        for (int j = 0; j < np; j++) {
            char nm[600];
            snprintf(nm, sizeof nm, "%.500s.weight", pp[j]);
            const nd_tview *pt = nd_ckpt_find(o, nm);
            if (pt && bf16_amax(pt) > amax) amax = bf16_amax(pt);
        }
        const float raw_w = *(const float *)m.weight_global->data;
        int gw_ok = fmt == ND_SYNTH_CT ? raw_w == 2688.0f / amax : raw_w == amax / 2688.0f;
        if (!gw_ok || fabs(m.weight_global_div - 2688.0 / amax) > 1e-5 * (2688.0 / amax)) {
            bad_gw++;
            fprintf(stderr, "%s: %s weight global %.9g (div %.9g), amax %.9g\n", what, path, raw_w, m.weight_global_div, amax);
        }
        const float xa = (float)expected_in_amax(path);
        const float raw_i = m.input_global ? *(const float *)m.input_global->data : NAN;
        int in_ok = fmt == ND_SYNTH_CT ? raw_i == 2688.0f / xa : raw_i == xa / 2688.0f;
        if (!in_ok || fabs(m.input_global_mult - 2688.0 / xa) > 1e-5 * (2688.0 / xa)) {
            bad_in++;
            fprintf(stderr, "%s: %s input scale %.9g (mult %.9g), calibrated amax %.9g\n", what, path, raw_i,
                    m.input_global_mult, xa);
        }
    }
    CHECK(n_nvfp4 > 10, "%s: %d NVFP4 linears", what, n_nvfp4);
    CHECK(bad_bind == 0, "%s: %d modules bind wrongly", what, bad_bind);
    CHECK(bad_rel == 0, "%s: %d NVFP4 weights over rel-L2 0.15 (worst %.4f)", what, bad_rel, worst);
    CHECK(worst > 0.02, "%s: NVFP4 error %.4f is real quantization error, not a copy", what, worst);
    CHECK(bad_gw == 0, "%s: %d weight global scales are not 2688/amax of the fused group", what, bad_gw);
    CHECK(bad_in == 0, "%s: %d input scales do not follow calibration", what, bad_in);
    CHECK(bad_copy == 0, "%s: %d unquantized tensors differ from the original", what, bad_copy);
    if (strstr(what, "deepseek_v4")) CHECK(n_fp8 == n_layers, "%s: %d FP8 o_a_proj modules", what, n_fp8);
    nd_ckpt_close(q);
    nd_ckpt_close(o);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)l + 1);
    *n = fread(b, 1, (size_t)l, f);
    fclose(f);
    return b;
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int s = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return s;
}

static void test_families(void) {
    static const char *const fams[] = {"deepseek_v4", "llama", "deepseek_v3"};
    for (int f = 0; f < 3; f++)
        for (int fmt = 0; fmt < 2; fmt++) {
            char dir[1024], sub[64], what[96];
            nd_err e;
            snprintf(sub, sizeof sub, "%s-%d", fams[f], fmt);
            snprintf(what, sizeof what, "%s/%s", fams[f], fmt ? "modelopt" : "compressed-tensors");
            n_calls = 0;
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            int rc = run(sub, fams[f], (nd_synth_format)fmt, 11, NULL, 0, 0, dir, &e);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            CHECK(rc == 0, "%s: synth: %s", what, e.msg);
            if (rc) continue;
            CHECK(n_calls > 0, "%s: calibration was called", what);
            CHECK(secs < 1.0, "%s: tiny synth took %.3f s", what, secs);
            check_checkpoint(dir, (nd_synth_format)fmt, what, 2);
            char side[1100];
            snprintf(side, sizeof side, "%s.faults.json", dir);
            json_error_t je;
            json_t *j = json_load_file(side, 0, &je);
            CHECK(j && json_is_array(j) && json_array_size(j) == 0, "%s: clean side file is an empty list", what);
            json_decref(j);
        }
}

/* small: real 128x128 FP8 block grids for o_a_proj, 16 experts, 4 layers */
static void test_small(void) {
    char dir[1024];
    nd_err e;
    g_size = ND_SYNTH_SMALL;
    int rc = run("v4-small", "deepseek_v4", ND_SYNTH_CT, 2, NULL, 0, 0, dir, &e);
    g_size = ND_SYNTH_TINY;
    CHECK(rc == 0, "small: %s", e.msg);
    if (!rc) check_checkpoint(dir, ND_SYNTH_CT, "deepseek_v4/small", 4);
}

/* CT and ModelOpt hold the same codes and block scales (nvfp4-spec.md §3.1). */
static void test_formats_agree(void) {
    char a[1200], b[1200];
    snprintf(a, sizeof a, "%s/deepseek_v4-0", g_root);
    snprintf(b, sizeof b, "%s/deepseek_v4-1", g_root);
    nd_ckpt *ca, *cb;
    nd_err e;
    if (nd_ckpt_open(a, &ca, &e) || nd_ckpt_open(b, &cb, &e)) { CHECK(0, "open: %s", e.msg); return; }
    int diff = 0, n = 0;
    for (size_t i = 0; i < nd_ckpt_count(ca); i++) {
        const nd_tview *t = nd_ckpt_at(ca, i);
        size_t l = strlen(t->name);
        char other[600];
        if (l > 14 && !strcmp(t->name + l - 14, ".weight_packed")) snprintf(other, sizeof other, "%.*s.weight", (int)l - 14, t->name);
        else if (l > 13 && !strcmp(t->name + l - 13, ".weight_scale") && t->dtype == ND_DT_F8_E4M3 && t->ndim == 2 &&
                 !strstr(t->name, "o_a_proj")) snprintf(other, sizeof other, "%s", t->name);
        else continue;
        const nd_tview *u = nd_ckpt_find(cb, other);
        n++;
        diff += !u || u->nbytes != t->nbytes || memcmp(u->data, t->data, t->nbytes);
    }
    CHECK(n > 20 && diff == 0, "compressed-tensors and ModelOpt codes/scales agree (%d tensors, %d differ)", n, diff);
    nd_ckpt_close(ca);
    nd_ckpt_close(cb);
}

static float scalar(const nd_ckpt *c, const char *name) {
    const nd_tview *t = nd_ckpt_find(c, name);
    return t && t->dtype == ND_DT_F32 && t->numel == 1 ? *(const float *)t->data : NAN;
}

static void test_faults(nd_synth_format fmt) {
    const int ct = fmt == ND_SYNTH_CT;
    const char *const inj[] = {
        "input-scale-inverted@layers.0.self_attn.q_a_proj",
        "input-scale-mul=4@layers.0.self_attn.q_b_proj",
        "input-scale-inf@layers.0.self_attn.o_b_proj",
        "weight-global-scale-zero@layers.1.mlp.experts.3.down_proj",
        "weight-scale-nan@layers.0.mlp.shared_experts.down_proj",
        "nibble-swap@layers.1.mlp.experts.2.gate_proj",
        "fused-scale-mismatch=1.25@layers.1.mlp.experts.3.up_proj",
        "missing-input-scale@layers.0.self_attn.kv_proj",
    };
    const char *IN = ct ? "input_global_scale" : "input_scale", *WG = ct ? "weight_global_scale" : "weight_scale_2";
    const char *PK = ct ? "weight_packed" : "weight";
    char changed[8][256];
    snprintf(changed[0], 256, "model.layers.0.self_attn.q_a_proj.%s", IN);
    snprintf(changed[1], 256, "model.layers.0.self_attn.q_b_proj.%s", IN);
    snprintf(changed[2], 256, "model.layers.0.self_attn.o_b_proj.%s", IN);
    snprintf(changed[3], 256, "model.layers.1.mlp.experts.3.down_proj.%s", WG);
    snprintf(changed[4], 256, "model.layers.0.mlp.shared_experts.down_proj.weight_scale");
    snprintf(changed[5], 256, "model.layers.1.mlp.experts.2.gate_proj.%s", PK);
    snprintf(changed[6], 256, "model.layers.1.mlp.experts.3.up_proj.%s", WG);
    snprintf(changed[7], 256, "model.layers.0.self_attn.kv_proj.%s", IN);
    char clean[1024], bad[1024];
    nd_err e;
    CHECK(run(ct ? "v4-clean-ct" : "v4-clean-mo", "deepseek_v4", fmt, 5, NULL, 0, 0, clean, &e) == 0, "clean: %s", e.msg);
    CHECK(run(ct ? "v4-faults-ct" : "v4-faults-mo", "deepseek_v4", fmt, 5, inj, 8, 0, bad, &e) == 0, "faulty: %s", e.msg);
    nd_ckpt *c, *b;
    if (nd_ckpt_open(clean, &c, &e) || nd_ckpt_open(bad, &b, &e)) { CHECK(0, "open: %s", e.msg); return; }
    /* every tensor other than the eight is byte-identical */
    int others = 0;
    for (size_t i = 0; i < nd_ckpt_count(c); i++) {
        const nd_tview *t = nd_ckpt_at(c, i);
        int k;
        for (k = 0; k < 8; k++) if (!strcmp(t->name, changed[k])) break;
        if (k < 8) continue;
        const nd_tview *u = nd_ckpt_find(b, t->name);
        if (!u || u->nbytes != t->nbytes || memcmp(u->data, t->data, t->nbytes)) { others++; fprintf(stderr, "changed: %s\n", t->name); }
    }
    CHECK(others == 0, "%d tensors changed that no fault names", others);
    CHECK(nd_ckpt_count(b) + 1 == nd_ckpt_count(c), "exactly one tensor removed (%zu vs %zu)", nd_ckpt_count(b), nd_ckpt_count(c));
    float v0 = scalar(c, changed[0]), v1 = scalar(b, changed[0]);
    CHECK(v1 == 1.0f / v0, "inverted: %.9g is 1/%.9g", v1, v0);
    v0 = scalar(c, changed[1]); v1 = scalar(b, changed[1]);
    CHECK(ct ? v1 == v0 * 4.0f : v1 == v0 / 4.0f, "mul=4: %.9g from %.9g", v1, v0);
    CHECK(isinf(scalar(b, changed[2])) && scalar(b, changed[2]) > 0, "inf");
    CHECK(scalar(b, changed[3]) == 0.0f && scalar(c, changed[3]) > 0.0f, "weight global zero");
    const nd_tview *s0 = nd_ckpt_find(c, changed[4]), *s1 = nd_ckpt_find(b, changed[4]);
    if (s0 && s1) {
        const int64_t rows = s0->shape[0], nb = s0->shape[1];
        int nan_ok = 1, rest_ok = 1, nnan = 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < nb; j++) {
                uint8_t x = ((const uint8_t *)s0->data)[r * nb + j], y = ((const uint8_t *)s1->data)[r * nb + j];
                if (r % 8 == 0 && j == 0) { nan_ok &= y == 0x7f && x != 0x7f; nnan++; }
                else rest_ok &= x == y;
            }
        CHECK(nan_ok && rest_ok && nnan == (rows + 7) / 8, "weight-scale-nan: %d NaN blocks exactly where documented", nnan);
    } else CHECK(0, "weight_scale tensors present");
    const nd_tview *p0 = nd_ckpt_find(c, changed[5]), *p1 = nd_ckpt_find(b, changed[5]);
    if (p0 && p1) {
        int sw = 1, nontrivial = 0;
        for (size_t j = 0; j < p0->nbytes; j++) {
            uint8_t x = ((const uint8_t *)p0->data)[j], y = ((const uint8_t *)p1->data)[j];
            sw &= y == (uint8_t)((x >> 4) | (x << 4));
            nontrivial += x != y;
        }
        CHECK(sw && nontrivial > (int)(p0->nbytes / 2), "nibble-swap swaps every byte (%d changed)", nontrivial);
    } else CHECK(0, "packed tensors present");
    v0 = scalar(c, changed[6]); v1 = scalar(b, changed[6]);
    CHECK(ct ? v1 == v0 * 1.25f : v1 == v0 / 1.25f, "fused mismatch: %.9g from %.9g", v1, v0);
    CHECK(nd_ckpt_find(c, changed[7]) && !nd_ckpt_find(b, changed[7]), "missing input scale");
    /* the bound module sees the fault */
    nd_module m;
    if (!nd_ckpt_module(b, "model.layers.0.self_attn.kv_proj", &m, &e)) CHECK(m.input_global == NULL, "kv_proj has no input scale");
    nd_ckpt_close(c);
    nd_ckpt_close(b);

    /* the side file lists every fault, in order, with the tensor it changed; not inside OUTDIR */
    char side[1100], inside[1100];
    snprintf(side, sizeof side, "%s.faults.json", bad);
    snprintf(inside, sizeof inside, "%s/faults.json", bad);
    CHECK(access(inside, F_OK) != 0, "nothing about faults inside the checkpoint");
    json_error_t je;
    json_t *j = json_load_file(side, 0, &je);
    CHECK(j && json_array_size(j) == 8, "side file has 8 entries");
    static const char *const names[] = {"input-scale-inverted", "input-scale-mul", "input-scale-inf",
                                        "weight-global-scale-zero", "weight-scale-nan", "nibble-swap",
                                        "fused-scale-mismatch", "missing-input-scale"};
    for (size_t i = 0; j && i < json_array_size(j) && i < 8; i++) {
        json_t *o = json_array_get(j, i);
        const char *f = json_string_value(json_object_get(o, "fault"));
        const char *mod = json_string_value(json_object_get(o, "module"));
        const char *t = json_string_value(json_object_get(o, "tensor"));
        CHECK(f && !strcmp(f, names[i]), "entry %zu fault %s", i, f ? f : "(none)");
        CHECK(mod && !strcmp(mod, strchr(inj[i], '@') + 1), "entry %zu module %s", i, mod ? mod : "(none)");
        CHECK(t && !strcmp(t, changed[i]), "entry %zu tensor %s (expected %s)", i, t ? t : "(none)", changed[i]);
    }
    json_t *v = j ? json_object_get(json_array_get(j, 1), "value") : NULL;
    CHECK(v && json_number_value(v) == 4.0, "input-scale-mul value recorded");
    json_decref(j);
}

static void test_reproducible(void) {
    char a[1024], b[1024], c[1024];
    nd_err e;
    CHECK(run("seed-a", "deepseek_v4", ND_SYNTH_CT, 42, NULL, 0, 0, a, &e) == 0, "%s", e.msg);
    CHECK(run("seed-b", "deepseek_v4", ND_SYNTH_CT, 42, NULL, 0, 0, b, &e) == 0, "%s", e.msg);
    CHECK(run("seed-c", "deepseek_v4", ND_SYNTH_CT, 43, NULL, 0, 0, c, &e) == 0, "%s", e.msg);
    static const char *const files[] = {"model.safetensors", "config.json", "original/model.safetensors",
                                        "original/config.json"};
    for (int i = 0; i < 4; i++) {
        char pa[1200], pb[1200], pc[1200];
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        snprintf(pc, sizeof pc, "%s/%s", c, files[i]);
        CHECK(same_file(pa, pb), "same seed, same %s", files[i]);
        if (strstr(files[i], "safetensors")) CHECK(!same_file(pa, pc), "other seed, other %s", files[i]);
        else CHECK(same_file(pa, pc), "config does not depend on the seed: %s", files[i]);
    }
}

static void test_sharded(void) {
    char a[1024], s[1024];
    nd_err e;
    CHECK(run("unsharded", "llama", ND_SYNTH_CT, 9, NULL, 0, 0, a, &e) == 0, "%s", e.msg);
    CHECK(run("sharded", "llama", ND_SYNTH_CT, 9, NULL, 0, 16384, s, &e) == 0, "%s", e.msg);
    char idx[1100], one[1100];
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", s);
    snprintf(one, sizeof one, "%s/model.safetensors", s);
    CHECK(access(idx, F_OK) == 0 && access(one, F_OK) != 0, "sharded output has an index and no single file");
    nd_ckpt *ca, *cs;
    if (nd_ckpt_open(a, &ca, &e) || nd_ckpt_open(s, &cs, &e)) { CHECK(0, "open: %s", e.msg); return; }
    int diff = 0;
    for (size_t i = 0; i < nd_ckpt_count(ca); i++) {
        const nd_tview *t = nd_ckpt_at(ca, i), *u = nd_ckpt_find(cs, t->name);
        diff += !u || u->nbytes != t->nbytes || memcmp(u->data, t->data, t->nbytes);
    }
    CHECK(diff == 0 && nd_ckpt_count(ca) == nd_ckpt_count(cs), "shards hold the same tensors (%d differ)", diff);
    json_error_t je;
    json_t *j = json_load_file(idx, 0, &je);
    CHECK(j && json_object_size(json_object_get(j, "weight_map")) == nd_ckpt_count(ca), "index maps every tensor");
    json_decref(j);
    nd_ckpt_close(ca);
    nd_ckpt_close(cs);
}

static void test_bad_options(void) {
    struct { const char *recipe, *inj; } cases[] = {
        {"deepseek_v4", "no-such-fault@layers.0.self_attn.q_a_proj"},
        {"deepseek_v4", "input-scale-inf@layers.0.self_attn.no_such_proj"},
        {"deepseek_v4", "input-scale-inf@layers.9.self_attn.q_a_proj"},
        {"deepseek_v4", "input-scale-inf@layers.0.self_attn.o_a_proj"},   /* FP8, not NVFP4 */
        {"deepseek_v4", "input-scale-inf@lm_head"},                       /* not quantized */
        {"deepseek_v4", "fused-scale-mismatch=2@layers.0.self_attn.q_b_proj"}, /* not fused */
        {"deepseek_v4", "input-scale-mul@layers.0.self_attn.q_b_proj"},   /* no factor */
        {"deepseek_v4", "input-scale-mul=abc@layers.0.self_attn.q_b_proj"},
        {"deepseek_v4", "nibble-swap=2@layers.0.self_attn.q_b_proj"},      /* takes no value */
        {"deepseek_v4", "nibble-swap"},
        {"gpt2", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[1024], sub[32];
        nd_err e;
        snprintf(sub, sizeof sub, "bad-%zu", i);
        const char *inj[1] = {cases[i].inj};
        int rc = run(sub, cases[i].recipe, ND_SYNTH_CT, 1, inj, cases[i].inj ? 1 : 0, 0, dir, &e);
        CHECK(rc == ND_EXIT_BADINPUT, "case %zu (%s): exit %d (%s)", i, cases[i].inj ? cases[i].inj : cases[i].recipe, rc, e.msg);
        CHECK(strncmp(e.msg, "synth: ", 7) == 0, "case %zu message names the command: %s", i, e.msg);
        CHECK(access(dir, F_OK) != 0, "case %zu wrote nothing", i);
    }
}

int main(void) {
    if (nd_scratch_make(g_root, sizeof g_root, "synth-test")) return 1;
    test_families();
    test_formats_agree();
    test_small();
    test_faults(ND_SYNTH_CT);
    test_faults(ND_SYNTH_MODELOPT);
    test_reproducible();
    test_sharded();
    test_bad_options();
    nd_scratch_remove(g_root);
    return nd_test_report("test_synth_ckpt");
}

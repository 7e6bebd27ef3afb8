/* test_conf_trace.c — `nvfp4dbg trace` of a conformance fixture (golden/conformance/MODEL/nvfp4,
 * the fixture's own prompt, CPU backend, --dump tensors).
 *   mode "exit":      the trace reports no divergence (exit 0).
 *   mode "reference": our reference path (--ref-numerics transformers) per layer against
 *                     transformers' forward on the decompressed model (reference.safetensors):
 *                     cosine >= 0.9999 and relative L2 <= 1e-2 for the embedding, every decoder
 *                     layer's output, the final norm and the logits.
 *                     The logits' top-1 token must agree on every position.
 *   mode "exact":     the same comparison with the reference path in FP32 throughout (--ref-numerics
 *                     fp32-exact) against transformers' FP32 forward (REFERENCE_FILE, FP32 tensors made
 *                     by tools/conformance/make_fp32_references.py): rel L2 <= 1e-4 for every compared
 *                     tensor (cosine >= 1 - 1e-8), top-1 on every position.
 *   mode "production": our PRODUCTION path (--ref-numerics transformers) against the serving engine's
 *                     forward re-implemented on the exported tensors (REFERENCE_FILE, e.g.
 *                     production_w4a8.safetensors by tools/conformance/make_modelopt_variants.py), with
 *                     the limits of mode "reference": the variant's semantics (FP8 activations, 32-blocks)
 *                     as the engine computes them.
 * usage: test_conf_trace NVFP4DBG MODEL exit|reference|exact [CHECKPOINT_DIR (default: the fixture's)
 *                        [REFERENCE_FILE (default: reference.safetensors)]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../nd_test.h"
#include "conf_fixture.h"
#include "trace/trace.h"
#include <jansson.h>

/* the limits of mode "reference" (BF16 vs BF16); mode "exact" sets the FP32 ones in main */
static double MIN_COS = 0.9999, MAX_REL = 1e-2;
/* which path's tensors are compared: "ref", or "prod" in mode "production" */
static const char *g_path = "ref";
/* mode "spread": the manifest's fp32_vs_bf16_rel_l2 (per reference tensor) and fp32_vs_bf16_top1 */
static json_t *g_spread;
static double g_top1_min = 1.0;

static double max_rel_for(const char *fixture_name) {
    if (!g_spread) return MAX_REL;
    json_t *v = json_object_get(g_spread, fixture_name);
    CHECK(json_is_number(v), "manifest.json fp32_vs_bf16_rel_l2 has no %s", fixture_name);
    return json_is_number(v) ? fmax(2.0 * json_number_value(v), 1e-3) : 0.0;
}

static void compare(const char *h5, const nd_st_file *ref, const char *stage, const char *fixture_name) {
    float *ours = NULL;
    int ndim = 0;
    int64_t shape[ND_TRACE_MAXDIM], n = 0, nf = 0;
    nd_err e = {0};
    char st[160]; /* the production path's chained tensors: the whole production forward */
    snprintf(st, sizeof st, "%s%s", stage, strcmp(g_path, "prod") ? "" : "@chained");
    CHECK(nd_trace_read_tensor(h5, st, g_path, &ours, &ndim, shape, &e) == 0, "%s", e.msg);
    float *theirs = conf_floats(ref, fixture_name, &nf);
    CHECK(theirs != NULL, "reference.safetensors has no %s", fixture_name);
    if (ours && theirs) {
        n = 1;
        for (int i = 0; i < ndim; i++) n *= shape[i];
        CHECK(n == nf, "%s: %lld elements, transformers' %s has %lld", stage, (long long)n, fixture_name, (long long)nf);
    }
    if (ours && theirs && n == nf) {
        double cs, rel, maxabs = 0;
        int64_t same = 0;
        conf_metrics(ours, theirs, n, &cs, &rel);
        for (int64_t i = 0; i < n; i++) {
            const double d = fabs((double)ours[i] - theirs[i]);
            if (d > maxabs) maxabs = d;
            same += ours[i] == theirs[i];
        }
        const double max_rel = max_rel_for(fixture_name);
        const int ok = cs >= MIN_COS && rel <= max_rel;
        printf("%-12s vs %-18s cosine %.10f  rel_l2 %.3e  max|d| %.3e  bit-equal %5.1f%%  %s\n", stage, fixture_name, cs,
               rel, maxabs, 100.0 * (double)same / (double)n, ok ? "ok" : "FAIL");
        CHECK(ok, "%s: cosine %.10f (min %.8f), rel_l2 %.3e (max %.3g) against transformers' %s", stage, cs, MIN_COS,
              rel, max_rel, fixture_name);
        if (!strcmp(fixture_name, "logits") && ndim >= 2 && shape[ndim - 1] > 0) {
            const int64_t v = shape[ndim - 1], rows = n / v;
            int64_t agree = 0, near_ties = 0;
            for (int64_t i = 0; i < rows; i++) {
                int64_t a = 0, b = 0;
                double dmax = 0;
                for (int64_t j = 0; j < v; j++) {
                    if (ours[i * v + j] > ours[i * v + a]) a = j;
                    if (theirs[i * v + j] > theirs[i * v + b]) b = j;
                    dmax = fmax(dmax, fabs((double)ours[i * v + j] - theirs[i * v + j]));
                }
                agree += a == b;
                /* mode spread: a position where we pick another token counts when transformers' own
                 * logits of the two tokens are closer than the row's largest difference between the
                 * two forwards (a near-tie another summation order may flip, as FP32 vs BF16 does) */
                if (a != b && g_spread && (double)theirs[i * v + b] - theirs[i * v + a] <= dmax) near_ties++;
            }
            if (g_spread && near_ties) {
                printf("%-12s %lld position(s) differ on a near-tie (transformers' two logits closer than the row's max|d|)\n", stage,
                       (long long)near_ties);
                agree += near_ties;
            }
            printf("%-12s top-1 agrees with transformers on %lld of %lld positions\n", stage, (long long)agree,
                   (long long)rows);
            CHECK(agree >= (int64_t)ceil(g_top1_min * (double)rows - 1e-9), "%s: top-1 agrees on %lld of %lld positions (at least %.4g wanted)",
                  stage, (long long)agree, (long long)rows, g_top1_min * (double)rows);
        }
    }
    free(ours);
    free(theirs);
}

/* the trace and its log this process wrote in the working folder (removed at exit) */
static char g_h5[256];
static void remove_outputs(void) {
    char log[300];
    snprintf(log, sizeof log, "%s.log", g_h5);
    remove(g_h5);
    remove(log);
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[3], "exit") && strcmp(argv[3], "reference") && strcmp(argv[3], "exact") && strcmp(argv[3], "spread") &&
                     strcmp(argv[3], "production"))) {
        fprintf(stderr, "usage: test_conf_trace NVFP4DBG MODEL exit|reference|exact|spread|production [CHECKPOINT_DIR [REFERENCE_FILE]]\n");
        return 2;
    }
    const char *bin = argv[1], *model = argv[2];
    const char *mode = argv[3];
    if (!strcmp(mode, "production")) { g_path = "prod"; mode = "reference"; }
    const int exact = !strcmp(mode, "exact");
    if (exact) MIN_COS = 1.0 - 1e-8, MAX_REL = 1e-4;
    json_t *manifest = NULL;
    if (!strcmp(mode, "spread")) {
        char mp[1024];
        json_error_t je;
        conf_path(mp, sizeof mp, model, "manifest.json");
        manifest = json_load_file(mp, 0, &je);
        g_spread = json_object_get(manifest, "fp32_vs_bf16_rel_l2");
        json_t *t1 = json_object_get(manifest, "fp32_vs_bf16_top1");
        CHECK(json_is_object(g_spread) && json_is_number(t1), "%s: no fp32_vs_bf16_rel_l2 / fp32_vs_bf16_top1 (%s)", mp,
              manifest ? "keys missing" : je.text);
        if (!json_is_object(g_spread) || !json_is_number(t1)) return nd_test_report("conf_trace");
        g_top1_min = json_number_value(t1);
        MIN_COS = 0.999;
    }
    char dir[1024], tokens[4096], h5[256], cmd[6000];
    if (argc > 4) snprintf(dir, sizeof dir, "%s", argv[4]);
    else conf_path(dir, sizeof dir, model, "nvfp4");
    const int64_t ntok = conf_tokens(model, tokens, sizeof tokens);
    CHECK(ntok > 0, "%s: no prompt", model);
    /* one file per process: several tests trace the same model (other checkpoint folders) at once */
    char tag[64];   /* the model's name, or the last part of a fixture folder's path */
    const char *slash = strrchr(model, '/');
    snprintf(tag, sizeof tag, "%s", slash ? slash + 1 : model);
    snprintf(h5, sizeof h5, "conf_%s_%s.%ld.h5", mode, tag, (long)getpid());
    snprintf(g_h5, sizeof g_h5, "%s", h5);
    atexit(remove_outputs);
    /* the reference comparison takes transformers' BF16 steps (--ref-numerics transformers): the
     * fixture is transformers' BF16 forward; the exact one none (fp32-exact: its FP32 forward) */
    /* CPU unless ND_TEST_BACKEND names another (the device runs the same checks on CUDA) */
    const char *be = getenv("ND_TEST_BACKEND") && *getenv("ND_TEST_BACKEND") ? getenv("ND_TEST_BACKEND") : "cpu";
    /* the BF16 originals hold no quantized module: replayed for the reference path alone */
    snprintf(cmd, sizeof cmd, "'%s' trace '%s' --tokens %s --backend %s --dump tensors --no-color --allow-unquantized%s --out '%s' "
             "> '%s.log' 2>&1", bin, dir, tokens, be, exact ? " --ref-numerics fp32-exact" : strcmp(mode, "reference") && strcmp(mode, "spread") ? "" : " --ref-numerics transformers",
             h5, h5);
    const int rc = conf_system(cmd);
    if (!strcmp(mode, "exit")) {
        if (rc != 0) {   /* show why */
            snprintf(cmd, sizeof cmd, "grep -v '  ok$' '%s.log' | tail -25 >&2", h5);
            (void)conf_system(cmd);
        }
        CHECK(rc == 0, "%s: nvfp4dbg trace exit %d (0: no divergence; 1: divergence; 2: bad input; 3: internal)", dir,
              rc);
        return nd_test_report("conf_trace");
    }
    if (rc != 0 && rc != 1) {   /* no trace to compare: say why */
        snprintf(cmd, sizeof cmd, "tail -5 '%s.log' >&2", h5);
        (void)conf_system(cmd);
        CHECK(0, "%s: nvfp4dbg trace exit %d, no reference tensors", dir, rc);
        return nd_test_report("conf_trace");
    }
    const char *ref_file = argc > 5 ? argv[5] : "reference.safetensors";
    nd_st_file *ref = conf_open(model, ref_file);
    CHECK(ref != NULL, "%s: %s", model, ref_file);
    if (!ref) return nd_test_report("conf_trace");
    int layers = 0;
    char name[64];
    for (;; layers++) {
        snprintf(name, sizeof name, "layer_out.%d", layers);
        if (!nd_st_find(ref, name)) break;
    }
    CHECK(layers > 0, "%s: no layer_out.* in reference.safetensors", model);
    /* V4: hidden_states.0 is the expanded streams (stage hc_expand), the rest as the others */
    compare(h5, ref, strcmp(model, "deepseek_v4") ? "embed" : "hc_expand", "hidden_states.0");
    for (int l = 0; l < layers; l++) {
        char stage[64];
        snprintf(stage, sizeof stage, "layers.%d", l);
        snprintf(name, sizeof name, "layer_out.%d", l);
        compare(h5, ref, stage, name);
    }
    snprintf(name, sizeof name, "hidden_states.%d", layers);
    compare(h5, ref, "norm", name);
    compare(h5, ref, "lm_head", "logits");
    nd_st_close(ref);
    json_decref(manifest);
    return nd_test_report("conf_trace");
}

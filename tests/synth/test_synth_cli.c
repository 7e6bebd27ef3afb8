/* test_synth_cli.c — `nvfp4dbg synth` through nd_cmd_synth: bad usage is exit 2 and writes
 * nothing; a real run calibrates through the reference pipeline (nd_pipeline_calibrate), and the
 * input global scales it writes are 2688 / the amax that calibration reports for the same tokens. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nd_test.h"
#include "scratch.h"
#include "cli/cli.h"
#include "ckpt/ckpt.h"
#include "pipeline/pipeline.h"
#include "synth/synth.h"

static char g_root[512];

static int cmd(int argc, const char **argv) {
    char *v[32];
    for (int i = 0; i < argc; i++) v[i] = (char *)argv[i];
    v[argc] = NULL;
    return nd_cmd_synth(argc, v);
}

static void test_usage(void) {
    char d[600];
    snprintf(d, sizeof d, "%s/bad", g_root);
    const char *cases[][8] = {
        {"synth", NULL},
        {"synth", d, NULL},
        {"synth", "--recipe", "deepseek_v4", NULL},
        {"synth", d, "--recipe", "gpt2", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--size", "huge", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--format", "gguf", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--seed", "x1", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--layers", "0", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--frobnicate", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--inject", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--inject", "bit-flip@layers.0.self_attn.q_a_proj", NULL},
        {"synth", d, "--recipe", "deepseek_v4", "--inject", "nibble-swap@layers.0.self_attn.q_c_proj", NULL},
        {"synth", d, d, "--recipe", "deepseek_v4", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int argc = 0;
        while (cases[i][argc]) argc++;
        int rc = cmd(argc, cases[i]);
        CHECK(rc == ND_EXIT_BADINPUT, "usage case %zu: exit %d", i, rc);
        CHECK(access(d, F_OK) != 0, "usage case %zu wrote nothing", i);
    }
    const char *help[] = {"synth", "--help"};
    CHECK(cmd(2, help) == 0, "--help is exit 0");
}

typedef struct seen { char m[64][128]; double a[64]; int n; } seen;
static void on_amax(void *u, const char *m, double a) {
    seen *s = u;
    if (s->n < 64 && strstr(m, "layers.0.self_attn")) {
        snprintf(s->m[s->n], 128, "%s", m);
        s->a[s->n++] = a;
    }
}

static void test_real_calibration(const char *fmt) {
    char d[600], orig[700];
    snprintf(d, sizeof d, "%s/v4-%s", g_root, fmt);
    snprintf(orig, sizeof orig, "%s/original", d);
    const char *argv[] = {"synth", d, "--recipe", "deepseek_v4", "--format", fmt, "--seed", "3",
                          "--inject", "input-scale-inverted@layers.0.self_attn.q_a_proj"};
    int rc = cmd(10, argv);
    CHECK(rc == 0, "synth %s: exit %d", fmt, rc);
    if (rc) return;
    /* the calibration synth ran, repeated here: same original, same tokens */
    int64_t tok[ND_SYNTH_CALIB_MAX];
    int n = nd_synth_calib_count(ND_SYNTH_TINY);
    nd_ckpt *c;
    nd_err e = {0};
    if (nd_ckpt_open(d, &c, &e)) { CHECK(0, "open: %s", e.msg); return; }
    nd_synth_calib_tokens(3, nd_ckpt_config(c)->vocab_size, tok, n);
    seen s = {0};
    rc = nd_pipeline_calibrate(orig, "deepseek_v4", tok, n, on_amax, &s, &e);
    CHECK(rc == 0, "calibrate: %s", e.msg);
    int checked = 0;
    for (int i = 0; i < s.n; i++) {
        nd_module m;
        if (nd_ckpt_module(c, s.m[i], &m, &e) || m.wfmt != ND_WF_NVFP4) continue;
        float raw = *(const float *)m.input_global->data, right = !strcmp(fmt, "modelopt")
                                                                       ? (float)s.a[i] / 2688.0f
                                                                       : 2688.0f / (float)s.a[i];
        if (strstr(s.m[i], "q_a_proj")) CHECK(raw == 1.0f / right, "%s: inverted %.9g vs 1/%.9g", s.m[i], raw, right);
        else CHECK(raw == right, "%s: input scale %.9g, calibration says %.9g", s.m[i], raw, right);
        CHECK(s.a[i] > 0 && isfinite(s.a[i]), "%s: amax %g", s.m[i], s.a[i]);
        checked++;
    }
    CHECK(checked >= 4, "%d attention NVFP4 modules checked against real calibration", checked);
    nd_ckpt_close(c);
}

int main(void) {
    if (nd_scratch_make(g_root, sizeof g_root, "synth-cli")) return 1;
    test_usage();
    test_real_calibration("compressed-tensors");
    test_real_calibration("modelopt");
    nd_scratch_remove(g_root);
    return nd_test_report("test_synth_cli");
}

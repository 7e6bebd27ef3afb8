/* test_repair.c — every repair transform applied and undone (issue 13): the byte repairs
 * (nibble swap, NaN block-scale fix), the scale repairs as --override text (reciprocal, 2^k,
 * calibrated, shard value, least-squares fit, both formats' on-disk meaning) and the fused-rule
 * override through nd_stack_params, the runtime-behaviour switches (gate/up order, routed scaling,
 * FP16 epilogue). Fresh random inputs each run (seed printed). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nd_test.h"
#include "diagnose/repair.h"
#include "pipeline/repair_bytes.h"
#include "pipeline/stack.h"

static uint64_t rng_state;
static uint64_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return rng_state; }

static void test_nibble_swap(void) {
    enum { N = 4099 };
    uint8_t a[N], b[N], c[N];
    for (int i = 0; i < N; i++) a[i] = (uint8_t)rnd();
    nd_swap_nibbles(a, b, N);
    int moved = 0;
    for (int i = 0; i < N; i++) moved += b[i] == (uint8_t)((a[i] << 4) | (a[i] >> 4));
    CHECK_EQ_INT(moved, N);
    nd_swap_nibbles(b, c, N);
    CHECK(!memcmp(a, c, N), "swapping twice gives the bytes back");
}

static int is_nan(uint8_t v) { return (v & 0x7f) == 0x7f; }

static void test_block_scale_fix(void) {
    enum { R = 37, C = 11 };
    uint8_t orig[R * C], sf[R * C];
    for (int i = 0; i < R * C; i++) { do orig[i] = (uint8_t)rnd(); while (is_nan(orig[i])); }
    memcpy(sf, orig, sizeof sf);
    int planted = 0, pos[R * C];
    for (int i = 0; i < R * C; i++)
        if (rnd() % 5 == 0) { sf[i] = rnd() & 1 ? 0x7f : 0xff; pos[planted++] = i; }
    /* a whole row of NaN: replaced by 0 */
    for (int j = 0; j < C; j++) sf[3 * C + j] = 0x7f;
    int64_t fixed = nd_fix_nan_block_scales(sf, R, C);
    int nan_after = 0;
    for (int i = 0; i < R * C; i++) nan_after += is_nan(sf[i]);
    CHECK_EQ_INT(nan_after, 0);
    int in_row3 = 0;
    for (int k = 0; k < planted; k++) in_row3 += pos[k] / C == 3;
    CHECK_EQ_INT(fixed, planted - in_row3 + C);
    for (int j = 0; j < C; j++) CHECK_EQ_INT(sf[3 * C + j], 0);
    /* every untouched scale is unchanged; every replaced one equals a finite scale of its row
     * (its nearest, left first) */
    for (int r = 0; r < R; r++)
        for (int j = 0; j < C; j++) {
            int i = r * C + j, was_nan = 0;
            for (int k = 0; k < planted; k++) was_nan |= pos[k] == i;
            if (r == 3) continue;
            if (!was_nan) { CHECK_EQ_INT(sf[i], orig[i]); continue; }
            int found = 0;
            for (int d = 1; d < C && !found; d++) {
                int l = j - d, rr = j + d, lnan = 1, rnan = 1;
                if (l >= 0) { lnan = 0; for (int k = 0; k < planted; k++) lnan |= pos[k] == r * C + l; }
                if (rr < C) { rnan = 0; for (int k = 0; k < planted; k++) rnan |= pos[k] == r * C + rr; }
                if (l >= 0 && !lnan) { CHECK_EQ_INT(sf[i], orig[r * C + l]); found = 1; }
                else if (rr < C && !rnan) { CHECK_EQ_INT(sf[i], orig[r * C + rr]); found = 1; }
            }
        }
    /* the inverse: NaN written back at the recorded places gives the planted matrix again */
    for (int k = 0; k < planted; k++) if (pos[k] / C != 3) sf[pos[k]] = 0x7f;
    int back = 0;
    for (int k = 0; k < planted; k++) back += pos[k] / C == 3 || is_nan(sf[pos[k]]);
    CHECK_EQ_INT(back, planted);
}

/* the value of NAME=VALUE of the repair whose override names `suffix` (printed with 9 significant
 * digits: relative precision 5e-9, so values are compared to 1e-8) */
static double ovr_value(const nd_repair *r, const char *suffix) {
    for (int i = 0; i < r->n_ovr; i++) {
        const char *eq = strrchr(r->ovr[i], '=');
        if (eq && (size_t)(eq - r->ovr[i]) >= strlen(suffix) && !strncmp(eq - strlen(suffix), suffix, strlen(suffix)))
            return strtod(eq + 1, NULL);
    }
    return NAN;
}

static const nd_repair *find(const nd_repair *r, int n, const char *name, int nth) {
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].name, name) && nth-- == 0) return &r[i];
    return NULL;
}

static void base_info(nd_stage_info *in, int modelopt, double mult) {
    memset(in, 0, sizeof *in);
    in->found = 1;
    snprintf(in->module, sizeof in->module, "model.layers.0.self_attn.q_proj");
    in->modelopt = modelopt;
    in->nvfp4_w4a4 = 1;
    in->has_input_scale = 1;
    in->fp4_weight = 1;
    in->input_mult = mult;
    in->weight_div = 5000;
    in->n_fused = 1;
    snprintf(in->fused[0], sizeof in->fused[0], "%s", in->module);
    in->fused_input_mult[0] = mult;
    in->fused_weight_div[0] = 5000;
    in->in_amax = 2688.0 / 700.0;
    in->weight_div_fit = NAN;
    in->mult = mult;
}

static void test_scale_repairs(void) {
    for (int mo = 0; mo < 2; mo++) {
        double healthy = 200 + (double)(rnd() % 100000) / 100.0; /* 2688/amax */
        const char *in_name = mo ? ".input_scale" : ".input_global_scale";
        /* the file value of a multiplier and back */
        nd_stage_info in;
        base_info(&in, mo, healthy);
        CHECK_NEAR(nd_repair_file_value(&in, nd_repair_file_value(&in, healthy)), healthy, 1e-9 * healthy);
        CHECK_NEAR(nd_repair_file_value(&in, healthy), mo ? 1.0 / healthy : healthy, 1e-12 * healthy);
        /* inverted: the reciprocal repair gives the healthy file value; applied twice, the broken one */
        double bad = 1.0 / healthy;
        base_info(&in, mo, bad);
        nd_row row;
        memset(&row, 0, sizeof row);
        snprintf(row.name, sizeof row.name, "layers.0.self_attn.q_proj");
        row.scale_ratio = bad / healthy;
        nd_repair r[ND_REPAIR_MAX];
        int n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        const nd_repair *rec = find(r, n, "input_scale_reciprocal", 0);
        CHECK(rec != NULL, "a reciprocal candidate");
        double v = rec ? ovr_value(rec, in_name) : NAN;
        CHECK_NEAR(v, nd_repair_file_value(&in, healthy), 1e-6 * fabs(nd_repair_file_value(&in, healthy)));
        base_info(&in, mo, healthy);
        row.scale_ratio = 1;
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        rec = find(r, n, "input_scale_reciprocal", 0);
        v = rec ? ovr_value(rec, in_name) : NAN;
        CHECK_NEAR(v, nd_repair_file_value(&in, bad), 1e-6 * fabs(nd_repair_file_value(&in, bad)));
        /* 2^k: the nearest power first, and its inverse restores the multiplier exactly */
        int k = 1 + (int)(rnd() % 12);
        double big = ldexp(healthy, k);
        base_info(&in, mo, big);
        row.scale_ratio = big / healthy;
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        const nd_repair *p2 = find(r, n, "input_scale_pow2", 0);
        CHECK(p2 && !strcmp(p2->cause, "scale_saturation"), "too large: saturation");
        v = p2 ? ovr_value(p2, in_name) : NAN;
        CHECK_NEAR(v, nd_repair_file_value(&in, healthy), 1e-8 * fabs(nd_repair_file_value(&in, healthy)));
        base_info(&in, mo, ldexp(healthy, -k));
        row.scale_ratio = ldexp(1.0, -k);
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        p2 = find(r, n, "input_scale_pow2", 0);
        CHECK(p2 && !strcmp(p2->cause, "scale_underflow"), "too small: underflow");
        v = p2 ? ovr_value(p2, in_name) : NAN;
        CHECK_NEAR(v, nd_repair_file_value(&in, healthy), 1e-8 * fabs(nd_repair_file_value(&in, healthy)));
        /* zero / missing: calibrated from this prompt's input amax; no reciprocal or 2^k then */
        base_info(&in, mo, 0);
        row.scale_ratio = NAN;
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        const nd_repair *cal = find(r, n, "input_scale_calibrated", 0);
        CHECK(cal && !find(r, n, "input_scale_reciprocal", 0), "calibrated only");
        v = cal ? ovr_value(cal, in_name) : NAN;
        CHECK_NEAR(v, nd_repair_file_value(&in, 700.0), 1e-6 * fabs(nd_repair_file_value(&in, 700.0)));
        /* weight fit with the original: the fitted divisor in the format's meaning */
        base_info(&in, mo, healthy);
        in.weight_div_fit = 4 * in.weight_div;
        row.scale_ratio = 1;
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        const nd_repair *fit = find(r, n, "weight_scale_fit", 0);
        v = fit ? ovr_value(fit, mo ? ".weight_scale_2" : ".weight_global_scale") : NAN;
        CHECK_NEAR(v, nd_repair_file_value(&in, 20000), 1e-6 * fabs(nd_repair_file_value(&in, 20000)));
        in.weight_div_fit = 1.01 * in.weight_div; /* within 5%: no candidate */
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        CHECK(!find(r, n, "weight_scale_fit", 0), "no fit candidate within 5%%");
        /* NaN block scales and packing */
        in.nan_block_scales = 3;
        n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
        CHECK(find(r, n, "block_scale_fix", 0) && ovr_value(find(r, n, "block_scale_fix", 0), ".block_scale_fix") == 1, "block fix");
        CHECK(find(r, n, "nibble_swap", 0) && ovr_value(find(r, n, "nibble_swap", 0), ".nibble_swap") == 1, "nibble swap");
    }
}

/* The fused-rule override changes the parameters as the rule says, and setting the stack's own
 * rule back gives the parameters without any override. */
static void test_fused_rule(void) {
    nd_module sh[2];
    memset(sh, 0, sizeof sh);
    snprintf(sh[0].path, sizeof sh[0].path, "model.layers.0.self_attn.q_a_proj");
    snprintf(sh[1].path, sizeof sh[1].path, "model.layers.0.self_attn.kv_proj");
    sh[0].input_global_mult = 700; sh[1].input_global_mult = 900;
    sh[0].weight_global_div = 5000; sh[1].weight_global_div = 6500;
    sh[0].wfmt = sh[1].wfmt = ND_WF_NVFP4;
    for (int rule = 0; rule < ND_FUSED_NRULES; rule++) {
        nd_stack s;
        memset(&s, 0, sizeof s);
        s.input_fused = s.weight_fused = ND_FUSED_MAX;
        nd_err e = {0};
        char a[128], b[128];
        snprintf(a, sizeof a, "layers.0.self_attn.q_a_proj.fused_input=%d", rule);
        snprintf(b, sizeof b, "layers.0.self_attn.q_a_proj.fused_weight=%d", rule);
        CHECK(!nd_stack_add_override(&s, a, &e) && !nd_stack_add_override(&s, b, &e), "%s", e.msg);
        nd_prod_params p, q;
        nd_stack_params(&s, &sh[0], sh, 2, "layers.0.self_attn.q_a_proj", &p);
        const float want_in[4] = {700, 900, 700, 700}, want_w[4] = {5000, 6500, 5000, 5000};
        CHECK_NEAR(p.mult, want_in[rule], 1e-3);
        CHECK_NEAR(p.w_div, want_w[rule], 1e-3);
        CHECK_NEAR(p.alpha, 1.0 / ((double)want_in[rule] * want_w[rule]), 1e-12);
        /* the inverse: the stack's own rule by override equals no override */
        nd_stack t;
        memset(&t, 0, sizeof t);
        t.input_fused = t.weight_fused = ND_FUSED_MAX;
        CHECK(!nd_stack_add_override(&t, "layers.0.self_attn.q_a_proj.fused_input=1", &e), "%s", e.msg);
        CHECK(!nd_stack_add_override(&t, "layers.0.self_attn.q_a_proj.fused_weight=1", &e), "%s", e.msg);
        nd_stack_params(&t, &sh[0], sh, 2, "layers.0.self_attn.q_a_proj", &q);
        nd_stack u;
        memset(&u, 0, sizeof u);
        u.input_fused = u.weight_fused = ND_FUSED_MAX;
        nd_prod_params z;
        nd_stack_params(&u, &sh[0], sh, 2, "layers.0.self_attn.q_a_proj", &z);
        CHECK(q.mult == z.mult && q.w_div == z.w_div && q.alpha == z.alpha, "stack's rule by override = no override");
    }
    /* module byte repairs are found by the module path */
    nd_stack s;
    memset(&s, 0, sizeof s);
    nd_err e = {0};
    CHECK(!nd_stack_add_override(&s, "model.layers.0.self_attn.kv_proj.nibble_swap=1", &e), "%s", e.msg);
    nd_module_repair mr;
    nd_stack_module_repair(&s, &sh[1], &mr);
    CHECK(mr.nibble_swap == 1 && mr.block_scale_fix == 0, "kv_proj: swap only");
    nd_stack_module_repair(&s, &sh[0], &mr);
    CHECK(mr.nibble_swap == 0, "q_a_proj untouched");
    /* on a module that is not FP4 the byte repairs are not looked up: the override stays unused
     * (the run then says it matched nothing), never a silent no-op */
    nd_stack d;
    memset(&d, 0, sizeof d);
    CHECK(!nd_stack_add_override(&d, "model.layers.0.self_attn.kv_proj.nibble_swap=1", &e), "%s", e.msg);
    nd_module dense = sh[1];
    dense.wfmt = ND_WF_DENSE;
    nd_stack_module_repair(&d, &dense, &mr);
    const char *unused = NULL;
    CHECK(mr.nibble_swap == 0 && nd_stack_unused(&d, &unused) && unused && strstr(unused, "nibble_swap"),
          "a dense module's nibble_swap override is left unused");
}

/* The runtime-behaviour repairs (issue 18): each names the stage's own switch with the value that
 * undoes what the stage ran with, and applying it through the stack gives that value back; applying
 * the inverse gives the broken behaviour again. */
static void test_runtime_repairs(void) {
    nd_row row;
    memset(&row, 0, sizeof row);
    nd_stage_info in;
    nd_repair r[ND_REPAIR_MAX];
    for (int swapped = 0; swapped < 2; swapped++)
        for (int times = 0; times < 3; times++) {
            const char *stage = times == 1 && !swapped ? "layers.0.mlp" : "layers.3.mlp.experts";
            snprintf(row.name, sizeof row.name, "%s", stage);
            memset(&in, 0, sizeof in);
            in.found = in.composite = 1;
            in.gate_up_swap = swapped;
            in.routed_scaling = times;
            in.routed_scaling_factor = 2.5;
            int n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
            const nd_repair *g = find(r, n, "gate_up_swap", 0), *m = find(r, n, "routed_scaling_once", 0);
            CHECK(g && !strcmp(g->cause, "gate_up_order") && g->n_ovr == 1, "gate/up candidate (swapped %d)", swapped);
            CHECK(g && ovr_value(g, ".gate_up_swap") == !swapped, "toggles the order the stage ran with");
            CHECK(!m == (times == 1), "routed scaling candidate only when it was not applied once (%d)", times);
            CHECK(!m || (!strcmp(m->cause, "moe_output_scale") && ovr_value(m, ".routed_scaling") == 1), "applied once");
            CHECK(!find(r, n, "nibble_swap", 0) && !find(r, n, "input_scale_reciprocal", 0), "no module repairs on a composite row");
            /* through the stack: the profile's behaviour, the repair's override, and its inverse */
            nd_stack s, t;
            memset(&s, 0, sizeof s);
            s.gate_up_w31 = swapped;
            s.routed_scaling = times;
            t = s;
            nd_err e = {0};
            CHECK(nd_stack_gate_up_swap(&s, stage) == swapped && nd_stack_routed_scaling(&s, stage) == times, "the profile's values");
            for (int i = 0; g && i < g->n_ovr; i++) CHECK(!nd_stack_add_override(&s, g->ovr[i], &e), "%s", e.msg);
            for (int i = 0; m && i < m->n_ovr; i++) CHECK(!nd_stack_add_override(&s, m->ovr[i], &e), "%s", e.msg);
            CHECK(nd_stack_gate_up_swap(&s, stage) == !swapped, "repaired order");
            CHECK(nd_stack_routed_scaling(&s, stage) == 1, "repaired scaling");
            CHECK(nd_stack_gate_up_swap(&s, "layers.9.mlp") == swapped, "other stages keep the profile's order");
            char inv[128];
            snprintf(inv, sizeof inv, "%s.gate_up_swap=%d", stage, swapped);
            CHECK(!nd_stack_add_override(&t, inv, &e), "%s", e.msg);
            snprintf(inv, sizeof inv, "%s.routed_scaling=%d", stage, times);
            CHECK(!nd_stack_add_override(&t, inv, &e), "%s", e.msg);
            CHECK(nd_stack_gate_up_swap(&t, stage) == swapped && nd_stack_routed_scaling(&t, stage) == times, "inverse");
        }
    /* a linear row under an FP16 epilogue: turn it off, first among the candidates */
    base_info(&in, 0, 700);
    in.epilogue_fp16 = 1;
    in.alpha = 1e-7;
    snprintf(row.name, sizeof row.name, "layers.0.self_attn.q_proj");
    row.scale_ratio = 1;
    int n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
    CHECK(n > 1 && !strcmp(r[0].name, "epilogue_fp32") && !strcmp(r[0].cause, "fp16_overflow"), "epilogue first");
    CHECK(n > 0 && ovr_value(&r[0], "layers.0.self_attn.q_proj.epilogue_fp16") == 0, "the stage's switch off");
    nd_stack s;
    memset(&s, 0, sizeof s);
    s.epilogue_fp16 = 1;
    nd_err e = {0};
    CHECK(nd_stack_epilogue_fp16(&s, row.name) == 1, "the profile's epilogue");
    CHECK(!nd_stack_add_override(&s, r[0].ovr[0], &e), "%s", e.msg);
    CHECK(nd_stack_epilogue_fp16(&s, row.name) == 0 && nd_stack_epilogue_fp16(&s, "layers.0.self_attn.k_proj") == 1, "one stage only");
    /* the FP16 output (epilogue: fp16_output, 2): the same repair, the switch keeps its value */
    in.epilogue_fp16 = 2;
    n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
    CHECK(n > 0 && !strcmp(r[0].name, "epilogue_fp32") && strstr(r[0].what, "kept in BF16"), "FP16 output: epilogue_fp32 first");
    CHECK(!nd_stack_add_override(&s, "layers.0.self_attn.o_proj.epilogue_fp16=2", &e), "%s", e.msg);
    CHECK(nd_stack_epilogue_fp16(&s, "layers.0.self_attn.o_proj") == 2, "the switch's value 2 (fp16_output)");
    in.epilogue_fp16 = 0;
    n = nd_repairs_for(&row, &in, r, ND_REPAIR_MAX);
    CHECK(!find(r, n, "epilogue_fp32", 0), "no epilogue candidate without an FP16 epilogue");
    /* the switches take their own values only */
    const char *bad[] = {"layers.0.mlp.gate_up_swap=2", "layers.0.mlp.gate_up_swap=0.5", "layers.0.mlp.experts.routed_scaling=3",
                         "layers.0.mlp.experts.routed_scaling=-1", "layers.0.mlp.experts.routed_scaling=1.5",
                         "layers.0.self_attn.q_proj.epilogue_fp16=3", "layers.0.self_attn.q_proj.epilogue_fp16=1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nd_err e2 = {0};
        CHECK(nd_stack_add_override(&s, bad[i], &e2) == ND_EXIT_BADINPUT && strstr(e2.msg, bad[i]), "refused: %s", bad[i]);
    }
}

int main(void) {
    rng_state = (uint64_t)time(NULL) * 2654435761u + 1;
    printf("seed %llu\n", (unsigned long long)rng_state);
    test_nibble_swap();
    test_block_scale_fix();
    test_scale_repairs();
    test_fused_rule();
    test_runtime_repairs();
    return nd_test_report("test_repair");
}

/* run_checks.c — what a checkpoint's config says against what the recipe computes, before a run
 * (run.h): keys the recipe does not model, values it does not compute, a sliding window, and
 * whether anything is quantized at all. Each refusal is exit 2 naming config.json and the recipe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "loop.h"

int nd_run_check_config(const nd_run *r, nd_err *e) {
    for (int i = 0; i < r->rc->n_unsupported; i++) {
        double v;
        const char *key = r->rc->unsupported[i], *sv = nd_cfg_string(r->cfg, key);
        if (sv || (!nd_cfg_number(r->cfg, key, &v) && v != 0))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: '%s' is set (not null, 0 or false), which recipe %s does "
                           "not model (%s): its reference would be wrong", nd_ckpt_dir(r->ck), key, r->rc->name, r->rc->path);
    }
    for (int i = 0; i < r->rc->n_req; i++) {
        const char *key = r->rc->req_key[i], *sv = nd_cfg_string(r->cfg, key);
        int hit = !sv;
        for (int j = 0; sv && j < r->rc->n_req_val[i]; j++) hit |= !strcmp(sv, r->rc->req_val[i][j]);
        if (!hit) {
            char list[300] = "";
            for (int j = 0; j < r->rc->n_req_val[i]; j++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", r->rc->req_val[i][j]);
            char sv_safe[200];
            snprintf(sv_safe, sizeof sv_safe, "%.120s", sv);
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s is '%s'; recipe %s computes %s only (%s): its reference would "
                           "be wrong", nd_ckpt_dir(r->ck), key, sv_safe, r->rc->name, list, r->rc->path);
        }
    }
    /* attention_bias: true promises q/k/v/o biases; a checkpoint without them is another model; false
     * builds the projections without biases, so bias tensors in the checkpoint are never loaded
     * (transformers drops them as unexpected keys, vLLM skips extra biases): replaying them would
     * judge another model than the one served (the recipe's q_proj of layer 0 as the witness, when
     * the checkpoint names it so) */
    double ab = 0;
    if (!nd_cfg_number(r->cfg, "attention_bias", &ab))
        for (int i = 0; i < r->rc->n_layer; i++) {
            const nd_stage_def *st = &r->rc->layer[i];
            if (strcmp(st->op, "linear") || !strstr(st->module, "self_attn.q_proj")) continue;
            char path[256];
            nd_expand(st->module, 0, 0, path, sizeof path);
            nd_module m;
            nd_err e2 = {0};
            if (!nd_ckpt_has_module(r->ck, path) || nd_ckpt_module(r->ck, path, &m, &e2)) break;
            if (ab != 0 && !m.bias)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: attention_bias is true, but %s has no bias tensor: the config "
                               "does not describe these weights", nd_ckpt_dir(r->ck), path);
            if (ab == 0 && m.bias)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: attention_bias is false, but %s has a bias tensor (%s), which "
                               "no loader that follows the config reads: the config does not describe these weights",
                               nd_ckpt_dir(r->ck), path, m.bias->name);
            break;
        }
    /* mlp_bias: true promises biases on the dense MLP's projections; intermediate_size is the dense
     * MLP's width (down_proj's input): a checkpoint that disagrees is another model, which neither
     * transformers nor a serving stack loads (layer 0's down_proj as the witness) */
    double mb = 0, isz = 0;
    const int says_bias = !nd_cfg_number(r->cfg, "mlp_bias", &mb), want_bias = says_bias && mb != 0;
    const int no_bias = says_bias && mb == 0; /* false: bias tensors are never loaded (as attention_bias) */
    const int want_width = !nd_cfg_number(r->cfg, "intermediate_size", &isz) && isz > 0;
    for (int i = 0; (want_bias || no_bias || want_width) && i < r->rc->n_layer; i++) {
        const nd_stage_def *st = &r->rc->layer[i];
        const size_t ml = strlen(st->module);
        /* an `mlp` stage's module holds its down_proj; a `linear` stage may be the down_proj */
        const int is_mlp = !strcmp(st->op, "mlp") && ml > 4 && !strcmp(st->module + ml - 4, ".mlp");
        const int is_down = !strcmp(st->op, "linear") && ml > 13 && !strcmp(st->module + ml - 14, ".mlp.down_proj");
        if (!is_mlp && !is_down) continue;
        char path[256], tmpl[256];
        snprintf(tmpl, sizeof tmpl, "%s%s", st->module, is_mlp ? ".down_proj" : "");
        nd_expand(tmpl, 0, 0, path, sizeof path);
        nd_module m;
        nd_err e2 = {0};
        if (!nd_ckpt_has_module(r->ck, path) || nd_ckpt_module(r->ck, path, &m, &e2)) break;
        if (want_bias && !m.bias)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: mlp_bias is true, but %s has no bias tensor: the config does "
                           "not describe these weights", nd_ckpt_dir(r->ck), path);
        if (no_bias && m.bias)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: mlp_bias is false, but %s has a bias tensor (%s), which no "
                           "loader that follows the config reads: the config does not describe these weights",
                           nd_ckpt_dir(r->ck), path, m.bias->name);
        if (want_width && m.in_features != (int64_t)isz)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: intermediate_size is %.0f, but %s takes %lld inputs: the config "
                           "does not describe these weights", nd_ckpt_dir(r->ck), isz, path, (long long)m.in_features);
        break;
    }
    /* use_qk_norm (GLM-4.5): the recipe runs the per-head q/k norms where their weights are; a config
     * that turns them off over a checkpoint that has them (or on, without them) builds another
     * model than the replay runs (layer 0's q_norm as the witness) */
    double qkn = 0;
    const int whole_model = !(r->loop && r->loop->opts && r->loop->opts->only_row); /* (a bundle holds one stage) */
    if (whole_model && !nd_cfg_number(r->cfg, "use_qk_norm", &qkn)) {
        const int has = nd_run_tensor((nd_run *)r, 0, "model.layers.0.self_attn.q_norm.weight") != NULL; /* (a lookup: r unchanged) */
        if ((qkn != 0) != has)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: use_qk_norm is %s, but layer 0 %s q/k norm weights "
                           "(self_attn.q_norm.weight): the config does not describe these weights", nd_ckpt_dir(r->ck),
                           qkn != 0 ? "true" : "false", has ? "has" : "has no");
    }
    /* a single-stage replay reads one stage's tensors (a repro bundle holds only those; bisect's and
     * the diagnosis's probes ran the whole model's checks before): no model to check them against */
    const int whole = !(r->loop && r->loop->opts && r->loop->opts->only_row);
    if (whole) ND_TRY(nd_run_check_structure(r, e)); /* config_structure.c */
    /* n_shared_experts: 0 promises none; a checkpoint that holds them is another model (a loader
     * that follows the config builds no shared expert and meets unexpected keys) */
    double nse = -1;
    if (!nd_cfg_number(r->cfg, "n_shared_experts", &nse) && nse == 0)
        for (size_t i = 0; i < nd_ckpt_module_count(r->ck); i++) {
            const char *mp = nd_ckpt_module_path(r->ck, i);
            if (strstr(mp, ".shared_experts.") || strstr(mp, ".shared_expert."))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: n_shared_experts is 0, but the checkpoint holds %s: the config "
                               "does not describe these weights", nd_ckpt_dir(r->ck), mp);
        }
    return 0;
}

/* config.json's sliding_window (Mistral, and Qwen's with use_sliding_window true) limits what a
 * token attends to; a recipe whose attention stages have no `window` attribute attends to every
 * earlier token, which differs only when the prompt is longer than the window: refused then. */
int nd_run_check_window(const nd_run *r, nd_err *e) {
    double w = 0, use = 1;
    if (nd_cfg_number(r->cfg, "sliding_window", &w) || !(w > 0) || r->t <= (int64_t)w) return 0;
    if (!nd_cfg_number(r->cfg, "use_sliding_window", &use) && use == 0) return 0;
    const nd_recipe *rc = r->rc;
    const nd_stage_def *secs[3] = {rc->prologue, rc->layer, rc->epilogue};
    const int ns[3] = {rc->n_prologue, rc->n_layer, rc->n_epilogue};
    int attends = 0;
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < ns[k]; i++) {
            if (nd_stage_attr(&secs[k][i], "window")) return 0;
            attends |= !strncmp(secs[k][i].op, "attention", 9);
        }
    if (!attends) return 0; /* no attention stage (a replayed bundle's one stage) */
    return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: sliding_window %.0f, and the prompt has %lld tokens: recipe %s attends to "
                   "every earlier token (%s), so its reference would differ from the model's; trace at most %.0f tokens",
                   nd_ckpt_dir(r->ck), w, (long long)r->t, rc->name, rc->path, w);
}

/* Does any module hold quantized tensors? (a config can say NVFP4 over BF16 weights) */
/* the decoder layer of a module path ("model.layers.3.mlp.down_proj" -> 3), -1 when none */
static long path_layer(const char *p) {
    for (const char *q = strstr(p, "layers."); q; q = strstr(q + 1, "layers.")) {
        if (q != p && q[-1] != '.') continue;
        char *end;
        const long v = strtol(q + 7, &end, 10);
        if (end != q + 7 && (*end == '.' || !*end)) return v;
    }
    return -1;
}

int nd_run_any_quantized_in(const nd_ckpt *c, int lo, int hi) {
    const size_t n = nd_ckpt_module_count(c);
    for (size_t i = 0; i < n; i++) {
        const char *p = nd_ckpt_module_path(c, i);
        const long l = path_layer(p);
        if (l < lo || l > hi) continue;
        nd_module m;
        nd_err e2 = {0};
        if (nd_ckpt_module(c, p, &m, &e2) == 0 && m.wfmt != ND_WF_DENSE) return 1;
    }
    return 0;
}

int nd_run_any_quantized(const nd_ckpt *c, nd_err *e) {
    const size_t n = nd_ckpt_module_count(c);
    int bad = -1;
    nd_err first = {0};
    for (size_t i = 0; i < n; i++) {
        nd_module m;
        nd_err e2 = {0};
        if (nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, &e2) == 0) { if (m.wfmt != ND_WF_DENSE) return 1; }
        else if (bad < 0) { bad = (int)i; first = e2; }
    }
    /* none bound as quantized, and one failed to bind: its reason, not "no quantized module" */
    if (bad >= 0) { *e = first; return -1; }
    return 0;
}


int nd_run_unreplayed(const nd_run *r, int lo, int hi, char *first, size_t cap) {
    if (first && cap) first[0] = 0;
    if (!r->n_bound) return 0;
    int n = 0;
    const size_t nm = nd_ckpt_module_count(r->ck);
    for (size_t i = 0; i < nm; i++) {
        const char *p = nd_ckpt_module_path(r->ck, i);
        const long l = path_layer(p);
        if (l < 0 || l >= r->cfg->num_hidden_layers || l < lo || (hi >= 0 && l > hi)) continue;
        char pat[192];
        nd_path_pattern(p, pat, sizeof pat);
        /* only under a layer prefix the run read ("model.layers.#."): a vision tower's or an MTP
         * block's layers belong to no recipe */
        const char *lp = strstr(pat, "layers.#.");
        if (!lp) continue;
        const size_t pl = (size_t)(lp - pat) + 9;
        int seen_prefix = 0, seen = 0;
        for (int k = 0; k < r->n_bound && !seen; k++) {
            seen_prefix |= !strncmp(r->bound[k], pat, pl);
            seen = !strcmp(r->bound[k], pat);
        }
        if (seen || !seen_prefix) continue;
        nd_module m;
        nd_err e2 = {0};
        if (nd_ckpt_module(r->ck, p, &m, &e2) || m.wfmt == ND_WF_DENSE) continue;
        if (!n && first) snprintf(first, cap, "%s", p);
        n++;
    }
    return n;
}

/* op_desc.c — the op table (op_desc.h). Keep each entry in step with what its op reads
 * (tests/pipeline/op_desc_coverage.sh checks the names against the source). */
#include "op_desc.h"
#include "util/suggest.h"
#include "util/table.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REQ(n, k, doc) {n, k, 1, "", doc}
#define OPT(n, k, d, doc) {n, k, 0, d, doc}
/* attributes several ops take alike */
#define A_QUERY_HEADS REQ("heads", ND_AK_NUM, "query heads")
#define A_HEAD_DIM REQ("head_dim", ND_AK_NUM, "values per head")
#define A_RATE OPT("rate", ND_AK_NUM, "the layer's compress_ratios entry", "compression rate")
#define A_SCORE_SCALE OPT("scale", ND_AK_NUM, "1/sqrt(head_dim)", "score scale")
#define A_HC_MULT REQ("n", ND_AK_NUM, "hc_mult")
#define A_HC_EPS REQ("eps", ND_AK_NUM, "norm epsilon"), REQ("hc_eps", ND_AK_NUM, "hc epsilon")

static const nd_op_desc OPS[] = {
    {"embedding", "the rows of the embedding matrix for the prompt's token ids", 0,
     {REQ("weight", ND_AK_TENSOR, "the embedding matrix [vocab, hidden]"),
      OPT("scale", ND_AK_NUM, "1", "the rows times this (Gemma: $sqrt_hidden_size; tf: bf16_scale rounds it to BF16 first)")}},
    {"tensor", "a checkpoint tensor as a buffer (e.g. a learned bias added later)", 0,
     {REQ("weight", ND_AK_TENSOR, "the 2-D tensor")}},
    {"hc_expand", "hyper-connections: the residual stream copied into n streams", 0,
     {REQ("n", ND_AK_NUM, "hc_mult, the number of streams")}},
    {"rmsnorm", "RMSNorm over the last dimension (or over groups of it), times the weight", 0,
     {REQ("eps", ND_AK_NUM, "epsilon added to the mean square"),
      OPT("group", ND_AK_NUM, "0 (the whole row)", "normalise each group of this many values (per-head q/k norms)"),
      OPT("weight", ND_AK_TENSOR, "none (no scale)", "the norm weight"),
      OPT("offset", ND_AK_NUM, "0", "added to the weight in FP32 first: 1 for the zero-centred (1 + w) norms of Qwen3-Next")}},
    {"rope", "rotary position embedding of the rotated part of each head", 0,
     {REQ("heads", ND_AK_NUM, "heads in the input"), A_HEAD_DIM,
      REQ("rot_dim", ND_AK_NUM, "rotated values per head"),
      OPT("theta", ND_AK_NUM, "none (required without params)", "rope_theta"),
      OPT("params", ND_AK_TEXT, "none", "a config object with this stage's rope_type (default, linear), rope_theta and "
          "factor; {T} = the layer's layer_types entry (Gemma 3: rope_parameters.{T})"),
      OPT("inverse", ND_AK_FLAG, "0", "rotate by the negative angle (V4's output de-rotation)"),
      OPT("interleaved", ND_AK_FLAG, "1", "pairs are adjacent values (1) or the two halves (0, GPT-NeoX style)"),
      OPT("rot_first", ND_AK_FLAG, "0", "the rotated part is the first rot_dim values of a head (1) or the last (0)"),
      OPT("yarn", ND_AK_FLAG, "0", "apply the config's YaRN rope scaling"),
      OPT("compressed_theta", ND_AK_NUM, "none", "the theta of compressed layers (V4), used where the layer compresses"),
      OPT("attention_factor", ND_AK_FLAG, "0", "cos and sin times YaRN's attention factor (rope_type yarn: attention_factor, "
          "else 0.1 ln(factor) + 1), as transformers' rotary embedding (gpt-oss)")}},
    {"attention", "causal softmax attention, optional sliding window and attention sinks", 0,
     {A_QUERY_HEADS, A_HEAD_DIM, OPT("kv_heads", ND_AK_NUM, "1", "key/value heads (grouped-query attention)"),
      OPT("window", ND_AK_NUM, "0 (none)", "sliding window in tokens"),
      OPT("window_layer_type", ND_AK_TEXT, "every layer", "the window applies only on layers whose config.json layer_types "
          "entry is this (sliding_attention)"),
      A_SCORE_SCALE, OPT("yarn_mscale", ND_AK_NUM, "0", "YaRN mscale applied to the score scale"),
      OPT("sinks", ND_AK_TENSOR, "none", "per-head sink logits (in the softmax denominator only)")}},
    {"attention_compressed", "V4 attention over the sliding window and the compressed KV of the layer", 0,
     {A_QUERY_HEADS, A_HEAD_DIM, A_RATE, OPT("window", ND_AK_NUM, "0", "sliding window in tokens"), A_SCORE_SCALE,
      OPT("sinks", ND_AK_TENSOR, "none", "per-head sink logits")}},
    {"compress", "V4 KV compressor: gated pooling of rate tokens (with overlap), norm and rope", 0,
     {REQ("head_dim", ND_AK_NUM, "values per compressed entry"), REQ("eps", ND_AK_NUM, "norm epsilon"),
      REQ("rot_dim", ND_AK_NUM, "rotated values"), REQ("position_bias", ND_AK_TENSOR, "the learned position bias"),
      OPT("norm", ND_AK_TENSOR, "", "the norm weight (required with position_bias)"), A_RATE,
      OPT("overlap", ND_AK_FLAG, "0", "windows overlap by half (CSA)"),
      OPT("theta", ND_AK_NUM, "", "rope theta (required when rot_dim > 0)"),
      OPT("compressed_theta", ND_AK_NUM, "none", "rope theta of compressed layers"),
      OPT("yarn", ND_AK_FLAG, "0", "apply YaRN rope scaling")}},
    {"indexer", "V4 lightning indexer: top-k compressed entries per query", 0,
     {REQ("heads", ND_AK_NUM, "indexer heads"), A_HEAD_DIM, REQ("topk", ND_AK_NUM, "entries kept per query"), A_RATE,
      A_SCORE_SCALE, OPT("weights_scale", ND_AK_NUM, "1/sqrt(heads)", "scale of the per-head weights")}},
    {"hc_pre", "hyper-connections before a block: Sinkhorn-normalised mixing of the n streams into one", 0,
     {A_HC_MULT, REQ("iters", ND_AK_NUM, "Sinkhorn iterations"), A_HC_EPS,
      REQ("params", ND_AK_TENSOR, "prefix of the .fn/.base/.scale tensors")}},
    {"hc_post", "hyper-connections after a block: the block output mixed back into the n streams", 0, {{0}}},
    {"hc_head", "hyper-connections before the head: the n streams reduced to one", 0,
     {A_HC_MULT, A_HC_EPS, REQ("params", ND_AK_TENSOR, "prefix of the .hc_fn/.hc_base/.hc_scale tensors")}},
    {"add", "elementwise sum of the inputs (residual)", 0, {{0}}},
    {"identity", "the input unchanged (a named point of the trace)", 0, {{0}}},
    {"split", "the input's columns split into the outputs", 0,
     {OPT("groups", ND_AK_NUM, "1", "split each of this many groups the same way"),
      OPT("sizes", ND_AK_TEXT, "equal parts", "comma-separated column counts (numbers or $config keys)")}},
    {"concat", "the inputs' columns side by side", 0,
     {OPT("groups", ND_AK_NUM, "1", "interleave per group"),
      OPT("broadcast", ND_AK_TEXT, "none", "inputs repeated across heads (comma-separated input positions)")}},
    {"linear", "a checkpoint linear module on both paths: the reference with dequantized weights, production "
               "as the stack's kernel computes it (NVFP4 W4A4, weight-only or FP8)", 1,
     {OPT("fused", ND_AK_TEXT, "none", "comma-separated sibling modules fused with this one (the stack's shared-scale rule)"),
      OPT("act_fp8_group", ND_AK_NUM, "0 (none)", "production FP8 activation quantization group (DeepSeek FP8)"),
      OPT("logits", ND_AK_FLAG, "0", "the model's head: also KL divergence and top-1 agreement of the logits")}},
    {"grouped_linear", "a grouped projection (V4's o_a): groups independent linears over column groups", 1,
     {REQ("groups", ND_AK_NUM, "number of groups"),
      OPT("fused", ND_AK_TEXT, "none", "fused siblings"),
      OPT("act_fp8_group", ND_AK_NUM, "0 (none)", "production FP8 activation group"),
      OPT("logits", ND_AK_FLAG, "0", "as for linear")}},
    {"router", "MoE router: scores, grouped top-k with correction bias or hash routing, weights", 0,
     {REQ("experts", ND_AK_NUM, "routed experts"), REQ("top_k", ND_AK_NUM, "experts per token"),
      OPT("n_group", ND_AK_NUM, "0 (no groups)", "expert groups (DeepSeek grouped top-k)"),
      OPT("topk_group", ND_AK_NUM, "0", "groups kept per token"),
      OPT("norm", ND_AK_FLAG, "1", "renormalise the top-k weights"),
      OPT("scaling", ND_AK_NUM, "1", "routed_scaling_factor"),
      OPT("score", ND_AK_TEXT, "score_default", "scoring function (softmax, sigmoid, sqrtsoftplus) or a $config key"),
      OPT("score_default", ND_AK_TEXT, "softmax", "scoring function when the config has none"),
      OPT("weight", ND_AK_TENSOR, "none", "router gate weight"),
      OPT("hash", ND_AK_TENSOR, "none", "token-to-expert table (hash layers)"),
      OPT("bias", ND_AK_TENSOR, "none", "score correction bias"),
      OPT("logit_bias", ND_AK_TENSOR, "none", "the gate linear's bias, added to the logits (gpt-oss)"),
      OPT("topk_softmax", ND_AK_FLAG, "0", "top-k of the logits, the weights a softmax over the k picked (gpt-oss)")}},
    {"moe_experts", "the routed experts (SwiGLU) combined with the router's weights", 1,
     {REQ("experts", ND_AK_NUM, "routed experts"),
      OPT("limit", ND_AK_NUM, "0 (none)", "SwiGLU clamp (swiglu_limit)"),
      OPT("act", ND_AK_TEXT, "silu", "silu(gate) * up, or swiglu_oai: (up + 1) * gate * sigmoid(alpha * gate) (gpt-oss)"),
      OPT("alpha", ND_AK_NUM, "", "the sigmoid's slope of swiglu_oai (gpt-oss: 1.702)"),
      OPT("gate_up", ND_AK_TEXT, "split", "interleaved: an expert's gate_up_proj module, when the checkpoint has one, holds "
          "gate (even rows) and up (odd rows) fused (gpt-oss); else gate_proj and up_proj")}},
    {"mlp", "a dense SwiGLU MLP (gate/up/down) or shared expert", 1,
     {OPT("limit", ND_AK_NUM, "0 (none)", "SwiGLU clamp"),
      OPT("act", ND_AK_TEXT, "silu", "silu or swiglu_oai (as moe_experts)"),
      OPT("alpha", ND_AK_NUM, "", "the sigmoid's slope of swiglu_oai")}},
    {"fp8_sim", "production FP8 block quantization of an activation (DeepSeek FP8 recipes)", 0,
     {REQ("cols", ND_AK_NUM, "columns"), OPT("group", ND_AK_NUM, "64", "values per scale"),
      OPT("pow2", ND_AK_FLAG, "1", "round the scales to powers of two")}},
    {"gate_mul", "the first input times act(second input), the gate one column per row or as wide as the input "
                 "(gated attention, RMSNormGated's SiLU gate, Qwen3-Next's shared-expert gate)", 0,
     {OPT("act", ND_AK_TEXT, "sigmoid", "sigmoid, silu or gelu_tanh (Gemma's MLP: gelu(gate, tanh) * up)")}},
    {"causal_conv1d", "depthwise causal convolution over the tokens, optional SiLU (Gated DeltaNet)", 0,
     {REQ("weight", ND_AK_TENSOR, "the conv weight [channels, 1, kernel]"),
      OPT("act", ND_AK_TEXT, "none", "silu or none")}},
    {"gated_delta_rule", "Gated DeltaNet's gated delta rule over the prompt from a zero state: inputs q, k, v, a, b; "
                         "L2-normalised q/k, decay exp(-exp(A_log)·softplus(a + dt_bias)), beta = sigmoid(b)", 0,
     {REQ("k_heads", ND_AK_NUM, "key heads (linear_num_key_heads)"),
      REQ("v_heads", ND_AK_NUM, "value heads (linear_num_value_heads, a multiple of k_heads)"),
      REQ("k_dim", ND_AK_NUM, "values per key head"), REQ("v_dim", ND_AK_NUM, "values per value head"),
      REQ("a_log", ND_AK_TENSOR, "A_log [v_heads]"), REQ("dt_bias", ND_AK_TENSOR, "dt_bias [v_heads]")}},
    {"kv_cache", "the KV cache as the stack stores it: FP8 E4M3 with the checkpoint's k/v scales under a "
                 "kv_cache: fp8 stack, else unchanged", 1,
     {OPT("latent", ND_AK_FLAG, "0", "the input is MLA's compressed latent (one row, k_scale)")}},
};

static const nd_attr_desc COMMON[] = {
    OPT("tf", ND_AK_TEXT, "none", "with --ref-numerics transformers: the BF16 rounding variant transformers takes in this "
        "stage (bf16, bf16_then_weight, rsqrt_bf16, bf16_products, bf16_logits, bf16_logits_weights)"),
};

const nd_op_desc *nd_op_descs(int *n) {
    *n = (int)ND_COUNT(OPS);
    return OPS;
}

const nd_op_desc *nd_op_desc_find(const char *op) {
    return nd_table_find(OPS, ND_COUNT(OPS), sizeof OPS[0], offsetof(nd_op_desc, name), op);
}

const nd_attr_desc *nd_op_common_attrs(int *n) {
    *n = (int)ND_COUNT(COMMON);
    return COMMON;
}

/* op's own attribute of that name (its list ends at the first without a name), else a common one */
static const nd_attr_desc *find_attr(const nd_op_desc *op, const char *name) {
    const nd_attr_desc *a = nd_table_find(op->attrs, ND_OP_MAX_ATTRS, sizeof op->attrs[0], offsetof(nd_attr_desc, name), name);
    return a ? a : nd_table_find(COMMON, ND_COUNT(COMMON), sizeof COMMON[0], offsetof(nd_attr_desc, name), name);
}

/* the closest declared attribute of op (util/suggest.h), or NULL */
static const char *suggest(const nd_op_desc *op, const char *name) {
    const char *cands[ND_OP_MAX_ATTRS];
    size_t n = 0;
    while (n < ND_OP_MAX_ATTRS && op->attrs[n].name) { cands[n] = op->attrs[n].name; n++; }
    return nd_suggest(name, cands, n);
}

/* a number attribute: terms separated by '+', each a number, $key or -$key */
static int num_ok(const char *v) {
    const char *p = v;
    for (;;) {
        size_t n = strcspn(p, "+");
        if (n == 0 || n >= 160) return 0;
        char term[160];
        memcpy(term, p, n);
        term[n] = 0;
        const char *t = term;
        if (t[0] == '-' && t[1] == '$') t++;
        if (t[0] == '$') {
            if (!t[1]) return 0;
        } else {
            char *end;
            (void)strtod(t, &end);
            if (end == t || *end) return 0;
        }
        if (!p[n]) return 1;
        p += n + 1;
    }
}

/* tf: a comma-separated list of known variants (a misspelt one changed the reference numerics
 * without a word) */
static int check_tf(const nd_stage_def *s, const char *v, const char *file, int line, nd_err *e) {
    for (const char *p = v; *p;) {
        while (*p == ' ' || *p == ',') p++;
        const size_t n = strcspn(p, ", ");
        if (!n) break;
        int ok = 0;
        for (int i = 0; ND_TF_VARIANTS[i] && !ok; i++) ok = strlen(ND_TF_VARIANTS[i]) == n && !strncmp(p, ND_TF_VARIANTS[i], n);
        if (!ok) {
            char word[64], list[400] = "";
            snprintf(word, sizeof word, "%.*s", (int)(n < 60 ? n : 60), p);
            for (int i = 0; ND_TF_VARIANTS[i]; i++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", ND_TF_VARIANTS[i]);
            const char *best = nd_suggest(word, (const char *const *)ND_TF_VARIANTS, 10);
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): tf variant '%s' is not one of %s%s%s%s", file, line,
                           s->name, s->op, word, list, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
        }
        p += n;
    }
    return 0;
}

/* A stage name: the trace's dataset path and the key of its rows, so no '/' (an HDF5 path
 * separator) or '@' (the mode separator of /tensors), placeholders only {L} (the layer) and {E}
 * (an expert). (A layer stage without {L} writes the same rows in every layer: the run refuses
 * duplicate rows, run.c.) */
static int check_name(const nd_stage_def *s, const char *file, nd_err *e) {
    const char *why = NULL;
    for (const char *p = s->name; *p && !why; p++) {
        if (*p == '/' || *p == '@') why = "holds '/' or '@' (path and mode separators of the trace)";
        else if (*p == '{') {
            if ((p[1] == 'L' || p[1] == 'E') && p[2] == '}') p += 2;
            else why = "holds a placeholder other than {L} (the layer) or {E} (an expert), or an unclosed one";
        } else if (*p == '}') why = "holds a '}' that closes no placeholder";
    }
    if (!why) return 0;
    return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage name '%s' %s", file, s->line, s->name, why);
}

static int check_stage(const nd_recipe *rc, const nd_stage_def *s, nd_err *e) {
    /* the file and line a stage (an attribute) was written at: the recipe or one it extends */
    const char *sf = nd_stage_file(rc, s);
    const nd_op_desc *op = nd_op_desc_find(s->op);
    if (!op) {
        const char *cands[sizeof OPS / sizeof OPS[0]];
        for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) cands[i] = OPS[i].name;
        const char *best = nd_suggest(s->op, cands, sizeof OPS / sizeof OPS[0]);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: unknown op '%s'%s%s%s (nvfp4dbg explain --ops lists them)",
                       sf, s->line, s->name, s->op, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
    }
    for (int i = 0; i < s->n_attrs; i++) {
        const char *k = s->attrs[i].key, *v = s->attrs[i].value;
        const char *af = s->attrs[i].file ? s->attrs[i].file : sf;
        const int al = s->attrs[i].file ? s->attrs[i].line : s->line;
        const nd_attr_desc *a = find_attr(op, k);
        if (!a) {
            const char *best = suggest(op, k);
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): unknown attribute '%s'%s%s%s", af, al,
                           s->name, s->op, k, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
        }
        if ((a->kind == ND_AK_NUM || a->kind == ND_AK_FLAG) && !num_ok(v))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): attribute %s must be a number or a $config key, not '%s'",
                           af, al, s->name, s->op, k, v);
        if (a->kind == ND_AK_FLAG && v[0] != '$' && strcmp(v, "0") && strcmp(v, "1"))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): attribute %s must be 0 or 1, not '%s'", af,
                           al, s->name, s->op, k, v);
        if (!strcmp(k, "tf")) ND_TRY(check_tf(s, v, af, al, e));
        /* a number written in the recipe gets the range the same key has in config.json
         * (ckpt/config_check.c): an epsilon or a RoPE base out of it is a NaN on both paths */
        if (a->kind == ND_AK_NUM && v[0] != '$') {
            static const struct { const char *key; double lo, hi; int lo_open; } R[] = {
                {"eps", 0, 0.1, 1}, {"hc_eps", 0, 0.1, 0}, {"theta", 0, 1e12, 1}};
            const double x = strtod(v, NULL);
            for (size_t j = 0; j < sizeof R / sizeof R[0]; j++)
                if (!strcmp(k, R[j].key) && (!isfinite(x) || x > R[j].hi || (R[j].lo_open ? x <= R[j].lo : x < R[j].lo)))
                    return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): attribute %s is %s, outside the allowed "
                                   "range %s%g..%g", af, al, s->name, s->op, k, v, R[j].lo_open ? ">" : "", R[j].lo, R[j].hi);
        }
        if (a->kind == ND_AK_TENSOR && !v[0])
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): attribute %s names no tensor", af, al,
                           s->name, s->op, k);
    }
    for (int i = 0; i < ND_OP_MAX_ATTRS && op->attrs[i].name; i++) {
        if (!op->attrs[i].required) continue;
        int have = 0;
        for (int j = 0; j < s->n_attrs && !have; j++) have = !strcmp(s->attrs[j].key, op->attrs[i].name);
        if (!have)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): needs attribute '%s' (%s)", sf, s->line,
                           s->name, s->op, op->attrs[i].name, op->attrs[i].doc);
    }
    if (op->module && !s->module[0])
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s (op %s): needs 'module' (the checkpoint module it runs)", sf,
                       s->line, s->name, s->op);
    return 0;
}

static int conditional(const nd_stage_def *s) { return s->when_has[0] || s->when_missing[0] || s->when_config[0]; }

int nd_op_validate_recipe(const nd_recipe *rc, nd_err *e) {
    const nd_stage_def *secs[3] = {rc->prologue, rc->layer, rc->epilogue};
    const int ns[3] = {rc->n_prologue, rc->n_layer, rc->n_epilogue};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < ns[k]; i++) {
            ND_TRY(check_stage(rc, &secs[k][i], e));
            ND_TRY(check_name(&secs[k][i], nd_stage_file(rc, &secs[k][i]), e));
            /* one stage per name: two would write the same rows (stages that run under a condition,
             * when_has / when_missing / when_config, are the alternatives of one stage) */
            for (int k2 = 0; k2 <= k && !conditional(&secs[k][i]); k2++)
                for (int j = 0; j < (k2 == k ? i : ns[k2]); j++)
                    if (!conditional(&secs[k2][j]) && !strcmp(secs[k2][j].name, secs[k][i].name))
                        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage '%s' is named twice (also at %s:%d): its rows would "
                                       "be written twice", nd_stage_file(rc, &secs[k][i]), secs[k][i].line, secs[k][i].name,
                                       nd_stage_file(rc, &secs[k2][j]), secs[k2][j].line);
        }
    return 0;
}

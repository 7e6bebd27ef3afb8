/* config_structure.c — the model's structure as config.json states it against the tensors the
 * checkpoint holds (run.h: nd_run_check_structure): widths (hidden_size, moe_intermediate_size,
 * n_shared_experts, q_lora_rank), the layer count, tied embeddings, which layers are sparse and
 * DeepSeek-V4's per-layer kinds. A loader builds the model from the config and then loads the
 * tensors into it: a config that describes another model loads with errors or random weights, so
 * each disagreement is exit 2 naming the key and the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "run.h"

/* The first module of the checkpoint whose path ends with one of the suffixes (NULL-terminated), bound;
 * 0 when there is none or it does not bind (its own error comes when a stage reads it) */
static int first_module(const nd_run *r, const char *const *suffixes, nd_module *m, const char **path) {
    const size_t n = nd_ckpt_module_count(r->ck);
    for (size_t i = 0; i < n; i++) {
        const char *mp = nd_ckpt_module_path(r->ck, i);
        const size_t ml = strlen(mp);
        for (const char *const *s = suffixes; *s; s++) {
            const size_t sl = strlen(*s);
            nd_err e2 = {0};
            if (ml >= sl && !strcmp(mp + ml - sl, *s) && (ml == sl || **s == '.' || mp[ml - sl - 1] == '.') &&
                !nd_ckpt_module(r->ck, mp, m, &e2)) {
                *path = mp;
                return 1;
            }
        }
    }
    return 0;
}

/* the same dtype and size, and 64 rows spread over the matrix equal byte for byte (a head that is not
 * the embedding differs in nearly every row; reading all of a vocabulary-sized matrix twice per run
 * would cost more than the check is worth) */
static int same_rows(const nd_tview *a, const nd_tview *b) {
    if (!a || !b || a->dtype != b->dtype || a->nbytes != b->nbytes || a->ndim != 2 || b->ndim != 2 || a->shape[0] != b->shape[0])
        return 0;
    const int64_t rows = a->shape[0];
    const size_t row = rows > 0 ? a->nbytes / (size_t)rows : 0;
    for (int64_t i = 0; i < 64 && rows > 0; i++) {
        const int64_t r = i * (rows - 1) / 63;
        if (memcmp((const char *)a->data + (size_t)r * row, (const char *)b->data + (size_t)r * row, row)) return 0;
    }
    return 1;
}

static int width_fails(const nd_run *r, const char *key, double want, const char *path, const char *what, int64_t got,
                       nd_err *e) {
    return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s is %.0f, but %s %s %lld: the config does not describe these weights",
                   nd_ckpt_dir(r->ck), key, want, path, what, (long long)got);
}

/* Widths and counts the config states against the tensors that have them: hidden_size (the embedding's
 * columns), moe_intermediate_size (a routed expert's down projection), n_shared_experts (the shared
 * expert's width in units of it, DeepSeek's layout), q_lora_rank (q_a_proj's rows), and
 * num_hidden_layers (no decoder layer past it but the MTP layers num_nextn_predict_layers adds). A
 * loader that builds the model from the config meets shapes or names it cannot load. */
static int check_widths(const nd_run *r, nd_err *e) {
    nd_module m;
    const char *path;
    double v, v2;
    static const char *const embed[] = {"model.embed_tokens", "model.language_model.embed_tokens", NULL};
    if (!nd_cfg_number(r->cfg, "hidden_size", &v) && v > 0 && first_module(r, embed, &m, &path) && m.in_features != (int64_t)v)
        return width_fails(r, "hidden_size", v, path, "has rows of", m.in_features, e);
    static const char *const expert_down[] = {".experts.0.down_proj", ".experts.0.w2", NULL};
    if (!nd_cfg_number(r->cfg, "moe_intermediate_size", &v) && v > 0 && first_module(r, expert_down, &m, &path) &&
        m.in_features != (int64_t)v)
        return width_fails(r, "moe_intermediate_size", v, path, "takes inputs", m.in_features, e);
    static const char *const shared_down[] = {".shared_experts.down_proj", ".shared_experts.w2", NULL};
    if (!nd_cfg_number(r->cfg, "n_shared_experts", &v) && v > 0 && !nd_cfg_number(r->cfg, "moe_intermediate_size", &v2) &&
        v2 > 0 && first_module(r, shared_down, &m, &path) && m.in_features != (int64_t)(v * v2))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: n_shared_experts %.0f x moe_intermediate_size %.0f is %.0f, but %s takes "
                       "inputs %lld: the config does not describe these weights", nd_ckpt_dir(r->ck), v, v2, v * v2, path,
                       (long long)m.in_features);
    /* the routed experts' width where the family has no moe_intermediate_size (Mixtral, gpt-oss,
     * MiniMax: intermediate_size is the expert's) */
    if (nd_cfg_number(r->cfg, "moe_intermediate_size", &v2) && !nd_cfg_number(r->cfg, "intermediate_size", &v) && v > 0 &&
        first_module(r, expert_down, &m, &path) && m.in_features != (int64_t)v)
        return width_fails(r, "intermediate_size", v, path, "takes inputs", m.in_features, e);
    /* no routed experts by the config over a checkpoint that holds them */
    if (!nd_cfg_number(r->cfg, "n_routed_experts", &v) && v == 0 && first_module(r, expert_down, &m, &path))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: n_routed_experts is 0, but the checkpoint holds routed experts (%s): "
                       "the config does not describe these weights", nd_ckpt_dir(r->ck), path);
    /* Qwen's single shared expert (Qwen2-MoE, Qwen3-Next, Qwen3.5) */
    static const char *const shared1_down[] = {".shared_expert.down_proj", NULL};
    if (!nd_cfg_number(r->cfg, "shared_expert_intermediate_size", &v) && v > 0 && first_module(r, shared1_down, &m, &path) &&
        m.in_features != (int64_t)v)
        return width_fails(r, "shared_expert_intermediate_size", v, path, "takes inputs", m.in_features, e);
    /* DeepSeek-V4's grouped output projection: o_a_proj has o_groups x o_lora_rank rows */
    static const char *const o_a[] = {".self_attn.o_a_proj", ".attn.wo_a", NULL};
    if (!nd_cfg_number(r->cfg, "o_lora_rank", &v) && v > 0 && !nd_cfg_number(r->cfg, "o_groups", &v2) && v2 >= 0 &&
        first_module(r, o_a, &m, &path) && m.out_features != (int64_t)(v * v2))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: o_groups %.0f x o_lora_rank %.0f is %.0f, but %s has rows %lld: the "
                       "config does not describe these weights", nd_ckpt_dir(r->ck), v2, v, v * v2, path, (long long)m.out_features);
    /* Gated DeltaNet's causal conv: its kernel is the weight's last dimension */
    if (!nd_cfg_number(r->cfg, "linear_conv_kernel_dim", &v) && v > 0)
        for (size_t i = 0, n = nd_ckpt_count(r->ck); i < n; i++) {
            const nd_tview *t = nd_ckpt_at(r->ck, i);
            const size_t l = strlen(t->name);
            if (l < 25 || strcmp(t->name + l - 25, "linear_attn.conv1d.weight") != 0 || t->ndim < 2) continue;
            if (t->shape[t->ndim - 1] != (int64_t)v)
                return width_fails(r, "linear_conv_kernel_dim", v, t->name, "has a kernel of", t->shape[t->ndim - 1], e);
            break;
        }
    static const char *const q_a[] = {".self_attn.q_a_proj", ".attn.wq_a", NULL};
    if (!nd_cfg_number(r->cfg, "q_lora_rank", &v) && v > 0 && first_module(r, q_a, &m, &path) && m.out_features != (int64_t)v)
        return width_fails(r, "q_lora_rank", v, path, "has rows", m.out_features, e);
    /* tied embeddings: the loaders read the embedding matrix as lm_head (vLLM skips a stored
     * lm_head.weight); a stored one that differs is another model than the one served */
    static const char *const head[] = {"lm_head", NULL};
    nd_module emb;
    const char *epath;
    if (r->cfg->tie_word_embeddings && first_module(r, head, &m, &path) && first_module(r, embed, &emb, &epath) &&
        !same_rows(m.weight, emb.weight))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: tie_word_embeddings is true, but %s is not %s: the loaders serve the "
                       "embedding as the head (vLLM skips the stored lm_head), so the config does not describe these weights",
                       nd_ckpt_dir(r->ck), path, epath);
    if (!nd_cfg_number(r->cfg, "num_hidden_layers", &v) && v > 0) {
        double mtp = 0;
        if (nd_cfg_number(r->cfg, "num_nextn_predict_layers", &mtp) || !(mtp > 0)) mtp = 0;
        const size_t n = nd_ckpt_module_count(r->ck);
        for (size_t i = 0; i < n; i++) {
            const char *mp = nd_ckpt_module_path(r->ck, i), *l = strstr(mp, "layers.");
            if (!l || (l != mp && l[-1] != '.') || l[7] < '0' || l[7] > '9') continue;
            if (strtol(l + 7, NULL, 10) >= (long)(v + mtp))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: num_hidden_layers is %.0f%s, but the checkpoint holds %s: the config "
                               "does not describe these weights", nd_ckpt_dir(r->ck), v, mtp > 0 ? " (and num_nextn_predict_layers)" : "", mp);
        }
    }
    return 0;
}

/* 1 when a module path of the checkpoint contains "layers.<L>.<part>" (at a name boundary; part ""
 * asks for any module of the layer) */
static int layer_has(const nd_run *r, long L, const char *part) {
    char pre[160];
    snprintf(pre, sizeof pre, *part ? "layers.%ld.%s" : "layers.%ld", L, part);
    const size_t pl = strlen(pre);
    for (size_t i = 0; i < nd_ckpt_module_count(r->ck); i++) {
        const char *mp = nd_ckpt_module_path(r->ck, i);
        for (const char *h = strstr(mp, pre); h; h = strstr(h + 1, pre))
            if ((h == mp || h[-1] == '.') && (h[pl] == 0 || h[pl] == '.')) return 1;
    }
    return 0;
}

/* Which layers the config makes sparse (MoE) against the tensors each layer holds: Qwen's
 * mlp_only_layers and decoder_sparse_step, DeepSeek's and GLM's first_k_dense_replace and
 * moe_layer_freq, as transformers builds them; DeepSeek-V4's num_hash_layers (a hash router's
 * tid2eid table in each of the first ones) and its compressed layer types (a compressor). A
 * loader that follows the config builds another model than the tensors hold. */
static int check_compressed(const nd_run *r, nd_err *e);

static int check_layer_kinds(const nd_run *r, nd_err *e) {
    json_t *j = (json_t *)r->cfg->json;
    double nl = 0, step = 1, fkd = 0, freq = 1, hash = 0, ne = 0;
    if (!j || nd_cfg_number(r->cfg, "num_hidden_layers", &nl) || !(nl > 0) || nl > 4096) return 0;
    const int qwen = json_object_get(j, "decoder_sparse_step") || json_object_get(j, "mlp_only_layers");
    const int dsk = !qwen && json_object_get(j, "first_k_dense_replace");
    json_t *dss = json_object_get(j, "decoder_sparse_step");
    if (dss && (!json_is_number(dss) || !((step = json_number_value(dss)) >= 1) || step != floor(step) || step > 4096))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: decoder_sparse_step is not a whole number of at least 1 (transformers "
                       "divides by it)", nd_ckpt_dir(r->ck));
    if (nd_cfg_number(r->cfg, "num_experts", &ne) && nd_cfg_number(r->cfg, "n_routed_experts", &ne) &&
        nd_cfg_number(r->cfg, "num_local_experts", &ne))
        ne = 0; /* no expert count: nothing is sparse */
    if (dsk) {
        nd_cfg_number(r->cfg, "first_k_dense_replace", &fkd);
        if (nd_cfg_number(r->cfg, "moe_layer_freq", &freq) || !(freq >= 1)) freq = 1;
    }
    json_t *mol = json_object_get(j, "mlp_only_layers");
    size_t k;
    json_t *x;
    json_array_foreach(mol, k, x)
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= (json_int_t)nl)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: mlp_only_layers[%zu] is not a layer of the %.0f", nd_ckpt_dir(r->ck), k, nl);
    /* a layer the checkpoint holds no module of (a repro bundle's one stage, a cut checkpoint) is
     * judged where a stage reads it */
    for (long L = 0; (qwen || dsk) && ne > 0 && L < (long)nl; L++) {
        if (!layer_has(r, L, "")) continue;
        int sparse;
        if (qwen) {
            int listed = 0;
            json_array_foreach(mol, k, x) listed |= json_integer_value(x) == L;
            sparse = !listed && (L + 1) % (long)step == 0;
        } else sparse = L >= (long)fkd && L % (long)freq == 0;
        const int experts = layer_has(r, L, "mlp.experts") || layer_has(r, L, "block_sparse_moe.experts");
        const int dense = layer_has(r, L, "mlp.down_proj") || layer_has(r, L, "mlp.gate_proj") || layer_has(r, L, "mlp.gate_up_proj");
        if (sparse ? (!experts && dense) : (experts && !dense))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s makes layer %ld %s, but the checkpoint's layer %ld holds %s: the "
                           "config does not describe these weights", nd_ckpt_dir(r->ck),
                           qwen ? "mlp_only_layers / decoder_sparse_step" : "first_k_dense_replace / moe_layer_freq", L,
                           sparse ? "sparse (routed experts)" : "dense", L, sparse ? "a dense MLP" : "routed experts");
    }
    /* DeepSeek-V4: hash-routed layers (a token-id table) by mlp_layer_types (transformers 5) or the
     * first num_hash_layers (DeepSeek's config, which transformers folds into mlp_layer_types) */
    json_t *mlt = json_object_get(j, "mlp_layer_types");
    const int have_hash = !nd_cfg_number(r->cfg, "num_hash_layers", &hash) && hash >= 0;
    if (mlt && !json_is_null(mlt)) {
        if (!json_is_array(mlt) || json_array_size(mlt) != (size_t)nl)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: mlp_layer_types must list one entry per layer (%.0f): transformers "
                           "refuses it", nd_ckpt_dir(r->ck), nl);
        json_array_foreach(mlt, k, x)
            if (!json_is_string(x) || (strcmp(json_string_value(x), "hash_moe") && strcmp(json_string_value(x), "moe")))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: mlp_layer_types[%zu] is not hash_moe or moe", nd_ckpt_dir(r->ck), k);
        json_array_foreach(mlt, k, x)
            if (have_hash && (!strcmp(json_string_value(x), "hash_moe")) != ((long)k < (long)hash))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: mlp_layer_types[%zu] is %s but num_hash_layers is %.0f: "
                               "transformers reads the first, DeepSeek's inference code the second, and they build different "
                               "routers", nd_ckpt_dir(r->ck), k, json_string_value(x), hash);
    }
    if (have_hash || json_is_array(mlt))
        for (long L = 0; L < (long)nl; L++) {
            if (!layer_has(r, L, "")) continue;
            char t1[96];
            snprintf(t1, sizeof t1, "model.layers.%ld.mlp.gate.tid2eid", L);
            const int has = nd_ckpt_find(r->ck, t1) || nd_ckpt_find(r->ck, t1 + 6);
            const int want = json_is_array(mlt) ? !strcmp(json_string_value(json_array_get(mlt, (size_t)L)), "hash_moe") : L < (long)hash;
            if (has != want && (layer_has(r, L, "mlp.experts") || has)) {
                char what[64];
                if (json_is_array(mlt)) snprintf(what, sizeof what, "mlp_layer_types[%ld] is %s", L, want ? "hash_moe" : "moe");
                else snprintf(what, sizeof what, "num_hash_layers is %.0f", hash);
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s, but the checkpoint's layer %ld %s hash router table "
                               "(tid2eid): the config does not describe these weights", nd_ckpt_dir(r->ck), what, L,
                               has ? "holds a" : "has no");
            }
        }
    return check_compressed(r, e);
}

/* the compress rate layer_types gives a layer: compress_rates[type] (transformers' defaults 4 and 128
 * when the key is absent), 0 for a sliding layer, -1 for another type */
static double type_rate(const nd_run *r, const char *t) {
    if (!strcmp(t, "sliding_attention")) return 0;
    const int csa = !strcmp(t, "compressed_sparse_attention");
    if (!csa && strcmp(t, "heavily_compressed_attention")) return -1;
    char key[96];
    double v;
    snprintf(key, sizeof key, "compress_rates.%s", t);
    return nd_cfg_number(r->cfg, key, &v) ? (csa ? 4 : 128) : v;
}

/* DeepSeek-V4's attention kinds against the tensors: a compressed layer (CSA or HCA) holds a
 * compressor, a sliding one none; CSA's compressor carries the Lightning indexer, HCA's none; and
 * layer_types (what transformers reads) agrees with compress_ratios (what DeepSeek's and vLLM's code
 * read) where a config has both. */
static int check_compressed(const nd_run *r, nd_err *e) {
    const nd_model_cfg *c = r->cfg;
    const char *dir = nd_ckpt_dir(r->ck);
    int any = 0; /* the family has compressors at all: in the config or in the tensors */
    for (long M = 0; M < c->n_layer_types && !any; M++)
        any = type_rate(r, c->layer_types[M]) > 0 || layer_has(r, M, "self_attn.compressor") || layer_has(r, M, "attn.compressor");
    for (long M = 0; M < c->n_compress_ratios && !any; M++) any = c->compress_ratios[M] > 0;
    if (!any) return 0;
    const long n = c->n_layer_types ? c->n_layer_types : c->n_compress_ratios;
    for (long L = 0; L < n && L < c->num_hidden_layers; L++) {
        if (!layer_has(r, L, "")) continue;
        const char *t = c->n_layer_types ? c->layer_types[L] : NULL;
        const double tr = t ? type_rate(r, t) : -1;
        if (t && tr < 0) continue; /* a type of another family */
        if (t && L < c->n_compress_ratios && (double)c->compress_ratios[L] != tr)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: layer_types[%ld] is %s (compress rate %.0f), but compress_ratios[%ld] "
                           "is %lld: transformers reads the first, DeepSeek's and vLLM's code the second, and they build different "
                           "attention", dir, L, t, tr, L, (long long)c->compress_ratios[L]);
        const double rate = t ? tr : (double)c->compress_ratios[L];
        char what[96];
        if (t) snprintf(what, sizeof what, "layer_types[%ld] is %s", L, t);
        else snprintf(what, sizeof what, "compress_ratios[%ld] is %.0f", L, rate);
        const int comp = layer_has(r, L, "self_attn.compressor") || layer_has(r, L, "attn.compressor");
        if (comp != (rate > 0))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s, but the checkpoint's layer %ld %s compressor: the config does "
                           "not describe these weights", dir, what, L, comp ? "holds a" : "has no");
        /* the indexer: CSA's (rate 4 in DeepSeek's code, which builds one only there) */
        const int csa = t ? !strcmp(t, "compressed_sparse_attention") : rate == 4;
        const int idx = layer_has(r, L, "self_attn.compressor.indexer") || layer_has(r, L, "attn.indexer");
        if (comp && idx != csa)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s, but the checkpoint's layer %ld %s Lightning indexer (%s): the "
                           "config does not describe these weights", dir, what, L, idx ? "holds a" : "has no",
                           csa ? "compressed sparse attention selects through one" : "only compressed sparse attention has one");
    }
    return 0;
}

/* Qwen3-Next's (and Qwen3.5's) hybrid attention: layer_types (else full_attention_interval, as
 * transformers derives it: full where (L + 1) % interval == 0, default 4) says which layers are Gated
 * DeltaNet (linear_attention: linear_attn.*) and which softmax attention (full_attention:
 * self_attn.*). The replay follows the tensors, a loader the config: they must agree. */
static int check_hybrid_attention(const nd_run *r, nd_err *e) {
    json_t *j = (json_t *)r->cfg->json;
    double nl = 0;
    if (!j || nd_cfg_number(r->cfg, "num_hidden_layers", &nl) || !(nl > 0) || nl > 4096) return 0;
    json_t *lt = json_object_get(j, "layer_types");
    int any_linear = 0;
    for (long L = 0; L < (long)nl && !any_linear; L++) any_linear = layer_has(r, L, "linear_attn");
    json_t *fai = json_object_get(j, "full_attention_interval");
    if (!any_linear && !fai) return 0; /* not a hybrid model */
    double interval = 4;
    if (fai && (!json_is_integer(fai) || json_integer_value(fai) < 1 || json_integer_value(fai) > 4096))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: full_attention_interval is not a whole number of at least 1",
                       nd_ckpt_dir(r->ck));
    if (fai) interval = (double)json_integer_value(fai);
    const int listed = json_is_array(lt);
    if (listed && json_array_size(lt) < (size_t)nl)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: layer_types has %zu entries for %.0f layers", nd_ckpt_dir(r->ck),
                       json_array_size(lt), nl);
    for (long L = 0; L < (long)nl; L++) {
        int full;
        if (listed) {
            json_t *x = json_array_get(lt, (size_t)L);
            const char *t = json_is_string(x) ? json_string_value(x) : "";
            if (strcmp(t, "linear_attention") && strcmp(t, "full_attention"))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: layer_types[%ld] is '%.40s', not linear_attention or "
                               "full_attention (a hybrid model's layers are one or the other)", nd_ckpt_dir(r->ck), L, t);
            full = !strcmp(t, "full_attention");
        } else {
            full = (L + 1) % (long)interval == 0;
        }
        const int lin = layer_has(r, L, "linear_attn"), soft = layer_has(r, L, "self_attn");
        if (!lin && !soft) continue; /* a layer the checkpoint holds nothing of: judged where read */
        if (full ? (lin && !soft) : (soft && !lin)) {
            char what[80];
            if (listed) snprintf(what, sizeof what, "layer_types[%ld] is %s", L, full ? "full_attention" : "linear_attention");
            else snprintf(what, sizeof what, "full_attention_interval %.0f makes layer %ld %s", interval, L,
                          full ? "full attention" : "linear attention");
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s, but the checkpoint's layer %ld holds %s: the config "
                           "does not describe these weights", nd_ckpt_dir(r->ck), what, L,
                           lin ? "Gated DeltaNet (linear_attn) tensors" : "softmax attention (self_attn) tensors");
        }
    }
    return 0;
}

int nd_run_check_structure(const nd_run *r, nd_err *e) {
    ND_TRY(check_widths(r, e));
    ND_TRY(check_hybrid_attention(r, e));
    return check_layer_kinds(r, e);
}

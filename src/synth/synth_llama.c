/* synth_llama.c — dense Llama parameter sets (GQA) and tensor plan. full = Llama-3.1-8B dims. */
#include <stdio.h>
#include "synth/synth_json.h"
#include "synth/synth_plan.h"

typedef struct llama_dims {
    int64_t vocab, hidden, layers, heads, kv_heads, head_dim, inter;
    double rope_theta;
} llama_dims;

/*                              vocab   hidden L   H   kvH  hd   inter   rope_theta */
static const llama_dims LLAMA[] = {
    [ND_SYNTH_TINY]  = {256,     64,    2,  4,  2,   16,  128,    10000.0},
    [ND_SYNTH_SMALL] = {1024,    256,   4,  8,  4,   32,  512,    10000.0},
    [ND_SYNTH_FULL]  = {128256,  4096,  1,  32, 8,   128, 14336,  500000.0},
};

static const char *const LLAMA_CT_IGNORE[] = {"lm_head", NULL};
static const char *const LLAMA_MO_EXCLUDE[] = {"lm_head", NULL};

static json_t *llama_config(const llama_dims *d, int64_t layers) {
    json_t *c = json_object();
    sy_config_head(c, "LlamaForCausalLM", "llama", d->vocab, d->hidden);
    sy_ji(c, "intermediate_size", d->inter);
    sy_ji(c, "num_hidden_layers", layers);
    sy_ji(c, "num_attention_heads", d->heads);
    sy_ji(c, "num_key_value_heads", d->kv_heads);
    sy_ji(c, "head_dim", d->head_dim);
    sy_js(c, "hidden_act", "silu");
    sy_jf(c, "rms_norm_eps", 1e-5);
    sy_jf(c, "rope_theta", d->rope_theta);
    sy_ji(c, "max_position_embeddings", 8192);
    sy_jb(c, "attention_bias", 0);
    sy_jb(c, "mlp_bias", 0);
    sy_jb(c, "tie_word_embeddings", 0);
    sy_js(c, "torch_dtype", "bfloat16");
    return c;
}

int sy_build_llama(sy_plan *pl, nd_synth_size size, int layers, nd_err *e) {
    const llama_dims *d = &LLAMA[size];
    const int64_t L = layers > 0 ? layers : d->layers, D = d->hidden, hd = d->head_dim;
    char nm[SY_NAME], pre[48];
    sy_plan_begin(pl, "llama", L, d->vocab, D, LLAMA_CT_IGNORE, LLAMA_MO_EXCLUDE);
    for (int l = 0; l < (int)L; l++) {
        snprintf(pre, sizeof pre, "model.layers.%d", l);
        snprintf(nm, sizeof nm, "%s.input_layernorm.weight", pre);
        sy_add_norm(pl, nm, D);
        int qkv = sy_new_fuse(pl); /* vLLM's qkv_proj: one weight global scale for q, k, v */
        snprintf(nm, sizeof nm, "%s.self_attn.q_proj", pre);
        sy_add_linear(pl, nm, d->heads * hd, D, 1.0, SY_Q_NVFP4, qkv, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.k_proj", pre);
        sy_add_linear(pl, nm, d->kv_heads * hd, D, 1.0, SY_Q_NVFP4, qkv, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.v_proj", pre);
        sy_add_linear(pl, nm, d->kv_heads * hd, D, 1.0, SY_Q_NVFP4, qkv, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.o_proj", pre);
        sy_add_linear(pl, nm, D, d->heads * hd, 0.5, SY_Q_NVFP4, -1, l, -1);
        snprintf(nm, sizeof nm, "%s.post_attention_layernorm.weight", pre);
        sy_add_norm(pl, nm, D);
        snprintf(nm, sizeof nm, "%s.mlp", pre);
        sy_add_mlp(pl, nm, d->inter, D, l, -1);
    }
    return sy_plan_end(pl, D, llama_config(d, L), e);
}

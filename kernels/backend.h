/* backend.h — the compute interface the pipeline and the probes call (ggml-style).
 *
 * A backend owns memory and runs ops on buffers it allocated. Pointers passed to ops are
 * backend pointers (host memory for the CPU backend, device memory for CUDA); `*_host`
 * arguments are always host memory. Every op returns 0 or an nd_exit code with e->msg set
 * ("cuda: file.cu:123: what failed"); an op a backend lacks returns ND_EXIT_INTERNAL with
 * "unsupported", it is never faked.
 *
 * Conventions
 *  - Activations are float32, row-major. The pipeline rounds to BF16 (round_bf16) where the
 *    model rounds; ops themselves compute in FP32 and never round unless stated.
 *  - Matrices: x [M,K] (tokens x features), weights w [N,K] (out x in, the checkpoint layout),
 *    y = x @ w^T [M,N].
 *  - NVFP4 operands: packed codes [R, K/2] (element 2j in the low nibble of byte j), block
 *    scales [R, K/16] e4m3 bytes in the linear (row-major) layout. K % 16 == 0.
 *  - Reductions that feed the trace (nd_cmp) accumulate in double.
 *
 * kernels/cpu/ implements every op (the reference); kernels/cuda/ implements the same ops and is
 * checked against the CPU by tests/test_backend_ops.c. Both read kernels/numerics/nd_numerics.h.
 */
#ifndef ND_BACKEND_H
#define ND_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "../src/util/err.h"
#include "numerics/nd_dtype.h"
#include "numerics/nd_logits.h"
#include "backend_dtype.h"

/* Result of the fused comparison probe: one pass over (ref, prod). Sums skip non-finite
 * elements; counts include them. With prod == NULL only the ref_* fields are filled. */
typedef struct nd_cmp {
    int64_t n;
    double ref_amax, prod_amax;           /* max |x| over finite elements */
    int64_t ref_nan, prod_nan, ref_inf, prod_inf;
    double sum_rr, sum_pp, sum_rp;        /* Σ ref², Σ prod², Σ ref·prod (both finite) */
    double sum_ee;                        /* Σ (ref-prod)² (both finite) */
    double max_abs_err;
    /* the worst block of `block` consecutive elements by Σ(ref-prod)² (block index, its error
     * energy and the ref energy of that block); -1 when n == 0 */
    int64_t worst_block;
    double worst_block_ee, worst_block_rr;
} nd_cmp;

/* Statistics of one NVFP4 activation quantization (host). */
typedef struct nd_qstats {
    int64_t n_elems;
    int64_t n_saturated;     /* |x·mult| > 6 before rounding (SPEC §6 sat_frac numerator) */
    int64_t n_blocks;
    int64_t n_nonzero_blocks;/* blocks with amax > 0 */
    int64_t n_zero_scale;    /* non-zero blocks whose stored e4m3 scale is 0 */
    int64_t n_scale_448;     /* blocks whose stored scale is 448 (clipped or exactly at the top) */
    int64_t n_nan_scale;     /* blocks whose scale is NaN (NaN input or NaN multiplier) */
} nd_qstats;

/* enum nd_fp8_scale_kind: numerics/nd_dtype.h (the checkpoint loader names them too) */

enum nd_score_func { ND_SCORE_SOFTMAX = 0, ND_SCORE_SIGMOID = 1, ND_SCORE_SQRTSOFTPLUS = 2 };
/* how gemm / gemm_grouped may sum (their comment below) */
enum nd_gemm_mode { ND_GEMM_F32 = 0, ND_GEMM_BF16_EXACT = 1, ND_GEMM_ORDERED = 2 };

/* Router description: scores from logits, selection on scores + bias, optional expert groups. */
typedef struct nd_router_cfg {
    int n_experts, top_k;
    int score_func;            /* nd_score_func */
    int n_group, topk_group;   /* 0/0: no groups. Group score = sum of top-2 selection scores */
    int norm_topk;             /* divide the picked scores by their sum */
    float scaling;             /* routed_scaling_factor, applied after normalisation */
    int bf16_steps;            /* scores and weights rounded to BF16 as transformers' DeepSeek-V4 router
                                * (numerics/nd_router_rule.h); 0: FP32 */
} nd_router_cfg;

typedef struct nd_backend nd_backend;

/* The compute ops, one X(name, dtypes, (parameters)) each, every one returning 0 or an nd_exit code.
 * dtypes: the element types (backend_dtype.h) the op reads or writes; each backend declares which of
 * them it supports in nd_backend.op_dtypes (both backends: all of them). ND_BACKEND_OPS holds the
 * generic ops; ND_BACKEND_FAMILY_OPS the compositions only one model family uses, each with the
 * recipes (recipes/<name>.yaml) that need it. ND_BACKEND_ALL_OPS, both lists, is the only place an
 * op is declared: the members of struct nd_backend, the CPU functions nd_cpu_<name>
 * (kernels/cpu/cpu_internal.h), the CUDA functions nd_cuda_<name> (kernels/cuda/cuda_common.cuh),
 * both backends' tables (ND_BACKEND_SET_OP), the op enum ND_OP_<name> and the names and capability
 * queries below are generated from it; tests/backend/test_backend_ops.c fails when an op, or a
 * dtype an op declares, has no cross-backend case. */
#define ND_BACKEND_OPS(X) \
    /* 2-D float copy: rows of `width` floats from src (row pitch spitch floats) to dst (dpitch). */ \
    X(copy2d, ND_ODT_F32, (nd_backend *b, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width, \
        int64_t rows, nd_err *e)) \
 \
    /* ---- weight decoding (inputs are checkpoint bytes uploaded unchanged) ---- */ \
    /* out[r,k] = e2m1(code[r,k]) * e4m3(sf[r,k/16]) / global_div. Used for weights and for \
     * quantized activations alike. */ \
    X(dequant_nvfp4, ND_ODT_NVFP4 | ND_ODT_F32, (nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div, int64_t rows, \
        int64_t k, float *out, nd_err *e)) \
    /* MXFP4: out = e2m1(code) * e8m0(sf[r,k/32]). */ \
    X(dequant_mxfp4, ND_ODT_MXFP4 | ND_ODT_F32, (nd_backend *b, const uint8_t *packed, const uint8_t *sf, int64_t rows, int64_t k, \
        float *out, nd_err *e)) \
    /* FP8 e4m3 weight times its scale (nd_fp8_scale_kind; bn/bk block sizes for block kinds). */ \
    X(dequant_fp8, ND_ODT_E4M3 | ND_ODT_F32 | ND_ODT_E8M0, (nd_backend *b, const uint8_t *w, const void *scale, int scale_kind, int bn, int bk, \
        int64_t rows, int64_t k, float *out, nd_err *e)) \
    /* BF16/F16/F32 -> F32. */ \
    X(to_f32, ND_ODT_F32 | ND_ODT_BF16 | ND_ODT_F16, (nd_backend *b, const void *src, nd_dtype dt, int64_t n, float *out, nd_err *e)) \
 \
    /* ---- activation quantization ---- */ \
    /* NVFP4 16-blocks of x [rows,k] with quantizer multiplier g (2688/amax when healthy) in \
     * semantics sem (ND_QSEM_*): codes [rows,k/2], sf [rows,k/16] linear. stats_host may be NULL. */ \
    X(quant_nvfp4, ND_ODT_F32 | ND_ODT_NVFP4, (nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k, uint8_t *codes, \
        uint8_t *sf, nd_qstats *stats_host, nd_err *e)) \
    /* MXFP4 32-blocks of x [rows,k] under the block-scale rule sem (nd_mxsem, numerics): codes \
     * [rows,k/2] (element 2j in the low nibble), E8M0 scale bytes sf [rows,k/32]. stats_host may be \
     * NULL (n_scale_448 and n_zero_scale stay 0; n_nan_scale counts 0xFF bytes). */ \
    X(quant_mxfp4, ND_ODT_F32 | ND_ODT_MXFP4, (nd_backend *b, const float *x, int sem, int64_t rows, int64_t k, uint8_t *codes, uint8_t *sf, \
        nd_qstats *stats_host, nd_err *e)) \
    /* FP8 e4m3 quantize-dequantize in groups of `group` consecutive columns: scale = amax/448, \
     * or 2^ceil(log2(max(amax,1e-4)/448)) when pow2; satfinite. In place allowed (x == out). */ \
    X(fake_quant_fp8, ND_ODT_F32 | ND_ODT_E4M3, (nd_backend *b, const float *x, int64_t rows, int64_t k, int group, int pow2, float *out, \
        nd_err *e)) \
    /* FP8 KV cache round trip of n values (numerics nd_kv_fp8): out = e4m3_satfinite(x / \
     * write_scale) * read_scale. In place allowed (x == out). */ \
    X(kv_fp8, ND_ODT_F32 | ND_ODT_E4M3, (nd_backend *b, const float *x, int64_t n, float write_scale, float read_scale, float *out, \
        nd_err *e)) \
    /* Linear [rows, k/16] scales <-> the 128x4 swizzled layout (nd_sf_swizzle_offset); the \
     * swizzled buffer holds nd_sf_swizzled_bytes(rows,k) bytes, padding zero. */ \
    X(swizzle_sf, ND_ODT_E4M3, (nd_backend *b, const uint8_t *linear, int64_t rows, int64_t k, uint8_t *swz, nd_err *e)) \
    X(unswizzle_sf, ND_ODT_E4M3, (nd_backend *b, const uint8_t *swz, int64_t rows, int64_t k, uint8_t *linear, nd_err *e)) \
 \
    /* ---- GEMM ---- */ \
    /* y[m,n] = alpha * Σ_k x[m,k] w[n,k], FP32 accumulation; mode (enum nd_gemm_mode): \
     * ND_GEMM_F32 sums in the backend's order; ND_GEMM_BF16_EXACT promises every operand is exactly \
     * representable in BF16 (dequantized FP4 x e4m3 values), which lets CUDA use BF16 tensor cores \
     * without changing any product; ND_GEMM_ORDERED sums each element in increasing k with every \
     * product and sum rounded alone, then times alpha (when not 1): the CPU's order, so every \
     * backend gives the same bits. The CPU sums in that order in every mode. */ \
    X(gemm, ND_ODT_F32 | ND_ODT_BF16, (nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t n, int64_t k, \
        float alpha, int mode, nd_err *e)) \
    /* Grouped: for g < groups, y[:, g, :] = alpha * x[:, g, :] @ w[g]^T with x [m, groups, k], \
     * w [groups, n, k], y [m, groups, n]. */ \
    X(gemm_grouped, ND_ODT_F32 | ND_ODT_BF16, (nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t groups, \
        int64_t n, int64_t k, float alpha, int mode, nd_err *e)) \
 \
    /* ---- elementwise and normalisation ---- */ \
    /* in place */ \
    X(round_bf16, ND_ODT_F32, (nd_backend *b, float *x, int64_t n, nd_err *e)) \
    /* x = f16(x) * scale in place: each value cast to IEEE half as a real cast does \
     * (nd_f16_from_f32: RNE, Inf from 65520 up), then one FP32 product. The epilogue of a kernel \
     * that casts its FP32 accumulator to FP16 before applying its global scale (stack profile \
     * `epilogue: fp16`, docs/stacks.md). */ \
    X(cast_f16_scale, ND_ODT_F32, (nd_backend *b, float *x, int64_t n, float scale, nd_err *e)) \
    /* x = x * s in place, one FP32 product per value (Gemma's embedding times sqrt(hidden_size)) */ \
    X(scale, ND_ODT_F32, (nd_backend *b, float *x, int64_t n, float s, nd_err *e)) \
    /* y = w ⊙ (x · rsqrt(mean(x²) + eps)) per row of d; w may be NULL (no weight). steps \
     * (nd_norm_steps, numerics/nd_bf16_steps.h): ND_NORM_FP32, or transformers' BF16 roundings of \
     * the Llama/V3 or the V4 unweighted RMSNorm. */ \
    X(rmsnorm, ND_ODT_F32, (nd_backend *b, const float *x, const float *w, float eps, int64_t rows, int64_t d, int steps, \
        float *y, nd_err *e)) \
    /* y += x (n elements). */ \
    X(add, ND_ODT_F32, (nd_backend *b, float *y, const float *x, int64_t n, nd_err *e)) \
    /* y[r, c] += bias[c] for an [rows, cols] y (a linear layer's bias, before its output rounding). */ \
    X(add_bias, ND_ODT_F32, (nd_backend *b, float *y, const float *bias, int64_t rows, int64_t cols, nd_err *e)) \
    /* y[r, c] = x[r, c] * s[c] for an [rows, cols] x, one FP32 product per value (AWQ's pre_quant_scale \
     * on a linear's input). In place allowed (x == y). */ \
    X(mul_cols, ND_ODT_F32, (nd_backend *b, const float *x, const float *s, int64_t rows, int64_t cols, float *y, nd_err *e)) \
    /* h = silu(min(g, limit)) * clamp(v, -limit, limit); limit <= 0: no clamp. bf16_steps: silu(g) \
     * rounded to BF16 before the product (nd_swiglu_elem). */ \
    X(swiglu, ND_ODT_F32, (nd_backend *b, const float *g, const float *v, int64_t n, float limit, int bf16_steps, float *h, \
        nd_err *e)) \
 \
    /* Rotary embedding in place on x [rows, heads, d], dims [rot_off, rot_off+rot_dim) of each \
     * head. pos_host [rows] positions, inv_freq_host [rot_dim/2] frequencies (YaRN already applied). \
     * interleaved: pairs (2i, 2i+1) (GPT-J / DeepSeek); else halves (i, i+rot_dim/2) (NeoX/Llama). \
     * inverse: rotate by -angle. Angles are pos*inv_freq in FP32, cos/sin in FP32, each times mscale \
     * (YaRN's attention factor as transformers multiplies it into cos and sin; 1: none) before steps \
     * (nd_rope_steps): ND_ROPE_FP32, or transformers' BF16 cos/sin (and BF16 products). */ \
    X(rope, ND_ODT_F32, (nd_backend *b, float *x, int64_t rows, int64_t heads, int64_t d, int64_t rot_off, int64_t rot_dim, \
        const int32_t *pos_host, const float *inv_freq_host, int interleaved, int inverse, int steps, \
        float mscale, nd_err *e)) \
 \
    /* Causal attention with optional sliding window and sinks. q [t, hq, d], k [s, hkv, d], \
     * v [s, hkv, dv]; query head h uses kv head h / (hq/hkv). Key j is visible to query i iff \
     * kpos[j] <= qpos[i] and (window == 0 || qpos[i] - kpos[j] < window). Scores in FP32 times \
     * scale; sinks_host [hq] (may be NULL) join only the softmax denominator. out [t, hq, dv]. \
     * A query with no visible key and no sink gets zeros. bf16_steps: transformers' eager \
     * attention of a BF16 model: score = bf16(bf16(q·k) · scale), probabilities rounded to BF16 \
     * before p·v (nd_attn_score, nd_attn_prob); 2: also, with sinks, each logit minus the max rounded \
     * to BF16 before the exponential (GptOssAttention, nd_attn_exp). */ \
    X(attention, ND_ODT_F32, (nd_backend *b, const float *q, const float *k, const float *v, int64_t t, int64_t s, \
        int64_t hq, int64_t hkv, int64_t d, int64_t dv, const int32_t *qpos_host, const int32_t *kpos_host, \
        int64_t window, float scale, const float *sinks_host, int bf16_steps, float *out, nd_err *e)) \
 \
    /* ---- MoE ---- */ \
    /* logits [t, E] (FP32) -> idx [t, top_k] (int32, descending selection score), w [t, top_k]. \
     * Selection uses score + bias (bias may be NULL); weights use the score alone. */ \
    X(router_topk, ND_ODT_F32 | ND_ODT_I32, (nd_backend *b, const float *logits, const float *bias, int64_t t, const nd_router_cfg *cfg, \
        int32_t *idx, float *w, nd_err *e)) \
    /* out[r] = x[rows_host[r]] for r < nr (dispatch). */ \
    X(gather_rows, ND_ODT_F32, (nd_backend *b, const float *x, const int32_t *rows_host, int64_t nr, int64_t d, float *out, \
        nd_err *e)) \
    /* y[rows_host[r]] += w_host[r] * x[r] for r < nr, in order of r (combine). bf16_products: each \
     * w·x rounded to BF16 before the FP32 sum (nd_combine_term). */ \
    X(scatter_add_rows, ND_ODT_F32, (nd_backend *b, float *y, const float *x, const int32_t *rows_host, const float *w_host, \
        int64_t nr, int64_t d, int bf16_products, nd_err *e)) \
 \
    /* ---- probes ---- */ \
    /* Fused single-pass comparison of ref and prod (prod may be NULL); worst block over `block` \
     * consecutive elements. Result on the host. */ \
    X(compare, ND_ODT_F32, (nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block, nd_cmp *out_host, \
        nd_err *e)) \
    /* The head probe: per position r < rows of two [rows, cols] logits tensors, KL(softmax ref || \
     * softmax prod) and each side's top-1 (numerics/nd_logits.h) into out_host[r]; complete on return. */ \
    X(logits_kl, ND_ODT_F32, (nd_backend *b, const float *ref, const float *prod, int64_t rows, int64_t cols, \
        nd_logits_row *out_host, nd_err *e)) \
 \
    /* ---- gating (Qwen3-Next's gated attention and RMSNormGated, numerics/nd_gdn.h) ---- */ \
    /* out[r, j] = x[r, j] · act(g[r, j / (cols/gcols)]) for x [rows, cols], g [rows, gcols] \
     * (cols % gcols == 0; gcols == cols elementwise, 1 one gate per row); act nd_gate_act; \
     * bf16_act: act(g) rounded to BF16 before the product (nd_gate_elem). In place allowed. */ \
    X(gate_mul, ND_ODT_F32, (nd_backend *b, const float *x, const float *g, int64_t rows, int64_t cols, int64_t gcols, \
        int act, int bf16_act, float *out, nd_err *e))

/* The model-specific ops: F(X, name, "recipes using it", dtypes, (parameters)). A new family's
 * composition is built from the generic ops in its recipe where it can; an op goes here only when
 * it cannot (a recurrence, a fused selection) and names the recipes that need it. */
#define ND_BACKEND_FAMILY_OPS(F, X) \
    /* ---- gpt-oss ---- */ \
    /* gpt-oss's clamped SwiGLU: g' = min(g, limit), v' = clamp(v, -limit, limit) (limit <= 0: no \
     * clamp), h = (v' + 1) * (g' * sigmoid(alpha * g')). bf16_steps: each step rounded to BF16 as \
     * GptOssExperts._apply_gate on BF16 tensors (nd_swiglu_oai_elem). */ \
    F(X, swiglu_oai, "gpt_oss", ND_ODT_F32, (nd_backend *b, const float *g, const float *v, int64_t n, float alpha, float limit, \
        int bf16_steps, float *h, nd_err *e)) \
 \
    /* ---- manifold-constrained hyper-connections (DeepSeek-V4, research/model-arch.md §3.2) ---- \
     * X [t, n, dm] streams. mix = (2+n)*n. fn [mix, n*dm], base [mix], scale_host [3]. \
     * rho = rsqrt(Σx²/(n·dm) + rms_eps) over the flattened streams; m = rho·(fn @ x); \
     * pre_i = σ(scale0·m_i + base_i) + hc_eps; post_i = 2σ(scale1·m_{n+i} + base_{n+i}); \
     * comb = Sinkhorn(softmax_row(scale2·m_{2n+i·n+j} + base) + hc_eps) with `iters` total \
     * normalisations rounds (first: column; then iters-1 × (row, column)), each dividing by \
     * (sum + hc_eps). u = Σ_i pre_i X_i. Outputs u [t, dm], post [t, n], comb [t, n, n]. */ \
    F(X, hc_pre, "deepseek_v4", ND_ODT_F32, (nd_backend *b, const float *X, const float *fn, const float *base, const float *scale_host, \
        int64_t t, int64_t n, int64_t dm, int iters, float rms_eps, float hc_eps, float *u, float *post, \
        float *comb, nd_err *e)) \
    /* Xout[j] = post_j · y + Σ_i comb[i,j] · X[i]. bf16_steps: post and comb rounded to BF16, the \
     * product and the mix each rounded before their sum (nd_hc_post_coef, nd_hc_post_join). */ \
    F(X, hc_post, "deepseek_v4", ND_ODT_F32, (nd_backend *b, const float *X, const float *y, const float *post, const float *comb, int64_t t, \
        int64_t n, int64_t dm, int bf16_steps, float *Xout, nd_err *e)) \
    /* hc_head: fn [n, n*dm], base [n], scale_host [1]; pre_i = σ(scale0·m_i + base_i) + hc_eps; \
     * u = Σ_i pre_i X_i. */ \
    F(X, hc_head, "deepseek_v4", ND_ODT_F32, (nd_backend *b, const float *X, const float *fn, const float *base, const float *scale_host, \
        int64_t t, int64_t n, int64_t dm, float rms_eps, float hc_eps, float *u, nd_err *e)) \
 \
    /* ---- DeepSeek-V4 compressed sparse attention (docs/reference-notes.md (d)) ---- \
     * A backend that lacks one leaves it NULL; the pipeline then fails the stage with \
     * "<backend>: op <name> unsupported". */ \
    /* KV compressor pooling over windows of `rate` source rows. kv, gate [s, w*d] with w = 2 when \
     * overlap (columns [0,d) = the Ca series, [d,2d) = Cb) and w = 1 otherwise; pbias_host [rate, w*d] \
     * FP32. n_win = s / rate entries (the tail s % rate rows are ignored). Entry e, channel c pools \
     * the slots j < rate of window e: value kv[e*rate+j, (w-1)*d+c], logit gate[same] + pbias[j, (w-1)*d+c]; \
     * with overlap also the slots j < rate of window e-1 (none for e = 0): value kv[(e-1)*rate+j, c], \
     * logit gate[same] + pbias[j, c]. p = softmax of the logits over the slots (FP32); \
     * out[e, c] = Σ_slots value·p summed in FP32. bf16_steps: p and every product value·p are rounded \
     * to BF16 before the sum (transformers' BF16 model); the sum itself is not rounded. out [n_win, d]. */ \
    F(X, compress_pool, "deepseek_v4", ND_ODT_F32, (nd_backend *b, const float *kv, const float *gate, const float *pbias_host, int64_t s, \
        int64_t d, int64_t rate, int overlap, int bf16_steps, float *out, nd_err *e)) \
    /* Lightning indexer. q [t, h, c], k [nc, c], wts [t, h]. Entry w is visible to query i iff \
     * w < (qpos_host[i] + 1) / rate (integer division). For visible w: \
     * score[i, w] = Σ_h max(q[i,h]·k[w], 0) · scale · wts[i,h] · wscale (dots, products and the sum in \
     * FP32); invisible entries get score 0. idx [t, topk] (int32, backend memory, topk <= nc): the set \
     * torch.topk picks on the CPU from the scores with invisible entries at -inf (ties included: see \
     * kernels/cpu/cpu_indexer.c), in no promised order, each invisible pick replaced by -1. \
     * scores [t, nc]. */ \
    F(X, indexer_topk, "deepseek_v4", ND_ODT_F32 | ND_ODT_I32, (nd_backend *b, const float *q, const float *k, const float *wts, int64_t t, int64_t nc, \
        int64_t h, int64_t c, float scale, float wscale, const int32_t *qpos_host, int64_t rate, int64_t topk, \
        float *scores, int32_t *idx, nd_err *e)) \
    /* Attention of DeepSeek-V4 CSA/HCA layers: one shared KV head read as key and value. q [t, hq, d]; \
     * kv [s, d] window rows at kpos_host[s]; ckv [nc, d] compressed entries. Window row j is visible \
     * to query i as in `attention` (kpos <= qpos, qpos - kpos < window when window > 0); compressed \
     * entry w iff w < (qpos_host[i] + 1) / rate and, when sel != NULL, w is one of sel[i, 0..nsel) \
     * (int32, backend memory, -1 = no entry). One softmax in FP32 over both sets with sinks_host [hq] \
     * (may be NULL) in the denominator only, exactly as `attention` (bf16_steps included); out [t, hq, d]. */ \
    F(X, attention_compressed, "deepseek_v4", ND_ODT_F32 | ND_ODT_I32, (nd_backend *b, const float *q, const float *kv, const float *ckv, int64_t t, \
        int64_t s, int64_t nc, int64_t hq, int64_t d, const int32_t *qpos_host, const int32_t *kpos_host, \
        int64_t window, float scale, const float *sinks_host, int64_t rate, const int32_t *sel, int64_t nsel, \
        int bf16_steps, float *out, nd_err *e)) \
    /* ---- Gated DeltaNet (Qwen3-Next linear attention, numerics/nd_gdn.h) ---- */ \
    /* Causal depthwise conv over the rows (tokens) of x [t, c] with w [c, kern]: \
     * acc[i, ch] = Σ_{j<kern} w[ch, j] · x[i - kern + 1 + j, ch] (rows before 0 are zero, summed \
     * in increasing j), out = nd_conv_act(acc, silu, bf16_steps). */ \
    F(X, causal_conv1d, "qwen3_next qwen3_5_moe", ND_ODT_F32, (nd_backend *b, const float *x, const float *w, int64_t t, int64_t c, int64_t kern, \
        int silu, int bf16_steps, float *out, nd_err *e)) \
    /* Gated delta rule over t tokens (prefill, zero initial state). q, k [t, nk, dk]; v [t, nv, dv]; \
     * a, bb [t, nv] (pre-activation decay input and beta logit); a_log_host, dt_bias_host [nv]. \
     * Value head h reads key head h / (nv/nk). Per token: q, k L2-normalised (nd_l2_inv), q times \
     * dk^-0.5; decay = nd_gdn_decay, beta = nd_gdn_beta(bb, bf16_steps); for each column j of the \
     * state S [dk, dv] of head h: S[:,j] *= decay; kv = Σ_i S[i,j] k_i; delta = (v_j - kv)·beta; \
     * S[i,j] += k_i·delta; out[t, h, j] = Σ_i S[i,j] q_i (sums in FP32, increasing i). */ \
    F(X, gated_delta_rule, "qwen3_next qwen3_5_moe", ND_ODT_F32, (nd_backend *b, const float *q, const float *k, const float *v, const float *a, \
        const float *bb, const float *a_log_host, const float *dt_bias_host, int64_t t, int64_t nk, int64_t nv, \
        int64_t dk, int64_t dv, int bf16_steps, float *out, nd_err *e))

#define ND_FAMILY_AS_OP(X, name, recipes, dtypes, params) X(name, dtypes, params)
/* Every op: the generic ones, then the family ones. */
#define ND_BACKEND_ALL_OPS(X) ND_BACKEND_OPS(X) ND_BACKEND_FAMILY_OPS(ND_FAMILY_AS_OP, X)

#define ND_OP_ENUM(name, dtypes, params) ND_OP_##name,
enum nd_backend_op { ND_BACKEND_ALL_OPS(ND_OP_ENUM) ND_OP_COUNT };
#undef ND_OP_ENUM

#define ND_BACKEND_MEMBER(name, dtypes, params) int(*name) params;

struct nd_backend {
    const char *name;          /* "cpu", "cuda" */
    char device[128];          /* human-readable device description */
    void *impl;

    void (*destroy)(nd_backend *b);

    /* ---- memory ---- */
    void *(*alloc)(nd_backend *b, size_t bytes, nd_err *e);          /* NULL on failure */
    void (*release)(nd_backend *b, void *p);
    int (*upload)(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e);
    /* Host memory that uploads read fastest from (CUDA: pinned; CPU: malloc). A backend whose
     * uploads gain from it (staging_pays = 1) gets the next routed expert's bytes copied there
     * ahead of time on a host thread (src/pipeline/prefetch.c). */
    void *(*host_alloc)(nd_backend *b, size_t bytes, nd_err *e);     /* NULL on failure */
    void (*host_free)(nd_backend *b, void *p);
    int staging_pays;
    int (*download)(nd_backend *b, void *dst_host, const void *src, size_t bytes, nd_err *e);
    int (*copy)(nd_backend *b, void *dst, const void *src, size_t bytes, nd_err *e);
    int (*sync)(nd_backend *b, nd_err *e);
    /* Probe results kept on the device: while defer_results is set (by the caller), compare and
     * quant_nvfp4 may return before writing their nd_cmp / nd_qstats, and flush_results writes
     * all of those with one device-to-host copy (a backend may also flush on its own, e.g. when
     * its result buffer is full); the *_host pointers must stay valid until then. A layer's probes
     * then cost one download instead of one round trip each. The CPU backend writes results at
     * once; its flush_results does nothing. */
    int defer_results;
    int (*flush_results)(nd_backend *b, nd_err *e);
    /* ---- compute ops: ND_BACKEND_ALL_OPS above ---- */
    ND_BACKEND_ALL_OPS(ND_BACKEND_MEMBER)
    /* the element types (backend_dtype.h flags) this backend supports per op (enum nd_backend_op);
     * set with the op by ND_BACKEND_SET_OP, narrowed by a backend that lacks one (with a comment) */
    unsigned op_dtypes[ND_OP_COUNT];
};

/* In a backend's constructor (its nd_backend *b), with ND_OP_IMPL(name) defined as the name of its
 * function for op `name`: ND_BACKEND_ALL_OPS(ND_BACKEND_SET_OP) fills the table and declares the
 * list's dtypes for every op. */
#define ND_BACKEND_SET_OP(name, dtypes, params) b->name = ND_OP_IMPL(name); b->op_dtypes[ND_OP_##name] = (dtypes);

/* The ops by index (enum nd_backend_op: ND_BACKEND_ALL_OPS order), their count, and whether
 * backend b implements op i. */
int nd_backend_op_count(void);
const char *nd_backend_op_name(int i);
int nd_backend_has_op(const nd_backend *b, int i);
/* The index of the op called name; -1 if there is none. */
int nd_backend_op_index(const char *name);
/* The recipes (space-separated stems of recipes/<stem>.yaml) that need a family op; NULL for a
 * generic op (ND_BACKEND_OPS). */
const char *nd_backend_op_family(int i);
/* The dtypes (backend_dtype.h flags) the list declares for op i: what both backends support. */
unsigned nd_backend_op_declared(int i);
/* The dtypes backend b supports for op i (0 when it lacks the op). */
unsigned nd_backend_op_dtypes(const nd_backend *b, int i);
/* 1 if b implements op i and supports every dtype flag in `dtypes`. */
int nd_backend_supports(const nd_backend *b, int i, unsigned dtypes);
/* 0 if nd_backend_supports(b, i, dtypes), else ND_EXIT_INTERNAL with "<backend>: op <name> does
 * not support <dtype>": an op called with a dtype its backend does not declare is a caller's bug
 * (exit 3). Callers whose dtype comes from a checkpoint ask nd_backend_supports first and fail
 * with exit 2 naming the file and the tensor (src/pipeline/weights.c). */
int nd_backend_require(const nd_backend *b, int i, unsigned dtypes, nd_err *e);
/* The same for a checkpoint dtype (nd_op_dtype_of); a dtype no op reads is named by its number. */
int nd_backend_require_dt(const nd_backend *b, int i, nd_dtype dt, nd_err *e);

/* Constructors. nd_backend_cuda_create returns ND_EXIT_BADINPUT with "no CUDA device" (and a
 * distinct message when the build has no CUDA) so callers can fall back or skip. */
int nd_backend_cpu_create(nd_backend **out, nd_err *e);
int nd_backend_cuda_create(nd_backend **out, int device, nd_err *e);
/* 1 if this build contains the CUDA backend and a device is visible. */
int nd_backend_cuda_available(void);

#endif

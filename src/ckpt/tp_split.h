/* tp_split.h — `inspect --tp N`: how tensor parallelism splits each NVFP4 linear, and which splits
 * leave a partial 16-block or a kernel-tile remainder on some rank (the static face of
 * padding_scale_contamination, research/field-bug-reports.md C22, C23, A8-A10, A33).
 *
 *   column-parallel (q/k/v, gate/up, q_b/kv_b, experts' w1/w3, ...): N is split, each rank holds N/tp
 *     rows and every 16-block of K whole;
 *   row-parallel (o_proj, down_proj, w2, wo_b, out_proj, wo): K is split, each rank holds K/tp columns
 *     and K/(16 tp) block scales per row;
 *   replicated (q_a_proj, kv_a_proj_with_mqa, wq_a, wkv, compressors and indexers): not split.
 * Findings, one per module kind (layers and experts collapsed), code padding_scale_contamination:
 *   all   N or K not divisible by tp, or K/tp not a multiple of 16: a block (and its scale) straddles
 *         two ranks; no loader can give each rank whole blocks
 *   none  N/tp or K/tp not a multiple of 32: the CUTLASS / FlashInfer FP4 GEMMs need both multiples of
 *         32 and vLLM pads the weight (pad_nvfp4_weight_for_cutlass) and the activation;
 *         N/tp not a multiple of 128 or K/(16 tp) not a multiple of 4: the swizzled 128x4 block-scale
 *         layout (scaled_fp4_quant, swizzle_blockscale) pads scale rows/columns that the kernels read:
 *         harmless when zeroed, NaN or garbage when left uninitialised (vLLM PR #45739, PR #30260). */
#ifndef ND_TP_SPLIT_H
#define ND_TP_SPLIT_H

#include "ckpt/ckpt.h"
#include "ckpt/findings.h"

typedef enum nd_tp_kind { ND_TP_REPLICATED = 0, ND_TP_COLUMN, ND_TP_ROW } nd_tp_kind;

/* How a module is split under tensor parallelism (by its name). */
nd_tp_kind nd_tp_kind_of(const char *path);
const char *nd_tp_kind_str(nd_tp_kind k);
/* The findings above for tp ranks (tp >= 1) over every NVFP4 linear of the checkpoint. */
/* The path with every ".<digits>." component replaced by ".#." ("layers.#.mlp.experts.#.up_proj"):
 * the same module in another layer or expert (also used by the audit, audit.c). */
void nd_ckpt_path_pattern(const char *path, char *out, size_t cap);
int nd_tp_check(const nd_ckpt *c, int tp, nd_findings *f, nd_err *e);

#endif

/* ops_compress.h — DeepSeek-V4 compressed attention stages (ops_compress.c). */
#ifndef ND_OPS_COMPRESS_H
#define ND_OPS_COMPRESS_H
#include "run.h"

/* compress: [kv, gate] projections -> pooled, kv_norm'ed, roped compressed entries [n_win, head_dim]. */
int nd_op_compress(nd_opctx *c, nd_err *e);
/* indexer: [q (roped), k entries, weights] -> index scores [t, n_win] with the top-k picks (idx). */
int nd_op_indexer(nd_opctx *c, nd_err *e);
/* attention_compressed: [q, kv, entries, (picks)] -> attention over the window and the entries. */
int nd_op_attention_compressed(nd_opctx *c, nd_err *e);
#endif

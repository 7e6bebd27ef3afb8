/* backend_ops.c — the op names and the capability query, generated from ND_BACKEND_OPS. */
#include "backend.h"
#include <stddef.h>

#define ND_OP_NAME(name, params) #name,
static const char *const NAMES[] = {ND_BACKEND_OPS(ND_OP_NAME)};
#undef ND_OP_NAME

int nd_backend_op_count(void) { return (int)(sizeof NAMES / sizeof NAMES[0]); }

const char *nd_backend_op_name(int i) { return i >= 0 && i < nd_backend_op_count() ? NAMES[i] : NULL; }

int nd_backend_has_op(const nd_backend *b, int i) {
    int k = 0;
    /* the i-th member of the list, by counting: one comparison per op, no offsets of function pointers */
#define ND_OP_HAS(name, params) if (k++ == i) return b->name != NULL;
    ND_BACKEND_OPS(ND_OP_HAS)
#undef ND_OP_HAS
    return 0;
}

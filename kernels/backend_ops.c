/* backend_ops.c — the op names, families, declared dtypes and the capability queries, generated
 * from ND_BACKEND_ALL_OPS (backend.h) and ND_OP_DTYPES (backend_dtype.h). */
#include "backend.h"
#include <stdio.h>
#include <string.h>

#define ND_OP_NAME(name, dtypes, params) #name,
static const char *const NAMES[] = {ND_BACKEND_ALL_OPS(ND_OP_NAME)};
#undef ND_OP_NAME

#define ND_OP_DECLARED(name, dtypes, params) (dtypes),
static const unsigned DECLARED[] = {ND_BACKEND_ALL_OPS(ND_OP_DECLARED)};
#undef ND_OP_DECLARED

/* the generic ops have no family: their entries stay NULL */
#define ND_OP_FAMILY(X, name, recipes, dtypes, params) [ND_OP_##name] = recipes,
static const char *const FAMILIES[ND_OP_COUNT] = {ND_BACKEND_FAMILY_OPS(ND_OP_FAMILY, _)};
#undef ND_OP_FAMILY

#define ND_ODT_NAME(N, s, dt, m) s,
static const char *const DT_NAMES[] = {ND_OP_DTYPES(ND_ODT_NAME)};
#undef ND_ODT_NAME
#define ND_ODT_MEANING(N, s, dt, m) m,
static const char *const DT_MEANINGS[] = {ND_OP_DTYPES(ND_ODT_MEANING)};
#undef ND_ODT_MEANING

int nd_backend_op_count(void) { return ND_OP_COUNT; }

const char *nd_backend_op_name(int i) { return i >= 0 && i < ND_OP_COUNT ? NAMES[i] : NULL; }

int nd_backend_op_index(const char *name) {
    for (int i = 0; name && i < ND_OP_COUNT; i++)
        if (!strcmp(NAMES[i], name)) return i;
    return -1;
}

const char *nd_backend_op_family(int i) { return i >= 0 && i < ND_OP_COUNT ? FAMILIES[i] : NULL; }

unsigned nd_backend_op_declared(int i) { return i >= 0 && i < ND_OP_COUNT ? DECLARED[i] : 0; }

int nd_backend_has_op(const nd_backend *b, int i) {
    if (!b) return 0;
    int k = 0;
    /* the i-th member of the list, by counting: one comparison per op, no offsets of function pointers */
#define ND_OP_HAS(name, dtypes, params) if (k++ == i) return b->name != NULL;
    ND_BACKEND_ALL_OPS(ND_OP_HAS)
#undef ND_OP_HAS
    return 0;
}

unsigned nd_backend_op_dtypes(const nd_backend *b, int i) {
    return b && nd_backend_has_op(b, i) ? b->op_dtypes[i] : 0;
}

int nd_backend_supports(const nd_backend *b, int i, unsigned dtypes) {
    return dtypes != 0 && nd_backend_has_op(b, i) && (b->op_dtypes[i] & dtypes) == dtypes;
}

int nd_backend_require(const nd_backend *b, int i, unsigned dtypes, nd_err *e) {
    if (nd_backend_supports(b, i, dtypes)) return 0;
    const char *be = b && b->name ? b->name : "backend";
    if (!nd_backend_has_op(b, i))
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: op %s unsupported", be, nd_backend_op_name(i) ? NAMES[i] : "?");
    char buf[128];
    return nd_fail(e, ND_EXIT_INTERNAL, "%s: op %s does not support %s", be, NAMES[i],
                   dtypes ? nd_op_dtypes_str(dtypes & ~b->op_dtypes[i], ", ", buf, sizeof buf) : "an empty dtype set");
}

int nd_backend_require_dt(const nd_backend *b, int i, nd_dtype dt, nd_err *e) {
    const unsigned f = nd_op_dtype_of(dt);
    if (f) return nd_backend_require(b, i, f, e);
    return nd_fail(e, ND_EXIT_INTERNAL, "%s: op %s does not support dtype #%d (no backend op reads it)",
                   b && b->name ? b->name : "backend", nd_backend_op_name(i) ? NAMES[i] : "?", (int)dt);
}

/* ---- dtype flags ---- */
const char *nd_op_dtype_name(int bit) { return bit >= 0 && bit < ND_ODT_BIT_COUNT ? DT_NAMES[bit] : NULL; }

const char *nd_op_dtype_meaning(int bit) { return bit >= 0 && bit < ND_ODT_BIT_COUNT ? DT_MEANINGS[bit] : NULL; }

unsigned nd_op_dtype_of(nd_dtype t) {
    if (t == ND_DT_INVALID) return 0;
#define ND_ODT_OF(N, s, dt, m) if (t == (dt)) return ND_ODT_##N;
    ND_OP_DTYPES(ND_ODT_OF)
#undef ND_ODT_OF
    return 0;
}

char *nd_op_dtypes_str(unsigned mask, const char *sep, char *buf, size_t n) {
    if (!n) return buf;
    buf[0] = 0;
    size_t len = 0;
    for (int bit = 0; bit < ND_ODT_BIT_COUNT; bit++) {
        if (!(mask & (1u << bit))) continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? sep : "", DT_NAMES[bit]);
        if (w < 0 || (size_t)w >= n - len) { buf[len] = 0; break; } /* no room: the whole names that fit */
        len += (size_t)w;
    }
    return buf;
}

/* json_fields.c — see json_fields.h. */
#include "json_fields.h"
#include <math.h>
#include <stdint.h>

json_t *nd_json_finite(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *spelled(double v) {
    if (isnan(v)) return json_string("nan");
    if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static json_t *value(const char *p, nd_jkind kind) {
    switch (kind) {
    case ND_J_STR: return json_string(p);
    case ND_J_I32: return json_integer(*(const int32_t *)p);
    case ND_J_I64: return json_integer(*(const int64_t *)p);
    case ND_J_BOOL8: return json_boolean(*(const uint8_t *)p);
    case ND_J_REAL: return json_real(*(const double *)p);
    case ND_J_FINITE: return nd_json_finite(*(const double *)p);
    case ND_J_SPELLED: return spelled(*(const double *)p);
    }
    return json_null();
}

void nd_json_put_fields(json_t *o, const void *base, const nd_jfield *f, size_t n) {
    for (size_t i = 0; i < n; i++) json_object_set_new(o, f[i].key, value((const char *)base + f[i].off, f[i].kind));
}

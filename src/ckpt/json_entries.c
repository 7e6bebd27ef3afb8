/* json_entries.c — one zeroed C array per JSON list or object of a config file (ckpt_internal.h). */
#include <stdlib.h>
#include <jansson.h>
#include "ckpt/ckpt_internal.h"

void *nd_json_entries(void *json, int object, size_t elem, const char *file, const char *shown, const char *must_be,
                      size_t *n, nd_err *e) {
    json_t *v = json;
    if (object ? !json_is_object(v) : !json_is_array(v)) {
        nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must be %s", file, shown, must_be);
        return NULL;
    }
    size_t count = object ? json_object_size(v) : json_array_size(v);
    void *p = calloc(count ? count : 1, elem);
    if (!p) nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", file);
    else if (n) *n = count;
    return p;
}

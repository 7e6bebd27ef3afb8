/* json_load.c — jansson's loaders with the huge-integer fallback of json_load.h. */
#include "util/infile.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "json_load.h"
#include <math.h>
#include <string.h>

static int too_big(const json_error_t *err) { return strstr(err->text, "too big") != NULL; }

/* Integral reals that fit an int64 become integers again; containers are walked (depth is
 * jansson's own parse limit, so the recursion is bounded). */
static void ints_back(json_t *v) {
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            if (json_is_real(x)) {
                const double d = json_real_value(x);
                if (d == floor(d) && fabs(d) < 9.2e18) json_object_set_new(v, k, json_integer((json_int_t)d));
            } else ints_back(x);
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *x = json_array_get(v, i);
            if (json_is_real(x)) {
                const double d = json_real_value(x);
                if (d == floor(d) && fabs(d) < 9.2e18) json_array_set_new(v, i, json_integer((json_int_t)d));
            } else ints_back(x);
        }
    }
}

/* json_load_file, but the file is opened without blocking on a FIFO and must be regular */
static json_t *load_regular(const char *path, size_t flags, json_error_t *err) {
    const char *kind;
    FILE *f = nd_fopen_regular(path, &kind);
    if (!f) {
        memset(err, 0, sizeof *err);
        snprintf(err->text, sizeof err->text, "%s", kind ? "not a regular file; refusing to read it" : strerror(errno));
        snprintf(err->source, sizeof err->source, "%s", path);
        return NULL;
    }
    /* jansson holds a document in up to ~40x its bytes (a long list of numbers): a file past the
     * largest real one (a trillion-parameter NVFP4 index of ~300k tensors is ~30 MB) is refused
     * before it is parsed, not after gigabytes */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > ND_JSON_FILE_MAX) {
        fclose(f);
        memset(err, 0, sizeof *err);
        snprintf(err->text, sizeof err->text, "%lld bytes: a JSON file the tool reads is at most %d MB", (long long)st.st_size,
                 ND_JSON_FILE_MAX >> 20);
        snprintf(err->source, sizeof err->source, "%s", path);
        return NULL;
    }
    json_t *root = json_loadf(f, flags, err);
    fclose(f);
    return root;
}

json_t *nd_json_load_file(const char *path, size_t flags, json_error_t *err) {
    json_t *root = load_regular(path, flags, err);
    if (root || !too_big(err)) return root;
    if ((root = load_regular(path, flags | JSON_DECODE_INT_AS_REAL, err))) ints_back(root);
    return root;
}

json_t *nd_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err) {
    json_t *root = json_loadb(buf, len, flags, err);
    if (root || !too_big(err)) return root;
    if ((root = json_loadb(buf, len, flags | JSON_DECODE_INT_AS_REAL, err))) ints_back(root);
    return root;
}

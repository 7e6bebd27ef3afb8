/* yaml_doc.h — the one YAML reader of recipes, serving-stack profiles and tolerance files.
 *
 * Loading: the file must be a regular file, nested at most ND_YAML_MAX_DEPTH levels (checked before
 * the load: yaml_depth.h), and well-formed; each failure is exit 2 "FILE[:LINE]: problem".
 * Typed keys: a value is read as the type its key has, and anything else is exit 2 naming the
 * file, the line and the key, with the value and what was expected:
 *   bool    a YAML boolean, as a plain (unquoted) scalar: true/false, yes/no, on/off in lower,
 *           Capitalised or UPPER case (YAML 1.2 core and 1.1), and 1/0
 *   number  a plain scalar strtod reads whole, finite, within [lo, hi]
 *   int     the same, integral
 *   enum    one of a list of names (the message lists them)
 *   text    any scalar (quoted or not) that fits its buffer
 * A quoted "true" or "12" is text, never a boolean or a number. */
#ifndef ND_YAML_DOC_H
#define ND_YAML_DOC_H
#include <stddef.h>
#include <yaml.h>
#include "util/err.h"

typedef struct nd_ydoc {
    yaml_document_t doc;
    char path[1024];
    int loaded;
    nd_err *e;          /* where every message of this document goes (the load's) */
} nd_ydoc;

/* Load path; what names the kind of file for the "cannot open" message ("recipe", "stack profile").
 * An empty document loads with a NULL root (the caller decides whether that is allowed). */
int nd_ydoc_load(nd_ydoc *d, const char *path, const char *what, nd_err *e);
void nd_ydoc_free(nd_ydoc *d);
yaml_node_t *nd_ydoc_root(nd_ydoc *d);
yaml_node_t *nd_ydoc_node(nd_ydoc *d, int id);
int nd_ydoc_line(const yaml_node_t *n);
/* The scalar text of n, or NULL when n is not a scalar. */
const char *nd_ydoc_scalar(const yaml_node_t *n);
/* exit 2 "FILE:LINE: <printf>" at node n, into the load's nd_err */
int nd_ydoc_fail(const nd_ydoc *d, const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Typed values; key is the key's name for the message, v the value node. */
int nd_ydoc_bool(const nd_ydoc *d, const char *key, const yaml_node_t *v, int *out);
int nd_ydoc_number(const nd_ydoc *d, const char *key, const yaml_node_t *v, double lo, double hi, double *out);
int nd_ydoc_int(const nd_ydoc *d, const char *key, const yaml_node_t *v, long lo, long hi, long *out);
int nd_ydoc_enum(const nd_ydoc *d, const char *key, const yaml_node_t *v, const char *const *names, int n, int *out);
int nd_ydoc_text(const nd_ydoc *d, const char *key, const yaml_node_t *v, char *dst, size_t cap);

#endif

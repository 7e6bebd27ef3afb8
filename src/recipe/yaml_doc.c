/* yaml_doc.c — see yaml_doc.h. */
#include "recipe/yaml_doc.h"
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "recipe/yaml_depth.h"
#include "util/infile.h"

/* Aliases make the loaded document a graph: `&a [*a]` is a cycle, and anchors of anchors expand
 * exponentially (a few lines stand for billions of nodes, which every walk of the document then
 * visits). The expanded size is counted once per node (memoised); a cycle or more than
 * ND_YAML_MAX_EXPANDED nodes is refused. */
#define ND_YAML_MAX_EXPANDED 1000000
static int64_t expanded(yaml_document_t *doc, int id, int64_t *memo, unsigned char *busy) {
    yaml_node_t *n = yaml_document_get_node(doc, id);
    if (!n) return 0;
    const int k = id - 1;
    if (memo[k]) return memo[k];
    if (busy[k]) return -1; /* a cycle */
    busy[k] = 1;
    int64_t total = 1;
    if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top && total >= 0; it++) {
            int64_t c = expanded(doc, *it, memo, busy);
            total = c < 0 ? -1 : total + c;
            if (total > ND_YAML_MAX_EXPANDED) total = ND_YAML_MAX_EXPANDED + 1;
        }
    } else if (n->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top && total >= 0; pr++) {
            int64_t a = expanded(doc, pr->key, memo, busy), b = a < 0 ? -1 : expanded(doc, pr->value, memo, busy);
            total = b < 0 ? -1 : total + a + b;
            if (total > ND_YAML_MAX_EXPANDED) total = ND_YAML_MAX_EXPANDED + 1;
        }
    }
    busy[k] = 0;
    if (total > 0) memo[k] = total;
    return total;
}

static int check_expansion(nd_ydoc *d) {
    const size_t n = (size_t)(d->doc.nodes.top - d->doc.nodes.start);
    if (!n) return 0;
    int64_t *memo = calloc(n, sizeof *memo);
    unsigned char *busy = calloc(n, 1);
    if (!memo || !busy) { free(memo); free(busy); return nd_fail(d->e, ND_EXIT_INTERNAL, "%s: out of memory", d->path); }
    const int64_t total = expanded(&d->doc, 1, memo, busy);
    free(memo);
    free(busy);
    if (total < 0) return nd_fail(d->e, ND_EXIT_BADINPUT, "%s: an alias refers to a node that contains it (a cycle)", d->path);
    if (total > ND_YAML_MAX_EXPANDED)
        return nd_fail(d->e, ND_EXIT_BADINPUT, "%s: its aliases expand to more than %d nodes", d->path, ND_YAML_MAX_EXPANDED);
    return 0;
}

/* A key given twice in one mapping: YAML says keys are unique; libyaml keeps both and the readers
 * would take one of them silently (a line added below a reviewed one could loosen the gate). */
static int check_duplicate_keys(nd_ydoc *d) {
    for (yaml_node_t *n = d->doc.nodes.start; n < d->doc.nodes.top; n++) {
        if (n->type != YAML_MAPPING_NODE) continue;
        if (n->data.mapping.pairs.top - n->data.mapping.pairs.start > 4096) /* (the check below is quadratic) */
            return nd_ydoc_fail(d, n, "a mapping of more than 4096 keys: not a file nvfp4dbg reads");
        for (yaml_node_pair_t *a = n->data.mapping.pairs.start; a < n->data.mapping.pairs.top; a++) {
            const char *ka = nd_ydoc_scalar(yaml_document_get_node(&d->doc, a->key));
            if (!ka) continue;
            for (yaml_node_pair_t *b = n->data.mapping.pairs.start; b < a; b++) {
                const char *kb = nd_ydoc_scalar(yaml_document_get_node(&d->doc, b->key));
                if (kb && !strcmp(ka, kb))
                    return nd_ydoc_fail(d, yaml_document_get_node(&d->doc, a->key), "key '%s' given twice in one mapping (first at line %d)",
                                        ka, nd_ydoc_line(yaml_document_get_node(&d->doc, b->key)));
            }
        }
    }
    return 0;
}

int nd_ydoc_load(nd_ydoc *d, const char *path, const char *what, nd_err *e) {
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    d->e = e;
    ND_TRY(nd_input_regular(path, e));
    const char *kind;
    FILE *f = nd_fopen_regular(path, &kind);
    if (!f && kind) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read the %s", path, kind, what);
    if (!f) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open %s: %s", path, what, strerror(errno));
    int deep_line = 0, tag_line = 0;
    if (!nd_yaml_depth_ok(f, ND_YAML_MAX_DEPTH, &deep_line, &tag_line)) {
        fclose(f);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: nested deeper than %d levels", path, deep_line, ND_YAML_MAX_DEPTH);
    }
    if (tag_line) {
        fclose(f);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: an explicit YAML tag (such as !!str): a %s takes plain values, not tagged ones",
                       path, tag_line, what);
    }
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        fclose(f);
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: cannot start the YAML parser", path);
    }
    yaml_parser_set_input_file(&p, f);
    int rc = 0;
    if (!yaml_parser_load(&p, &d->doc))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: malformed YAML: %s%s%s", path, (int)p.problem_mark.line + 1,
                     p.problem ? p.problem : "parse error", p.context ? " " : "", p.context ? p.context : "");
    else
        d->loaded = 1;
    /* one document per file: a second one ("---" and more keys below) would be silently ignored,
     * so a line added below a reviewed tolerance file could never take effect unnoticed */
    if (!rc && yaml_document_get_root_node(&d->doc)) {
        yaml_document_t next;
        if (!yaml_parser_load(&p, &next)) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: malformed YAML: %s%s%s", path, (int)p.problem_mark.line + 1,
                         p.problem ? p.problem : "parse error", p.context ? " " : "", p.context ? p.context : "");
        } else {
            if (yaml_document_get_root_node(&next))
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: a second YAML document: a %s holds one (remove the '---' and "
                             "merge its keys, or give it its own file)", path, (int)next.start_mark.line + 1, what);
            yaml_document_delete(&next);
        }
    }
    yaml_parser_delete(&p);
    fclose(f);
    if (!rc) rc = check_expansion(d);
    if (!rc) rc = check_duplicate_keys(d);
    if (rc) nd_ydoc_free(d);
    return rc;
}

void nd_ydoc_free(nd_ydoc *d) {
    if (d->loaded) yaml_document_delete(&d->doc);
    d->loaded = 0;
}

yaml_node_t *nd_ydoc_root(nd_ydoc *d) { return d->loaded ? yaml_document_get_root_node(&d->doc) : NULL; }
yaml_node_t *nd_ydoc_node(nd_ydoc *d, int id) { return yaml_document_get_node(&d->doc, id); }
int nd_ydoc_line(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }
const char *nd_ydoc_scalar(const yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int vfail(nd_err *e, const nd_ydoc *d, const yaml_node_t *n, const char *fmt, va_list ap) {
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: %s", d->path, nd_ydoc_line(n), msg);
}

int nd_ydoc_fail(const nd_ydoc *d, const yaml_node_t *n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(d->e, d, n, fmt, ap);
    va_end(ap);
    return rc;
}


/* the value as a plain scalar (what a boolean or a number must be), or NULL */
static const char *plain(const yaml_node_t *v) {
    if (!v || v->type != YAML_SCALAR_NODE || v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return NULL;
    return (const char *)v->data.scalar.value;
}

static const char *shown(const yaml_node_t *v) {
    const char *s = nd_ydoc_scalar(v);
    return s ? s : v && v->type == YAML_MAPPING_NODE ? "a mapping" : v && v->type == YAML_SEQUENCE_NODE ? "a list" : "nothing";
}

int nd_ydoc_bool(const nd_ydoc *d, const char *key, const yaml_node_t *v, int *out) {
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "1"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "0"};
    const char *s = plain(v);
    for (size_t i = 0; s && i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcmp(s, yes[i])) { *out = 1; return 0; }
        if (!strcmp(s, no[i])) { *out = 0; return 0; }
    }
    return nd_ydoc_fail(d, v, "%s must be a YAML boolean (true/false, yes/no, on/off, 1/0; unquoted), not %s'%s'", key,
                s || !nd_ydoc_scalar(v) ? "" : "the quoted text ", shown(v));
}

int nd_ydoc_number(const nd_ydoc *d, const char *key, const yaml_node_t *v, double lo, double hi, double *out) {
    const char *s = plain(v);
    /* decimal only: strtod would also take 0x10 (hexadecimal) and the like */
    const int decimal = s && strspn(s, "0123456789+-.eE") == strlen(s);
    char *end = (char *)s;
    double x = decimal ? strtod(s, &end) : NAN;
    if (!decimal || end == s || *end || !isfinite(x))
        return nd_ydoc_fail(d, v, "%s must be a number (unquoted), not '%s'", key, shown(v));
    if (x < lo || x > hi) return nd_ydoc_fail(d, v, "%s is %s, outside [%g, %g]", key, s, lo, hi);
    *out = x;
    return 0;
}

int nd_ydoc_int(const nd_ydoc *d, const char *key, const yaml_node_t *v, long lo, long hi, long *out) {
    double x;
    ND_TRY(nd_ydoc_number(d, key, v, (double)lo, (double)hi, &x));
    if (x != floor(x)) return nd_ydoc_fail(d, v, "%s must be a whole number, not '%s'", key, shown(v));
    *out = (long)x;
    return 0;
}

int nd_ydoc_enum(const nd_ydoc *d, const char *key, const yaml_node_t *v, const char *const *names, int n, int *out) {
    const char *s = nd_ydoc_scalar(v);
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) { *out = i; return 0; }
    char list[512] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        if (i + 2 < n) strncat(list, ", ", sizeof list - strlen(list) - 1);
        else if (i + 1 < n) strncat(list, " or ", sizeof list - strlen(list) - 1);
    }
    return nd_ydoc_fail(d, v, "%s must be %s, not '%s'", key, list, shown(v));
}

int nd_ydoc_text(const nd_ydoc *d, const char *key, const yaml_node_t *v, char *dst, size_t cap) {
    const char *s = nd_ydoc_scalar(v);
    if (!s) return nd_ydoc_fail(d, v, "%s must be text, not %s", key, shown(v));
    size_t n = strlen(s);
    if (n >= cap) return nd_ydoc_fail(d, v, "%s is too long (%zu characters, at most %zu)", key, n, cap - 1);
    /* a name reaches headers and terminals: no control characters (ESC, BEL, CR, C1), and no line
     * breaks but in a description */
    const int lines = strstr(key, "description") != NULL;
    for (const unsigned char *q = (const unsigned char *)s; *q; q++)
        if ((*q < 0x20 && !(*q == '\t' || (lines && *q == '\n'))) || *q == 0x7f || (q[0] == 0xc2 && q[1] >= 0x80 && q[1] <= 0x9f))
            return nd_ydoc_fail(d, v, "%s holds a control character (byte %zu)", key, (size_t)(q - (const unsigned char *)s));
    memcpy(dst, s, n + 1);
    return 0;
}

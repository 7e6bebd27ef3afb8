#define _GNU_SOURCE
#include "err.h"
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Put text in dst[cap]; a text longer than that keeps its start and its end with " ... " between,
 * so that a message about a path near PATH_MAX still ends with what is wrong. */
static void put_middle_cut(char *dst, size_t cap, const char *text, size_t n) {
    if (n < cap) { memcpy(dst, text, n + 1); return; }
    static const char mid[] = " ... ";
    const size_t tail = cap / 2, head = cap - 1 - tail - (sizeof mid - 1);
    memcpy(dst, text, head);
    memcpy(dst + head, mid, sizeof mid - 1);
    memcpy(dst + head + sizeof mid - 1, text + n - tail, tail);
    dst[cap - 1] = 0;
}

int nd_fail(nd_err *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        char *full = NULL;
        const int n = vasprintf(&full, fmt, ap);
        va_end(ap);
        if (n >= 0 && full) put_middle_cut(e->msg, sizeof e->msg, full, (size_t)n);
        else snprintf(e->msg, sizeof e->msg, "(out of memory formatting an error)");
        free(full);
        e->code = code;
    }
    return code;
}

int nd_wrap(nd_err *e, const char *fmt, ...) {
    if (!e) return ND_EXIT_INTERNAL;
    char *prefix = NULL, *full = NULL;
    va_list ap;
    va_start(ap, fmt);
    const int pn = vasprintf(&prefix, fmt, ap);
    va_end(ap);
    const int n = pn >= 0 && prefix ? asprintf(&full, "%s: %s", prefix, e->msg) : -1;
    if (n >= 0 && full) put_middle_cut(e->msg, sizeof e->msg, full, (size_t)n);
    free(prefix);
    free(full);
    return e->code ? e->code : ND_EXIT_INTERNAL;
}

void nd_err_swap(nd_err *e, const char *from, const char *to) {
    if (!e || !e->code || !from || !*from || !to) return;
    const size_t fl = strlen(from), tl = strlen(to);
    char *out = malloc(sizeof e->msg * 2 + 1);
    if (!out) return;
    size_t n = 0;
    for (const char *p = e->msg; *p;) {
        const char *hit = strstr(p, from);
        const size_t run = hit ? (size_t)(hit - p) : strlen(p);
        if (n + run + tl >= sizeof e->msg * 2) break;
        memcpy(out + n, p, run); n += run; p += run;
        if (!hit) break;
        memcpy(out + n, to, tl); n += tl; p += fl;
    }
    out[n] = 0;
    put_middle_cut(e->msg, sizeof e->msg, out, n);
    free(out);
}

#include "err.h"
#include <stdio.h>
#include <string.h>

int nd_fail(nd_err *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

int nd_wrap(nd_err *e, const char *fmt, ...) {
    if (!e) return ND_EXIT_INTERNAL;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* truncation of an over-long message is acceptable; keep the compiler quiet about it */
    size_t pl = strlen(prefix);
    if (pl > sizeof e->msg - 3) pl = sizeof e->msg - 3;
    memcpy(e->msg, prefix, pl);
    memcpy(e->msg + pl, ": ", 2);
    size_t rest = sizeof e->msg - pl - 3, ol = strlen(old);
    if (ol > rest) ol = rest;
    memcpy(e->msg + pl + 2, old, ol);
    e->msg[pl + 2 + ol] = 0;
    return e->code ? e->code : ND_EXIT_INTERNAL;
}

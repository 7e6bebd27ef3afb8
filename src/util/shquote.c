/* shquote.c — see shquote.h. */
#include "shquote.h"
#include <string.h>

static int plain(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("_./:=,+-@%", c);
}

size_t nd_shquote_cat(char *out, size_t cap, const char *s) {
    size_t n = strnlen(out, cap);
    int quote = !*s;
    for (const unsigned char *p = (const unsigned char *)s; *p && !quote; p++) quote = !plain(*p);
    /* the write goes through put(): past cap it only counts */
#define PUT(ch) do { if (n + 1 < cap) { out[n] = (ch); out[n + 1] = 0; } n++; } while (0)
    if (quote) PUT('\'');
    for (const char *p = s; *p; p++) {
        if (quote && *p == '\'') { PUT('\''); PUT('\\'); PUT('\''); PUT('\''); }
        else PUT(*p);
    }
    if (quote) PUT('\'');
#undef PUT
    return n;
}

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
    int ctrl = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && !ctrl; p++) ctrl = *p < 0x20 || *p == 0x7f;
    if (ctrl) {
        /* a control byte (ESC, newline, ...) inside '...' would reach the terminal raw when the
         * command is printed: bash/zsh/ksh's $'...' spells it \xHH, printable and pasted exactly */
        static const char hex[] = "0123456789abcdef";
        PUT('$'); PUT('\'');
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
            if (*p < 0x20 || *p == 0x7f) { PUT('\\'); PUT('x'); PUT(hex[*p >> 4]); PUT(hex[*p & 15]); }
            else if (*p == '\\' || *p == '\'') { PUT('\\'); PUT((char)*p); }
            else PUT((char)*p);
        }
        PUT('\'');
        return n;
    }
    if (quote) PUT('\'');
    for (const char *p = s; *p; p++) {
        if (quote && *p == '\'') { PUT('\''); PUT('\\'); PUT('\''); PUT('\''); }
        else PUT(*p);
    }
    if (quote) PUT('\'');
#undef PUT
    return n;
}

/* shquote.c — see shquote.h. */
#include "shquote.h"
#include <string.h>

static int plain(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("_./:=,+-@%", c);
}

/* one word from p: its end (the space or NUL after it), or NULL when it is not one we write */
static const char *word_end(const char *p) {
    if (*p == ' ' || !*p) return NULL;
    while (*p && *p != ' ') {
        if (*p == '\'') { /* '...': anything but a quote or a control byte */
            const char *q = strchr(p + 1, '\'');
            if (!q) return NULL;
            for (const char *c = p + 1; c < q; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f) return NULL;
            p = q + 1;
        } else if (p[0] == '\\' && p[1] == '\'') { /* the '\'' of a quote inside '...' */
            p += 2;
        } else if (p[0] == '$' && p[1] == '\'') { /* $'...' with \xHH, \\ and \' only */
            p += 2;
            for (;;) {
                const unsigned char c = (unsigned char)*p;
                if (!c || c < 0x20 || c == 0x7f) return NULL;
                if (c == '\'') { p++; break; }
                if (c != '\\') { p++; continue; }
                if (p[1] == '\\' || p[1] == '\'') { p += 2; continue; }
                if (p[1] != 'x' || !strchr("0123456789abcdef", p[2]) || !p[2] || !strchr("0123456789abcdef", p[3]) || !p[3]) return NULL;
                p += 4;
            }
        } else if (plain((unsigned char)*p)) {
            p++;
        } else {
            return NULL;
        }
    }
    return p;
}

int nd_shcmd_is_ours(const char *cmd) {
    if (!cmd || strncmp(cmd, "nvfp4dbg trace ", 15)) return 0;
    for (const char *p = cmd + 15;;) {
        const char *end = word_end(p);
        if (!end) return 0;
        if (!*end) return 1;
        p = end + 1;
    }
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

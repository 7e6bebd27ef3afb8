/* html_escape.c — escaping of untrusted trace strings for HTML and inline SVG. */
#include <string.h>
#include "report.h"

/* The replacement for one byte, or NULL when the byte is written as is. */
static const char *entity(unsigned char c) {
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    case '\t': case '\n': return NULL;
    default: return (c < 0x20 || c == 0x7f) ? "&#xFFFD;" : NULL;
    }
}

void nd_html_escape(FILE *f, const char *s) {
    if (!s) return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *r = entity(*p);
        if (r) fputs(r, f);
        else fputc(*p, f);
    }
}

void nd_html_wrap(FILE *f, const char *open, const char *s, const char *close) {
    fputs(open, f);
    nd_html_escape(f, s);
    fputs(close, f);
}

size_t nd_html_escape_buf(char *dst, size_t n, const char *s) {
    size_t need = 0, at = 0;
    int cut = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        const char *r = entity(*p);
        char one[2] = {(char)*p, 0};
        const char *piece = r ? r : one;
        size_t len = strlen(piece);
        if (!cut && n && at + len < n) {
            memcpy(dst + at, piece, len);
            at += len;
        } else {
            cut = 1;
        }
        need += len;
    }
    if (n) dst[at] = 0;
    return need;
}

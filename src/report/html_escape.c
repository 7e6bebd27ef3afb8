/* html_escape.c — escaping of untrusted trace strings for HTML and inline SVG. */
#include <string.h>
#include "report.h"
#include "util/term.h"

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

/* bytes that start no valid UTF-8 sequence (0x9B, 0xFF) in a page declared UTF-8: the replacement
 * character, never the raw byte */
void nd_html_escape(FILE *f, const char *s) {
    if (!s) return;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *r = entity(*p);
        const unsigned len = *p < 0x80 ? 1 : nd_utf8_len(p);
        if (r) fputs(r, f);
        else if (!len) fputs("&#xFFFD;", f);
        else { fwrite(p, 1, len, f); p += len - 1; }
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
        const unsigned ul = *p < 0x80 ? 1 : nd_utf8_len(p);
        char one[5] = {0};
        if (ul) memcpy(one, p, ul);
        const char *piece = r ? r : ul ? one : "&#xFFFD;";
        if (ul > 1) p += ul - 1;
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

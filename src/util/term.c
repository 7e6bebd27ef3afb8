/* term.c — see term.h. */
#include <string.h>
#include "term.h"
#include <stdio.h>

/* The length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 when it is not one (a stray
 * continuation byte, an overlong or surrogate form, a truncated sequence). */
unsigned nd_utf8_len(const unsigned char *p) {
    unsigned n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) n = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) { n = 3; if (p[0] == 0xE0) lo = 0xA0; if (p[0] == 0xED) hi = 0x9F; }
    else if (p[0] >= 0xF0 && p[0] <= 0xF4) { n = 4; if (p[0] == 0xF0) lo = 0x90; if (p[0] == 0xF4) hi = 0x8F; }
    else return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (unsigned i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

const char *nd_term_safe(const char *in, char *out, size_t cap) {
    size_t o = 0;
    if (!cap) return out;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p && o + 1 < cap; p++) {
        /* UTF-8 of a C1 control (U+0080..U+009F: 0xC2 0x80..0x9F, e.g. CSI U+009B), a zero-width
         * or direction mark (U+200B..U+200F), a line or paragraph separator (U+2028, U+2029: a new
         * line in some terminals and every JavaScript console) or a bidi override/isolate
         * (U+202A..U+202E, U+2066..U+2069): a terminal acts on them or hides them, so they are
         * written as \u{XXXX} */
        unsigned cp = 0, nb = 0;
        if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) cp = p[1], nb = 2;
        else if (p[0] == 0xE2 && p[1] == 0x80 && ((p[2] >= 0x8B && p[2] <= 0x8F) || (p[2] >= 0xA8 && p[2] <= 0xAE)))
            cp = 0x2000u + (p[2] - 0x80u), nb = 3;
        else if (p[0] == 0xE2 && p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9) cp = 0x2040u + (p[2] - 0x80u), nb = 3;
        if (nb) {
            if (o + 10 >= cap) break;
            o += (size_t)snprintf(out + o, cap - o, "\\u{%04x}", cp);
            p += nb - 1;
            continue;
        }
        /* a byte that starts no valid UTF-8 sequence (0x9B alone is the 8-bit CSI a Latin-1 terminal
         * acts on) is written as \xNN like the C0 controls; a valid sequence is copied whole */
        const unsigned len = *p < 0x80 ? 1 : nd_utf8_len(p);
        if (*p < 0x20 || *p == 0x7f || !len) {
            if (o + 5 >= cap) break;
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        } else {
            if (o + len >= cap) break;
            memcpy(out + o, p, len);
            o += len;
            p += len - 1;
        }
    }
    out[o] = 0;
    return out;
}

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int nd_term_width(int fd) {
    struct winsize ws;
    if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col < 20 ? 20 : ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (c && *c) {
        char *end;
        long v = strtol(c, &end, 10);
        if (!*end && v > 0) return v < 20 ? 20 : v > 100000 ? 100000 : (int)v;
    }
    return 0;
}

void nd_term_wrap(FILE *f, const char *text, int indent, int col, int width) {
    const char *p = text ? text : "";
    if (width <= 0 || width - indent < 10) { fprintf(f, "%s\n", p); return; }
    while (*p) {
        size_t len = strlen(p), room = (size_t)(width - col);
        if (len <= room) { fputs(p, f); break; }
        /* the last space that keeps the line within the width; a word longer than a line is
         * printed whole (names are never cut) */
        size_t cut = 0;
        for (size_t i = 0; i <= room && i < len; i++) if (p[i] == ' ') cut = i;
        if (!cut && col > indent) { fprintf(f, "\n%*s", indent, ""); col = indent; continue; }
        if (!cut) { cut = strcspn(p, " "); if (!p[cut]) { fputs(p, f); break; } }
        size_t keep = cut;
        while (keep && p[keep - 1] == ' ') keep--;
        fwrite(p, 1, keep, f);
        fprintf(f, "\n%*s", indent, "");
        col = indent;
        p += cut;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

/* test_term_safe.c — nd_term_safe (src/util/term.c): what reaches a terminal from a file or an argument.
 * C0 controls and DEL as \xNN; C1 controls, zero-width and direction marks, line/paragraph separators and
 * bidi overrides in UTF-8 as \u{XXXX}; a byte that starts no
 * valid UTF-8 sequence (0x9B alone, the 8-bit CSI a Latin-1 terminal acts on; a stray continuation
 * byte; an overlong or truncated sequence) as \xNN; valid UTF-8 text unchanged. Then random byte
 * strings: the output never holds a byte below 0x20, DEL, or a byte of 0x80..0xFF outside a valid
 * UTF-8 sequence whose code point is printable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "util/term.h"

static void same(const char *in, const char *want) {
    char out[256];
    nd_term_safe(in, out, sizeof out);
    CHECK(!strcmp(out, want), "nd_term_safe(%s) gave '%s', want '%s'", want, out, want);
}

/* the byte string s is safe: no C0/DEL, every high byte inside a valid, non-C1, non-bidi sequence */
static int safe(const unsigned char *s) {
    for (; *s; s++) {
        if (*s < 0x20 || *s == 0x7f) return 0;
        if (*s < 0x80) continue;
        unsigned n = *s >= 0xF0 ? 4 : *s >= 0xE0 ? 3 : *s >= 0xC2 && *s <= 0xDF ? 2 : 0;
        if (!n || *s > 0xF4) return 0;
        for (unsigned i = 1; i < n; i++)
            if (s[i] < 0x80 || s[i] > 0xBF) return 0;
        if (s[0] == 0xC2 && s[1] <= 0x9F) return 0;
        if (s[0] == 0xE2 && ((s[1] == 0x80 && ((s[2] >= 0x8B && s[2] <= 0x8F) || (s[2] >= 0xA8 && s[2] <= 0xAE))) ||
                             (s[1] == 0x81 && s[2] >= 0xA6 && s[2] <= 0xA9))) return 0;
        s += n - 1;
    }
    return 1;
}

int main(void) {
    same("plain text", "plain text");
    same("a\x1b[31mb", "a\\x1b[31mb");
    same("tab\there", "tab\\x09here");
    same("del\x7f", "del\\x7f");
    same("c1 \xc2\x9b csi", "c1 \\u{009b} csi");
    same("bidi \xe2\x80\xae x", "bidi \\u{202e} x");
    same("line\xe2\x80\xa8sep", "line\\u{2028}sep");   /* round 24: a line separator reached the terminal */
    same("para\xe2\x80\xa9sep", "para\\u{2029}sep");
    same("rlm\xe2\x80\x8fx zw\xe2\x80\x8by", "rlm\\u{200f}x zw\\u{200b}y");
    same("en\xe2\x80\x93" "dash", "en\xe2\x80\x93" "dash");  /* U+2013 is text */
    same("raw \x9b csi", "raw \\x9b csi");
    same("stray \x80\xbf", "stray \\x80\\xbf");
    same("overlong \xc0\xaf", "overlong \\xc0\\xaf");
    same("cut \xe2\x82", "cut \\xe2\\x82");
    same("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    same("surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80");
    srand(4242);
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        unsigned char in[33];
        const int n = 1 + rand() % 32;
        for (int i = 0; i < n; i++) in[i] = (unsigned char)(1 + rand() % 255);
        in[n] = 0;
        char out[32 * 10 + 1];
        nd_term_safe((const char *)in, out, sizeof out);
        if (!safe((const unsigned char *)out)) bad++;
    }
    CHECK(bad == 0, "%d random strings came out with a byte a terminal acts on", bad);
    return nd_test_report("term_safe");
}

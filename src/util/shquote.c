/* shquote.c — see shquote.h. */
#include "shquote.h"
#include <stdio.h>
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

/* the options a next command repeats (diagnose/next_command.c), and whether each takes a value;
 * never --force, --dump or anything else that writes (--out is checked apart: last, in the form
 * next_command.c writes) */
static int known_option(const char *w, size_t n, int *takes_value) {
    static const char *const with[] = {"--recipe", "--stack", "--reference-checkpoint", "--layers", "--mode",
                                       "--ref-numerics", "--ep", "--tokens", "--tokens-file", "--prompt",
                                       "--prompt-file", "--override", "--tokenizer"};
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++)
        if (strlen(with[i]) == n && !strncmp(w, with[i], n)) { *takes_value = 1; return 1; }
    *takes_value = 0;
    return n == 6 && !strncmp(w, "--chat", 6);
}

/* "...-repaired.h5" or "...-repaired-N.h5", quoted or not (next_command.c's repaired_path) */
static int repaired_name(const char *w, size_t n) {
    if (n >= 2 && w[0] == '\'' && w[n - 1] == '\'') { w++; n -= 2; }
    if (n < 3 || memcmp(w + n - 3, ".h5", 3)) return 0;
    n -= 3;
    size_t k = n;
    while (k > 0 && w[k - 1] >= '0' && w[k - 1] <= '9') k--;
    if (k < n) {
        if (k == 0 || w[k - 1] != '-') return 0;
        n = k - 1;
    }
    return n >= 9 && !memcmp(w + n - 9, "-repaired", 9);
}

int nd_shcmd_is_ours(const char *cmd) {
    if (!cmd || strncmp(cmd, "nvfp4dbg trace ", 15)) return 0;
    /* a command too long for the trace's field ends with this note (next_command.c) */
    char buf[16384];
    snprintf(buf, sizeof buf, "%s", cmd);
    char *note = strstr(buf, "  # and this run's ");
    if (note) {
        static const char *const forms[] = {"--tokens", "--tokens-file", "--prompt", "--prompt-file", "options"};
        int exact = 0;
        for (size_t i = 0; i < sizeof forms / sizeof forms[0] && !exact; i++) {
            char want[96];
            snprintf(want, sizeof want, "  # and this run's %s (too long to repeat here)", forms[i]);
            exact = !strcmp(note, want);
        }
        if (!exact) return 0;
        *note = 0;
    }
    int idx = 0, value_next = 0;
    for (const char *p = buf + 15;; idx++) {
        const char *end = word_end(p);
        if (!end) return 0;
        int takes = 0;
        if (idx == 0) {
            if (*p == '-') return 0; /* the checkpoint comes first */
        } else if (value_next) {
            value_next = 0;
        } else if ((size_t)(end - p) == 5 && !strncmp(p, "--out", 5)) {
            /* the trace the rerun writes beside this run's: the last word, X-repaired[-N].h5 */
            const char *v = end + 1, *vend = *end ? word_end(v) : NULL;
            return vend && !*vend && repaired_name(v, (size_t)(vend - v));
        } else if (!known_option(p, (size_t)(end - p), &takes)) {
            return 0;
        } else {
            value_next = takes;
        }
        if (!*end) return !value_next;
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

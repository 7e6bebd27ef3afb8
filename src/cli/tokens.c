/* tokens.c — --tokens / --tokens-file parsing (SPEC §2). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokens.h"
#include "util/infile.h"

int nd_tokens_parse(const char *text, const char *what, int64_t **out, int64_t *n, nd_err *e) {
    int64_t cap = 16, k = 0;
    int64_t *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    /* ids separated by one comma (a file: also by whitespace and line breaks); an empty entry
     * ("1,,2", a trailing comma), a sign or a space inside the --tokens list is refused, not skipped */
    const int cmdline = what[0] == '-';
    const char *p = text;
    while (*p) {
        int commas = 0;
        for (; *p == ',' || *p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'; p++) {
            if (*p == ',') commas++;
            else if (cmdline) { free(v); return nd_fail(e, ND_EXIT_BADINPUT, "%s: ids are separated by commas, without spaces (got '%.40s')", what, text); }
        }
        /* two commas in a row, a leading or a trailing one */
        if (commas > 1 || (commas == 1 && (!k || !*p)))
            { free(v); return nd_fail(e, ND_EXIT_BADINPUT, "%s: an empty entry in '%.40s' (ids separated by one comma)", what, text); }
        if (!*p) break;
        char *end;
        errno = 0;
        long long x = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : (end = (char *)p, 0);
        /* the whole entry up to its separator is quoted: "0x10" and "1e3" are not ids (the
         * message once quoted only what followed the digits) */
        if (end == p || errno || x < 0 || (*end && !strchr(", \n\r\t", *end))) {
            const int len = (int)strcspn(p, ", \n\r\t");
            free(v);
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%.*s%s' is not a token id (non-negative integers, comma or newline separated)",
                           what, len < 40 ? len : 40, p, len > 40 ? "..." : "");
        }
        if (k == cap) {
            cap *= 2;
            int64_t *nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv) { free(v); return nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); }
            v = nv;
        }
        v[k++] = x;
        p = end;
    }
    if (!k) { free(v); return nd_fail(e, ND_EXIT_BADINPUT, "%s: no token ids", what); }
    *out = v;
    *n = k;
    return 0;
}

int nd_tokens_file(const char *path, int64_t **out, int64_t *n, nd_err *e) {
    char *buf = NULL;
    ND_TRY(nd_read_text(path, "tokens file", 64u << 20, 0, &buf, NULL, e));
    int rc = nd_tokens_parse(buf, path, out, n, e);
    free(buf);
    return rc;
}

int nd_parse_layers(const char *s, int *lo, int *hi) {
    if (!strcmp(s, "all")) { *lo = 0; *hi = -1; return 0; }
    char *end;
    errno = 0;
    long a = strtol(s, &end, 10);
    /* layer numbers are small: anything past 2^20 (or an overflow) is refused, never truncated */
    if (end == s || a < 0 || a > (1L << 20) || errno) return -1;
    if (!*end) { *lo = *hi = (int)a; return 0; }
    if (*end != '-') return -1;
    const char *t = end + 1;
    long b = strtol(t, &end, 10);
    if (end == t || *end || b < a || b > (1L << 20) || errno) return -1;
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

int nd_parse_size(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0) || v != v) return -1;
    double mul = 1;
    switch (*end) {
    case 'K': case 'k': mul = 1024.0; end++; break;
    case 'M': case 'm': mul = 1024.0 * 1024; end++; break;
    case 'G': case 'g': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': case 't': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    v *= mul;
    if (v < 1024.0 * 1024 || v > 1152921504606846976.0) return -1;
    *out = (uint64_t)v;
    return 0;
}

int nd_parse_decimal(const char *s, double *out) {
    if (!s || !*s || strspn(s, "0123456789+-.eE") != strlen(s)) return -1;
    char *end;
    errno = 0;
    const double x = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(x)) return -1;
    *out = x;
    return 0;
}

int nd_parse_device(const char *s, int *out) {
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 4) return -1;
    *out = atoi(s);
    return 0;
}

/* tok_pretok.c — the normalizers (NFC as a check, Prepend, Replace) and the pre-tokenizers (Split
 * with PCRE2 and its five behaviours, ByteLevel, Metaspace; Digits is a Split on \p{N}) over the
 * pieces between added tokens, as tokenizers applies them: each step on every piece, empty pieces
 * dropped. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"

#define OOM() nd_fail(e, ND_EXIT_INTERNAL, "out of memory")

/* The normalized text of a prompt may grow (Replace "a" -> "aa" in a chain doubles it each step),
 * but never past this: a prompt is at most 16 MB, and a tokenizer whose normalizers blow it up
 * further is refused before the memory goes. */
#define TOK_NORM_MAX ((size_t)64 << 20)

/* s with every occurrence of a replaced by b (and pre prepended); malloc'd. NULL with *outlen
 * SIZE_MAX when the result would pass TOK_NORM_MAX. */
static char *rewrite(const char *s, size_t len, const char *pre, const char *a, const char *b, size_t *outlen) {
    size_t lp = pre ? strlen(pre) : 0, la = a ? strlen(a) : 0, lb = b ? strlen(b) : 0, cnt = 0;
    if (la) for (size_t i = 0; i + la <= len; ) { if (!memcmp(s + i, a, la)) { cnt++; i += la; } else i++; }
    if (lp > TOK_NORM_MAX || len > TOK_NORM_MAX || (lb && cnt > (TOK_NORM_MAX - lp - len) / lb)) {
        *outlen = SIZE_MAX;
        return NULL;
    }
    size_t n = lp + len + cnt * lb;   /* an upper bound */
    if (n > TOK_NORM_MAX) { *outlen = SIZE_MAX; return NULL; }
    char *o = malloc(n + 1), *w = o;
    if (!o) return NULL;
    if (lp) { memcpy(w, pre, lp); w += lp; }
    for (size_t i = 0; i < len; ) {
        if (la && i + la <= len && !memcmp(s + i, a, la)) { memcpy(w, b, lb); w += lb; i += la; }
        else *w++ = s[i++];
    }
    *w = 0;
    *outlen = (size_t)(w - o);
    return o;
}

static int replace_piece(tok_piece *p, char *s, size_t len) {
    if (!s) return -1;
    free(p->s);
    p->s = s;
    p->len = len;
    return 0;
}

int tok_normalize(const nd_tokenizer *t, tok_pieces *v, const char *what, nd_err *e) {
    /* total: the normalized text; work: the bytes all steps wrote (a long chain of Prepends on a
     * long text grows quadratically in time without growing past the size limit) */
    size_t total = 0, work = 0;
    for (size_t i = 0; i < v->n; i++) {
        tok_piece *p = &v->p[i];
        if (p->tok >= 0 || !p->len) continue;
        for (int k = 0; k < t->nnorm; k++) {
            const tok_norm *m = &t->norm[k];
            size_t len = 0;
            if (m->kind == TOK_NORM_NFC) continue;   /* checked on the whole text before (tok_encode.c) */
            char *s = m->kind == TOK_NORM_PREPEND ? rewrite(p->s, p->len, m->a, NULL, NULL, &len)
                                                  : rewrite(p->s, p->len, NULL, m->a, m->b, &len);
            if (!s && len == SIZE_MAX)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: its normalizers (step %d of %d) grow %s past %zu MB: refused", t->path, k + 1,
                               t->nnorm, what, TOK_NORM_MAX >> 20);
            if (replace_piece(p, s, len)) return OOM();
            work += len;
            if (work > 16 * TOK_NORM_MAX)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: its %d normalizers rewrite %s past %zu MB in all: refused", t->path,
                               t->nnorm, what, (16 * TOK_NORM_MAX) >> 20);
        }
        total += p->len;
        if (total > TOK_NORM_MAX)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: its normalizers grow %s past %zu MB: refused", t->path, what, TOK_NORM_MAX >> 20);
    }
    return 0;
}

/* tokenizers' bytes_to_unicode: printable bytes stand for themselves, the rest for U+0100 on */
static uint32_t byte_char(unsigned b) {
    static uint32_t map[256];
    static int done;
    if (!done) {
        unsigned n = 0;
        for (unsigned c = 0; c < 256; c++)
            map[c] = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE) ? c : 256 + n++;
        done = 1;
    }
    return map[b];
}

static size_t put_u8(char *w, uint32_t c) {
    if (c < 0x80) { w[0] = (char)c; return 1; }
    if (c < 0x800) { w[0] = (char)(0xC0 | c >> 6); w[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    w[0] = (char)(0xE0 | c >> 12); w[1] = (char)(0x80 | ((c >> 6) & 0x3F)); w[2] = (char)(0x80 | (c & 0x3F));
    return 3;
}

typedef struct span { size_t s, e; int m; } span;

/* The spans of pattern re over s (tokenizers' find_matches: matches and the gaps between them,
 * in order), with invert applied. */
static int find_spans(nd_tokenizer *t, const pcre2_code *re, const char *s, size_t len, int invert, span **out, size_t *n) {
    size_t cap = 16, k = 0, prev = 0, at = 0;
    span *v = malloc(sizeof *v * cap);
    if (!v) return -1;
#define PUSH(a, b, mm) do { if (k + 1 > cap) { span *nv = realloc(v, sizeof *v * (cap *= 2)); if (!nv) { free(v); return -1; } v = nv; } v[k++] = (span){a, b, mm}; } while (0)
    while (at <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, len, at, PCRE2_NO_UTF_CHECK, t->md, t->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;   /* the rest is one gap */
        if (rc < 0) { free(v); return rc == PCRE2_ERROR_NOMEMORY ? -1 : -2; }   /* a limit or an engine error */
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (prev != ms) PUSH(prev, ms, 0);
        PUSH(ms, me, 1);
        prev = me;
        if (me == ms) {   /* an empty match: step one character on */
            if (me >= len) break;
            at = me + tok_u8len((unsigned char)s[me]);
        } else at = me;
    }
    if (prev != len) PUSH(prev, len, 0);
#undef PUSH
    if (invert) for (size_t i = 0; i < k; i++) v[i].m = !v[i].m;
    *out = v;
    *n = k;
    return 0;
}

/* the spans grouped by behaviour; is_match afterwards means "removed" */
static size_t apply_behavior(span *v, size_t n, int behavior) {
    size_t k = 0;
    int prev = 0;
    switch (behavior) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) v[i].m = 0;
        return n;
    case TOK_SPLIT_REMOVED:
        return n;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            int m = v[i].m;
            if (k && m == prev) v[k - 1].e = v[i].e;
            else { v[k] = v[i]; v[k++].m = 0; }
            prev = m;
        }
        return k;
    case TOK_SPLIT_PREV:
        for (size_t i = 0; i < n; i++) {
            int m = v[i].m;
            if (m && !prev && k) v[k - 1].e = v[i].e;
            else { v[k] = v[i]; v[k++].m = 0; }
            prev = m;
        }
        return k;
    default: { /* MergedWithNext: the same from the end */
        span *o = malloc(sizeof *o * (n ? n : 1));
        if (!o) return (size_t)-1;
        for (size_t j = n; j-- > 0; ) {
            if (v[j].m && !prev && k) o[k - 1].s = v[j].s;
            else { o[k] = v[j]; o[k++].m = 0; }
            prev = v[j].m;
        }
        for (size_t i = 0; i < k; i++) v[i] = o[k - 1 - i];
        free(o);
        return k;
    }
    }
}

static int split_piece(nd_tokenizer *t, const tok_pre *p, const tok_piece *in, tok_pieces *out, nd_err *e) {
    const char *s = in->s;
    size_t len = in->len;
    char *own = NULL;
    if (p->add_prefix_space && (len == 0 || s[0] != ' ')) {
        if (!(own = rewrite(s, len, " ", NULL, NULL, &len))) return OOM();
        s = own;
    }
    span *v = NULL;
    size_t n = 0;
    int rc = 0;
    const int fs = find_spans(t, p->re, s, len, p->invert, &v, &n);
    if (fs == -2) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: the pre-tokenizer's regular expression passed PCRE2's match limit on this "
                               "prompt (a pattern with nested repetition or back-references); refusing to guess the split", t->path);
    else if (fs) rc = OOM();
    else {
        size_t k = apply_behavior(v, n, p->behavior);
        if (k == (size_t)-1) rc = OOM();
        for (size_t i = 0; !rc && i < k; i++)
            if (!v[i].m && v[i].e > v[i].s && tok_pieces_add(out, s + v[i].s, v[i].e - v[i].s, in->orig + v[i].s, -1)) rc = OOM();
    }
    free(v);
    free(own);
    return rc;
}

static int bytelevel_piece(const tok_pre *p, const tok_piece *in, tok_pieces *out, nd_err *e) {
    int pre = p->add_prefix_space && (in->len == 0 || in->s[0] != ' ');
    size_t n = in->len + (size_t)pre;
    char *o = malloc(n * 2 + 1), *w = o;   /* every byte becomes at most two UTF-8 bytes (< U+0800) */
    if (!o) return OOM();
    if (pre) w += put_u8(w, byte_char(' '));
    for (size_t i = 0; i < in->len; i++) w += put_u8(w, byte_char((unsigned char)in->s[i]));
    int rc = tok_pieces_add(out, o, (size_t)(w - o), in->orig, -1) ? OOM() : 0;
    free(o);
    return rc;
}

static int metaspace_piece(nd_tokenizer *t, const tok_pre *p, const tok_piece *in, tok_pieces *out, nd_err *e) {
    size_t len, lr = strlen(p->replacement);
    char *s = rewrite(in->s, in->len, NULL, " ", p->replacement, &len);
    if (!s) return OOM();
    int starts = len >= lr && !memcmp(s, p->replacement, lr);
    if (!starts && (p->prepend_scheme == TOK_PREPEND_ALWAYS || (p->prepend_scheme == TOK_PREPEND_FIRST && in->orig == 0))) {
        char *s2 = rewrite(s, len, p->replacement, NULL, NULL, &len);
        free(s);
        if (!(s = s2)) return OOM();
    }
    int rc = 0;
    if (!p->split) rc = tok_pieces_add(out, s, len, in->orig, -1) ? OOM() : 0;
    else {   /* split before every replacement character (MergedWithNext) */
        size_t st = 0;
        for (size_t i = 1; i <= len && !rc; i++)
            if (i == len || (i + lr <= len && !memcmp(s + i, p->replacement, lr))) {
                if (tok_pieces_add(out, s + st, i - st, in->orig + st, -1)) rc = OOM();
                st = i;
            }
    }
    free(s);
    (void)t;
    return rc;
}

int tok_pretokenize(nd_tokenizer *t, tok_pieces *v, nd_err *e) {
    for (int k = 0; k < t->npre; k++) {
        const tok_pre *p = &t->pre[k];
        tok_pieces out = {0};
        int rc = 0;
        for (size_t i = 0; i < v->n && !rc; i++) {
            const tok_piece *in = &v->p[i];
            if (in->tok >= 0) { rc = tok_pieces_add(&out, in->s, in->len, in->orig, in->tok) ? OOM() : 0; continue; }
            if (!in->len) continue;
            if (p->kind == TOK_PRE_SPLIT) rc = split_piece(t, p, in, &out, e);
            else if (p->kind == TOK_PRE_BYTELEVEL) rc = bytelevel_piece(p, in, &out, e);
            else rc = metaspace_piece(t, p, in, &out, e);
        }
        tok_pieces_free(v);
        *v = out;
        if (rc) return rc;
    }
    return 0;
}

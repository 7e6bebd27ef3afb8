/* tok_bpe.c — the BPE merge loop over one pre-tokenized word, as tokenizers' Word::merge_all:
 * the characters (or their <0xXX> bytes, or the unknown token) first, then repeatedly the
 * adjacent pair of lowest merge rank, the leftmost on a tie, through a binary heap; ignore_merges
 * takes a word found whole in the vocabulary as it is. Words up to 256 bytes are cached. */
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"

#define OOM() nd_fail(e, ND_EXIT_INTERNAL, "out of memory")
#define CACHE_WORD_MAX 256
#define CACHE_MAX 65536

typedef struct cand { int32_t rank, pos, out; } cand;

static int less(const cand *a, const cand *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    h[i] = c;
    while (i && less(&h[i], &h[(i - 1) / 2])) { cand x = h[i]; h[i] = h[(i - 1) / 2]; h[(i - 1) / 2] = x; i = (i - 1) / 2; }
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0];
    h[0] = h[--(*n)];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && less(&h[l], &h[m])) m = l;
        if (r < *n && less(&h[r], &h[m])) m = r;
        if (m == i) break;
        cand x = h[i]; h[i] = h[m]; h[m] = x; i = m;
    }
    return top;
}

int tok_bpe_push(int64_t **ids, int64_t *n, int64_t *cap, int64_t id) {
    if (*n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 64;
        int64_t *v = realloc(*ids, sizeof *v * (size_t)nc);
        if (!v) return -1;
        *ids = v;
        *cap = nc;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

/* the initial symbols of the word (tokenizers' merge_word) */
static int symbols(const nd_tokenizer *t, const char *s, size_t len, int32_t *sym, size_t *nsym) {
    size_t k = 0;
    int32_t unk = -1;   /* a pending unknown token (fuse_unk joins consecutive ones) */
    for (size_t i = 0; i < len; ) {
        size_t cl = tok_u8len((unsigned char)s[i]);
        if (i + cl > len) cl = len - i;
        int32_t id = tok_strmap_get(&t->vocab, s + i, cl);
        if (id >= 0) {
            if (unk >= 0) { sym[k++] = unk; unk = -1; }
            sym[k++] = id;
        } else {
            int all = t->byte_fallback;
            for (size_t b = 0; all && b < cl; b++) all = t->byte_tok[(unsigned char)s[i + b]] >= 0;
            if (all) {
                for (size_t b = 0; b < cl; b++) sym[k++] = t->byte_tok[(unsigned char)s[i + b]];
            } else if (t->unk >= 0) {
                if (unk >= 0 && !t->fuse_unk) sym[k++] = unk;
                unk = t->unk;
            }   /* no unknown token: the character is dropped, as tokenizers drops it */
        }
        i += cl;
    }
    if (unk >= 0) sym[k++] = unk;
    *nsym = k;
    return 0;
}

static int merge_word(const nd_tokenizer *t, const char *s, size_t len, int32_t **out, size_t *nout) {
    int32_t *sym = malloc(sizeof *sym * (len + 1)), *prev = malloc(sizeof *prev * (len + 1)), *next = malloc(sizeof *next * (len + 1));
    cand *h = malloc(sizeof *h * (2 * len + 2));
    int rc = -1;
    size_t n = 0, nh = 0;
    if (!sym || !prev || !next || !h) goto out;
    int32_t whole = t->ignore_merges ? tok_strmap_get(&t->vocab, s, len) : -1;
    if (whole >= 0) { sym[0] = whole; n = 1; }
    else {
        symbols(t, s, len, sym, &n);
        for (size_t i = 0; i < n; i++) { prev[i] = (int32_t)i - 1; next[i] = i + 1 < n ? (int32_t)i + 1 : -1; }
        for (size_t i = 0; i + 1 < n; i++) {
            cand c = {0, (int32_t)i, 0};
            if (!tok_pairmap_get(&t->merges, sym[i], sym[i + 1], &c.rank, &c.out)) heap_push(h, &nh, c);
        }
        while (nh) {
            cand c = heap_pop(h, &nh);
            int32_t p = c.pos, q = next[p], rank, o;
            if (sym[p] < 0 || q < 0) continue;   /* merged away, or nothing to its right any more */
            if (tok_pairmap_get(&t->merges, sym[p], sym[q], &rank, &o) || o != c.out) continue;
            sym[p] = o;
            sym[q] = -1;
            next[p] = next[q];
            if (next[q] >= 0) prev[next[q]] = p;
            /* the heap never holds more than one entry per live pair plus stale ones: each merge
             * removes a symbol and adds at most two */
            if (prev[p] >= 0 && !tok_pairmap_get(&t->merges, sym[prev[p]], sym[p], &c.rank, &c.out)) { c.pos = prev[p]; heap_push(h, &nh, c); }
            if (next[p] >= 0 && !tok_pairmap_get(&t->merges, sym[p], sym[next[p]], &c.rank, &c.out)) { c.pos = p; heap_push(h, &nh, c); }
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) if (sym[i] >= 0) sym[k++] = sym[i];
        n = k;
    }
    *out = sym;
    sym = NULL;
    *nout = n;
    rc = 0;
out:
    free(sym); free(prev); free(next); free(h);
    return rc;
}

int tok_bpe_word(nd_tokenizer *t, const char *s, size_t len, int64_t **ids, int64_t *n, int64_t *cap, nd_err *e) {
    int32_t ci = len <= CACHE_WORD_MAX ? tok_strmap_get(&t->cache, s, len) : -1;
    int32_t *w;
    size_t nw;
    if (ci >= 0) { w = t->cache_ids[ci]; nw = (size_t)t->cache_n[ci]; }
    else {
        if (merge_word(t, s, len, &w, &nw)) return OOM();
        if (len <= CACHE_WORD_MAX && t->ncache < CACHE_MAX) {
            if (t->ncache == t->cache_cap) {
                uint32_t nc = t->cache_cap ? t->cache_cap * 2 : 256;
                int32_t **a = realloc(t->cache_ids, sizeof *a * nc);
                if (a) t->cache_ids = a;
                int32_t *b = realloc(t->cache_n, sizeof *b * nc);
                if (b) t->cache_n = b;
                if (!a || !b) { free(w); return OOM(); }
                t->cache_cap = nc;
            }
            if (tok_strmap_put(&t->cache, s, len, (int32_t)t->ncache) < 0) { free(w); return OOM(); }
            t->cache_ids[t->ncache] = w;
            t->cache_n[t->ncache++] = (int32_t)nw;
        } else {
            for (size_t i = 0; i < nw; i++) if (tok_bpe_push(ids, n, cap, w[i])) { free(w); return OOM(); }
            free(w);
            return 0;
        }
    }
    for (size_t i = 0; i < nw; i++) if (tok_bpe_push(ids, n, cap, w[i])) return OOM();
    return 0;
}

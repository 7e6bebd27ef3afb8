/* tok_maps.c — the vocabulary and merge tables (open addressing), the list of pieces, and the
 * UTF-8 check. */
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"

static uint32_t hash_bytes(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int strmap_grow(tok_strmap *m) {
    uint32_t cap = m->cap ? m->cap * 2 : 1024;
    int32_t *slot = calloc(cap, sizeof *slot);
    char **key = realloc(m->key, sizeof *key * cap / 2);
    uint32_t *klen = realloc(m->klen, sizeof *klen * cap / 2);
    int32_t *val = realloc(m->val, sizeof *val * cap / 2);
    if (key) m->key = key;
    if (klen) m->klen = klen;
    if (val) m->val = val;
    if (!slot || !key || !klen || !val) { free(slot); return -1; }
    for (uint32_t i = 0; i < m->n; i++) {
        uint32_t h = hash_bytes(m->key[i], m->klen[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = (int32_t)i + 1;
    }
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    return 0;
}

static int32_t strmap_find(const tok_strmap *m, const char *k, size_t len, uint32_t *at) {
    if (!m->cap) return -1;
    uint32_t h = hash_bytes(k, len) & (m->cap - 1);
    for (;; h = (h + 1) & (m->cap - 1)) {
        int32_t s = m->slot[h];
        if (!s) { if (at) *at = h; return -1; }
        if (m->klen[s - 1] == len && !memcmp(m->key[s - 1], k, len)) { if (at) *at = h; return s - 1; }
    }
}

int tok_strmap_put(tok_strmap *m, const char *k, size_t len, int32_t v) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m)) return -1;
    uint32_t at;
    int32_t i = strmap_find(m, k, len, &at);
    if (i >= 0) { m->val[i] = v; return 1; }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, k, len);
    c[len] = 0;
    m->key[m->n] = c;
    m->klen[m->n] = (uint32_t)len;
    m->val[m->n] = v;
    m->slot[at] = (int32_t)++m->n;
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t len) {
    int32_t i = strmap_find(m, k, len, NULL);
    return i < 0 ? -1 : m->val[i];
}

void tok_strmap_free(tok_strmap *m) {
    for (uint32_t i = 0; i < m->n; i++) free(m->key[i]);
    free(m->key); free(m->klen); free(m->val); free(m->slot);
    memset(m, 0, sizeof *m);
}

static uint32_t hash_pair(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return (uint32_t)k;
}

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t out) {
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *key = calloc(cap, sizeof *key);
        int32_t *r = malloc(sizeof *r * cap), *o = malloc(sizeof *o * cap);
        if (!key || !r || !o) { free(key); free(r); free(o); return -1; }
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->key[i]) continue;
            uint32_t h = hash_pair(m->key[i]) & (cap - 1);
            while (key[h]) h = (h + 1) & (cap - 1);
            key[h] = m->key[i]; r[h] = m->rank[i]; o[h] = m->out[i];
        }
        free(m->key); free(m->rank); free(m->out);
        m->key = key; m->rank = r; m->out = o; m->cap = cap;
    }
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t h = hash_pair(k) & (m->cap - 1);
    while (m->key[h] && m->key[h] != k) h = (h + 1) & (m->cap - 1);
    int had = m->key[h] != 0;   /* a repeated merge takes its last rank, as tokenizers' map does */
    m->key[h] = k; m->rank[h] = rank; m->out[h] = out;
    if (!had) m->n++;
    return had;
}

int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *out) {
    if (!m->cap) return -1;
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint32_t h = hash_pair(k) & (m->cap - 1); m->key[h]; h = (h + 1) & (m->cap - 1))
        if (m->key[h] == k) { *rank = m->rank[h]; *out = m->out[h]; return 0; }
    return -1;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->key); free(m->rank); free(m->out);
    memset(m, 0, sizeof *m);
}

int tok_pieces_add(tok_pieces *v, const char *s, size_t len, size_t orig, int32_t tok) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 16;
        tok_piece *p = realloc(v->p, sizeof *p * cap);
        if (!p) return -1;
        v->p = p; v->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    if (len) memcpy(c, s, len);
    c[len] = 0;
    v->p[v->n++] = (tok_piece){c, len, orig, tok};
    return 0;
}

void tok_pieces_free(tok_pieces *v) {
    for (size_t i = 0; i < v->n; i++) free(v->p[i].s);
    free(v->p);
    memset(v, 0, sizeof *v);
}

int nd_utf8_check(const char *str, size_t len, size_t *bad) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c < 0xE0) { n = 2; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c < 0xF0) { n = 3; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c < 0xF5) { n = 4; cp = c & 0x07; min = 0x10000; }
        else { *bad = i; return -1; }
        if (i + n > len) { *bad = i; return -1; }
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) { *bad = i; return -1; }
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { *bad = i; return -1; }
        i += n;
    }
    return 0;
}

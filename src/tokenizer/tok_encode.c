/* tok_encode.c — text to token ids as tokenizers' encode does: UTF-8 checked, the added tokens
 * (special tokens) matched first on the raw text (leftmost, then longest; lstrip/rstrip take the
 * whitespace beside them), the normalizer and pre-tokenizer over the pieces between them, BPE on
 * every word, and the post-processor's tokens around the result when asked. */
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"

#define OOM() nd_fail(e, ND_EXIT_INTERNAL, "out of memory")

/* Rust's char::is_whitespace (Unicode White_Space) at s; its length, 0 when not whitespace */
static size_t white_at(const char *str, size_t len) {
    const unsigned char *s = (const unsigned char *)str;
    if (!len) return 0;
    if (s[0] == ' ' || (s[0] >= 9 && s[0] <= 13)) return 1;
    if (s[0] < 0x80) return 0;
    size_t n = tok_u8len(s[0]);
    if (n > len) return 0;
    uint32_t cp = n == 2 ? s[0] & 0x1Fu : n == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;
    for (size_t k = 1; k < n; k++) cp = cp << 6 | (s[k] & 0x3Fu);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
                   cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 ? n : 0;
}

static size_t white_before(const char *s, size_t end, size_t lo) {   /* start of the whitespace run ending at end */
    size_t i = end;
    while (i > lo) {
        size_t j = i - 1;
        while (j > lo && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
        if (!white_at(s + j, i - j) || white_at(s + j, i - j) != i - j) break;
        i = j;
    }
    return i;
}

static int split_added(const nd_tokenizer *t, const char *s, size_t len, tok_pieces *v, nd_err *e) {
    size_t start = 0, i = 0;
    while (i < len) {
        /* the longest added token at i: a walk down the trie (tok_internal.h) */
        const tok_added *best = NULL;
        for (int32_t node = t->ntrie ? 0 : -1, j = 0; node >= 0 && i + (size_t)j < len; j++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != (unsigned char)s[i + (size_t)j]) c = t->trie[c].sibling;
            node = c;
            if (node >= 0 && t->trie[node].added >= 0) best = &t->added[t->trie[node].added];
        }
        if (!best) { i++; continue; }
        size_t ms = i, me = i + best->len;
        if (best->lstrip) ms = white_before(s, ms, start);
        if (best->rstrip) for (size_t w; (w = white_at(s + me, len - me)); ) me += w;
        if (ms > start && tok_pieces_add(v, s + start, ms - start, start, -1)) return OOM();
        if (tok_pieces_add(v, s + ms, me - ms, ms, best->id)) return OOM();
        i = start = me;
    }
    if (len > start && tok_pieces_add(v, s + start, len - start, start, -1)) return OOM();
    return 0;
}

/* The saved truncation/padding blocks are not applied (transformers disables them for a call
 * that does not ask for them); a prompt they would cut or pad is refused, since the tokenizers
 * package, applying them, would give other ids. */
static int check_trunc_pad(const nd_tokenizer *t, int64_t n, const char *what, nd_err *e) {
    if (t->trunc_max && n > t->trunc_max)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %lld tokens, more than the truncation max_length %lld that %s carries: the tokenizers "
                       "package would cut it (transformers would not); shorten the prompt, or remove the truncation block from a "
                       "copy of the tokenizer", what, (long long)n, (long long)t->trunc_max, t->path);
    if ((t->pad_fixed && n != t->pad_fixed) || (t->pad_multiple && n % t->pad_multiple))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %lld tokens, which the padding block of %s (%s %lld) would pad: the tokenizers "
                       "package would add pad tokens (transformers would not); remove the padding block from a copy of the "
                       "tokenizer", what, (long long)n, t->path, t->pad_fixed ? "Fixed" : "pad_to_multiple_of",
                       (long long)(t->pad_fixed ? t->pad_fixed : t->pad_multiple));
    return 0;
}

int nd_tokenizer_encode(nd_tokenizer *t, const char *text, size_t len, int add_special, const char *what,
                        int64_t **ids, int64_t *n, nd_err *e) {
    *ids = NULL;
    *n = 0;
    size_t bad;
    if (nd_utf8_check(text, len, &bad))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid UTF-8 at byte offset %zu (byte 0x%02X)", what, bad, (unsigned char)text[bad]);
    for (int k = 0; k < t->nnorm; k++)
        if (t->norm[k].kind == TOK_NORM_NFC && tok_nfc_suspect(text, len, &bad))
            return nd_fail(e, ND_EXIT_BADINPUT,
                           "%s: the text is not in Unicode NFC form at byte offset %zu, and %s normalizes to NFC, which nvfp4dbg "
                           "does not implement; normalize the text to NFC first (e.g. uconv -x any-nfc)", what, bad, t->path);
    tok_pieces v = {0};
    int64_t cap = 0;
    int rc = split_added(t, text, len, &v, e);
    if (!rc) rc = tok_normalize(t, &v, what, e);
    if (!rc) rc = tok_pretokenize(t, &v, e);
    int64_t *out = NULL, k = 0;
    if (!rc && add_special) {
        for (int j = 0; j < t->npost_pre && !rc; j++) rc = tok_bpe_push(&out, &k, &cap, t->post_pre[j]) ? OOM() : 0;
    }
    for (size_t i = 0; !rc && i < v.n; i++) {
        if (v.p[i].tok >= 0) rc = tok_bpe_push(&out, &k, &cap, v.p[i].tok) ? OOM() : 0;
        else if (v.p[i].len) rc = tok_bpe_word(t, v.p[i].s, v.p[i].len, &out, &k, &cap, e);
    }
    if (!rc && add_special)
        for (int j = 0; j < t->npost_post && !rc; j++) rc = tok_bpe_push(&out, &k, &cap, t->post_post[j]) ? OOM() : 0;
    if (!rc && !out && !(out = malloc(sizeof *out))) rc = OOM();
    tok_pieces_free(&v);
    if (!rc) rc = check_trunc_pad(t, k, what, e);
    if (rc) { free(out); return rc; }
    *ids = out;
    *n = k;
    return 0;
}

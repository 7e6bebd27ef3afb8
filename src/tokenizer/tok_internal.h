/* tok_internal.h — the loaded tokenizer.json (tok_load.c) and the pieces the pipeline passes
 * between its steps (tok_pretok.c, tok_bpe.c, tok_encode.c). */
#ifndef ND_TOK_INTERNAL_H
#define ND_TOK_INTERNAL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>
#include "tokenizer.h"

/* string -> id, open addressing */
typedef struct tok_strmap {
    uint32_t cap, n;        /* cap a power of two */
    int32_t *slot;          /* index + 1 into the arrays below, 0 empty */
    char **key;
    uint32_t *klen;
    int32_t *val;
} tok_strmap;
int tok_strmap_put(tok_strmap *m, const char *k, size_t len, int32_t v);   /* 1 when k was there */
int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t len);    /* -1 when absent */
void tok_strmap_free(tok_strmap *m);

/* (left id, right id) -> rank and merged id */
typedef struct tok_pairmap {
    uint32_t cap, n;
    uint64_t *key;          /* (a << 32 | b) + 1, 0 empty */
    int32_t *rank, *out;
} tok_pairmap;
int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t out);
int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *out); /* 0 found */
void tok_pairmap_free(tok_pairmap *m);

enum { TOK_NORM_NFC, TOK_NORM_PREPEND, TOK_NORM_REPLACE };
typedef struct tok_norm { int kind; char *a, *b; } tok_norm;   /* prepend: a; replace: a -> b */

enum { TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_PREV, TOK_SPLIT_NEXT, TOK_SPLIT_CONTIGUOUS };
enum { TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL, TOK_PRE_METASPACE };
enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };
typedef struct tok_pre {
    int kind;
    pcre2_code *re;          /* split: the pattern (a String pattern compiled literally) */
    int behavior, invert;
    int add_prefix_space;    /* byte-level */
    char *replacement;       /* metaspace */
    int prepend_scheme, split;
} tok_pre;

typedef struct tok_added {
    char *content;
    size_t len;
    int32_t id;
    int lstrip, rstrip;
} tok_added;

/* The added tokens as a byte trie (node 0 the root; children as a sibling list): the longest one
 * starting at a position is found in at most its length steps, not one comparison per added token
 * (a tokenizer.json with 20,000 of them made a long prompt quadratic). */
typedef struct tok_trie {
    int32_t child, sibling;   /* -1 none */
    int32_t added;            /* index in added[] of the token ending here, -1 none */
    unsigned char byte;
} tok_trie;
#define TOK_ADDED_MAX_LEN 256 /* bytes of one added token's content */

struct nd_tokenizer {
    char *path;
    tok_strmap vocab;
    tok_pairmap merges;
    int32_t unk;              /* -1 none */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_tok[256];    /* <0xXX> ids (-1 absent) */
    tok_norm *norm; int nnorm;
    tok_pre *pre; int npre;
    tok_added *added; int nadded;
    tok_trie *trie; int32_t ntrie, trie_cap;
    int32_t *post_pre, *post_post; int npost_pre, npost_post; /* ids the post-processor puts around $A */
    pcre2_code *bytelevel_re; /* GPT-2's regex for ByteLevel use_regex */
    pcre2_match_data *md;
    pcre2_match_context *mc;    /* match and depth limits: a pattern from a file never runs unbounded */
    /* tokenizer.json's truncation and padding blocks, kept as the exporters save them (llmcompressor
     * tokenizes its calibration set with truncation=True and saves that tokenizer): transformers
     * turns them off for a call without truncation/padding, so they are checked, not applied: a
     * prompt they would change is refused (tok_encode.c). 0: not set. */
    int64_t trunc_max;        /* truncation.max_length */
    int64_t pad_fixed;        /* padding.strategy {"Fixed": N} */
    int64_t pad_multiple;     /* padding.pad_to_multiple_of */
    tok_strmap cache;         /* word -> index into cache_ids */
    int32_t **cache_ids; int32_t *cache_n; uint32_t ncache, cache_cap;
};

/* A piece of the text on its way through the pipeline: bytes, where it began in the original
 * text (Metaspace's prepend_scheme "first"), and a token id when an added token matched it. */
typedef struct tok_piece { char *s; size_t len, orig; int32_t tok; } tok_piece;
typedef struct tok_pieces { tok_piece *p; size_t n, cap; } tok_pieces;
int tok_pieces_add(tok_pieces *v, const char *s, size_t len, size_t orig, int32_t tok);
void tok_pieces_free(tok_pieces *v);

int tok_normalize(const nd_tokenizer *t, tok_pieces *v, const char *what, nd_err *e);
int tok_pretokenize(nd_tokenizer *t, tok_pieces *v, nd_err *e);
/* append the ids of one pre-tokenized word */
int tok_bpe_word(nd_tokenizer *t, const char *s, size_t len, int64_t **ids, int64_t *n, int64_t *cap, nd_err *e);
int tok_bpe_push(int64_t **ids, int64_t *n, int64_t *cap, int64_t id); /* -1 out of memory */
/* 1 when text might change under NFC (nfc_check.c: Unicode's NFC quick check, No and Maybe) */
int tok_nfc_suspect(const char *s, size_t len, size_t *at);
/* next UTF-8 character's length at s (valid input) */
static inline size_t tok_u8len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }
pcre2_code *tok_regex(const char *pattern, size_t len, int literal, char *err, size_t errlen);
#endif

/* tok_load.c — reading tokenizer.json with jansson into struct nd_tokenizer. Every component the
 * file names is either implemented (docs/tokenizer.md lists them) or refused here with exit 2
 * naming the file and the component. */
#include <jansson.h>
#include "util/json_load.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tok_internal.h"
#include "util/infile.h"

#define BAD(...) nd_fail(e, ND_EXIT_BADINPUT, __VA_ARGS__)
#define OOM() nd_fail(e, ND_EXIT_INTERNAL, "out of memory")

/* GPT-2's pre-tokenizer regex (tokenizers' ByteLevel with use_regex) */
static const char gpt2_re[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

pcre2_code *tok_regex(const char *pattern, size_t len, int literal, char *err, size_t errlen) {
    int code;
    PCRE2_SIZE off;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) { snprintf(err, errlen, "out of memory"); return NULL; }
    /* Oniguruma (tokenizers' engine) reads \uHHHH; PCRE2 does with ALT_BSUX */
    if (!literal) pcre2_set_compile_extra_options(cc, PCRE2_EXTRA_ALT_BSUX);
    /* PCRE2_LITERAL allows none of UCP / ALT_BSUX (a String pattern has no classes or escapes) */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len,
                                   PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_ALT_BSUX), &code, &off, cc);
    pcre2_compile_context_free(cc);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        snprintf(err, errlen, "%s at offset %zu", (const char *)msg, (size_t)off);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* faster where PCRE2 has a JIT; the interpreter otherwise */
    return re;
}

static const char *str_of(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* a boolean field: absent or null -> def; anything but a boolean -> -1 */
static int bool_of(json_t *o, const char *k, int def) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return def;
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

/* A step of the pipeline (normalizer, pre_tokenizer, post_processor; `where` names it): absent or
 * null is none; a Sequence has `load` run on each entry of its list_key list; any other type is one
 * step, returned in *ty for the caller to read (*ty stays NULL when there is none left to read). */
typedef int (*step_loader)(nd_tokenizer *t, json_t *n, const char *where, nd_err *e);
static int step_type(nd_tokenizer *t, json_t *n, const char *where, const char *list_key, step_loader load,
                     const char **ty, nd_err *e) {
    *ty = NULL;
    if (!n || json_is_null(n)) return 0;
    const char *type = json_is_object(n) ? str_of(n, "type") : NULL;
    if (!type) return BAD("%s: %s is not an object with a \"type\"", t->path, where);
    if (strcmp(type, "Sequence")) {
        *ty = type;
        return 0;
    }
    json_t *list = json_object_get(n, list_key);
    if (!json_is_array(list)) return BAD("%s: %s Sequence without a \"%s\" list", t->path, where, list_key);
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) ND_TRY(load(t, x, where, e));
    return 0;
}

static int load_normalizer(nd_tokenizer *t, json_t *n, const char *where, nd_err *e) {
    const char *ty;
    ND_TRY(step_type(t, n, where, "normalizers", load_normalizer, &ty, e));
    if (!ty) return 0;
    tok_norm *nn = realloc(t->norm, sizeof *nn * (size_t)(t->nnorm + 1));
    if (!nn) return OOM();
    t->norm = nn;
    tok_norm *m = &t->norm[t->nnorm];
    memset(m, 0, sizeof *m);
    if (!strcmp(ty, "NFC")) m->kind = TOK_NORM_NFC;
    else if (!strcmp(ty, "Prepend")) {
        const char *p = str_of(n, "prepend");
        if (!p) return BAD("%s: %s Prepend without a \"prepend\" string", t->path, where);
        m->kind = TOK_NORM_PREPEND;
        if (!(m->a = strdup(p))) return OOM();
    } else if (!strcmp(ty, "Replace")) {
        json_t *pat = json_object_get(n, "pattern");
        const char *from = json_is_object(pat) ? str_of(pat, "String") : NULL, *to = str_of(n, "content");
        if (json_is_object(pat) && json_object_get(pat, "Regex"))
            return BAD("%s: %s Replace with a Regex pattern is not supported (only a String pattern)", t->path, where);
        if (!from || !from[0] || !to) return BAD("%s: %s Replace needs pattern {\"String\": ...} and \"content\"", t->path, where);
        m->kind = TOK_NORM_REPLACE;
        if (!(m->a = strdup(from)) || !(m->b = strdup(to))) { free(m->a); return OOM(); }
    } else return BAD("%s: %s type %s is not supported (NFC, Prepend, Replace and Sequence are)", t->path, where, ty);
    t->nnorm++;
    return 0;
}

static int behavior_of(const char *b) {
    if (!b) return -1;
    if (!strcmp(b, "Removed")) return TOK_SPLIT_REMOVED;
    if (!strcmp(b, "Isolated")) return TOK_SPLIT_ISOLATED;
    if (!strcmp(b, "MergedWithPrevious")) return TOK_SPLIT_PREV;
    if (!strcmp(b, "MergedWithNext")) return TOK_SPLIT_NEXT;
    if (!strcmp(b, "Contiguous")) return TOK_SPLIT_CONTIGUOUS;
    return -1;
}

static int add_pre(nd_tokenizer *t, tok_pre **out, nd_err *e) {
    tok_pre *np = realloc(t->pre, sizeof *np * (size_t)(t->npre + 1));
    if (!np) return OOM();
    t->pre = np;
    *out = &t->pre[t->npre++];
    memset(*out, 0, sizeof **out);
    return 0;
}

static int split_regex(nd_tokenizer *t, tok_pre *p, const char *pat, int literal, const char *what, nd_err *e) {
    char err[300];
    if (!(p->re = tok_regex(pat, strlen(pat), literal, err, sizeof err)))
        return BAD("%s: pre_tokenizer %s: pattern %.80s does not compile: %s", t->path, what, pat, err);
    return 0;
}

static int load_pre(nd_tokenizer *t, json_t *n, const char *where, nd_err *e) {
    const char *ty;
    ND_TRY(step_type(t, n, where, "pretokenizers", load_pre, &ty, e));
    if (!ty) return 0;
    tok_pre *p;
    if (!strcmp(ty, "Split")) {
        json_t *pat = json_object_get(n, "pattern");
        const char *rx = json_is_object(pat) ? str_of(pat, "Regex") : NULL, *lit = json_is_object(pat) ? str_of(pat, "String") : NULL;
        int b = behavior_of(str_of(n, "behavior")), inv = bool_of(n, "invert", 0);
        if (!rx && !lit) return BAD("%s: pre_tokenizer Split needs pattern {\"Regex\": ...} or {\"String\": ...}", t->path);
        if (b < 0) return BAD("%s: pre_tokenizer Split: behavior %s is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
                              t->path, str_of(n, "behavior") ? str_of(n, "behavior") : "(missing)");
        if (inv < 0) return BAD("%s: pre_tokenizer Split: invert is not a boolean", t->path);
        ND_TRY(add_pre(t, &p, e));
        p->kind = TOK_PRE_SPLIT;
        p->behavior = b;
        p->invert = inv;
        return split_regex(t, p, rx ? rx : lit, !rx, "Split", e);
    } else if (!strcmp(ty, "Digits")) {
        int ind = bool_of(n, "individual_digits", 0);
        if (ind < 0) return BAD("%s: pre_tokenizer Digits: individual_digits is not a boolean", t->path);
        ND_TRY(add_pre(t, &p, e));
        p->kind = TOK_PRE_SPLIT;   /* tokenizers splits on char::is_numeric, i.e. \p{N} */
        p->behavior = ind ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS;
        return split_regex(t, p, "\\p{N}", 0, "Digits", e);
    } else if (!strcmp(ty, "ByteLevel")) {
        int aps = bool_of(n, "add_prefix_space", 1), ur = bool_of(n, "use_regex", 1);
        if (aps < 0 || ur < 0) return BAD("%s: pre_tokenizer ByteLevel: add_prefix_space/use_regex is not a boolean", t->path);
        if (ur) {   /* GPT-2's regex first, Isolated, after the prefix space (one step, as tokenizers does) */
            ND_TRY(add_pre(t, &p, e));
            p->kind = TOK_PRE_SPLIT;
            p->behavior = TOK_SPLIT_ISOLATED;
            p->add_prefix_space = aps;
            ND_TRY(split_regex(t, p, gpt2_re, 0, "ByteLevel", e));
            aps = 0;
        }
        ND_TRY(add_pre(t, &p, e));
        p->kind = TOK_PRE_BYTELEVEL;
        p->add_prefix_space = aps;
        return 0;
    } else if (!strcmp(ty, "Metaspace")) {
        const char *r = str_of(n, "replacement"), *ps = str_of(n, "prepend_scheme");
        int sp = bool_of(n, "split", 1), aps = bool_of(n, "add_prefix_space", 1);
        if (!r || !r[0] || sp < 0 || aps < 0) return BAD("%s: pre_tokenizer Metaspace: replacement missing or split/add_prefix_space not a boolean", t->path);
        ND_TRY(add_pre(t, &p, e));
        p->kind = TOK_PRE_METASPACE;
        p->split = sp;
        if (!ps) p->prepend_scheme = aps ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;   /* older files */
        else if (!strcmp(ps, "always")) p->prepend_scheme = TOK_PREPEND_ALWAYS;
        else if (!strcmp(ps, "first")) p->prepend_scheme = TOK_PREPEND_FIRST;
        else if (!strcmp(ps, "never")) p->prepend_scheme = TOK_PREPEND_NEVER;
        else return BAD("%s: pre_tokenizer Metaspace: prepend_scheme %s is not always, first or never", t->path, ps);
        if (!(p->replacement = strdup(r))) return OOM();
        return 0;
    }
    return BAD("%s: pre_tokenizer type %s is not supported (Sequence, Split, ByteLevel, Digits and Metaspace are)", t->path, ty);
}

static int byte_val(const char *s, size_t len) {   /* "<0xAB>" -> 0xAB, else -1 */
    if (len != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static int load_model(nd_tokenizer *t, json_t *m, nd_err *e) {
    if (!json_is_object(m)) return BAD("%s: \"model\" is missing or not an object", t->path);
    const char *ty = str_of(m, "type");
    if (ty && strcmp(ty, "BPE")) return BAD("%s: model type %s is not supported (only BPE)", t->path, ty);
    json_t *vocab = json_object_get(m, "vocab"), *merges = json_object_get(m, "merges");
    if (!json_is_object(vocab)) return BAD("%s: model.vocab is missing or not an object", t->path);
    if (!json_is_array(merges)) return BAD("%s: model.merges is missing or not a list", t->path);
    json_t *d = json_object_get(m, "dropout");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0))
        return BAD("%s: model.dropout is set: BPE dropout is random, not supported", t->path);
    const char *cp = str_of(m, "continuing_subword_prefix"), *ew = str_of(m, "end_of_word_suffix");
    if ((cp && cp[0]) || (ew && ew[0]))
        return BAD("%s: model.%s is not supported", t->path, cp && cp[0] ? "continuing_subword_prefix" : "end_of_word_suffix");
    t->fuse_unk = bool_of(m, "fuse_unk", 0);
    t->byte_fallback = bool_of(m, "byte_fallback", 0);
    t->ignore_merges = bool_of(m, "ignore_merges", 0);
    if (t->fuse_unk < 0 || t->byte_fallback < 0 || t->ignore_merges < 0)
        return BAD("%s: model.fuse_unk/byte_fallback/ignore_merges is not a boolean", t->path);
    const char *k;
    json_t *v;
    json_object_foreach(vocab, k, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
            return BAD("%s: model.vocab[\"%.40s\"] is not a token id", t->path, k);
        int32_t id = (int32_t)json_integer_value(v);
        size_t len = strlen(k);
        if (tok_strmap_put(&t->vocab, k, len, id) < 0) return OOM();
        int b = byte_val(k, len);
        if (b >= 0) t->byte_tok[b] = id;
    }
    const char *unk = str_of(m, "unk_token");
    t->unk = -1;
    if (unk && (t->unk = tok_strmap_get(&t->vocab, unk, strlen(unk))) < 0)
        return BAD("%s: model.unk_token %s is not in the vocabulary", t->path, unk);
    size_t i;
    json_t *x;
    json_array_foreach(merges, i, x) {
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if (json_is_string(x)) {   /* "a b" */
            const char *s = json_string_value(x), *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) return BAD("%s: model.merges[%zu] \"%.40s\" is not two tokens separated by one space", t->path, i, s);
            a = s; la = (size_t)(sp - s); b = sp + 1; lb = strlen(b);
        } else if (json_is_array(x) && json_array_size(x) == 2 && json_is_string(json_array_get(x, 0)) && json_is_string(json_array_get(x, 1))) {
            a = json_string_value(json_array_get(x, 0)); la = strlen(a);
            b = json_string_value(json_array_get(x, 1)); lb = strlen(b);
        } else return BAD("%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", t->path, i);
        int32_t ia = tok_strmap_get(&t->vocab, a, la), ib = tok_strmap_get(&t->vocab, b, lb);
        if (ia < 0 || ib < 0)
            return BAD("%s: model.merges[%zu] names %.*s, which is not in the vocabulary", t->path, i,
                       (int)(ia < 0 ? la : lb), ia < 0 ? a : b);
        char *ab = malloc(la + lb + 1);
        if (!ab) return OOM();
        memcpy(ab, a, la);
        memcpy(ab + la, b, lb);
        int32_t io = tok_strmap_get(&t->vocab, ab, la + lb);
        free(ab);
        if (io < 0) return BAD("%s: model.merges[%zu]: the merged token %.*s%.*s is not in the vocabulary", t->path, i, (int)la, a, (int)lb, b);
        if (tok_pairmap_put(&t->merges, ia, ib, (int32_t)i, io) < 0) return OOM();
    }
    return 0;
}

static int32_t trie_node(nd_tokenizer *t, unsigned char byte) {
    if (t->ntrie == t->trie_cap) {
        const int32_t cap = t->trie_cap ? t->trie_cap * 2 : 256;
        tok_trie *n = realloc(t->trie, sizeof *n * (size_t)cap);
        if (!n) return -1;
        t->trie = n;
        t->trie_cap = cap;
    }
    t->trie[t->ntrie] = (tok_trie){-1, -1, -1, byte};
    return t->ntrie++;
}

/* add added[k] (content s, len bytes) to the trie; *dup: the index of an earlier token with the
 * same content, else left as it was. -1 out of memory. */
static int trie_add(nd_tokenizer *t, const char *s, size_t len, int k, int *dup) {
    if (!t->ntrie && trie_node(t, 0) < 0) return -1;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        const unsigned char b = (unsigned char)s[i];
        int32_t c = t->trie[node].child;
        while (c >= 0 && t->trie[c].byte != b) c = t->trie[c].sibling;
        if (c < 0) {
            if ((c = trie_node(t, b)) < 0) return -1;
            t->trie[c].sibling = t->trie[node].child;
            t->trie[node].child = c;
        }
        node = c;
    }
    if (t->trie[node].added >= 0) *dup = t->trie[node].added;
    else t->trie[node].added = k;
    return 0;
}

static int load_added(nd_tokenizer *t, json_t *list, nd_err *e) {
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return BAD("%s: added_tokens is not a list", t->path);
    size_t n = json_array_size(list), i;
    json_t *x;
    if (!(t->added = calloc(n ? n : 1, sizeof *t->added))) return OOM();
    int only_nfc = 1;
    for (int k = 0; k < t->nnorm; k++) only_nfc &= t->norm[k].kind == TOK_NORM_NFC;
    /* the tokenizers package ignores an added token's "id" on load: it adds the tokens in file order,
     * content already in the model's vocabulary keeps the vocabulary's id, and new content gets the
     * vocabulary's size, or one past the largest added id once that is at or past it (serialization.rs,
     * AddedVocabulary::add_tokens; a mismatch is only a warning there). A file whose ids differ from
     * those would make other ids here than transformers gives: refused */
    const int64_t vsize = (int64_t)t->vocab.n;
    int64_t max_added = -1;
    json_array_foreach(list, i, x) {
        const char *c = json_is_object(x) ? str_of(x, "content") : NULL;
        json_t *id = json_is_object(x) ? json_object_get(x, "id") : NULL;
        if (!c || !c[0] || !json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX)
            return BAD("%s: added_tokens[%zu] needs a non-empty \"content\" and an \"id\"", t->path, i);
        int sw = bool_of(x, "single_word", 0), ls = bool_of(x, "lstrip", 0), rs = bool_of(x, "rstrip", 0), nm = bool_of(x, "normalized", 0);
        if (sw < 0 || ls < 0 || rs < 0 || nm < 0) return BAD("%s: added_tokens[%zu] (%s): a flag is not a boolean", t->path, i, c);
        if (sw) return BAD("%s: added_tokens[%zu] (%s): single_word is not supported", t->path, i, c);
        /* a normalized token is matched on the normalized text; the same as the raw text only
         * when the normalizer changes nothing nvfp4dbg accepts (none, or NFC on NFC text) */
        if (nm && !only_nfc) return BAD("%s: added_tokens[%zu] (%s): normalized=true with a normalizer other than NFC is not supported", t->path, i, c);
        if (strlen(c) > TOK_ADDED_MAX_LEN)
            return BAD("%s: added_tokens[%zu]: %zu bytes long; added tokens of more than %d bytes are not supported", t->path, i,
                       strlen(c), TOK_ADDED_MAX_LEN);
        const int32_t idv = (int32_t)json_integer_value(id);
        const int32_t in_vocab = tok_strmap_get(&t->vocab, c, strlen(c));
        const int64_t given = in_vocab >= 0 ? in_vocab : max_added < 0 ? vsize : max_added >= vsize ? max_added + 1 : vsize;
        if (given != idv)
            return BAD("%s: added_tokens[%zu] (%s) has id %d where the tokenizers package (and transformers) gives it %lld "
                       "(%s): the file's ids are not the ones the model was run with", t->path, i, c, idv, (long long)given,
                       in_vocab >= 0 ? "its id in model.vocab" : "the next id after the vocabulary and the earlier added tokens");
        if (given > max_added) max_added = given;
        for (int k = 0; k < t->nadded; k++)
            if (t->added[k].id == idv) return BAD("%s: added_tokens[%zu] (%s): id %d is also added_tokens[%d]'s", t->path, i, c, idv, k);
        tok_added *a = &t->added[t->nadded++];
        if (!(a->content = strdup(c))) return OOM();
        a->len = strlen(c);
        a->id = idv;
        a->lstrip = ls;
        a->rstrip = rs;
        int dup = -1;
        if (trie_add(t, a->content, a->len, t->nadded - 1, &dup)) return OOM();
        if (dup >= 0) return BAD("%s: added_tokens[%zu] (%s) repeats added_tokens[%d]", t->path, i, c, dup);
    }
    return 0;
}

static int push_ids(int32_t **v, int *n, const int32_t *ids, size_t k, nd_err *e) {
    int32_t *nv = realloc(*v, sizeof **v * (size_t)(*n + (int)k + 1));
    if (!nv) return OOM();
    memcpy(nv + *n, ids, sizeof *ids * k);
    *v = nv;
    *n += (int)k;
    return 0;
}

static int load_post(nd_tokenizer *t, json_t *p, const char *where, nd_err *e) {
    const char *ty;
    ND_TRY(step_type(t, p, where, "processors", load_post, &ty, e));
    if (!ty || !strcmp(ty, "ByteLevel")) return 0;   /* ByteLevel: offsets only */
    if (strcmp(ty, "TemplateProcessing")) return BAD("%s: post_processor type %s is not supported (TemplateProcessing, ByteLevel and Sequence are)", t->path, ty);
    if (t->npost_pre || t->npost_post) return BAD("%s: post_processor holds two TemplateProcessing steps", t->path);
    json_t *single = json_object_get(p, "single"), *sp = json_object_get(p, "special_tokens");
    if (!json_is_array(single) || !json_is_object(sp)) return BAD("%s: post_processor TemplateProcessing needs \"single\" and \"special_tokens\"", t->path);
    int seen_a = 0;
    size_t i;
    json_t *x;
    json_array_foreach(single, i, x) {
        json_t *st = json_object_get(x, "SpecialToken"), *sq = json_object_get(x, "Sequence");
        if (json_is_object(sq)) {
            const char *id = str_of(sq, "id");
            if (!id || strcmp(id, "A") || seen_a) return BAD("%s: post_processor TemplateProcessing single: a Sequence other than one $A", t->path);
            seen_a = 1;
            continue;
        }
        const char *name = json_is_object(st) ? str_of(st, "id") : NULL;
        json_t *def = name ? json_object_get(sp, name) : NULL, *ids = json_is_object(def) ? json_object_get(def, "ids") : NULL;
        if (!json_is_array(ids)) return BAD("%s: post_processor TemplateProcessing single[%zu]: special token %s has no ids in special_tokens", t->path, i, name ? name : "(missing)");
        size_t j;
        json_t *y;
        json_array_foreach(ids, j, y) {
            if (!json_is_integer(y) || json_integer_value(y) < 0 || json_integer_value(y) > INT32_MAX)
                return BAD("%s: post_processor special token %s: ids[%zu] is not a token id", t->path, name, j);
            int32_t v = (int32_t)json_integer_value(y);
            ND_TRY(seen_a ? push_ids(&t->post_post, &t->npost_post, &v, 1, e) : push_ids(&t->post_pre, &t->npost_pre, &v, 1, e));
        }
    }
    if (!seen_a) return BAD("%s: post_processor TemplateProcessing single has no $A", t->path);
    return 0;
}

/* truncation {"max_length": N, ...} and padding {"strategy": "BatchLongest" | {"Fixed": N},
 * "pad_to_multiple_of": M|null, ...}: recorded for the check in tok_encode.c */
static int load_trunc_pad(nd_tokenizer *t, json_t *trunc, json_t *pad, nd_err *e) {
    if (trunc && !json_is_null(trunc)) {
        json_t *m = json_object_get(trunc, "max_length");
        if (!json_is_object(trunc) || !json_is_integer(m) || json_integer_value(m) < 1)
            return BAD("%s: truncation is not an object with a positive integer max_length", t->path);
        t->trunc_max = json_integer_value(m);
    }
    if (pad && !json_is_null(pad)) {
        if (!json_is_object(pad)) return BAD("%s: padding is not an object", t->path);
        json_t *st = json_object_get(pad, "strategy"), *mul = json_object_get(pad, "pad_to_multiple_of");
        if (json_is_object(st)) {
            json_t *fx = json_object_get(st, "Fixed");
            if (!json_is_integer(fx) || json_integer_value(fx) < 1)
                return BAD("%s: padding.strategy is an object without a positive integer Fixed", t->path);
            t->pad_fixed = json_integer_value(fx);
        } else if (!json_is_string(st) || strcmp(json_string_value(st), "BatchLongest"))
            return BAD("%s: padding.strategy is neither \"BatchLongest\" nor {\"Fixed\": N}", t->path);
        if (mul && !json_is_null(mul)) {
            if (!json_is_integer(mul) || json_integer_value(mul) < 1)
                return BAD("%s: padding.pad_to_multiple_of is not a positive integer", t->path);
            t->pad_multiple = json_integer_value(mul);
        }
    }
    return 0;
}

static int load_doc(nd_tokenizer *t, json_t *root, nd_err *e) {
    if (!json_is_object(root)) return BAD("%s: not a tokenizer.json (the top level is not an object)", t->path);
    ND_TRY(load_trunc_pad(t, json_object_get(root, "truncation"), json_object_get(root, "padding"), e));
    for (int b = 0; b < 256; b++) t->byte_tok[b] = -1;
    ND_TRY(load_model(t, json_object_get(root, "model"), e));
    ND_TRY(load_normalizer(t, json_object_get(root, "normalizer"), "normalizer", e));
    ND_TRY(load_pre(t, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", e));
    ND_TRY(load_added(t, json_object_get(root, "added_tokens"), e));
    ND_TRY(load_post(t, json_object_get(root, "post_processor"), "post_processor", e));
    if (!(t->md = pcre2_match_data_create(4, NULL))) return OOM();
    /* a pattern of tokenizer.json runs under PCRE2's limits: a catastrophic one (nested
     * quantifiers, back-references) stops with an error instead of running for minutes. The
     * real pre-tokenizers (GPT-2, Llama 3, Qwen 2) use a few hundred steps per match. */
    if (!(t->mc = pcre2_match_context_create(NULL))) return OOM();
    pcre2_set_match_limit(t->mc, 1000000);
    pcre2_set_depth_limit(t->mc, 10000);
    pcre2_set_heap_limit(t->mc, 64 * 1024); /* KiB */
    return 0;
}

int nd_tokenizer_load(const char *path, nd_tokenizer **out, nd_err *e) {
    *out = NULL;
    ND_TRY(nd_input_regular(path, e));
    json_error_t je;
    json_t *root = nd_json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return BAD("%s: not valid JSON: %s (line %d)", path, je.text, je.line);
    nd_tokenizer *t = calloc(1, sizeof *t);
    int rc = !t || !(t->path = strdup(path)) ? OOM() : load_doc(t, root, e);
    json_decref(root);
    if (rc) { nd_tokenizer_free(t); return rc; }
    *out = t;
    return 0;
}

void nd_tokenizer_free(nd_tokenizer *t) {
    if (!t) return;
    tok_strmap_free(&t->vocab);
    tok_pairmap_free(&t->merges);
    for (int i = 0; i < t->nnorm; i++) { free(t->norm[i].a); free(t->norm[i].b); }
    free(t->norm);
    for (int i = 0; i < t->npre; i++) { pcre2_code_free(t->pre[i].re); free(t->pre[i].replacement); }
    free(t->pre);
    for (int i = 0; i < t->nadded; i++) free(t->added[i].content);
    free(t->added);
    free(t->trie);
    free(t->post_pre);
    free(t->post_post);
    pcre2_code_free(t->bytelevel_re);
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mc);
    tok_strmap_free(&t->cache);
    for (uint32_t i = 0; i < t->ncache; i++) free(t->cache_ids[i]);
    free(t->cache_ids);
    free(t->cache_n);
    free(t->path);
    free(t);
}

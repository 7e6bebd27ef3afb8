/* prompt.c — --prompt / --prompt-file / --chat: the text through the checkpoint's tokenizer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/infile.h"

#define PROMPT_FILE_MAX (16u << 20)

int nd_prompt_option(nd_prompt *p, const char *a, const char *v) {
    if (!strcmp(a, "--chat")) { p->chat = 1; return 1; }
    if (!strcmp(a, "--tokenizer")) {
        if (!v) return -1;
        p->tokenizer = v;
        return 2;
    }
    if (strcmp(a, "--prompt") && strcmp(a, "--prompt-file")) return 0;
    if (!v) return -1;
    if (!strcmp(a, "--prompt")) p->text = v, p->file = NULL;
    else p->file = v, p->text = NULL;
    return 2;
}

int nd_prompt_given(const nd_prompt *p) { return p->text || p->file; }

const char *nd_prompt_text(const nd_prompt *p) { return p->buf ? p->buf : p->text; }

static int read_file(nd_prompt *p, size_t *len, nd_err *e) {
    ND_TRY(nd_input_regular(p->file, e));
    const char *kind;
    FILE *f = nd_fopen_regular(p->file, &kind);
    if (!f) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open the prompt file: %s", p->file, kind ? kind : strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        if (cap >= PROMPT_FILE_MAX) { free(b); fclose(f); return nd_fail(e, ND_EXIT_BADINPUT, "%s: prompt file larger than 16 MB", p->file); }
        char *nb = realloc(b, (cap *= 2) + 1);
        if (!nb) { free(b); b = NULL; break; }
        b = nb;
    }
    int err = ferror(f);
    fclose(f);
    if (!b) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (err) { free(b); return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read the prompt file", p->file); }
    b[n] = 0;
    if (memchr(b, 0, n)) {
        size_t at = (size_t)((char *)memchr(b, 0, n) - b);
        free(b);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: a NUL byte at byte offset %zu: not a text file", p->file, at);
    }
    p->buf = b;
    *len = n;
    return 0;
}

int nd_prompt_tokens(nd_prompt *p, const char *ckpt_dir, int have_tokens, int64_t **tokens, int64_t *n, nd_err *e) {
    if (have_tokens) return nd_fail(e, ND_EXIT_BADINPUT, "--tokens and --prompt/--prompt-file: give the prompt one way");
    *tokens = NULL;
    *n = 0;
    size_t len = 0;
    const char *what = p->file ? p->file : "--prompt";
    if (p->file) ND_TRY(read_file(p, &len, e));
    else len = strlen(p->text);
    const char *text = nd_prompt_text(p);
    size_t bad;
    if (nd_utf8_check(text, len, &bad))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid UTF-8 at byte offset %zu (byte 0x%02X); the prompt must be UTF-8 text",
                       what, bad, (unsigned char)text[bad]);
    /* the checkpoint's tokenizer files are read only when they lie inside it (a link out of the
     * folder is refused before anything is read: a parse error would print the start of the file) */
    if (!p->tokenizer) ND_TRY(nd_dir_links_ok(ckpt_dir, e));
    char tj[4096], cfg[4096];
    struct stat st;
    if (p->tokenizer && stat(p->tokenizer, &st) == 0 && !S_ISDIR(st.st_mode)) {
        /* a tokenizer.json file: its tokenizer_config.json (chat template) beside it */
        const char *slash = strrchr(p->tokenizer, '/');
        snprintf(tj, sizeof tj, "%s", p->tokenizer);
        snprintf(cfg, sizeof cfg, "%.*stokenizer_config.json", slash ? (int)(slash - p->tokenizer + 1) : 0, p->tokenizer);
    } else {
        const char *dir = p->tokenizer ? p->tokenizer : ckpt_dir;
        snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    }
    const char *kind;
    FILE *f = nd_fopen_regular(tj, &kind); /* never blocks on a FIFO */
    if (!f && kind) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read it", tj, kind);
    if (!f && p->tokenizer) return nd_fail(e, ND_EXIT_BADINPUT, "%s: no tokenizer.json (--tokenizer %s)", tj, p->tokenizer);
    if (!f) return nd_fail(e, ND_EXIT_BADINPUT, "%s: no tokenizer next to config.json, needed for --prompt; give one with "
                           "--tokenizer DIR|FILE, or token ids with --tokens", tj);
    fclose(f);
    snprintf(p->tokenizer_used, sizeof p->tokenizer_used, "%s", tj);
    nd_tokenizer *t = NULL;
    ND_TRY(nd_tokenizer_load(tj, &t, e));
    char *chat = NULL;
    int rc = 0;
    if (p->chat) rc = nd_chat_render(cfg, text, &chat, &p->chat_name, e);
    if (!rc) rc = chat ? nd_tokenizer_encode(t, chat, strlen(chat), 0, what, tokens, n, e)
                       : nd_tokenizer_encode(t, text, len, 1, what, tokens, n, e);
    if (!rc && !*n) {
        free(*tokens);
        *tokens = NULL;
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: the prompt gives no tokens", what);
    }
    free(chat);
    nd_tokenizer_free(t);
    return rc;
}

void nd_prompt_explain_vocab(const nd_prompt *p, nd_err *e) {
    if (!e->code || !p->tokenizer_used[0] || !strstr(e->msg, "is outside the vocabulary")) return;
    const size_t l = strlen(e->msg);
    snprintf(e->msg + l, sizeof e->msg - l, ": the prompt was tokenized with %s, a tokenizer of another model? (--tokenizer "
             "names the checkpoint's own)", p->tokenizer_used);
}

void nd_prompt_free(nd_prompt *p) {
    free(p->buf);
    p->buf = NULL;
}

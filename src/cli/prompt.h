/* prompt.h — --prompt TEXT, --prompt-file FILE and --chat (issue 22): the prompt as text,
 * tokenized with the checkpoint's tokenizer.json (src/tokenizer/), for every command that takes
 * --tokens (trace, bisect). */
#ifndef ND_PROMPT_H
#define ND_PROMPT_H
#include <stdint.h>
#include "util/err.h"

typedef struct nd_prompt {
    const char *text;        /* --prompt */
    const char *file;        /* --prompt-file */
    int chat;                /* --chat */
    char *buf;               /* the file's text */
    const char *chat_name;   /* the chat format applied (after nd_prompt_tokens) */
    const char *tokenizer;   /* --tokenizer: a folder with tokenizer.json (and tokenizer_config.json),
                              * or a tokenizer.json file; NULL: the checkpoint's */
    char tokenizer_used[4096]; /* the tokenizer.json the prompt was tokenized with (after nd_prompt_tokens) */
} nd_prompt;

/* The option a (with its value v, NULL when none) if it is --prompt, --prompt-file, --chat or
 * --tokenizer: 1 when a was taken
 * without its value, 2 with it (the caller skips v), 0 when a is another option, -1 when it needs
 * a value and v is NULL. */
int nd_prompt_option(nd_prompt *p, const char *a, const char *v);
/* 1 when --prompt or --prompt-file was given */
int nd_prompt_given(const nd_prompt *p);
/* The prompt's ids with CKPT/tokenizer.json (and --chat: CKPT/tokenizer_config.json's template).
 * have_tokens: --tokens was given too (refused). Exit 2 on bad input naming the file. */
int nd_prompt_tokens(nd_prompt *p, const char *ckpt_dir, int have_tokens, int64_t **tokens, int64_t *n, nd_err *e);
/* the text the user gave (after nd_prompt_tokens) */
const char *nd_prompt_text(const nd_prompt *p);
void nd_prompt_free(nd_prompt *p);
/* A run refused a prompt's token id as outside the vocabulary: the message gets the tokenizer the
 * prompt was tokenized with (another model's tokenizer, the usual reason). */
void nd_prompt_explain_vocab(const nd_prompt *p, nd_err *e);
#endif

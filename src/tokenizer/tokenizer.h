/* tokenizer.h — a checkpoint's tokenizer.json, applied as the `tokenizers` package applies it, for
 * `--prompt` (issue 22, docs/tokenizer.md). Only BPE models (byte-level as Llama 3, Qwen, DeepSeek,
 * Mistral-Nemo ship them; SentencePiece-style with "▁" and <0xXX> byte fallback as Llama 2 and
 * Mistral 7B do); the pre-tokenizer regexes run with PCRE2. Anything in the file this code does
 * not implement is refused when loading (exit 2 naming the file and the component), never
 * tokenized differently. */
#ifndef ND_TOKENIZER_H
#define ND_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

typedef struct nd_tokenizer nd_tokenizer;

/* Load PATH (a tokenizer.json). Malformed or unsupported: exit 2 naming the file. */
int nd_tokenizer_load(const char *path, nd_tokenizer **out, nd_err *e);
void nd_tokenizer_free(nd_tokenizer *t);

/* Token ids of text (len bytes of UTF-8; invalid UTF-8 is refused with its byte offset, named
 * after `what`). add_special: apply the post-processor (the BOS the file's TemplateProcessing adds),
 * as tokenizers' encode(text) does by default; 0 as transformers' apply_chat_template does.
 * *ids is malloc'd (also for zero ids). */
int nd_tokenizer_encode(nd_tokenizer *t, const char *text, size_t len, int add_special, const char *what,
                        int64_t **ids, int64_t *n, nd_err *e);

/* 0 when s (len bytes) is valid UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF); else -1 with *bad the offset of the first byte that is not. */
int nd_utf8_check(const char *s, size_t len, size_t *bad);

/* --chat: the prompt as the checkpoint's chat template renders one user turn with the generation
 * prompt, for the families' templates recognised by their signature strings in
 * tokenizer_config.json's chat_template (chat.c lists them). *out is malloc'd; *name the format.
 * An unknown template: exit 2 suggesting --prompt without --chat. */
int nd_chat_render(const char *config_path, const char *text, char **out, const char **name, nd_err *e);
#endif

/* fuzz_tokenizer.c — --prompt's path: tokenizer.json (nd_tokenizer_load) and the encoding of a
 * prompt with it. The input is the tokenizer.json text, a NUL byte, then the prompt (no NUL: a
 * fixed prompt). A file that loads must encode any valid UTF-8 prompt to ids inside its vocabulary
 * or refuse with exit 2 naming the file or the prompt (PCRE2's limits included); never a crash,
 * a hang or a leak. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tokenizer.h"
#include "fuzz_common.h"

static int load(const char *path, void *out, nd_err *e) { return nd_tokenizer_load(path, out, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t jlen = nul ? (size_t)(nul - data) : size;
    const char *prompt = nul ? (const char *)nul + 1 : "Hello world, aaaa 12345 \xc3\xa9t\xc3\xa9!";
    const size_t plen = nul ? size - jlen - 1 : strlen(prompt);
    nd_tokenizer *t = NULL;
    if (!fz_parse("tokenizer.json", data, jlen, load, &t)) return 0;
    size_t bad;
    if (nd_utf8_check(prompt, plen, &bad) == 0) {
        nd_err e = {0};
        int64_t *ids = NULL, n = 0;
        int rc = nd_tokenizer_encode(t, prompt, plen, 1, "--prompt", &ids, &n, &e);
        if (rc) FZ_ASSERT(rc == ND_EXIT_BADINPUT && e.code == rc && (strstr(e.msg, "tokenizer.json") || strstr(e.msg, "--prompt")),
                          "encode: rc %d: %s", rc, e.msg);
        else FZ_ASSERT(n >= 0 && (n == 0 || ids), "encode gave %lld ids", (long long)n);
        for (int64_t i = 0; !rc && i < n; i++) FZ_ASSERT(ids[i] >= 0, "id %lld < 0", (long long)ids[i]);
        free(ids);
    }
    nd_tokenizer_free(t);
    return 0;
}

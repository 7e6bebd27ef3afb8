/* fuzz_tokens.c — --tokens text and --tokens-file parsing. Accepted input gives at least one id,
 * every id >= 0; on input without NUL bytes, what the --tokens parser accepts the file reader
 * accepts with the same ids (a file may also separate ids by whitespace and line breaks). */
#include <stdlib.h>
#include <string.h>
#include "cli/tokens.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    int64_t *v = NULL, n = 0;
    nd_err e = {0};
    int rc = nd_tokens_parse(text, "--tokens", &v, &n, &e);
    fz_check_err(rc, &e, "--tokens");
    if (!rc) {
        FZ_ASSERT(n > 0, "no ids");
        for (int64_t i = 0; i < n; i++) FZ_ASSERT(v[i] >= 0, "negative id");
    }
    const char *p = fz_write("tokens.txt", data, size);
    int64_t *w = NULL, m = 0;
    nd_err e2 = {0};
    int rc2 = nd_tokens_file(p, &w, &m, &e2);
    fz_check_err(rc2, &e2, p);
    if (!memchr(data, 0, size)) {
        FZ_ASSERT(rc || (!rc2 && n == m && !memcmp(v, w, (size_t)n * sizeof *v)), "file and text disagree");
    }
    free(v);
    free(w);
    free(text);
    return 0;
}

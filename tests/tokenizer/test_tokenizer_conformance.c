/* test_tokenizer_conformance.c — src/tokenizer against the `tokenizers` package and transformers:
 * for every family under golden/tokenizers/ (made by tools/conformance/make_tokenizers.py), every
 * test string's ids equal tokenizers' Tokenizer.encode(text).ids, every --chat rendering equals
 * apply_chat_template's text and ids, and the texts the family must refuse (not NFC for an NFC
 * normalizer) exit 2.
 *   usage: test_tokenizer_conformance GOLDEN_TOKENIZERS_DIR FAMILY... */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "tokenizer/tokenizer.h"

static int ids_equal(const int64_t *a, int64_t n, json_t *want, char *why, size_t cap) {
    if ((size_t)n != json_array_size(want)) { snprintf(why, cap, "%lld ids, expected %zu", (long long)n, json_array_size(want)); }
    for (int64_t i = 0; i < n && (size_t)i < json_array_size(want); i++)
        if (a[i] != json_integer_value(json_array_get(want, (size_t)i))) {
            snprintf(why, cap, "id %lld is %lld, expected %lld", (long long)i, (long long)a[i], (long long)json_integer_value(json_array_get(want, (size_t)i)));
            return 0;
        }
    return (size_t)n == json_array_size(want);
}

static void show(FILE *f, const int64_t *ids, int64_t n) {
    for (int64_t i = 0; i < n; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)ids[i]);
    fputc('\n', f);
}

static void family(const char *root, const char *name) {
    char tj[4096], cj[4096], cfg[4096];
    snprintf(tj, sizeof tj, "%s/%s/tokenizer.json", root, name);
    snprintf(cj, sizeof cj, "%s/%s/cases.json", root, name);
    snprintf(cfg, sizeof cfg, "%s/%s/tokenizer_config.json", root, name);
    nd_err e = {0};
    nd_tokenizer *t = NULL;
    int rc = nd_tokenizer_load(tj, &t, &e);
    CHECK(rc == 0, "%s: load: %s", name, e.msg);
    json_error_t je;
    json_t *doc = json_load_file(cj, 0, &je);
    CHECK(doc != NULL, "%s: %s", cj, je.text);
    if (rc || !doc) { nd_tokenizer_free(t); json_decref(doc); return; }
    int ok_cases = 0, ok_chats = 0, ok_err = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        int64_t *ids = NULL, n = 0;
        char why[128] = "";
        int r = nd_tokenizer_encode(t, text, strlen(text), 1, "test", &ids, &n, &e);
        int ok = !r && ids_equal(ids, n, json_object_get(c, "ids"), why, sizeof why);
        CHECK(ok, "%s: case %zu \"%s\": %s", name, i, text, r ? e.msg : why);
        if (!ok && !r) show(stderr, ids, n);
        ok_cases += ok;
        free(ids);
    }
    json_array_foreach(json_object_get(doc, "chats"), i, c) {
        const char *text = json_string_value(json_object_get(c, "chat")), *want = json_string_value(json_object_get(c, "rendered")), *fmt = NULL;
        char *out = NULL;
        int r = nd_chat_render(cfg, text, &out, &fmt, &e);
        CHECK(!r && !strcmp(out, want), "%s: chat %zu \"%s\": %s\n  got  [%s]\n  want [%s]", name, i, text, r ? e.msg : "rendering differs", out ? out : "", want);
        int64_t *ids = NULL, n = 0;
        char why[128] = "";
        int ok = 0;
        if (!r) {
            r = nd_tokenizer_encode(t, out, strlen(out), 0, "test", &ids, &n, &e);
            ok = !r && ids_equal(ids, n, json_object_get(c, "ids"), why, sizeof why);
            CHECK(ok, "%s: chat %zu ids: %s", name, i, r ? e.msg : why);
        }
        ok_chats += ok;
        free(ids);
        free(out);
    }
    json_array_foreach(json_object_get(doc, "errors"), i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        int64_t *ids = NULL, n = 0;
        nd_err e2 = {0};
        int r = nd_tokenizer_encode(t, text, strlen(text), 1, "test", &ids, &n, &e2);
        CHECK(r == ND_EXIT_BADINPUT && strstr(e2.msg, json_string_value(json_object_get(c, "error"))),
              "%s: \"%s\" should be refused (%s), got rc %d: %s", name, text, json_string_value(json_object_get(c, "error")), r, e2.msg);
        ok_err += r == ND_EXIT_BADINPUT;
        free(ids);
    }
    printf("%s: %d/%zu strings, %d/%zu chat prompts, %d/%zu refusals\n", name, ok_cases, json_array_size(json_object_get(doc, "cases")),
           ok_chats, json_array_size(json_object_get(doc, "chats")), ok_err, json_array_size(json_object_get(doc, "errors")));
    CHECK(json_array_size(json_object_get(doc, "cases")) >= 40, "%s: only %zu cases", name, json_array_size(json_object_get(doc, "cases")));
    json_decref(doc);
    nd_tokenizer_free(t);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s GOLDEN_TOKENIZERS_DIR FAMILY...\n", argv[0]); return 2; }
    for (int i = 2; i < argc; i++) family(argv[1], argv[i]);
    return nd_test_report("tokenizer_conformance");
}

/* test_yaml_doc.c — the typed YAML reader (src/recipe/yaml_doc.h) on real files: every accepted
 * spelling of each type gives its value, everything else is exit 2 naming file, line and key with
 * the value; empty, malformed, too deep and non-regular files are refused or reported as such. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nd_test.h"
#include "recipe/yaml_doc.h"

static char dir[256], path[512];

static const char *put(const char *text) {
    snprintf(path, sizeof path, "%s/t.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

/* the value node of `key` in the root mapping */
static yaml_node_t *val(nd_ydoc *d, const char *key) {
    yaml_node_t *root = nd_ydoc_root(d);
    if (!root || root->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++)
        if (!strcmp(nd_ydoc_scalar(nd_ydoc_node(d, p->key)), key)) return nd_ydoc_node(d, p->value);
    return NULL;
}

static void check_bool(const char *text, int want) { /* want -1: refused */
    char doc[128];
    snprintf(doc, sizeof doc, "a: 1\nflag: %s\n", text);
    nd_ydoc d;
    nd_err e = {0};
    CHECK(nd_ydoc_load(&d, put(doc), "test file", &e) == 0, "%s", e.msg);
    int v = -7, rc = nd_ydoc_bool(&d, "flag", val(&d, "flag"), &v);
    if (want >= 0) CHECK(rc == 0 && v == want, "bool '%s': rc %d value %d (want %d) %s", text, rc, v, want, e.msg);
    else {
        char expect[600];
        snprintf(expect, sizeof expect, "%s:2: flag must be a YAML boolean", path);
        CHECK(rc == 2 && e.code == 2 && strstr(e.msg, expect), "bool '%s': rc %d msg '%s'", text, rc, e.msg);
    }
    nd_ydoc_free(&d);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/nd-ydoc-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "1"};
    const char *no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "0"};
    for (int i = 0; i < 10; i++) { check_bool(yes[i], 1); check_bool(no[i], 0); }
    const char *bad[] = {"banana", "\"true\"", "'yes'", "2", "tRUE", "y", "[true]", "{a: 1}", "~"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_bool(bad[i], -1);

    nd_ydoc d;
    nd_err e = {0};
    CHECK(nd_ydoc_load(&d, put("x: 2.5\nq: \"2.5\"\nn: nan\ni: inf\nbig: 1e400\nw: 3\nf: 3.5\nname: own\nlong: abcdefghij\n"),
                       "test file", &e) == 0, "%s", e.msg);
    double x = 0;
    long l = 0;
    int k = -1;
    char buf[8];
    CHECK(nd_ydoc_number(&d, "x", val(&d, "x"), 0, 10, &x) == 0 && x == 2.5, "x %g %s", x, e.msg);
    CHECK(nd_ydoc_number(&d, "x", val(&d, "x"), 3, 10, &x) == 2 && strstr(e.msg, ":1: x is 2.5, outside [3, 10]"), "%s", e.msg);
    CHECK(nd_ydoc_number(&d, "q", val(&d, "q"), 0, 10, &x) == 2 && strstr(e.msg, ":2: q must be a number (unquoted), not '2.5'"), "%s", e.msg);
    CHECK(nd_ydoc_number(&d, "n", val(&d, "n"), -1e9, 1e9, &x) == 2 && strstr(e.msg, ":3: n must be a number"), "%s", e.msg);
    CHECK(nd_ydoc_number(&d, "i", val(&d, "i"), -HUGE_VAL, HUGE_VAL, &x) == 2 && strstr(e.msg, ":4: i must be a number"), "%s", e.msg);
    CHECK(nd_ydoc_number(&d, "big", val(&d, "big"), -HUGE_VAL, HUGE_VAL, &x) == 2 && strstr(e.msg, ":5: big must be a number"), "%s", e.msg);
    CHECK(nd_ydoc_int(&d, "w", val(&d, "w"), 1, 4, &l) == 0 && l == 3, "w %ld %s", l, e.msg);
    CHECK(nd_ydoc_int(&d, "f", val(&d, "f"), 1, 4, &l) == 2 && strstr(e.msg, ":7: f must be a whole number, not '3.5'"), "%s", e.msg);
    static const char *const rules[] = {"own", "max", "min"};
    CHECK(nd_ydoc_enum(&d, "name", val(&d, "name"), rules, 3, &k) == 0 && k == 0, "%d %s", k, e.msg);
    CHECK(nd_ydoc_enum(&d, "x", val(&d, "x"), rules, 3, &k) == 2 && strstr(e.msg, ":1: x must be own, max or min, not '2.5'"), "%s", e.msg);
    CHECK(nd_ydoc_text(&d, "name", val(&d, "name"), buf, sizeof buf) == 0 && !strcmp(buf, "own"), "%s", buf);
    CHECK(nd_ydoc_text(&d, "long", val(&d, "long"), buf, sizeof buf) == 2 && strstr(e.msg, ":9: long is too long (10 characters, at most 7)"), "%s", e.msg);
    nd_ydoc_free(&d);

    /* an empty file: loads with no root; malformed: the line of the problem */
    CHECK(nd_ydoc_load(&d, put(""), "test file", &e) == 0 && nd_ydoc_root(&d) == NULL, "%s", e.msg);
    nd_ydoc_free(&d);
    CHECK(nd_ydoc_load(&d, put("a: 1\nb: [1, 2\nc: 3\n"), "test file", &e) == 2 && strstr(e.msg, "malformed YAML"), "%s", e.msg);
    /* too deep: refused before the load */
    char deep[400] = "a: ";
    for (int i = 0; i < 100; i++) strcat(deep, "[");
    CHECK(nd_ydoc_load(&d, put(deep), "test file", &e) == 2 && strstr(e.msg, "nested deeper than 64 levels"), "%s", e.msg);
    /* not a regular file, and a missing file */
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo.yaml", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    CHECK(nd_ydoc_load(&d, fifo, "test file", &e) == 2 && strstr(e.msg, "not a regular file"), "%s", e.msg);
    unlink(fifo);
    snprintf(fifo, sizeof fifo, "%s/none.yaml", dir);
    CHECK(nd_ydoc_load(&d, fifo, "stack profile", &e) == 2 && strstr(e.msg, "none.yaml: cannot open stack profile"), "%s", e.msg);
    unlink(path);
    rmdir(dir);
    return nd_test_report("yaml_doc");
}

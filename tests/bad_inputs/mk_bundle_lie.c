/* mk_bundle_lie.c — a bundle whose stage names a module its tensors lack: IN's /text/stage_yaml with
 * every "q_a_proj" written "q_zz_pro" (same length; the bad-input corpus: replay's message must name the
 * bundle, not the temporary folder it unpacks into).
 * With "esc" as a third argument, instead: the rows' name, mode and verdict end in terminal escapes
 * (an OSC title and a colour), as a tampered bundle carries them (replay must escape them).
 * With "norows": the first input holds 0 rows (a stage replayed on nothing). With "opyaml": the
 * stage_yaml's op is "identity" while the bundle's op and rows say otherwise.
 *   usage: mk_bundle_lie IN.h5 OUT.h5 [esc|norows|opyaml] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/bundle_file.h"

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 4 && (!strcmp(argv[3], "esc") || !strcmp(argv[3], "norows") || !strcmp(argv[3], "opyaml")))) {
        fprintf(stderr, "usage: mk_bundle_lie IN.h5 OUT.h5 [esc|norows|opyaml]\n");
        return 2;
    }
    nd_err e = {0};
    nd_bundle *b = NULL;
    if (nd_bundle_read(argv[1], &b, &e)) { fprintf(stderr, "mk_bundle_lie: %s\n", e.msg); return 1; }
    int n = 0;
    if (argc == 4 && strcmp(argv[3], "esc")) {
        if (!strcmp(argv[3], "norows")) {
            n = b->n_in > 0;
            if (n) b->in[0].rows = 0;
        } else {
            /* the op's value as repro writes it (a quoted flow mapping) or plain */
            char want[48], *p;
            static const char *const forms[][2] = {{"\"op\": \"%s\"", "\"op\": \"identity\""}, {"op: \"%s\"", "op: \"identity\""},
                                                   {"op: %s", "op: identity"}};
            const char *rep = NULL;
            p = NULL;
            for (size_t k = 0; k < sizeof forms / sizeof forms[0] && !p; k++) {
                snprintf(want, sizeof want, forms[k][0], b->op);
                if ((p = strstr(b->stage_yaml, want))) rep = forms[k][1];
            }
            if (p) {
                const size_t head = (size_t)(p - b->stage_yaml), tail = strlen(p + strlen(want)), rl = strlen(rep);
                char *y = malloc(head + rl + tail + 1);
                if (y) {
                    memcpy(y, b->stage_yaml, head);
                    memcpy(y + head, rep, rl);
                    memcpy(y + head + rl, p + strlen(want), tail + 1);
                    free(b->stage_yaml);
                    b->stage_yaml = y;
                    n = 1;
                }
            }
        }
        int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
        if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", n ? e.msg : "nothing to change");
        nd_bundle_free(b);
        return rc ? 1 : 0;
    }
    if (argc == 4) {
        static const char esc[] = "\033]0;T\007\033[31m";
        for (int i = 0; i < b->n_rows; i++, n++) {
            nd_row *r = &b->rows[i];
            size_t len = strlen(r->name);
            if (len + sizeof esc > sizeof r->name) len = sizeof r->name - sizeof esc;
            memcpy(r->name + len, esc, sizeof esc);
            snprintf(r->mode, sizeof r->mode, "iso%s", esc);
            snprintf(r->verdict, sizeof r->verdict, "ok%s", esc);
        }
        int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
        if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", n ? e.msg : "no rows in the bundle");
        nd_bundle_free(b);
        return rc ? 1 : 0;
    }
    for (char *p = b->stage_yaml; (p = strstr(p, "q_a_proj")); p += 8) { memcpy(p, "q_zz_pro", 8); n++; }
    int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
    if (!n) fprintf(stderr, "mk_bundle_lie: no q_a_proj in the stage\n");
    else if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", e.msg);
    nd_bundle_free(b);
    return rc ? 1 : 0;
}

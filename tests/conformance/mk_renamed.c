/* mk_renamed.c — rewrite a checkpoint's weights under other names, as other exporters save them:
 * every tensor name is rewritten by the FROM=TO pairs given (plain substring replacement, first
 * match per pair), the bytes unchanged. Used to load one model under each naming the Hub uses
 * (issue 32: Mixtral's experts as w1/w2/w3 with weight_packed, as RedHatAI-style exports keep them).
 *   usage: mk_renamed SRC.safetensors-folder OUT.safetensors FROM=TO ... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: mk_renamed SRC_DIR OUT.safetensors FROM=TO ...\n"); return 2; }
    nd_err e = {0};
    nd_ckpt *ck = NULL;
    nd_st_writer *w = NULL;
    if (nd_ckpt_open(argv[1], &ck, &e) || nd_st_writer_open(argv[2], &w, &e)) {
        fprintf(stderr, "mk_renamed: %s\n", e.msg);
        return 2;
    }
    int rc = 0, renamed = 0;
    for (size_t i = 0; !rc && i < nd_ckpt_count(ck); i++) {
        const nd_tview *t = nd_ckpt_at(ck, i);
        char name[512];
        snprintf(name, sizeof name, "%s", t->name);
        for (int a = 3; a < argc; a++) {
            const char *eq = strchr(argv[a], '=');
            if (!eq) { fprintf(stderr, "mk_renamed: %s: expected FROM=TO\n", argv[a]); return 2; }
            const size_t fl = (size_t)(eq - argv[a]);
            char from[256];
            if (fl == 0 || fl >= sizeof from) { fprintf(stderr, "mk_renamed: %s: bad FROM\n", argv[a]); return 2; }
            memcpy(from, argv[a], fl);
            from[fl] = 0;
            char *at = strstr(name, from);
            if (!at) continue;
            char out[512];
            snprintf(out, sizeof out, "%.*s%s%s", (int)(at - name), name, eq + 1, at + fl);
            snprintf(name, sizeof name, "%s", out);
            renamed++;
        }
        rc = nd_st_writer_add(w, name, t->dtype, t->ndim, t->shape, t->data, &e);
    }
    if (!rc) rc = nd_st_writer_close(w, &e);
    else nd_st_writer_abort(w);
    nd_ckpt_close(ck);
    if (rc) { fprintf(stderr, "mk_renamed: %s\n", e.msg); return 2; }
    printf("%d names rewritten\n", renamed);
    return renamed ? 0 : 1;
}

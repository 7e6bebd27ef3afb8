#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "util/term.h"
#include "cli.h"
#include "util/progress.h"

int nd_cli_error(const nd_err *e) {
    nd_progress_clear(); /* a progress bar on the terminal goes before the message */
    /* messages quote names taken from files and arguments: never raw control characters */
    char safe[sizeof e->msg * 4];
    fprintf(stderr, "nvfp4dbg: %s\n", e->msg[0] ? nd_term_safe(e->msg, safe, sizeof safe) : "internal error");
    fflush(stderr);
    return e->code ? e->code : ND_EXIT_INTERNAL;
}

int nd_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char msg[2048], safe[sizeof msg * 4];
    vsnprintf(msg, sizeof msg, fmt, ap);
    nd_progress_clear();
    fprintf(stderr, "nvfp4dbg: %s: %s", cmd, nd_term_safe(msg, safe, sizeof safe));
    fprintf(stderr, " (see 'nvfp4dbg %s --help')\n", cmd);
    va_end(ap);
    return ND_EXIT_BADINPUT;
}

int nd_cli_parse(const char *cmd, const char *usage, int argc, char **argv, const nd_cli_opt *opts, const char **pos,
                 int npos) {
    int got = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage, stdout); return -1; }
        const nd_cli_opt *o = opts;
        while (o->name && strcmp(o->name, a)) o++;
        if (o->name && o->flag) *o->flag = 1;
        else if (o->name) {
            if (i + 1 >= argc) return nd_cli_usage_error(cmd, "%s needs a value", a);
            if (o->list) o->list[(*o->n_list)++] = argv[++i];
            else *o->value = argv[++i];
        } else if (a[0] == '-') return nd_cli_usage_error(cmd, "unknown option %s", a);
        else if (got < npos) pos[got++] = a;
        else return nd_cli_usage_error(cmd, "unexpected argument %s", a);
    }
    return 0;
}

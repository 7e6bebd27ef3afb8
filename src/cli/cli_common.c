#include <stdarg.h>
#include <stdio.h>
#include "cli.h"

int nd_cli_error(const nd_err *e) {
    fprintf(stderr, "nvfp4dbg: %s\n", e->msg[0] ? e->msg : "internal error");
    fflush(stderr);
    return e->code ? e->code : ND_EXIT_INTERNAL;
}

int nd_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "nvfp4dbg: %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'nvfp4dbg %s --help')\n", cmd);
    va_end(ap);
    return ND_EXIT_BADINPUT;
}

/* compare_fixture.h — run nd_cmd_compare as the CLI would and capture what it prints. */
#ifndef ND_COMPARE_FIXTURE_H
#define ND_COMPARE_FIXTURE_H

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include "cli/cli.h"
#include "trace_fixture.h"

/* Runs `compare ARGS...` (NULL-terminated), returns its exit code; stdout and stderr land in
 * out/err (each up to 16 KiB). */
static char fx_out[16384], fx_err[16384];
static inline int fx_compare(const char *a1, ...) {
    char *argv[16];
    int argc = 0;
    argv[argc++] = "compare";
    va_list ap;
    va_start(ap, a1);
    for (const char *a = a1; a && argc < 15; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    const char *po = fx_path("compare.stdout"), *pe = fx_path("compare.stderr");
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1);
    dup2(fe, 2);
    int rc = nd_cmd_compare(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so); close(se); close(fo); close(fe);
    FILE *f = fopen(po, "r");
    size_t n = f ? fread(fx_out, 1, sizeof fx_out - 1, f) : 0;
    fx_out[n] = 0;
    if (f) fclose(f);
    f = fopen(pe, "r");
    n = f ? fread(fx_err, 1, sizeof fx_err - 1, f) : 0;
    fx_err[n] = 0;
    if (f) fclose(f);
    return rc;
}

#endif

/* infile.c — see infile.h. */
#include "infile.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int nd_input_regular(const char *path, nd_err *e) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file";
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read it", path, what);
}

int nd_read_text(const char *path, const char *what, size_t max, int missing_ok, char **out, size_t *len, nd_err *e) {
    *out = NULL;
    if (len) *len = 0;
    ND_TRY(nd_input_regular(path, e));
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (missing_ok && errno == ENOENT) return 0;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open %s", path, what);
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > max + 4096 + 1) cap = max + 4096 + 1;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (n > max) { free(buf); fclose(f); return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s larger than %zu MiB", path, what, max >> 20); }
        if (got < 4096) break;
    }
    const int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return nd_fail(e, ND_EXIT_BADINPUT, "%s: read error", path); }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}

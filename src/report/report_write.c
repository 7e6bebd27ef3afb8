/* report_write.c — the page goes to a temporary beside OUT (util/outfile.h) and is renamed to OUT
 * only when complete. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "report.h"
#include "util/infile.h"
#include "util/outfile.h"

#define TRAILER "<!-- nvfp4dbg report, fnv1a64 of the page above: "

/* FNV-1a 64 of the first n bytes of path (n < 0: all): a checksum to recognise an unedited page,
 * not a signature */
static int page_hash(const char *path, long n, uint64_t *h) {
    const char *kind;
    FILE *f = nd_fopen_regular(path, &kind); /* never blocks on a FIFO put at OUT */
    if (!f) return -1;
    uint64_t x = 0xcbf29ce484222325ull;
    unsigned char buf[65536];
    size_t got;
    long left = n;
    while ((n < 0 || left > 0) && (got = fread(buf, 1, n < 0 || left > (long)sizeof buf ? sizeof buf : (size_t)left, f)) > 0) {
        for (size_t i = 0; i < got; i++) x = (x ^ buf[i]) * 0x100000001b3ull;
        left -= (long)got;
    }
    const int bad = ferror(f) || (n >= 0 && left != 0);
    fclose(f);
    *h = x;
    return bad ? -1 : 0;
}

int nd_report_write(const char *out_path, const nd_trace *t, const nd_report_routing *rt, const char *source_name,
                    const nd_report_against *against, nd_err *e) {
    nd_outtmp ot;
    int fd = -1;
    ND_TRY(nd_out_begin(&ot, out_path, &fd, e));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        nd_out_abort(&ot);
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", out_path);
    }
    int rc = nd_report_html(f, t, rt, source_name, against, e);
    /* the page's own checksum as its last line: only a page as written counts as ours (an annotated
     * one is the user's, replaced only with --force) */
    uint64_t h = 0;
    if (!rc && !fflush(f) && !page_hash(ot.tmp, -1, &h)) fprintf(f, TRAILER "%016llx -->\n", (unsigned long long)h);
    /* errors of writing are the output's, never the trace's */
    if (!rc && (ferror(f) || fflush(f))) rc = nd_fail(e, nd_io_exit(errno), "%s: cannot write the page: %s%s", out_path, strerror(errno), nd_io_hint(errno));
    if (fclose(f) && !rc) rc = nd_fail(e, nd_io_exit(errno), "%s: cannot write the page: %s%s", out_path, strerror(errno), nd_io_hint(errno));
    if (rc) nd_out_abort(&ot);
    else rc = nd_out_commit(&ot, e);
    return rc;
}

int nd_report_is_ours(const char *path) {
    char head[512];
    nd_read_head(path, head, sizeof head);
    if (strncmp(head, "<!DOCTYPE html>", 15) || !strstr(head, "<meta name=\"generator\" content=\"" ND_REPORT_GENERATOR "\">"))
        return 0;
    /* the last line is the checksum of everything before it */
    const char *kind;
    FILE *f = nd_fopen_regular(path, &kind);
    if (!f) return 0;
    char tail[128] = "";
    long size = -1;
    if (!fseek(f, 0, SEEK_END)) size = ftell(f);
    const long tl = (long)strlen(TRAILER) + 16 + 5; /* "...<16 hex> -->\n" */
    const int got = size >= tl && !fseek(f, size - tl, SEEK_SET) && fread(tail, 1, (size_t)tl, f) == (size_t)tl;
    fclose(f);
    if (!got || strncmp(tail, TRAILER, strlen(TRAILER)) || strcmp(tail + tl - 5, " -->\n") != 0) return 0;
    char hex[17];
    memcpy(hex, tail + strlen(TRAILER), 16);
    hex[16] = 0;
    uint64_t h = 0;
    return !page_hash(path, size - tl, &h) && strtoull(hex, NULL, 16) == h;
}

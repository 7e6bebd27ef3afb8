/* report_write.c — the page goes to a temporary beside OUT (util/outfile.h) and is renamed to OUT
 * only when complete. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "report.h"
#include "util/infile.h"
#include "util/outfile.h"

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
    return !strncmp(head, "<!DOCTYPE html>", 15) && strstr(head, "<meta name=\"generator\" content=\"" ND_REPORT_GENERATOR "\">") != NULL;
}

/* report_write.c — the page goes to OUT.tmp and is renamed to OUT only when complete. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"
#include "util/tmpclean.h"

int nd_report_write(const char *out_path, const nd_trace *t, const nd_report_routing *rt, const char *source_name,
                    const nd_report_against *against, nd_err *e) {
    size_t n = strlen(out_path) + 5;
    char *tmp = malloc(n);
    if (!tmp) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", out_path);
    snprintf(tmp, n, "%s.tmp", out_path);
    FILE *f = fopen(tmp, "w");
    const int slot = f ? nd_tmpclean_add(tmp) : -1;
    if (!f) {
        int rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    int rc = nd_report_html(f, t, rt, source_name, against, e);
    if (!rc && fflush(f)) rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: write error: %s", tmp, strerror(errno));
    if (fclose(f) && !rc) rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: write error: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, out_path)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot rename to %s: %s", tmp, out_path, strerror(errno));
    if (rc) remove(tmp);
    nd_tmpclean_drop(slot);
    free(tmp);
    return rc;
}

/* mk_bundle_lie.c — a bundle whose stage names a module its tensors lack: IN's /text/stage_yaml with
 * every "q_a_proj" written "q_zz_pro" (same length; the bad-input corpus: replay's message must name the
 * bundle, not the temporary folder it unpacks into).
 *   usage: mk_bundle_lie IN.h5 OUT.h5 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/bundle_file.h"

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: mk_bundle_lie IN.h5 OUT.h5\n"); return 2; }
    nd_err e = {0};
    nd_bundle *b = NULL;
    if (nd_bundle_read(argv[1], &b, &e)) { fprintf(stderr, "mk_bundle_lie: %s\n", e.msg); return 1; }
    int n = 0;
    for (char *p = b->stage_yaml; (p = strstr(p, "q_a_proj")); p += 8) { memcpy(p, "q_zz_pro", 8); n++; }
    int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
    if (!n) fprintf(stderr, "mk_bundle_lie: no q_a_proj in the stage\n");
    else if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", e.msg);
    nd_bundle_free(b);
    return rc ? 1 : 0;
}

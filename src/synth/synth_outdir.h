/* synth_outdir.h — the folder synth writes into (issue: synth must never delete a user's files).
 *
 * A folder synth writes is new or empty. After writing, synth records the names it wrote in the
 * manifest OUTDIR/.nvfp4dbg-synth (one name per line). `--force` replaces an earlier synth output:
 * it removes exactly the entries that manifest lists (a listed sub-folder by its own manifest) and
 * refuses when anything else is left, so a user's own files are never removed or mixed in. */
#ifndef ND_SYNTH_OUTDIR_H
#define ND_SYNTH_OUTDIR_H

#include "util/err.h"

#define SY_OUTDIR_MANIFEST ".nvfp4dbg-synth"

/* Create dir (and its parents) when absent; use it when empty; with force, clear an earlier
 * synth output. Anything else is exit 2 naming the folder and an entry found in it. */
int sy_outdir_prepare(const char *dir, int force, nd_err *e);
/* Write the manifest: every entry of dir now present (call after writing into a prepared dir). */
int sy_outdir_record(const char *dir, nd_err *e);

#endif

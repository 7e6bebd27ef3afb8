/* synth_outdir.h — the folder synth writes into (issue: synth must never delete a user's files).
 *
 * A folder synth writes is new or empty. After writing, synth records the names it wrote in the
 * manifest OUTDIR/.nvfp4dbg-synth (one name per line). `--force` replaces an earlier synth output:
 * it removes exactly the entries that manifest lists (a listed sub-folder by its own manifest) and
 * refuses when anything else is left, so a user's own files are never removed or mixed in. */
#ifndef ND_SYNTH_OUTDIR_H
#define ND_SYNTH_OUTDIR_H

#include <stddef.h>
#include "util/err.h"

#define SY_OUTDIR_MANIFEST ".nvfp4dbg-synth"

/* Create dir (and its parents) when absent; use it when empty; with force, clear an earlier
 * synth output. Anything else is exit 2 naming the folder and an entry found in it. */
int sy_outdir_prepare(const char *dir, int force, nd_err *e);
/* Write the manifest: every entry of dir now present (call after writing into a prepared dir). */
int sy_outdir_record(const char *dir, nd_err *e);

/* Staging: synth writes everything into a hidden folder beside dir (".NAME.synth-XXXXXX") and
 * renames it onto dir only when complete, so that an error, a full disk or a signal never leaves
 * a half-written dir (which --force would then refuse), and dir is never touched before then.
 *
 * sy_outdir_check: what sy_outdir_prepare would refuse, refused now (nothing removed), and dir
 * must not be a symbolic link nor be, hold or lie inside any of the n inputs of the run (synth
 * --from's source, the recipe folder, a recipe file; NULL entries skipped). */
int sy_outdir_check(const char *dir, int force, const char *const *inputs, int n, nd_err *e);
/* Create the staging folder (parents of dir created as needed) into stage[cap]; registered with
 * tmpclean so that SIGINT/SIGTERM/SIGHUP remove it. */
int sy_stage_begin(const char *dir, char *stage, size_t cap, int *slot, nd_err *e);
/* Prepare dir (force: remove the earlier synth output) and rename the staging folder onto it. */
int sy_stage_commit(const char *stage, int slot, const char *dir, int force, nd_err *e);
/* Remove the staging folder and what it holds. */
void sy_stage_abort(const char *stage, int slot);

#endif

/* outfile.h — the one output discipline of every writer (trace, report, repro, synth, replay).
 *
 *  1. nd_out_check, before any work: the output is refused (exit 2) when it is, or resolves to, an
 *     input of the run (the same file, or a path inside an input checkpoint folder); when it is a
 *     symbolic link, a folder, a device, a FIFO or a socket (never replaced, never written
 *     through); and when it is an existing file that is not this tool's own output of that kind
 *     (or any existing file, with keep_ours), unless --force. It also notes the inputs' permission
 *     bits: every output the run commits has group/other bits only where all its inputs grant
 *     them (a private checkpoint gives private traces and bundles).
 *  2. nd_out_begin creates a temporary beside the output with O_CREAT|O_EXCL (so never through a
 *     link, never over another file), registered with tmpclean so that SIGINT/SIGTERM/SIGHUP
 *     remove it; nd_out_commit checks the target again and renames; nd_out_abort removes the
 *     temporary. A write that fails leaves neither a temporary nor a half-written output.
 *
 * Write and create errors of the environment (disk full, quota, read-only file system, no
 * permission) are exit 2 (SPEC §3: bad input and environment); nd_io_exit classifies an errno. */
#ifndef ND_OUTFILE_H
#define ND_OUTFILE_H
#include <stddef.h>
#include "util/err.h"

/* 1 when the regular file at path is this tool's own output of the kind being written (a trace,
 * a report page, a bundle), so that running the command again replaces it without --force. */
typedef int (*nd_out_ours_fn)(const char *path);

typedef struct nd_out_rules {
    const char *what;            /* "trace", "report", "bundle", ... for messages */
    const char *const *inputs;   /* files and folders the run reads; NULL entries are skipped */
    int n_inputs;
    int force;                   /* --force: an existing regular file of any kind may be replaced */
    nd_out_ours_fn ours;         /* NULL: only --force replaces an existing file */
    int keep_ours;               /* this tool's own output is refused too without --force (an
                                  * earlier trace: a run is evidence, never replaced silently) */
    const char *other_hint;      /* besides the force option, e.g. "or give another --out" */
    const char *force_hint;      /* the option that forces ("--force" when NULL) */
} nd_out_rules;

int nd_out_check(const char *out, const nd_out_rules *r, nd_err *e);

/* A temporary beside an output; nd_out_begin fills it. */
typedef struct nd_outtmp {
    char *out;    /* the output path */
    char *tmp;    /* the temporary: "<dir>/.<name>.<random>.tmp" */
    int slot;     /* tmpclean slot, or -1 */
} nd_outtmp;

/* Create the temporary (mode 0666 & ~umask) and return its descriptor in *fd; with fd NULL the
 * name is reserved and the file removed again, for a library that creates it itself with an
 * exclusive create (HDF5's H5F_ACC_EXCL). */
int nd_out_begin(nd_outtmp *o, const char *out, int *fd, nd_err *e);
/* Rename the temporary onto the output, refusing if the output became a link or a non-file. */
int nd_out_commit(nd_outtmp *o, nd_err *e);
/* Remove the temporary (when it exists) and free o. Safe to call after commit (then only frees). */
void nd_out_abort(nd_outtmp *o);

/* Exit class of a failed create/write/rename: 2 for the environment, 3 for anything else. */
int nd_io_exit(int err);
/* A short reason to append to the errno text for the common environment errors ("" otherwise). */
const char *nd_io_hint(int err);

/* An output folder staged the same way: nd_outdir_begin makes "<parent>/.<name>.<tag>-XXXXXX"
 * (mode from the umask; registered with tmpclean) for the caller to fill; nd_outdir_commit renames
 * it onto dir, which must be absent or an empty folder (whose permissions it keeps); on failure, and
 * in nd_outdir_abort, the staged tree is removed. stage holds at least PATH_MAX bytes. */
int nd_outdir_begin(const char *dir, const char *tag, char *stage, size_t cap, int *slot, nd_err *e);
int nd_outdir_commit(const char *stage, int slot, const char *dir, nd_err *e);
void nd_outdir_abort(const char *stage, int slot);

/* Remove the tree at dir (files and folders at most depth levels down); symbolic links are removed,
 * never followed. 0 on success. */
int nd_rmtree(const char *dir, int depth);

#endif

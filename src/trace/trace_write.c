/* trace_write.c — the trace writer (SPEC §6).
 *
 * Crash consistency: the file is built at "<target>.incomplete" beside the target (skeleton: root
 * attributes, /tokens, an empty extensible /stages, /summary with status "incomplete", empty
 * /tensors and /routing; under a hidden temporary name first, renamed once it is whole) and
 * switched to HDF5 SWMR write mode. In SWMR mode HDF5 orders its
 * metadata writes (flush dependencies) so that the file on disk is consistent for a reader at every
 * moment: a process killed at any point leaves "<target>.incomplete", a file that opens (with
 * H5F_ACC_SWMR_READ, as nd_trace_read does) and holds every row whose nd_trace_append returned.
 * nd_trace_finish renames it onto the target, so a run that does not end (killed, out of memory)
 * or ends in an error never replaces an earlier trace at the target; the next run replaces the
 * stale .incomplete. */
#include "util/outfile.h"
#include "util/mapguard.h"
#include "trace_h5.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define STAGE_CHUNK_ROWS 64

struct nd_trace_w {
    hid_t f, stages, rowtype, tensors, routing, summary, gcpl;
    int64_t nrows;
    char *path;     /* the target, named in messages */
    char *inprog;   /* "<target>.incomplete", renamed onto the target when the run ends */
    int failed;     /* a write failed (full disk, file-size limit): the file is not renamed */
    int lockfd;     /* holds flock(LOCK_EX) on the .incomplete while the run lives (clear_stale) */
};

int nd_trace_incomplete_path(const char *out, char *buf, size_t cap) {
    const char *slash = strrchr(out, '/');
    const char *base = slash ? slash + 1 : out;
    const size_t dl = (size_t)(base - out);
    /* the suffix must fit a file name: a target name near NAME_MAX is cut first */
    const size_t keep = strlen(base) + sizeof ".incomplete" - 1 > 255 ? 255 - (sizeof ".incomplete" - 1) : strlen(base);
    const int n = snprintf(buf, cap, "%.*s%.*s.incomplete", (int)dl, out, (int)keep, base);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* An HDF5 file that is not another kind of HDF5 file: one that opens must carry the trace schema at
 * its root (a run's file takes the .incomplete name only after its root attributes are flushed);
 * one that no longer opens is a run's that a write failure or a kill cut short (a file-size limit,
 * a full disk). A bundle or any other HDF5 file that opens is someone else's. */
static int is_trace(const char *path) {
    hid_t f = nd_h5_open_read(path);
    if (f < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 1;
    }
    char schema[64] = "";
    nd_err e2 = {0};
    int ok = nd_h5_get_str_attr(f, "schema", schema, sizeof schema, path, &e2) == 0 && !strcmp(schema, ND_TRACE_SCHEMA);
    /* a trace whose run finished (ok, diverged, unjudged) is not an unfinished one: a user's file
     * (round 25: a trace written with --out X.incomplete was taken over by the next run to X) */
    if (ok) {
        hid_t g = H5Gopen2(f, "summary", H5P_DEFAULT);
        char status[32] = "";
        if (g >= 0 && nd_h5_get_str_attr(g, "status", status, sizeof status, path, &e2) == 0 &&
            (!strcmp(status, "ok") || !strcmp(status, "diverged") || !strcmp(status, "unjudged")))
            ok = 0;
        if (g >= 0) H5Gclose(g);
    }
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

/* A stale "<target>.incomplete" of a run that was killed is removed; anything else at that name
 * (not a regular file, or a file that is not an nvfp4dbg trace) is refused, never replaced. */
static int clear_stale(const char *inprog, const char *path, nd_err *e) {
    struct stat st;
    if (lstat(inprog, &st) != 0) return errno == ENOENT ? 0 : nd_fail(e, nd_io_exit(errno), "%s: %s", inprog, strerror(errno));
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    int ours = S_ISREG(st.st_mode) && st.st_size == 0;
    if (S_ISREG(st.st_mode) && !ours) {
        int fd = open(inprog, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        ours = fd >= 0 && read(fd, head, sizeof head) == (ssize_t)sizeof head && !memcmp(head, sig, sizeof sig);
        if (fd >= 0) close(fd);
    }
    if (ours && st.st_size > 0) ours = is_trace(inprog);
    if (!ours)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: exists and is not a trace that an earlier run left unfinished; the trace of %s "
                       "is written there while it runs: move it away", inprog, path);
    /* a run still writing it holds a lock on it: that file is not stale, and taking it over would
     * lose that run's rows and let two runs rename onto one target */
    int fd = open(inprog, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
        close(fd);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: a trace run to %s is writing it right now; wait for that run to end or "
                       "give this one another --out", inprog, path);
    }
    const int gone = unlink(inprog) != 0 ? errno : 0;
    if (fd >= 0) close(fd);
    if (gone && gone != ENOENT) return nd_fail(e, nd_io_exit(gone), "%s: cannot remove the unfinished trace of an earlier run: %s%s",
                                               inprog, strerror(gone), nd_io_hint(gone));
    return 0;
}

/* Groups that get members while the file is in SWMR mode store their links densely from the
 * start: HDF5 1.10 crashes when a compact group converts to dense storage under SWMR writing
 * (seen at the 9th link), so that conversion must never happen there. */
static hid_t dense_gcpl(void) {
    hid_t p = H5Pcreate(H5P_GROUP_CREATE);
    if (p >= 0 && H5Pset_link_phase_change(p, 0, 0) < 0) {
        H5Pclose(p);
        return -1;
    }
    return p;
}

static void close_all(nd_trace_w *w) {
    nd_h5_close(w->gcpl);
    nd_h5_close(w->rowtype); nd_h5_close(w->stages); nd_h5_close(w->tensors);
    nd_h5_close(w->routing); nd_h5_close(w->summary); nd_h5_close(w->f);
    w->f = w->stages = w->rowtype = w->tensors = w->routing = w->summary = w->gcpl = -1;
}

static int write_root_attrs(hid_t f, const nd_trace_meta *m, const char *path, nd_err *e) {
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *names[] = {"schema", "tool_version", "created_utc", "checkpoint", "checkpoint_format",
                           "recipe", "stack", "backend", "device", "modes"};
    const char *vals[] = {ND_TRACE_SCHEMA, m->tool_version, when, m->checkpoint, m->checkpoint_format,
                          m->recipe, m->stack, m->backend, m->device, m->modes};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ND_TRY(nd_h5_put_str_attr(f, names[i], vals[i], 0, path, e));
    ND_TRY(nd_h5_put_str_attr(f, "overrides", m->overrides ? m->overrides : "", 0, path, e));
    /* extension: which numerics the reference path ran (trace --ref-numerics) */
    ND_TRY(nd_h5_put_str_attr(f, "ref_numerics", m->ref_numerics ? m->ref_numerics : "fp32", 0, path, e));
    /* extension: the original whose weights the reference path ran (trace --reference-checkpoint) */
    ND_TRY(nd_h5_put_str_attr(f, "reference_checkpoint", m->reference_checkpoint ? m->reference_checkpoint : "", 0, path, e));
    /* extension: which recipe file the stages came from, and its bytes' hash (repro replays the same) */
    ND_TRY(nd_h5_put_str_attr(f, "recipe_file", m->recipe_file ? m->recipe_file : "", 0, path, e));
    ND_TRY(nd_h5_put_str_attr(f, "recipe_fnv1a", m->recipe_fnv ? m->recipe_fnv : "", 0, path, e));
    ND_TRY(nd_h5_put_str_attr(f, "stack_file", m->stack_file ? m->stack_file : "", 0, path, e));
    ND_TRY(nd_h5_put_str_attr(f, "stack_fnv1a", m->stack_fnv ? m->stack_fnv : "", 0, path, e));
    return 0;
}

static int write_tokens(hid_t f, const int64_t *tokens, int64_t ntok, const char *path, nd_err *e) {
    hsize_t n = (hsize_t)(ntok > 0 ? ntok : 0);
    hid_t s = H5Screate_simple(1, &n, NULL), d = -1;
    int rc = 0;
    if (s < 0 || (d = H5Dcreate2(f, "tokens", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /tokens");
    else if (n > 0 && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write /tokens");
    nd_h5_close(d); nd_h5_close(s);
    return rc;
}

/* /prompt: the text as one scalar UTF-8 string, and the chat format as a root attribute */
static int write_prompt(hid_t f, const nd_trace_meta *m, const char *path, nd_err *e) {
    if (!m->prompt) return 0;
    hid_t ty = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), d = -1;
    int rc = 0;
    if (ty < 0 || s < 0 || H5Tset_size(ty, strlen(m->prompt) + 1) < 0 || H5Tset_cset(ty, H5T_CSET_UTF8) < 0 ||
        (d = H5Dcreate2(f, "prompt", ty, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /prompt");
    else if (H5Dwrite(d, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, m->prompt) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write /prompt");
    nd_h5_close(d); nd_h5_close(s); nd_h5_close(ty);
    if (!rc) rc = nd_h5_put_str_attr(f, "prompt_chat", m->prompt_chat ? m->prompt_chat : "", 0, path, e);
    return rc;
}

static int create_stages(nd_trace_w *w, nd_err *e) {
    hsize_t zero = 0, unlim = H5S_UNLIMITED, chunk = STAGE_CHUNK_ROWS;
    hid_t ft = -1, s = -1, dcpl = -1;
    int rc = 0;
    w->rowtype = nd_h5_row_type(NULL);
    if (w->rowtype < 0 || (ft = H5Tcopy(w->rowtype)) < 0 || H5Tpack(ft) < 0 ||
        (s = H5Screate_simple(1, &zero, &unlim)) < 0 || (dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0 ||
        H5Pset_chunk(dcpl, 1, &chunk) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, w->path, "cannot build the /stages type");
    } else if ((w->stages = H5Dcreate2(w->f, "stages", ft, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot create /stages");
    }
    nd_h5_close(dcpl); nd_h5_close(s); nd_h5_close(ft);
    return rc;
}

/* /summary exists from the start with room for every attribute, so finishing only overwrites
 * values in place (no new objects appear while the file is in SWMR mode). */
static int create_summary(nd_trace_w *w, nd_err *e) {
    nd_trace_summary s;
    if ((w->summary = H5Gcreate2(w->f, "summary", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        return ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot create /summary");
    ND_TRY(nd_h5_put_str_attr(w->summary, "status", "incomplete", sizeof s.status, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "first_divergence", "", sizeof s.first_divergence, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "first_divergence_mode", "", sizeof s.first_divergence_mode, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "cause", "", sizeof s.cause, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "message", "", sizeof s.message, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "repair", "", sizeof s.repair, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "evidence", "", sizeof s.evidence, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "next_command", "", sizeof s.next_command, w->path, e));
    ND_TRY(nd_h5_put_f64_attr(w->summary, "sqnr_before_db", NAN, w->path, e));
    ND_TRY(nd_h5_put_f64_attr(w->summary, "sqnr_after_db", NAN, w->path, e));
    ND_TRY(nd_h5_put_f64_attr(w->summary, "floor_db", NAN, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "applied_command", "", sizeof s.applied_command, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "applied_status", "", sizeof s.applied_status, w->path, e));
    ND_TRY(nd_h5_put_str_attr(w->summary, "applied_first_divergence", "", sizeof s.applied_first, w->path, e));
    static const char *const q[] = {"kl_before", "kl_after", "top1_before", "top1_after"};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) ND_TRY(nd_h5_put_f64_attr(w->summary, q[i], NAN, w->path, e));
    return 0;
}

int nd_trace_create(const char *path, const nd_trace_meta *meta, const int64_t *tokens, int64_t ntok,
                    nd_trace_w **out, nd_err *e) {
    *out = NULL;
    nd_h5_quiet();
    if (!path || !path[0]) return nd_fail(e, ND_EXIT_BADINPUT, "trace: empty output path");
    if (ntok < 0 || (ntok > 0 && !tokens)) return nd_fail(e, ND_EXIT_INTERNAL, "%s: bad token list", path);
    nd_trace_meta none = {0};
    if (!meta) meta = &none;

    nd_trace_w *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
    }
    w->f = w->stages = w->rowtype = w->tensors = w->routing = w->summary = w->gcpl = -1;
    w->lockfd = -1;
    /* never replace something that is not a regular file (a link, a FIFO, a device, a folder) */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        free(w->path); free(w);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: exists and is not a regular file; not writing the trace over it", path);
    }
    char inprog[4096];
    if (nd_trace_incomplete_path(path, inprog, sizeof inprog) || !(w->inprog = strdup(inprog))) {
        free(w->path); free(w);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: output path too long", path);
    }
    int rc = clear_stale(w->inprog, path, e);
    if (rc) { free(w->inprog); free(w->path); free(w); return rc; }
    /* the skeleton is built under a hidden name (created exclusively, never through a link) and
     * renamed to the .incomplete name once it is a valid trace in SWMR mode */
    nd_outtmp ot;
    if ((rc = nd_out_begin(&ot, w->inprog, NULL, e))) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        rc = nd_fail(e, rc, "%s: cannot write the trace (%s)", path, why);
        free(w->inprog); free(w->path); free(w);
        return rc;
    }
    const char *tmp = ot.tmp;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, path, "cannot set up file access");
        goto fail;
    }
    if ((w->f = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl)) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create the trace file");
        goto fail;
    }
    if ((rc = write_root_attrs(w->f, meta, path, e)) || (rc = write_tokens(w->f, tokens, ntok, path, e)) || (rc = write_prompt(w->f, meta, path, e)) ||
        (rc = create_stages(w, e)) || (rc = create_summary(w, e)))
        goto fail;
    if ((w->gcpl = dense_gcpl()) < 0 ||
        (w->tensors = H5Gcreate2(w->f, "tensors", H5P_DEFAULT, w->gcpl, H5P_DEFAULT)) < 0 ||
        (w->routing = H5Gcreate2(w->f, "routing", H5P_DEFAULT, w->gcpl, H5P_DEFAULT)) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot create /tensors or /routing");
        goto fail;
    }
    if (H5Fstart_swmr_write(w->f) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot start SWMR writing");
        goto fail;
    }
    if (H5Fflush(w->f, H5F_SCOPE_GLOBAL) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, path, "cannot write the trace file");
        goto fail;
    }
    /* the lock that tells a second run to the same target this file is live; taken before the
     * file has its .incomplete name, so no run ever sees that name unlocked while this one lives.
     * HDF5 drops its own lock when SWMR writing starts; a build that kept it would refuse ours, and
     * then the run goes on without one (as on a file system without flock) */
    if ((w->lockfd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0 && flock(w->lockfd, LOCK_EX | LOCK_NB) != 0) {
        close(w->lockfd);
        w->lockfd = -1;
    }
    if ((rc = nd_out_commit(&ot, e))) goto fail;
    nd_mapguard_partial(w->inprog); /* a checkpoint that shrinks mid-run: the message names what stays */
    nd_h5_close(fapl);
    *out = w;
    return 0;
fail:
    close_all(w);
    nd_h5_close(fapl);
    nd_out_abort(&ot);
    if (w->lockfd >= 0) close(w->lockfd);
    free(w->inprog); free(w->path); free(w);
    return rc;
}

/* Copy a string field, checking it is terminated, and zero its tail: HDF5 stores null-padded
 * strings byte for byte, so leftovers after the terminator would show up in h5py. */
static int clean_str(char *dst, const char *src, size_t cap, const char *field, const char *path, nd_err *e) {
    const char *z = memchr(src, 0, cap);
    if (!z) return nd_fail(e, ND_EXIT_INTERNAL, "%s: stage %s is longer than %zu bytes", path, field, cap - 1);
    size_t n = (size_t)(z - src);
    memmove(dst, src, n);
    memset(dst + n, 0, cap - n);
    return 0;
}

int nd_trace_append(nd_trace_w *w, const nd_row *row, nd_err *e) {
    if (!w || w->f < 0) return nd_fail(e, ND_EXIT_INTERNAL, "trace: append to a closed trace");
    nd_row r = *row;
    ND_TRY(clean_str(r.name, row->name, sizeof r.name, "name", w->path, e));
    ND_TRY(clean_str(r.op, row->op, sizeof r.op, "op", w->path, e));
    ND_TRY(clean_str(r.mode, row->mode, sizeof r.mode, "mode", w->path, e));
    ND_TRY(clean_str(r.verdict, row->verdict, sizeof r.verdict, "verdict", w->path, e));
    if (!r.name[0]) return nd_fail(e, ND_EXIT_INTERNAL, "%s: stage row without a name", w->path);

    hsize_t n = (hsize_t)w->nrows + 1, off = (hsize_t)w->nrows, one = 1;
    hid_t fs = -1, ms = -1;
    int rc = 0;
    if (H5Dset_extent(w->stages, &n) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot extend /stages");
    } else if ((fs = H5Dget_space(w->stages)) < 0 || (ms = H5Screate_simple(1, &one, NULL)) < 0 ||
               H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &one, NULL) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, w->path, "cannot select a /stages row");
    } else if (H5Dwrite(w->stages, w->rowtype, ms, fs, H5P_DEFAULT, &r) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot write a /stages row");
    } else if (H5Fflush(w->f, H5F_SCOPE_GLOBAL) < 0) {
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot flush the trace file");
    } else {
        w->nrows++;
    }
    nd_h5_close(ms); nd_h5_close(fs);
    if (rc == ND_EXIT_BADINPUT) w->failed = 1; /* a write the file refused (disk full, size limit), not a misuse */
    return rc;
}

int nd_trace_set_verdict(nd_trace_w *w, int64_t index, const nd_row *row, nd_err *e) {
    if (!w || w->f < 0) return nd_fail(e, ND_EXIT_INTERNAL, "trace: write to a closed trace");
    if (index < 0 || index >= w->nrows) return nd_fail(e, ND_EXIT_INTERNAL, "%s: no row %lld to rewrite", w->path, (long long)index);
    nd_row r = *row;
    ND_TRY(clean_str(r.name, row->name, sizeof r.name, "name", w->path, e));
    ND_TRY(clean_str(r.op, row->op, sizeof r.op, "op", w->path, e));
    ND_TRY(clean_str(r.mode, row->mode, sizeof r.mode, "mode", w->path, e));
    ND_TRY(clean_str(r.verdict, row->verdict, sizeof r.verdict, "verdict", w->path, e));
    hsize_t off = (hsize_t)index, one = 1;
    hid_t fs = -1, ms = -1;
    int rc = 0;
    /* an element rewritten in place: allowed in SWMR mode (no new object appears) */
    if ((fs = H5Dget_space(w->stages)) < 0 || (ms = H5Screate_simple(1, &one, NULL)) < 0 ||
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &off, NULL, &one, NULL) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_INTERNAL, w->path, "cannot select a /stages row");
    else if (H5Dwrite(w->stages, w->rowtype, ms, fs, H5P_DEFAULT, &r) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot rewrite a /stages row");
    nd_h5_close(ms); nd_h5_close(fs);
    if (rc == ND_EXIT_BADINPUT) w->failed = 1;
    return rc;
}

static int check_names(nd_trace_w *w, const char *stage, const char *which, nd_err *e) {
    if (!w || w->f < 0) return nd_fail(e, ND_EXIT_INTERNAL, "trace: write to a closed trace");
    if (!stage || !stage[0] || strchr(stage, '/') || !strcmp(stage, ".") || !strcmp(stage, ".."))
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: bad stage name '%s' for a dataset", w->path, stage ? stage : "");
    if (!which || (strcmp(which, "ref") && strcmp(which, "prod")))
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor kind must be ref or prod", w->path);
    return 0;
}

/* Write parent/<stage>/<which> as a chunked, shuffled, deflated dataset. */
static int put_array(nd_trace_w *w, hid_t parent, const char *grp_name, const char *stage, const char *which,
                     hid_t mtype, hid_t ftype, size_t esize, const void *data, int ndim, const hsize_t *dims,
                     nd_err *e) {
    char what[160];
    hid_t g = -1, s = -1, dcpl = -1, d = -1;
    int rc = 0;
    hsize_t chunk[8], total = 1;
    for (int i = 0; i < ndim; i++) total *= dims[i];
    /* chunks of about 1 MiB: trailing dimensions whole, the leading ones cut down */
    hsize_t budget = (1u << 20) / esize;
    for (int i = ndim - 1; i >= 0; i--) {
        hsize_t c = dims[i] ? dims[i] : 1;
        if (c > budget) c = budget ? budget : 1;
        chunk[i] = c;
        budget = budget / c ? budget / c : 1;
    }
    htri_t ex = H5Lexists(parent, stage, H5P_DEFAULT);
    if (ex < 0) {
        snprintf(what, sizeof what, "cannot look up /%s/%s", grp_name, stage);
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, what);
        goto done;
    }
    g = ex ? H5Gopen2(parent, stage, H5P_DEFAULT) : H5Gcreate2(parent, stage, H5P_DEFAULT, w->gcpl, H5P_DEFAULT);
    if (g < 0) {
        snprintf(what, sizeof what, "cannot create /%s/%s", grp_name, stage);
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, what);
        goto done;
    }
    if ((ex = H5Lexists(g, which, H5P_DEFAULT)) != 0) {
        rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: /%s/%s/%s written twice", w->path, grp_name, stage, which);
        goto done;
    }
    snprintf(what, sizeof what, "cannot write /%s/%s/%s", grp_name, stage, which);
    if ((s = H5Screate_simple(ndim, dims, NULL)) < 0 || (dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0 ||
        H5Pset_chunk(dcpl, ndim, chunk) < 0 || H5Pset_shuffle(dcpl) < 0 || H5Pset_deflate(dcpl, 4) < 0 ||
        (d = H5Dcreate2(g, which, ftype, s, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0 ||
        (total > 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) ||
        H5Fflush(w->f, H5F_SCOPE_GLOBAL) < 0)
        rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, what);
done:
    nd_h5_close(d); nd_h5_close(dcpl); nd_h5_close(s); nd_h5_close(g);
    return rc;
}

int nd_trace_put_tensor(nd_trace_w *w, const char *stage, const char *which, const float *data,
                        int ndim, const int64_t *shape, nd_err *e) {
    ND_TRY(check_names(w, stage, which, e));
    if (ndim < 1 || ndim > 8) return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor rank %d not in 1..8", w->path, ndim);
    hsize_t dims[8];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return nd_fail(e, ND_EXIT_INTERNAL, "%s: negative tensor dimension", w->path);
        dims[i] = (hsize_t)shape[i];
    }
    const int rc = put_array(w, w->tensors, "tensors", stage, which, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE, sizeof(float),
                             data, ndim, dims, e);
    if (rc == ND_EXIT_BADINPUT) w->failed = 1; /* a write the file refused (disk full, size limit), not a misuse */
    return rc;
}

int nd_trace_put_routing(nd_trace_w *w, const char *stage, const char *which, const int32_t *idx,
                         int64_t t, int64_t k, nd_err *e) {
    ND_TRY(check_names(w, stage, which, e));
    if (t < 0 || k < 1) return nd_fail(e, ND_EXIT_INTERNAL, "%s: bad routing shape [%lld, %lld]", w->path,
                                       (long long)t, (long long)k);
    hsize_t dims[2] = {(hsize_t)t, (hsize_t)k};
    const int rc = put_array(w, w->routing, "routing", stage, which, H5T_NATIVE_INT32, H5T_STD_I32LE, sizeof(int32_t),
                             idx, 2, dims, e);
    if (rc == ND_EXIT_BADINPUT) w->failed = 1; /* a write the file refused (disk full, size limit), not a misuse */
    return rc;
}

int nd_trace_mark_failed(const char *path, const nd_trace_meta *meta, const char *message, nd_err *e) {
    nd_trace_w *w = NULL;
    ND_TRY(nd_trace_create(path, meta, NULL, 0, &w, e));
    nd_trace_summary s;
    memset(&s, 0, sizeof s);
    snprintf(s.status, sizeof s.status, "error");
    snprintf(s.message, sizeof s.message, "%s", message);
    s.sqnr_before_db = s.sqnr_after_db = s.floor_db = NAN;
    s.kl_before = s.kl_after = s.top1_before = s.top1_after = NAN;
    return nd_trace_finish(w, &s, e);
}

int nd_trace_finish(nd_trace_w *w, const nd_trace_summary *s, nd_err *e) {
    if (!w) return 0;
    nd_mapguard_partial(NULL);
    int rc = 0;
    if (s && w->f >= 0) {
        if (!s->status[0]) rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: summary without a status", w->path);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "first_divergence", s->first_divergence, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "first_divergence_mode", s->first_divergence_mode, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "cause", s->cause, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "message", s->message, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "repair", s->repair, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "evidence", s->evidence, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "next_command", s->next_command, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "sqnr_before_db", s->sqnr_before_db, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "sqnr_after_db", s->sqnr_after_db, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "floor_db", s->floor_db, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "applied_command", s->applied_command, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "applied_status", s->applied_status, w->path, e);
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "applied_first_divergence", s->applied_first, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "kl_before", s->kl_before, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "kl_after", s->kl_after, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "top1_before", s->top1_before, w->path, e);
        if (!rc) rc = nd_h5_set_f64_attr(w->summary, "top1_after", s->top1_after, w->path, e);
        /* status last: a reader that sees a final status sees the rest of the summary too */
        if (!rc && H5Fflush(w->f, H5F_SCOPE_GLOBAL) < 0)
            rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot flush the trace file");
        if (!rc) rc = nd_h5_set_str_attr(w->summary, "status", s->status, w->path, e);
    }
    hid_t f = w->f;
    w->f = -1;
    nd_h5_close(w->rowtype); nd_h5_close(w->stages); nd_h5_close(w->tensors);
    nd_h5_close(w->routing); nd_h5_close(w->summary); nd_h5_close(w->gcpl);
    if (f >= 0 && H5Fclose(f) < 0 && !rc) rc = ND_H5_FAIL(e, ND_EXIT_BADINPUT, w->path, "cannot close the trace file");
    /* the run ended: its trace takes the target's place (status ok, diverged, error, or incomplete
     * when it ended without a summary: compare refuses that), unless a write failed (a full disk,
     * a file-size limit): then the file may not be whole, the earlier file at the target stays, and
     * the rows written stay in the .incomplete */
    if (!rc && w->failed)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: a write to the trace failed earlier in the run", w->path);
    struct stat st;
    /* a run that ended in an error (or without a summary) never replaces an earlier trace: that
     * one may be a good run a later step still reads; the failed run's rows stay in the
     * .incomplete, which compare sees (it refuses OUT while a newer OUT.incomplete exists) */
    const int failed_run = !s || !strcmp(s->status, "error");
    if (!rc && failed_run && lstat(w->path, &st) == 0) {
        if (w->lockfd >= 0) close(w->lockfd);
        free(w->inprog);
        free(w->path);
        free(w);
        return 0;
    }
    const int exists = !rc && lstat(w->path, &st) == 0;
    struct stat cur;
    if (exists && !S_ISREG(st.st_mode))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: became a link or a non-file while the trace was written; not replacing it "
                     "(the trace is in %s)", w->path, w->inprog);
    /* a trace replaced (--force) keeps its permissions, as cp and editors do, never wider than the
     * new trace's own (a private checkpoint's trace stays private: round 19) */
    else if (exists && chmod(w->inprog, st.st_mode & 07777 & (stat(w->inprog, &cur) == 0 ? cur.st_mode : 0600)) != 0)
        rc = nd_fail(e, nd_io_exit(errno), "%s: cannot keep the replaced trace's permissions: %s", w->path, strerror(errno));
    else if (!rc && rename(w->inprog, w->path) != 0)
        rc = nd_fail(e, nd_io_exit(errno), "%s: cannot move the trace into place from %s: %s%s", w->path, w->inprog,
                     strerror(errno), nd_io_hint(errno));
    else if (rc && e) {
        const size_t l = strlen(e->msg);
        snprintf(e->msg + l, sizeof e->msg - l, " (the rows written before stay in %s; %s was not replaced)", w->inprog, w->path);
    }
    /* released only now: until the rename, a second run must see the .incomplete as live */
    if (w->lockfd >= 0) close(w->lockfd);
    free(w->inprog);
    free(w->path);
    free(w);
    return rc;
}

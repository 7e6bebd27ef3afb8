/* outfile.c — see outfile.h. */
#include "outfile.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/tmpclean.h"

int nd_io_exit(int err) {
    switch (err) {
    case ENOSPC: case EDQUOT: case EROFS: case EACCES: case EPERM: case ENOENT: case ENOTDIR:
    case ENAMETOOLONG: case EFBIG: case EISDIR: case EEXIST: case ELOOP: case EXDEV: case EMFILE:
    case ENFILE: case EBUSY: case ETXTBSY:
        return ND_EXIT_BADINPUT;
    default:
        return ND_EXIT_INTERNAL;
    }
}

const char *nd_io_hint(int err) {
    switch (err) {
    case ENOSPC: return " (the disk is full)";
    case EDQUOT: return " (over the disk quota)";
    case EROFS: return " (a read-only file system)";
    case EFBIG: return " (over the file-size limit)";
    case EACCES: case EPERM: return " (no permission)";
    default: return "";
    }
}

static const char *kind_of(mode_t m) {
    return S_ISLNK(m) ? "a symbolic link" : S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* The folder part of path ("." when there is none), resolved; NULL when it does not resolve. */
static char *parent_real(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) dir = strdup(".");
    else if (slash == path) dir = strdup("/");
    else dir = strndup(path, (size_t)(slash - path));
    if (!dir) return NULL;
    char *r = realpath(dir, NULL);
    free(dir);
    return r;
}

/* 1 when a is b or a folder below b (both resolved) */
static int inside(const char *a, const char *b) {
    size_t n = strlen(b);
    if (strncmp(a, b, n)) return 0;
    return a[n] == 0 || a[n] == '/' || (n == 1 && b[0] == '/');
}

/* 1 when a file of folder dir (one level) is the file st describes: a hard link or a link to it */
static int same_file_in(const char *dir, const struct stat *st) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int same = 0;
    for (struct dirent *de; !same && (de = readdir(d));) {
        char p[PATH_MAX];
        struct stat s;
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p && stat(p, &s) == 0)
            same = s.st_dev == st->st_dev && s.st_ino == st->st_ino;
    }
    closedir(d);
    return same;
}

/* The permission bits an output of this run may have: group and other bits only where every
 * input grants them (an input folder: the folder and each file in it). Set by nd_out_check from
 * its inputs, applied by the commits: a bundle or trace made from a private (0600/0700) checkpoint
 * is private too, whatever the umask (the rule synth --from keeps for its copies). */
static mode_t g_out_mask = 07777;

static mode_t share_bits(const char *in) {
    struct stat st;
    if (stat(in, &st) != 0) return 07777;
    mode_t m = 0700 | (st.st_mode & 077);
    if (!S_ISDIR(st.st_mode)) return m;
    DIR *d = opendir(in);
    if (!d) return m;
    for (struct dirent *de; (de = readdir(d));) {
        char p[PATH_MAX];
        struct stat fs;
        if (de->d_name[0] != '.' && snprintf(p, sizeof p, "%s/%s", in, de->d_name) < (int)sizeof p && stat(p, &fs) == 0 &&
            S_ISREG(fs.st_mode))
            m &= 0700 | (fs.st_mode & 077);
    }
    closedir(d);
    return m;
}

/* narrow an output (file or staged folder) to g_out_mask */
static int narrow(const char *path, const char *out, nd_err *e) {
    struct stat st;
    if (g_out_mask == 07777 || stat(path, &st) != 0) return 0;
    /* a folder may be entered wherever it may be read (the inputs' files grant r, not x) */
    const mode_t mask = S_ISDIR(st.st_mode) ? g_out_mask | ((g_out_mask & 0044) >> 2) : g_out_mask;
    if ((st.st_mode & 07777 & ~mask) == 0) return 0;
    if (chmod(path, st.st_mode & 07777 & mask) == 0) return 0;
    return nd_fail(e, nd_io_exit(errno), "%s: cannot narrow the output's permissions to its inputs': %s", out, strerror(errno));
}

int nd_out_check(const char *out, const nd_out_rules *r, nd_err *e) {
    const char *what = r->what ? r->what : "output";
    if (!out || !out[0]) return nd_fail(e, ND_EXIT_BADINPUT, "%s: empty output path", what);
    struct stat ost;
    const int exists = lstat(out, &ost) == 0;
    if (!exists && errno != ENOENT) return nd_fail(e, nd_io_exit(errno), "%s: cannot write the %s here: %s", out, what, strerror(errno));
    if (exists && !S_ISREG(ost.st_mode))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: is %s; the %s is written only to a new path or over a regular file "
                       "(a link, folder or device is never replaced or written through)", out, kind_of(ost.st_mode), what);
    char *pdir = parent_real(out);
    if (!pdir) {
        const int err = errno;
        return err == ENOENT || err == ENOTDIR
            ? nd_fail(e, ND_EXIT_BADINPUT, "%s: the folder to write the %s in does not exist (%s)", out, what, strerror(err))
            : nd_fail(e, nd_io_exit(err), "%s: cannot resolve the folder to write the %s in: %s%s", out, what, strerror(err),
                      err == ENAMETOOLONG ? " (the working folder's path is longer than PATH_MAX: give an absolute --out)" : nd_io_hint(err));
    }
    int rc = 0;
    for (int i = 0; !rc && i < r->n_inputs; i++) {
        const char *in = r->inputs[i];
        struct stat ist;
        if (!in || stat(in, &ist) != 0) continue;
        g_out_mask &= share_bits(in);
        if (exists && ist.st_dev == ost.st_dev && ist.st_ino == ost.st_ino) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: is also an input of this run (%s); the %s would replace it: give another output path",
                         out, in, what);
        } else if (S_ISDIR(ist.st_mode)) {
            if (exists && same_file_in(in, &ost)) {
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: is also an input of this run (a file of %s); the %s would replace it: give "
                             "another output path", out, in, what);
                break;
            }
            char *ireal = realpath(in, NULL);
            if (ireal && inside(pdir, ireal))
                rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: is inside the input folder %s; writing the %s there would change "
                             "an input of this run: give a path outside it", out, in, what);
            free(ireal);
        }
    }
    free(pdir);
    if (rc || !exists || r->force) return rc;
    if (r->ours && r->ours(out)) {
        if (!r->keep_ours) return 0;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: holds an earlier %s; not replacing it (%s replaces it%s%s)", out, what,
                       r->force_hint ? r->force_hint : "--force", r->other_hint ? ", " : "", r->other_hint ? r->other_hint : "");
    }
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: exists and is not an nvfp4dbg %s; not replacing it (%s replaces it)", out, what,
                   r->force_hint ? r->force_hint : "--force");
}

int nd_out_begin(nd_outtmp *o, const char *out, int *fd, nd_err *e) {
    memset(o, 0, sizeof *o);
    o->slot = -1;
    const char *slash = strrchr(out, '/');
    const size_t dl = slash ? (size_t)(slash - out) + 1 : 0;
    const size_t n = strlen(out) + 24;
    if (!(o->out = strdup(out)) || !(o->tmp = malloc(n))) {
        free(o->out); o->out = NULL;
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", out);
    }
    /* a hidden name beside the output: same file system, so the rename is atomic; the output's
     * name is cut so that the temporary's still fits a file name (NAME_MAX) */
    const size_t bl = strlen(out + dl), keep = bl > NAME_MAX - 13 ? NAME_MAX - 13 : bl;
    snprintf(o->tmp, n, "%.*s.%.*s.XXXXXX.tmp", (int)dl, out, (int)keep, out + dl);
    int f = nd_tmpclean_mkstemps(o->tmp, 4, &o->slot);
    if (f < 0) {
        const int err = errno;
        free(o->tmp); free(o->out); o->tmp = o->out = NULL;
        return nd_fail(e, nd_io_exit(err), "%s: cannot create a temporary beside it: %s%s", out, strerror(err), nd_io_hint(err));
    }
    /* mkstemp makes 0600; an output is an ordinary file: its mode follows the umask */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(f, 0666 & ~mask);
    if (fd) *fd = f;
    else { close(f); unlink(o->tmp); }
    return 0;
}

int nd_out_commit(nd_outtmp *o, nd_err *e) {
    struct stat st;
    const int exists = lstat(o->out, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        const int rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: became %s while the output was written; not replacing it", o->out, kind_of(st.st_mode));
        nd_out_abort(o);
        return rc;
    }
    /* a file replaced keeps its permissions (as cp and editors do): a 0600 trace stays private */
    if (exists && chmod(o->tmp, st.st_mode & 07777) != 0) {
        const int err = errno;
        const int rc = nd_fail(e, nd_io_exit(err), "%s: cannot keep the replaced file's permissions: %s", o->out, strerror(err));
        nd_out_abort(o);
        return rc;
    }
    const int nrc = narrow(o->tmp, o->out, e);
    if (nrc) { nd_out_abort(o); return nrc; }
    if (rename(o->tmp, o->out) != 0) {
        const int err = errno;
        const int rc = nd_fail(e, nd_io_exit(err), "%s: cannot move the output into place: %s%s", o->out, strerror(err), nd_io_hint(err));
        nd_out_abort(o);
        return rc;
    }
    nd_tmpclean_drop(o->slot);
    free(o->tmp); free(o->out);
    o->tmp = o->out = NULL;
    o->slot = -1;
    return 0;
}

void nd_out_abort(nd_outtmp *o) {
    if (o->tmp) unlink(o->tmp);
    nd_tmpclean_drop(o->slot);
    free(o->tmp); free(o->out);
    o->tmp = o->out = NULL;
    o->slot = -1;
}

int nd_outdir_begin(const char *dir, const char *tag, char *stage, size_t cap, int *slot, nd_err *e) {
    *slot = -1;
    const char *sl = strrchr(dir, '/');
    const size_t dl = sl ? (size_t)(sl - dir) + 1 : 0;
    /* the folder's name is cut so that the staging name still fits a file name (NAME_MAX) */
    const size_t extra = strlen(tag) + 9, bl = strlen(dir + dl), keep = bl > NAME_MAX - extra ? NAME_MAX - extra : bl;
    if ((size_t)snprintf(stage, cap, "%.*s.%.*s.%s-XXXXXX", (int)dl, dir, (int)keep, dir + dl, tag) >= cap)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: output path too long", dir);
    if (!nd_tmpclean_mkdtemp(stage, slot))
        return nd_fail(e, nd_io_exit(errno), "%s: cannot create a folder beside it: %s%s", dir, strerror(errno), nd_io_hint(errno));
    /* mkdtemp makes 0700; an output folder is an ordinary folder: its mode follows the umask */
    mode_t mask = umask(0);
    umask(mask);
    (void)chmod(stage, 0777 & ~mask);
    return 0;
}

int nd_outdir_commit(const char *stage, int slot, const char *dir, nd_err *e) {
    struct stat st;
    int rc = 0;
    if (lstat(dir, &st) == 0) {
        /* a folder replaced keeps its permissions (a 0700 folder stays private) */
        if (!S_ISDIR(st.st_mode)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: became %s while the output was written; not replacing it", dir, kind_of(st.st_mode));
        else if (chmod(stage, st.st_mode & 07777))
            rc = nd_fail(e, nd_io_exit(errno), "%s: cannot keep the folder's permissions: %s", dir, strerror(errno));
    }
    if (!rc) rc = narrow(stage, dir, e);
    /* rename replaces an empty folder and refuses one that is not (ENOTEMPTY, EEXIST) */
    if (!rc && rename(stage, dir))
        rc = nd_fail(e, errno == ENOTEMPTY || errno == EEXIST ? ND_EXIT_BADINPUT : nd_io_exit(errno),
                     "%s: cannot move the new folder into place: %s%s", dir, strerror(errno), nd_io_hint(errno));
    if (rc) nd_outdir_abort(stage, slot);
    else nd_tmpclean_drop(slot);
    return rc;
}

void nd_outdir_abort(const char *stage, int slot) {
    nd_rmtree(stage, 3);
    nd_tmpclean_drop(slot);
}

int nd_rmtree(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int rc = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) { rc = -1; continue; }
        struct stat st;
        if (lstat(p, &st)) continue;
        if (S_ISDIR(st.st_mode)) rc |= depth > 0 ? nd_rmtree(p, depth - 1) : -1;
        else rc |= unlink(p);
    }
    closedir(d);
    return rmdir(dir) | rc;
}

/* synth_outdir.c — see synth_outdir.h. */
#include "synth/synth_outdir.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>
#include <unistd.h>
#include "util/outfile.h"
#include "util/tmpclean.h"

#define SY_PATH 4352

static int skip_entry(const char *nm) { return !strcmp(nm, ".") || !strcmp(nm, ".."); }

/* The first entry of dir that is not the manifest, or "" when there is none. */
static int first_entry(const char *dir, char *out, size_t cap, nd_err *e) {
    DIR *d = opendir(dir);
    if (!d) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot list: %s", dir, strerror(errno));
    out[0] = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (!skip_entry(de->d_name) && strcmp(de->d_name, SY_OUTDIR_MANIFEST)) {
            snprintf(out, cap, "%s", de->d_name);
            break;
        }
    closedir(d);
    return 0;
}

/* A manifest line: NAME, a tab, then the entry's inode, size and modification time as synth left
 * it ("ino size sec.nsec"; a folder: "ino 0 0"). An entry is synth's only while it still has those:
 * a manifest that names a file synth did not write (one a user added later, or a manifest shipped
 * inside a folder) never gets that file removed by --force. */
static void entry_stamp(const struct stat *st, char *out, size_t cap) {
    if (S_ISDIR(st->st_mode)) snprintf(out, cap, "%llu 0 0", (unsigned long long)st->st_ino);
    else snprintf(out, cap, "%llu %lld %lld.%09ld", (unsigned long long)st->st_ino, (long long)st->st_size,
                  (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);
}

/* The manifest of dir as one buffer of "NAME\tSTAMP" entries separated by NUL (a name of this
 * folder only: nothing outside it is ever listed). NULL with a message when it is absent or
 * unreadable. */
static char *read_manifest(const char *dir, size_t *len, nd_err *e) {
    char path[SY_PATH], line[1024];
    snprintf(path, sizeof path, "%s/%s", dir, SY_OUTDIR_MANIFEST);
    struct stat st;
    if (lstat(path, &st) || !S_ISREG(st.st_mode)) {
        nd_fail(e, ND_EXIT_BADINPUT, "%s: exists, is not empty and was not written by synth (no %s); --force removes "
                "only what synth wrote", dir, SY_OUTDIR_MANIFEST);
        return NULL;
    }
    FILE *f = fopen(path, "r");
    if (!f) { nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read: %s", path, strerror(errno)); return NULL; }
    size_t cap = (size_t)st.st_size + 2, n = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(f); nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path); return NULL; }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        size_t l = strlen(line);
        char *tab = strchr(line, '\t');
        if (!tab) continue; /* a line without its stamp (an older manifest, a hand-written one) lists nothing */
        *tab = 0;
        const int bad = !line[0] || skip_entry(line) || strchr(line, '/') || !strcmp(line, SY_OUTDIR_MANIFEST);
        *tab = '\t';
        if (bad || n + l + 1 > cap) continue;
        memcpy(buf + n, line, l + 1);
        n += l + 1;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* nm (in dir) is listed with the stamp it has now */
static int listed(const char *names, size_t len, const char *dir, const char *nm) {
    char p[SY_PATH], stamp[96];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, nm);
    if (lstat(p, &st)) return 0;
    entry_stamp(&st, stamp, sizeof stamp);
    const size_t l = strlen(nm);
    for (size_t i = 0; i < len; i += strlen(names + i) + 1)
        if (!strncmp(names + i, nm, l) && names[i + l] == '\t' && !strcmp(names + i + l + 1, stamp)) return 1;
    return 0;
}

/* 0 when every entry of dir (sub-folders included, depth-bounded) is listed in its manifest;
 * else exit 2 naming the first one that is not. Nothing is removed. */
static int check_listed(const char *dir, int depth, nd_err *e) {
    size_t len = 0;
    char *names = read_manifest(dir, &len, e);
    if (!names) return e->code;
    DIR *d = opendir(dir);
    if (!d) { free(names); return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot list: %s", dir, strerror(errno)); }
    int rc = 0;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        const char *nm = de->d_name;
        if (skip_entry(nm) || !strcmp(nm, SY_OUTDIR_MANIFEST)) continue;
        char p[SY_PATH];
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        struct stat st;
        if (!listed(names, len, dir, nm))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: holds '%s', which synth did not write (or which changed since); "
                         "nothing replaced (--force removes only what synth wrote, as it wrote it)", dir, nm);
        else if (!lstat(p, &st) && S_ISDIR(st.st_mode))
            rc = depth >= 2 ? nd_fail(e, ND_EXIT_BADINPUT, "%s: nested too deep to replace", p) : check_listed(p, depth + 1, e);
    }
    closedir(d);
    free(names);
    return rc;
}

/* Remove what the manifest of dir lists (checked by check_listed), then the manifest. */
static int remove_listed(const char *dir, int depth, nd_err *e) {
    size_t len = 0;
    char *names = read_manifest(dir, &len, e);
    if (!names) return e->code;
    int rc = 0;
    for (size_t i = 0; !rc && i < len; i += strlen(names + i) + 1) {
        char p[SY_PATH];
        struct stat st;
        char nm[1024];
        snprintf(nm, sizeof nm, "%.*s", (int)strcspn(names + i, "\t"), names + i);
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        if (lstat(p, &st) || !listed(names, len, dir, nm)) continue; /* gone, or not as synth wrote it */
        if (S_ISDIR(st.st_mode)) {
            rc = depth >= 2 ? nd_fail(e, ND_EXIT_BADINPUT, "%s: nested too deep to replace", p) : remove_listed(p, depth + 1, e);
            if (!rc && rmdir(p)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot remove: %s", p, strerror(errno));
        } else if (unlink(p)) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot remove: %s", p, strerror(errno));
        }
    }
    free(names);
    char man[SY_PATH];
    snprintf(man, sizeof man, "%s/%s", dir, SY_OUTDIR_MANIFEST);
    if (!rc && unlink(man)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot remove: %s", man, strerror(errno));
    return rc;
}

/* The existing folder dir may receive synth's output: *empty when it holds nothing; else only
 * with force and when everything in it is listed in its manifest (nothing removed here). */
static int replaceable(const char *dir, int force, int *empty, nd_err *e) {
    struct stat st;
    char left[512], man[SY_PATH];
    ND_TRY(first_entry(dir, left, sizeof left, e));
    snprintf(man, sizeof man, "%s/%s", dir, SY_OUTDIR_MANIFEST);
    const int has_manifest = lstat(man, &st) == 0;
    *empty = !left[0] && !has_manifest;
    if (*empty) return 0;
    if (!force)
        return nd_fail(e, ND_EXIT_BADINPUT,
                       "%s: exists and is not empty (it holds '%s'); synth writes only into a new or empty folder "
                       "(--force replaces an earlier synth output, removing only what synth wrote)",
                       dir, left[0] ? left : SY_OUTDIR_MANIFEST);
    return check_listed(dir, 0, e);
}

static int mkdir_parents(const char *dir, nd_err *e) {
    char tmp[SY_PATH];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof tmp) return nd_fail(e, ND_EXIT_BADINPUT, "synth: bad output directory '%s'", dir);
    memcpy(tmp, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] != '/' && tmp[i] != 0) continue;
        char c = tmp[i];
        tmp[i] = 0;
        if (mkdir(tmp, 0777) && errno != EEXIST)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot create directory: %s", tmp, strerror(errno));
        tmp[i] = c;
    }
    return 0;
}

int sy_outdir_prepare(const char *dir, int force, nd_err *e) {
    struct stat st;
    if (stat(dir, &st)) {
        if (errno != ENOENT) return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s", dir, strerror(errno));
        ND_TRY(mkdir_parents(dir, e));
        if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a directory", dir);
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: exists and is not a directory", dir);
    int empty = 0;
    ND_TRY(replaceable(dir, force, &empty, e));
    if (empty) return 0;
    return remove_listed(dir, 0, e);
}

int sy_outdir_record(const char *dir, nd_err *e) {
    char path[SY_PATH], tmp[SY_PATH + 8];
    snprintf(path, sizeof path, "%s/%s", dir, SY_OUTDIR_MANIFEST);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    DIR *d = opendir(dir);
    if (!d) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot list: %s", dir, strerror(errno));
    FILE *f = fopen(tmp, "w");
    if (!f) {
        closedir(d);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot create: %s", tmp, strerror(errno));
    }
    for (struct dirent *de; (de = readdir(d));) {
        const char *nm = de->d_name;
        size_t l = strlen(nm);
        if (skip_entry(nm) || !strcmp(nm, SY_OUTDIR_MANIFEST) || (l > 4 && !strcmp(nm + l - 4, ".tmp") &&
                                                                   !strncmp(nm, SY_OUTDIR_MANIFEST, l - 4)))
            continue;
        char p[SY_PATH], stamp[96];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, nm);
        /* a name a line cannot hold is not listed (--force then refuses the folder) */
        if (strpbrk(nm, "\t\n\r") || lstat(p, &st)) continue;
        entry_stamp(&st, stamp, sizeof stamp);
        fprintf(f, "%s\t%s\n", nm, stamp);
    }
    closedir(d);
    int rc = 0;
    if (fclose(f)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: write failed: %s", tmp, strerror(errno));
    if (!rc && rename(tmp, path)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

/* 1 when the resolved a is b or lies below it */
static int path_inside(const char *a, const char *b) {
    size_t n = strlen(b);
    return !strncmp(a, b, n) && (a[n] == 0 || a[n] == '/' || (n == 1 && b[0] == '/'));
}

int sy_outdir_check(const char *dir, int force, const char *const *inputs, int n, nd_err *e) {
    /* OUTDIR is replaced as a whole (staged beside it, renamed onto it): "." or ".." names no place beside */
    const char *base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    if (!strcmp(base, ".") || !strcmp(base, ".."))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: give the output folder by its name (not '.' or '..'): synth writes it "
                       "beside itself and renames it into place", dir);
    struct stat st;
    if (lstat(dir, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: is a symbolic link; synth writes only into a real folder (give the "
                           "link's target or a new path)", dir);
        if (!S_ISDIR(st.st_mode)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: exists and is not a directory", dir);
    } else if (errno != ENOENT) {
        return nd_fail(e, nd_io_exit(errno), "%s: %s", dir, strerror(errno));
    }
    /* the output must not be an input, lie inside one or hold one: --force replaces it whole */
    char *out = realpath(dir, NULL);
    const int exists = out != NULL;
    if (!out) { /* not there yet: its parent decides whether it would lie inside an input */
        char parent[SY_PATH];
        snprintf(parent, sizeof parent, "%s", dir);
        char *sl = strrchr(parent, '/');
        if (sl && sl != parent) *sl = 0; else snprintf(parent, sizeof parent, "%s", sl ? "/" : ".");
        out = realpath(parent, NULL);
    }
    int rc = 0;
    for (int i = 0; !rc && out && i < n; i++) {
        char *in = inputs[i] ? realpath(inputs[i], NULL) : NULL;
        if (in && (exists ? path_inside(out, in) || path_inside(in, out) : path_inside(out, in)))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: is, holds or lies inside %s, an input of this run; synth writes a new "
                         "checkpoint elsewhere", dir, inputs[i]);
        free(in);
    }
    free(out);
    if (rc) return rc;
    if (lstat(dir, &st) != 0) return 0;
    int empty = 0;
    return replaceable(dir, force, &empty, e);
}

int sy_stage_begin(const char *dir, char *stage, size_t cap, int *slot, nd_err *e) {
    *slot = -1;
    const char *sl = strrchr(dir, '/');
    const size_t dl = sl ? (size_t)(sl - dir) + 1 : 0;
    if (dl > 1) {
        char parent[SY_PATH];
        snprintf(parent, sizeof parent, "%.*s", (int)(dl - 1), dir);
        ND_TRY(mkdir_parents(parent, e));
    }
    return nd_outdir_begin(dir, "synth", stage, cap, slot, e);
}

int sy_stage_commit(const char *stage, int slot, const char *dir, int force, nd_err *e) {
    struct stat before;
    const int existed = lstat(dir, &before) == 0 && S_ISDIR(before.st_mode);
    int rc = sy_outdir_prepare(dir, force, e);
    struct stat st;
    if (!rc && (lstat(dir, &st) || !S_ISDIR(st.st_mode))) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: not a directory", dir);
    /* a folder replaced keeps its permissions (a 0700 folder stays private); a new one keeps the
     * staging folder's (the umask's, or synth --from's source folder's) */
    if (!rc && existed && chmod(stage, before.st_mode & 07777))
        rc = nd_fail(e, nd_io_exit(errno), "%s: cannot keep the folder's permissions: %s", dir, strerror(errno));
    /* dir is now empty: rename replaces an empty folder */
    if (!rc && rename(stage, dir))
        rc = nd_fail(e, nd_io_exit(errno), "%s: cannot move the new checkpoint into place: %s%s", dir, strerror(errno), nd_io_hint(errno));
    if (rc) sy_stage_abort(stage, slot);
    else nd_tmpclean_drop(slot);
    return rc;
}

void sy_stage_abort(const char *stage, int slot) { nd_outdir_abort(stage, slot); }

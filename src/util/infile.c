/* infile.c — see infile.h. */
#include "infile.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

static const char *kind_of(mode_t m) {
    return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a folder" : S_ISCHR(m) || S_ISBLK(m) ? "a device"
         : S_ISSOCK(m) ? "a socket" : "not a file";
}

int nd_open_regular(const char *path, const char **kind) {
    *kind = NULL;
    /* O_NONBLOCK: opening a FIFO (or a device) for reading never waits; fstat on the descriptor
     * then judges the very file that was opened, not a name that may change in between */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *kind = fstat(fd, &st) == 0 ? kind_of(st.st_mode) : "not a file";
        close(fd);
        errno = EINVAL;
        return -2;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *nd_fopen_regular(const char *path, const char **kind) {
    int fd = nd_open_regular(path, kind);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd);
    return f;
}

size_t nd_read_head(const char *path, char *buf, size_t cap) {
    const char *kind;
    buf[0] = 0;
    FILE *f = nd_fopen_regular(path, &kind);
    if (!f) return 0;
    const size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n;
}

int nd_input_regular(const char *path, nd_err *e) {
    const char *kind;
    int fd = nd_open_regular(path, &kind);
    if (fd >= 0) { close(fd); return 0; }
    if (fd == -1) return 0; /* missing or unreadable: the caller's open reports it */
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read it", path, kind);
}

int nd_read_text(const char *path, const char *what, size_t max, int missing_ok, char **out, size_t *len, nd_err *e) {
    *out = NULL;
    if (len) *len = 0;
    const char *kind;
    FILE *f = nd_fopen_regular(path, &kind);
    if (!f && kind) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read it", path, kind);
    if (!f) {
        const int err = errno;
        if (missing_ok && err == ENOENT) return 0;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open %s: %s", path, what, strerror(err));
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > max + 4096 + 1) cap = max + 4096 + 1;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); }
            buf = nb;
        }
        errno = 0;
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (n > max) { free(buf); fclose(f); return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s larger than %zu MiB", path, what, max >> 20); }
        if (got < 4096) break;
    }
    const int bad = ferror(f), err = errno;
    fclose(f);
    if (bad) { free(buf); return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read %s: %s", path, what, err ? strerror(err) : "read error"); }
    buf[n] = 0;
    /* a text read as a C string would end at a NUL byte and drop the rest without a word */
    const char *nul = memchr(buf, 0, n);
    if (nul) {
        const size_t at = (size_t)(nul - buf);
        free(buf);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: a NUL byte at byte offset %zu: not a text file (%s)", path, at, what);
    }
    *out = buf;
    if (len) *len = n;
    return 0;
}

static int below(const char *a, const char *b) {
    size_t n = strlen(b);
    return !strncmp(a, b, n) && (a[n] == '/' || (n == 1 && b[0] == '/'));
}

int nd_member_link_ok(const char *dir, const char *path, nd_err *e) {
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
    char *target = realpath(path, NULL), *root = realpath(dir, NULL);
    int ok = 0;
    if (target && root) {
        ok = below(target, root);
        /* a Hugging Face cache snapshot: <repo>/snapshots/<rev>/<file> -> <repo>/blobs/<hash> */
        const char *sl = strrchr(root, '/');
        if (!ok && sl && sl > root) {
            char snaps[PATH_MAX];
            snprintf(snaps, sizeof snaps, "%.*s", (int)(sl - root), root);
            const char *s2 = strrchr(snaps, '/');
            if (s2 && !strcmp(s2 + 1, "snapshots")) {
                char blobs[PATH_MAX + 8];
                snprintf(blobs, sizeof blobs, "%.*s/blobs", (int)(s2 - snaps), snaps);
                ok = below(target, blobs);
            }
        }
    }
    int rc = 0;
    if (!target) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: a symbolic link that leads nowhere; refusing to read it", path);
    else if (!ok)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: a symbolic link out of the checkpoint folder (to %s); nvfp4dbg reads and copies "
                     "only files inside it (or its Hugging Face cache blobs): copy the file in if it belongs there", path, target);
    free(target);
    free(root);
    return rc;
}

int nd_dir_links_ok(const char *dir, nd_err *e) {
    DIR *d = opendir(dir);
    if (!d) return 0; /* the caller's own open reports a missing or unreadable folder */
    int rc = 0;
    for (struct dirent *de; !rc && (de = readdir(d));) {
        if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN) continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p) continue;
        /* every member, weight shards included: a repro bundle copies weight bytes, so a link out of the
         * folder would carry a file the checkpoint's author chose into what the user shares (issue 37) */
        rc = nd_member_link_ok(dir, p, e);
    }
    closedir(d);
    return rc;
}

/* infile.c — see infile.h. */
#include "infile.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

int nd_input_regular(const char *path, nd_err *e) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file";
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read it", path, what);
}

int nd_read_text(const char *path, const char *what, size_t max, int missing_ok, char **out, size_t *len, nd_err *e) {
    *out = NULL;
    if (len) *len = 0;
    ND_TRY(nd_input_regular(path, e));
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (missing_ok && errno == ENOENT) return 0;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open %s", path, what);
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
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (n > max) { free(buf); fclose(f); return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s larger than %zu MiB", path, what, max >> 20); }
        if (got < 4096) break;
    }
    const int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return nd_fail(e, ND_EXIT_BADINPUT, "%s: read error", path); }
    buf[n] = 0;
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
        /* weight shards may live elsewhere (another disk): a safetensors file is parsed and
         * checked as one, so no other file can pass for it; texts (configs, tokenizers,
         * templates), which a bundle embeds, must lie inside */
        const size_t n = strlen(de->d_name);
        if (n > 12 && !strcmp(de->d_name + n - 12, ".safetensors")) continue;
        rc = nd_member_link_ok(dir, p, e);
    }
    closedir(d);
    return rc;
}

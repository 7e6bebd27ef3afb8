/* st_writer.c — write a safetensors file: header JSON padded with spaces so the data area starts
 * on an 8-byte boundary (as the safetensors library does), then the tensors in the order added,
 * back to back. Written to PATH.tmp, fsynced, renamed into place. */
#include "util/outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "util/tmpclean.h"
#include "ckpt/ckpt_internal.h"

typedef struct wt {
    const void *data;
    size_t nbytes;
} wt;

struct nd_st_writer {
    char *path, *tmp;
    json_t *hdr, *meta;
    wt *t;
    size_t n, cap;
    uint64_t off;
};

int nd_st_writer_open(const char *path, nd_st_writer **out, nd_err *e) {
    *out = NULL;
    nd_st_writer *w = calloc(1, sizeof *w);
    size_t pl = strlen(path);
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(pl + 5)) || !(w->hdr = json_object())) {
        if (w) { free(w->path); free(w->tmp); free(w); }
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
    }
    memcpy(w->tmp, path, pl);
    memcpy(w->tmp + pl, ".tmp", 5);
    *out = w;
    return 0;
}

static void writer_free(nd_st_writer *w) {
    json_decref(w->hdr);
    json_decref(w->meta);
    free(w->t);
    free(w->path);
    free(w->tmp);
    free(w);
}

int nd_st_writer_add(nd_st_writer *w, const char *name, nd_dtype dt, int ndim, const int64_t *shape,
                     const void *data, nd_err *e) {
    if (!name || !name[0] || strcmp(name, "__metadata__") == 0)
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: invalid tensor name '%s'", w->path, name ? name : "");
    if (json_object_get(w->hdr, name))
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor '%s' added twice", w->path, name);
    if (nd_dtype_size(dt) == 0 || ndim < 0 || ndim > ND_MAX_DIMS)
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor '%s': bad dtype or ndim %d", w->path, name, ndim);
    uint64_t numel = 1, nbytes;
    json_t *js = json_array();
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(numel, (uint64_t)shape[i], &numel)) {
            json_decref(js);
            return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor '%s': bad shape", w->path, name);
        }
        json_array_append_new(js, json_integer(shape[i]));
    }
    if (__builtin_mul_overflow(numel, (uint64_t)nd_dtype_size(dt), &nbytes)) {
        json_decref(js);
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor '%s': size overflows", w->path, name);
    }
    if (w->n == w->cap) {
        size_t nc = w->cap ? 2 * w->cap : 16;
        wt *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt) { json_decref(js); return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", w->path); }
        w->t = nt;
        w->cap = nc;
    }
    json_t *ent = json_object();
    json_object_set_new(ent, "dtype", json_string(nd_dtype_str(dt)));
    json_object_set_new(ent, "shape", js);
    json_t *jo = json_array();
    json_array_append_new(jo, json_integer((json_int_t)w->off));
    json_array_append_new(jo, json_integer((json_int_t)(w->off + nbytes)));
    json_object_set_new(ent, "data_offsets", jo);
    if (json_object_set_new(w->hdr, name, ent)) /* jansson refuses keys that are not valid UTF-8 */
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: tensor name is not valid UTF-8", w->path);
    w->t[w->n].data = data;
    w->t[w->n].nbytes = (size_t)nbytes;
    w->n++;
    w->off += nbytes;
    return 0;
}

int nd_st_writer_meta(nd_st_writer *w, const char *key, const char *value, nd_err *e) {
    if (!w->meta && !(w->meta = json_object()))
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", w->path);
    if (json_object_set_new(w->meta, key, json_string(value)))
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: bad metadata '%s'", w->path, key);
    return 0;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

int nd_st_writer_close(nd_st_writer *w, nd_err *e) {
    int rc = 0;
    if (w->meta) {
        /* the safetensors library writes __metadata__ first */
        json_t *h = json_object();
        json_object_set(h, "__metadata__", w->meta);
        json_object_update(h, w->hdr);
        json_decref(w->hdr);
        w->hdr = h;
    }
    char *js = json_dumps(w->hdr, JSON_COMPACT);
    if (!js) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: cannot serialise header", w->path); goto done; }
    size_t hl = strlen(js), padded = (hl + 7) & ~(size_t)7;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    /* shards are written only into folders of our own (synth's staging folder, replay's): the
     * temporary is new, never a link (O_EXCL) */
    int fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    const int slot = fd >= 0 ? nd_tmpclean_add(w->tmp) : -1;
    if (fd < 0) {
        rc = nd_fail(e, nd_io_exit(errno), "%s: cannot create: %s%s", w->tmp, strerror(errno), nd_io_hint(errno));
        free(js);
        goto done;
    }
    static const char spaces[8] = "        ";
    int bad = write_all(fd, len8, 8) || write_all(fd, js, hl) || write_all(fd, spaces, padded - hl);
    free(js);
    for (size_t i = 0; !bad && i < w->n; i++) bad = write_all(fd, w->t[i].data, w->t[i].nbytes);
    if (!bad) bad = fsync(fd);
    int err = errno;
    if (close(fd) && !bad) { bad = 1; err = errno; }
    if (!bad && rename(w->tmp, w->path)) { bad = 1; err = errno; }
    if (bad) {
        unlink(w->tmp);
        rc = nd_fail(e, nd_io_exit(err), "%s: write failed: %s%s", w->path, strerror(err), nd_io_hint(err));
    }
    nd_tmpclean_drop(slot);
done:
    writer_free(w);
    return rc;
}

void nd_st_writer_abort(nd_st_writer *w) {
    if (!w) return;
    unlink(w->tmp);
    writer_free(w);
}

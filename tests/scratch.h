/* scratch.h — a test's scratch folder: nd_scratch_make creates $TMPDIR/nd-TAG-XXXXXX (P_tmpdir
 * without TMPDIR); nd_scratch_remove deletes it with everything in it, or keeps it and says so
 * when ND_KEEP_TMP is set. */
#ifndef ND_SCRATCH_H
#define ND_SCRATCH_H
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static inline int nd_scratch_rm_one(const char *p, const struct stat *s, int flag, struct FTW *f) {
    (void)s; (void)flag; (void)f;
    return remove(p);
}

/* 0 with the folder's path in dir, else -1 (the reason printed). */
static inline int nd_scratch_make(char *dir, size_t cap, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, cap, "%s/nd-%s-XXXXXX", tmp && *tmp ? tmp : P_tmpdir, tag);
    if (mkdtemp(dir)) return 0;
    perror("mkdtemp");
    return -1;
}

static inline void nd_scratch_remove(const char *dir) {
    if (!getenv("ND_KEEP_TMP")) nftw(dir, nd_scratch_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else fprintf(stderr, "kept %s\n", dir);
}
#endif

/* replay_main.c — runs a harness without libFuzzer: every file named on the command line (folders
 * are walked) is fed once to LLVMFuzzerTestOneInput. This is how the seed and regression corpora
 * run in the normal and the sanitizer test builds. Fails when no input was found, so a corpus
 * path that went missing cannot pass silently. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include "fuzz_common.h"

#if defined(__SANITIZE_ADDRESS__)
#define ND_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ND_UNDER_ASAN 1
#endif
#endif

static long g_files;

static void run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) { perror(path); exit(1); }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    g_files++;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void run_path(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) { perror(path); exit(1); }
    if (!S_ISDIR(st.st_mode)) { run_file(path); return; }
    DIR *d = opendir(path);
    if (!d) { perror(path); exit(1); }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue; /* ., .. and .gitkeep */
        names = realloc(names, (n + 1) * sizeof *names);
        size_t len = strlen(path) + strlen(de->d_name) + 2;
        names[n] = malloc(len);
        snprintf(names[n++], len, "%s/%s", path, de->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) { run_path(names[i]); free(names[i]); }
    free(names);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]); return 2; }
#ifndef ND_UNDER_ASAN
    /* As ASan's max_allocation_size_mb=4096 does in the sanitizer build: libhdf5 allocates what a
     * corrupt link message declares (21 GB, regress/bundle) before checking it against the file.
     * Untouched, that costs nothing; but meson's MALLOC_PERTURB_ makes glibc fill it, which took
     * the test past its timeout. A cap on the address space makes that malloc return NULL, as on a
     * system without overcommit. */
    struct rlimit lim = {8ull << 30, 8ull << 30};
    if (setrlimit(RLIMIT_AS, &lim)) perror("setrlimit");
#endif
    for (int i = 1; i < argc; i++) run_path(argv[i]);
    printf("%s: %ld inputs replayed\n", argv[0], g_files);
    return g_files > 0 ? 0 : 1;
}

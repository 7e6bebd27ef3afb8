/* run_bad_input.c — `run_bad_input NVFP4DBG CORPUS`: runs `NVFP4DBG inspect CORPUS/<case>` for
 * every case folder and checks exit 2 (not a crash, not a sanitizer report), an error line
 * "nvfp4dbg: ...", and every substring listed in CORPUS/<case>/expect.
 * `run_bad_input --same GENERATOR CORPUS` runs the generator into a fresh folder and checks that
 * it reproduces the committed corpus byte for byte. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Run the binary on one case; fills err (its stderr) and returns the wait status. */
static int run(const char *bin, const char *dir, char *err, size_t cap) {
    int p[2];
    if (pipe(p)) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        close(p[0]);
        close(p[1]);
        if (!freopen("/dev/null", "w", stdout)) _exit(127);
        execl(bin, bin, "inspect", dir, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t k;
    while ((k = read(p[0], err + n, cap - 1 - n)) > 0) n += (size_t)k;
    if (k > 0 || n == cap - 1) { char sink[4096]; while (read(p[0], sink, sizeof sink) > 0) {} }
    err[n] = 0;
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static unsigned char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    unsigned char *b = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n == cap) { cap = cap ? 2 * cap : 4096; b = realloc(b, cap); if (!b) break; }
        size_t k = fread(b + *n, 1, cap - *n, f);
        if (!k) break;
        *n += k;
    }
    fclose(f);
    return b;
}

/* Every file of every case in a is in b with the same bytes (called both ways). */
static int same_tree(const char *a, const char *b) {
    int bad = 0;
    DIR *d = opendir(a);
    if (!d) { perror(a); return 1; }
    struct dirent *c;
    while ((c = readdir(d))) {
        if (c->d_name[0] == '.') continue;
        char ca[2048];
        snprintf(ca, sizeof ca, "%s/%s", a, c->d_name);
        DIR *dc = opendir(ca);
        if (!dc) { fprintf(stderr, "%s: not a case folder\n", ca); bad++; continue; }
        struct dirent *fe;
        while ((fe = readdir(dc))) {
            if (fe->d_name[0] == '.') continue;
            char pa[4096], pb[4096];
            snprintf(pa, sizeof pa, "%s/%s", ca, fe->d_name);
            snprintf(pb, sizeof pb, "%s/%s/%s", b, c->d_name, fe->d_name);
            size_t na, nb;
            unsigned char *x = slurp(pa, &na), *y = slurp(pb, &nb);
            if (!x || !y || na != nb || memcmp(x, y, na)) { fprintf(stderr, "differs: %s vs %s\n", pa, pb); bad++; }
            free(x);
            free(y);
        }
        closedir(dc);
    }
    closedir(d);
    return bad;
}

static int same(const char *gen, const char *corpus) {
    char out[] = "bad-input-regenerated-XXXXXX";
    if (!mkdtemp(out)) { perror("mkdtemp"); return 1; }
    pid_t pid = fork();
    if (pid == 0) { execl(gen, gen, out, (char *)NULL); _exit(127); }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "%s failed\n", gen); return 1; }
    int bad = same_tree(out, corpus) + same_tree(corpus, out);
    printf("regenerated corpus %s the committed one\n", bad ? "differs from" : "matches");
    if (!bad) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", out); /* our own temp folder, fixed pattern */
        if (system(cmd)) {}
    }
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--same")) return same(argv[2], argv[3]);
    if (argc != 3) { fprintf(stderr, "usage: run_bad_input NVFP4DBG CORPUS\n"); return 2; }
    DIR *d = opendir(argv[2]);
    if (!d) { perror(argv[2]); return 1; }
    char *names[512];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    int bad = 0, checked = 0;
    static char err[65536];
    for (size_t i = 0; i < n; i++) {
        char dir[2048], ex[2200];
        snprintf(dir, sizeof dir, "%s/%s", argv[2], names[i]);
        snprintf(ex, sizeof ex, "%s/expect", dir);
        FILE *f = fopen(ex, "r");
        if (!f) { fprintf(stderr, "%s: no expect file\n", names[i]); bad++; continue; }
        int st = run(argv[1], dir, err, sizeof err);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 2 && strncmp(err, "nvfp4dbg: ", 10) == 0 &&
                 strchr(err, '\n') == err + strlen(err) - 1; /* one line, no sanitizer report */
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            if (line[0] && !strstr(err, line)) {
                fprintf(stderr, "%s: message lacks \"%s\"\n", names[i], line);
                ok = 0;
            }
        }
        fclose(f);
        /* the message names the case's own folder, so it names the right file */
        if (!strstr(err, names[i])) { fprintf(stderr, "%s: message does not name the checkpoint path\n", names[i]); ok = 0; }
        if (!ok) {
            fprintf(stderr, "%s: FAILED (status %s %d)\n  stderr: %s\n", names[i],
                    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), err);
            bad++;
        } else {
            printf("ok   %-34s %s", names[i], err);
        }
        checked++;
        free(names[i]);
    }
    printf("bad-input corpus: %d cases, %d failed\n", checked, bad);
    if (checked < 20) { fprintf(stderr, "expected at least 20 cases\n"); return 1; }
    return bad ? 1 : 0;
}

/* run_bad_input.c — `run_bad_input NVFP4DBG CORPUS`: runs `NVFP4DBG inspect CORPUS/<case>` for
 * every case folder and checks exit 2 (not a crash, not a sanitizer report), an error line
 * "nvfp4dbg: ...", and every substring listed in CORPUS/<case>/expect. */
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

int main(int argc, char **argv) {
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

/* test_tmpclean.c — a SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGPIPE/SIGALRM/SIGUSR1/... while temporaries are registered removes them and the
 * process still dies of that signal; a dropped temporary is kept (its writer renamed it); an
 * ignored signal stays ignored. Each case runs in a forked child. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "nd_test.h"
#include "util/tmpclean.h"

static char dir[256];

static int exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

static void touch(const char *p) { FILE *f = fopen(p, "w"); if (f) { fputs("x", f); fclose(f); } }

/* child: register a and b, drop b, then raise sig; returns how the child ended */
static int child_raises(int sig, const char *a, const char *b, int ignore) {
    pid_t p = fork();
    if (p == 0) {
        /* the test's own disposition, whatever it inherited (a CI run under nohup ignores SIGHUP) */
        signal(sig, ignore ? SIG_IGN : SIG_DFL);
        nd_tmpclean_install();
        touch(a);
        touch(b);
        nd_tmpclean_add(a);
        nd_tmpclean_drop(nd_tmpclean_add(b));
        raise(sig);
        _exit(42); /* reached only when the signal is ignored */
    }
    int st = 0;
    waitpid(p, &st, 0);
    return st;
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/nd-tmpclean-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU};
    for (int i = 0; i < 3; i++) {
        char a[300], b[300];
        snprintf(a, sizeof a, "%s/out%d.tmp", dir, i);
        snprintf(b, sizeof b, "%s/kept%d", dir, i);
        int st = child_raises(sigs[i], a, b, 0);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i], "signal %d: child status %#x (want killed by it)", sigs[i], st);
        CHECK(!exists(a), "signal %d: registered temporary %s left behind", sigs[i], a);
        CHECK(exists(b), "signal %d: dropped file %s removed", sigs[i], b);
        unlink(b);
    }
    /* an ignored SIGHUP (nohup) stays ignored: the child goes on and the file stays */
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/nohup.tmp", dir);
    snprintf(b, sizeof b, "%s/nohup-kept", dir);
    int st = child_raises(SIGHUP, a, b, 1);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42, "ignored SIGHUP: child status %#x (want exit 42)", st);
    CHECK(exists(a), "ignored SIGHUP: %s removed", a);
    unlink(a);
    unlink(b);
    /* every slot taken: the next registration says so instead of overwriting one */
    int got = 0;
    for (int i = 0; i < ND_TMPCLEAN_SLOTS; i++) got += nd_tmpclean_add("/nonexistent/x") >= 0;
    CHECK_EQ_INT(got, ND_TMPCLEAN_SLOTS);
    CHECK_EQ_INT(nd_tmpclean_add("/nonexistent/y"), -1);
    rmdir(dir);
    return nd_test_report("tmpclean");
}

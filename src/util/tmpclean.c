/* tmpclean.c — see tmpclean.h. */
#include "tmpclean.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>

static char paths[ND_TMPCLEAN_SLOTS][ND_TMPCLEAN_PATH];
/* 1 while paths[i] holds a registered temporary; the handler reads it, so it is volatile and
 * set only after the path is complete */
static volatile sig_atomic_t live[ND_TMPCLEAN_SLOTS];
static int installed;

static void on_signal(int sig) {
    for (int i = 0; i < ND_TMPCLEAN_SLOTS; i++)
        if (live[i]) unlink(paths[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void nd_tmpclean_install(void) {
    if (installed) return;
    installed = 1;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* a signal the caller chose to ignore (nohup, a shell's background job) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

int nd_tmpclean_add(const char *path) {
    size_t n = strlen(path);
    if (n >= ND_TMPCLEAN_PATH) return -1;
    for (int i = 0; i < ND_TMPCLEAN_SLOTS; i++)
        if (!live[i]) {
            memcpy(paths[i], path, n + 1);
            live[i] = 1;
            return i;
        }
    return -1;
}

void nd_tmpclean_drop(int slot) {
    if (slot >= 0 && slot < ND_TMPCLEAN_SLOTS) live[slot] = 0;
}

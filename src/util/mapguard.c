/* mapguard.c — see mapguard.h. */
#include "mapguard.h"
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "util/tmpclean.h"

typedef struct { const char *base; size_t len; const char *path; } range;
static range ranges[ND_MAPGUARD_SLOTS];
static volatile sig_atomic_t used[ND_MAPGUARD_SLOTS];
static char partial[4096];
static volatile sig_atomic_t has_partial;

static void say(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t k = write(2, s, n);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *ctx) {
    (void)sig; (void)ctx;
    const char *a = si ? (const char *)si->si_addr : NULL, *path = NULL;
    for (int i = 0; a && i < ND_MAPGUARD_SLOTS && !path; i++)
        if (used[i] && a >= ranges[i].base && a < ranges[i].base + ranges[i].len) path = ranges[i].path;
    say("nvfp4dbg: ");
    if (path) { say(path); say(": "); }
    say("the file changed while it was read (it shrank, or its disk failed): reading it raised SIGBUS; ");
    if (has_partial) { say("the rows written before stay in "); say(partial); say(" (an unfinished trace)"); }
    else say("the run stopped there");
    say(". Copy the checkpoint where nothing else writes to it and run again.\n");
    nd_tmpclean_now();
    _exit(2);
}

void nd_mapguard_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

int nd_mapguard_add(const void *base, size_t len, const char *path) {
    for (int i = 0; i < ND_MAPGUARD_SLOTS; i++)
        if (!used[i]) {
            ranges[i] = (range){base, len, path};
            used[i] = 1;
            return i;
        }
    return -1;
}

void nd_mapguard_drop(int slot) {
    if (slot >= 0 && slot < ND_MAPGUARD_SLOTS) used[slot] = 0;
}

void nd_mapguard_partial(const char *path) {
    has_partial = 0;
    if (!path) return;
    size_t n = strlen(path);
    if (n >= sizeof partial) n = sizeof partial - 1;
    memcpy(partial, path, n);
    partial[n] = 0;
    has_partial = 1;
}

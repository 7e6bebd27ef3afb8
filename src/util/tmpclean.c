/* tmpclean.c — see tmpclean.h. */
#include "tmpclean.h"
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char paths[ND_TMPCLEAN_SLOTS][ND_TMPCLEAN_PATH];
/* 1 while paths[i] holds a registered temporary; the handler reads it, so it is volatile and
 * set only after the path is complete */
static volatile sig_atomic_t live[ND_TMPCLEAN_SLOTS];
static volatile sig_atomic_t is_dir[ND_TMPCLEAN_SLOTS];
static int installed;

/* Remove the entries of the folder open as fd, depth levels down, with system calls only
 * (getdents64, unlinkat, openat: async-signal-safe; opendir/readdir are not). */
static void empty_dir(int fd, int depth) {
    char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) return;
        for (long off = 0; off < n;) {
            struct { unsigned long long ino; long long off; unsigned short reclen; unsigned char type; char name[]; } *d = (void *)(buf + off);
            off += d->reclen;
            if (!strcmp(d->name, ".") || !strcmp(d->name, "..")) continue;
            if (d->type == DT_DIR) {
                if (depth > 0) {
                    int sub = openat(fd, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
                    if (sub >= 0) { empty_dir(sub, depth - 1); close(sub); }
                }
                unlinkat(fd, d->name, AT_REMOVEDIR);
            } else {
                unlinkat(fd, d->name, 0);
            }
        }
    }
}

static void remove_tree(const char *path) {
    /* a listing read while its entries go may skip some: a few passes, each from the start */
    for (int pass = 0; pass < 4; pass++) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (fd < 0) return;
        empty_dir(fd, 3);
        close(fd);
        if (rmdir(path) == 0) return;
    }
}

void nd_tmpclean_now(void) {
    for (int i = 0; i < ND_TMPCLEAN_SLOTS; i++)
        if (live[i]) {
            if (is_dir[i]) remove_tree(paths[i]);
            else unlink(paths[i]);
            live[i] = 0;
        }
}

/* set while a temporary is created and registered (signals blocked in that thread only: a signal
 * delivered to another thread, such as a BLAS worker, runs the handler while the new path is not
 * registered yet; the handler waits for the registration, then removes it too) */
static volatile sig_atomic_t creating;

static void on_signal(int sig) {
    nd_tmpclean_now();
    if (creating) {
        for (long spin = 0; creating && spin < 1000000000L; spin++) {}
        nd_tmpclean_now();
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void nd_tmpclean_install(void) {
    if (installed) return;
    installed = 1;
    /* every signal whose default action ends the process and that a process can catch */
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM, SIGPROF};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigfillset(&sa.sa_mask); /* one cleanup at a time */
        /* a signal the caller chose to ignore (nohup, a shell's background job) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

static int add(const char *path, int dir) {
    size_t n = strlen(path);
    if (n >= ND_TMPCLEAN_PATH) return -1;
    for (int i = 0; i < ND_TMPCLEAN_SLOTS; i++)
        if (!live[i]) {
            memcpy(paths[i], path, n + 1);
            is_dir[i] = dir;
            live[i] = 1;
            return i;
        }
    return -1;
}

int nd_tmpclean_add(const char *path) { return add(path, 0); }

/* the signals nd_tmpclean_install catches, blocked while a temporary is created and registered: a
 * signal in between would leave it behind; it is delivered (and the temporary removed) after */
static void block_all(sigset_t *old) {
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, old);
}

int nd_tmpclean_mkstemps(char *tmpl, int suffix_len, int *slot) {
    sigset_t old;
    block_all(&old);
    creating = 1;
    const int fd = mkstemps(tmpl, suffix_len);
    *slot = fd >= 0 ? add(tmpl, 0) : -1;
    creating = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return fd;
}

char *nd_tmpclean_mkdtemp(char *tmpl, int *slot) {
    sigset_t old;
    block_all(&old);
    creating = 1;
    char *d = mkdtemp(tmpl);
    *slot = d ? add(tmpl, 1) : -1;
    creating = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return d;
}
int nd_tmpclean_add_dir(const char *path) { return add(path, 1); }

void nd_tmpclean_drop_path(const char *path) {
    for (int i = 0; i < ND_TMPCLEAN_SLOTS; i++)
        if (live[i] && !strcmp(paths[i], path)) live[i] = 0;
}

void nd_tmpclean_drop(int slot) {
    if (slot >= 0 && slot < ND_TMPCLEAN_SLOTS) live[slot] = 0;
}

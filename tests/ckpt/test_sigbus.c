/* test_sigbus.c — a weights file that shrinks while it is mapped (issue 37 item 3): reading the
 * lost pages raises SIGBUS, which util/mapguard turns into exit 2 naming the file, with the run's
 * temporaries removed — never a silent death. A child process maps a 1 MiB shard, the file is
 * truncated to its header, the child reads the tensor; the parent checks the child's exit status,
 * its message (the file, and the unfinished trace a run keeps) and that a temporary it registered
 * is gone. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "nd_test.h"
#include "ckpt/ckpt.h"
#include "util/mapguard.h"
#include "util/tmpclean.h"

int main(void) {
    char dir[] = "/tmp/nd-sigbus-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], tmpf[256], errf[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(tmpf, sizeof tmpf, "%s/.out.XXXXXX.tmp", dir);
    snprintf(errf, sizeof errf, "%s/stderr", dir);
    static float data[1 << 18];
    for (int i = 0; i < (1 << 18); i++) data[i] = (float)i;
    nd_err e = {0};
    nd_st_writer *w;
    const int64_t shape[1] = {1 << 18};
    CHECK_EQ_INT(nd_st_writer_open(path, &w, &e), 0);
    CHECK_EQ_INT(nd_st_writer_add(w, "w", ND_DT_F32, 1, shape, data, &e), 0);
    CHECK_EQ_INT(nd_st_writer_close(w, &e), 0);
    int tfd = mkstemps(tmpf, 4);
    CHECK(tfd >= 0, "temporary");
    close(tfd);

    int pipefd[2];
    CHECK(pipe(pipefd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        int ef = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(ef, 2);
        nd_tmpclean_install();
        nd_mapguard_install();
        nd_tmpclean_add(tmpf);
        nd_mapguard_partial("/x/run.h5.incomplete"); /* a trace being written: the message names what stays */
        nd_st_file *f;
        if (nd_st_open(path, &f, &e)) _exit(10);
        const nd_tview *t = nd_st_find(f, "w");
        if (!t) _exit(11);
        char go = 1;
        if (write(pipefd[1], &go, 1) != 1) _exit(12);  /* mapped: the parent may truncate now */
        sleep(1); /* the parent truncates the file meanwhile */
        volatile double s = 0;
        const float *x = t->data;
        for (int i = 0; i < (1 << 18); i += 1024) s += x[i];
        _exit(0); /* not reached when the pages are gone */
    }
    close(pipefd[1]);
    char go;
    CHECK(read(pipefd[0], &go, 1) == 1, "child mapped the file");
    CHECK(truncate(path, 128) == 0, "truncate");
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "the child exits 2 (status %d, signalled %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
          WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    char msg[1024] = {0};
    FILE *m = fopen(errf, "r");
    if (m) { size_t n = fread(msg, 1, sizeof msg - 1, m); msg[n] = 0; fclose(m); }
    CHECK(strstr(msg, path) && strstr(msg, "the file changed while it was read"), "message names the file: %s", msg);
    CHECK(strstr(msg, "the rows written before stay in /x/run.h5.incomplete") != NULL, "message names the partial trace: %s", msg);
    CHECK(access(tmpf, F_OK) != 0, "the temporary was removed");
    unlink(path); unlink(errf); unlink(tmpf); rmdir(dir);
    return nd_test_report("sigbus");
}

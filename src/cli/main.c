/* main.c — command dispatch. Each command lives in its own file and returns an nd_exit code
 * (SPEC §3: 0 ok, 1 divergence/regression/finding, 2 bad usage or input, 3 internal/device). */
#include "util/mapguard.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "util/term.h"
#include "cli_args.h"
#include "util/suggest.h"
#include "nd_config.h"
#include "util/tmpclean.h"

typedef struct nd_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} nd_command;

static const nd_command commands[] = {
    {"trace", nd_cmd_trace, "replay a checkpoint stage by stage on the reference and NVFP4 paths"},
    {"inspect", nd_cmd_inspect, "formats, scales and static findings of a checkpoint"},
    {"compare", nd_cmd_compare, "compare a trace with a golden trace (the CI gate)"},
    {"synth", nd_cmd_synth, "write a synthetic checkpoint in the real format, with faults"},
    {"repro", nd_cmd_repro, "write one stage of a trace as a self-contained bundle"},
    {"replay", nd_cmd_replay, "rerun a bundled stage without the checkpoint"},
    {"bisect", nd_cmd_bisect, "the smallest set of stages whose NVFP4 execution the divergence needs"},
    {"sensitivity", nd_cmd_sensitivity, "which modules or layers to keep in high precision, by counterfactual runs"},
    {"report", nd_cmd_report, "one self-contained HTML page of a trace (charts, routing, table)"},
    {"explain", nd_cmd_explain, "what a cause code means, what proves it, what to do next"},
    {"show", nd_cmd_show, "print a trace's stages table (text, --csv or --json)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: nvfp4dbg COMMAND [ARGS]   (nvfp4dbg COMMAND --help for details)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nEvery command takes --opt=value as well as --opt value; -o -s -r -t -l -b -q -j stand for\n"
               "--out --stack --recipe --tokens --layers --backend --quiet --json where the command has them;\n"
               "--color=auto|always|never (NO_COLOR=1: never), --no-color and --quiet (-q: no progress on\n"
               "stderr; a bar on a terminal, else a line every NVFP4DBG_PROGRESS_INTERVAL=5 s) everywhere.\n");
    fprintf(f, "\nexample: nvfp4dbg trace golden/seed-bug-v4\n");
}

/* Descriptors 0-2 must be open before any file is: a closed stdout would otherwise be the number
 * the next open() gets, and printf would write into a trace or a checkpoint. A closed stdin or
 * stderr gets /dev/null; a closed stdout is an error (what the command prints is its result). */
static int std_fds_open(void) {
    int stdout_closed = 0;
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        if (fd == 1) stdout_closed = 1;
        if (open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return -1;
    }
    if (stdout_closed) {
        fputs("nvfp4dbg: standard output is closed; nothing would be printed (redirect it to a file or /dev/null)\n", stderr);
        return -1;
    }
    return 0;
}

/* What a command printed reached its destination: a full disk or a closed pipe behind stdout is
 * the environment's failure, exit 2 (SPEC §3), never a silent success. */
static int stdout_flushed(int rc) {
    errno = 0;
    const int flush_failed = fflush(stdout) != 0;
    if (!flush_failed && !ferror(stdout)) return rc;
    const int err = errno;
    fprintf(stderr, "nvfp4dbg: cannot write standard output: %s\n", flush_failed && err ? strerror(err) : "a write failed");
    return rc == 0 || rc == 1 ? ND_EXIT_BADINPUT : rc;
}

/* $NVFP4DBG_RECIPES names the recipes and stack profiles a run reads: a value that is not a
 * folder is refused, never replaced silently by the installed or source-tree recipes */
static int recipes_env_bad(void) {
    const char *env = getenv("NVFP4DBG_RECIPES");
    struct stat st;
    if (!env || !env[0]) return 0;
    if (stat(env, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    char safe[4 * 1024];
    fprintf(stderr, "nvfp4dbg: NVFP4DBG_RECIPES=%s: %s; it must name a folder of recipes (or be unset for the installed ones)\n",
            nd_term_safe(env, safe, sizeof safe), stat(env, &st) == 0 ? "not a folder" : strerror(errno));
    return 1;
}

int main(int argc, char **argv) {
    if (std_fds_open()) return ND_EXIT_BADINPUT;
    nd_tmpclean_install();
    nd_mapguard_install();
    /* a file-size limit (ulimit -f) reached by a write: an error the writer reports (EFBIG, exit 2,
     * temporaries removed), not a signal that kills the process mid-write */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) { usage(stderr); return ND_EXIT_BADINPUT; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return stdout_flushed(0); }
    if (!strcmp(argv[1], "--version")) { printf("nvfp4dbg %s\n", ND_VERSION); return stdout_flushed(0); }
    const size_t ncmd = sizeof commands / sizeof commands[0];
    for (size_t i = 0; i < ncmd; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            if (recipes_env_bad()) return ND_EXIT_BADINPUT;
            /* the shared conventions (--opt=value, -o, did you mean, --color) before the command's own parsing */
            int ac = argc - 1;
            char **av = argv + 1;
            int rc = nd_cli_args(commands[i].name, commands[i].run, &ac, &av);
            if (rc && commands[i].run == nd_cmd_trace) nd_trace_args_refused(argc - 1, argv + 1, rc);
            if (!rc) rc = commands[i].run(ac, av);
            nd_cli_args_free();
            return stdout_flushed(rc);
        }
    const char *names[sizeof commands / sizeof commands[0]];
    for (size_t i = 0; i < ncmd; i++) names[i] = commands[i].name;
    const char *best = nd_suggest(argv[1], names, ncmd);
    char cs[1024];
    nd_term_safe(argv[1], cs, sizeof cs);
    if (best) fprintf(stderr, "nvfp4dbg: unknown command '%s'; did you mean '%s'?\n", cs, best);
    else fprintf(stderr, "nvfp4dbg: unknown command '%s'\n", cs);
    usage(stderr);
    return ND_EXIT_BADINPUT;
}

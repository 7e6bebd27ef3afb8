/* main.c — command dispatch. Each command lives in its own file and returns an nd_exit code
 * (SPEC §3: 0 ok, 1 divergence/regression/finding, 2 bad usage or input, 3 internal/device). */
#include <stdio.h>
#include <string.h>
#include "cli.h"
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
    {"report", nd_cmd_report, "one self-contained HTML page of a trace (charts, routing, table)"},
    {"explain", nd_cmd_explain, "what a cause code means, what proves it, what to do next"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: nvfp4dbg COMMAND [ARGS]   (nvfp4dbg COMMAND --help for details)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexample: nvfp4dbg trace golden/seed-bug-v4\n");
}

int main(int argc, char **argv) {
    nd_tmpclean_install();
    if (argc < 2) { usage(stderr); return ND_EXIT_BADINPUT; }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) { usage(stdout); return 0; }
    if (!strcmp(argv[1], "--version")) { printf("nvfp4dbg %s\n", ND_VERSION); return 0; }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nvfp4dbg: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return ND_EXIT_BADINPUT;
}

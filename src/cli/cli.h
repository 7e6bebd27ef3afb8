/* cli.h — one entry point per command (src/cli/<command>.c); main.c dispatches and maps
 * statuses to exit codes. Each returns an nd_exit code. */
#ifndef ND_CLI_H
#define ND_CLI_H
#include "util/err.h"

int nd_cmd_inspect(int argc, char **argv);
int nd_cmd_trace(int argc, char **argv);
/* trace's arguments were refused before nd_cmd_trace ran (an unknown option: exit rc): the output
 * they name (-o/--out, else the default) gets the failed-run mark when an earlier trace is there */
void nd_trace_args_refused(int argc, char **argv, int rc);
int nd_cmd_compare(int argc, char **argv);
int nd_cmd_synth(int argc, char **argv);
int nd_cmd_repro(int argc, char **argv);
int nd_cmd_replay(int argc, char **argv);
int nd_cmd_bisect(int argc, char **argv);
int nd_cmd_sensitivity(int argc, char **argv);
int nd_cmd_report(int argc, char **argv);
int nd_cmd_explain(int argc, char **argv);
int nd_cmd_show(int argc, char **argv);

/* Print "nvfp4dbg: <msg>" on stderr and return e->code (ND_EXIT_INTERNAL when unset). */
int nd_cli_error(const nd_err *e);
/* Print "nvfp4dbg: <command>: <fmt>" usage error and return ND_EXIT_BADINPUT. */
int nd_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A command's options as a table for nd_cli_parse: a flag sets *flag to 1; an option with a value
 * stores it in *value, or appends it to list (n_list counts; the list holds argc entries). */
typedef struct nd_cli_opt {
    const char *name;
    const char **value;
    int *flag;
    const char **list;
    int *n_list;
} nd_cli_opt;
/* Parse argv[1..argc) with opts (ended by a NULL name) and up to npos positional arguments into
 * pos[] in order. Returns 0; -1 after printing usage for --help or -h (the command exits 0); or a
 * usage error (exit 2) for an unknown option, an option without its value or one argument too many. */
int nd_cli_parse(const char *cmd, const char *usage, int argc, char **argv, const nd_cli_opt *opts, const char **pos,
                 int npos);
#endif

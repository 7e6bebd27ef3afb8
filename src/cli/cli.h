/* cli.h — one entry point per command (src/cli/<command>.c); main.c dispatches and maps
 * statuses to exit codes. Each returns an nd_exit code. */
#ifndef ND_CLI_H
#define ND_CLI_H
#include "util/err.h"

int nd_cmd_inspect(int argc, char **argv);
int nd_cmd_trace(int argc, char **argv);
int nd_cmd_compare(int argc, char **argv);
int nd_cmd_synth(int argc, char **argv);
int nd_cmd_repro(int argc, char **argv);
int nd_cmd_replay(int argc, char **argv);
int nd_cmd_bisect(int argc, char **argv);
int nd_cmd_report(int argc, char **argv);
int nd_cmd_explain(int argc, char **argv);
int nd_cmd_show(int argc, char **argv);

/* Print "nvfp4dbg: <msg>" on stderr and return e->code (ND_EXIT_INTERNAL when unset). */
int nd_cli_error(const nd_err *e);
/* Print "nvfp4dbg: <command>: <fmt>" usage error and return ND_EXIT_BADINPUT. */
int nd_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif

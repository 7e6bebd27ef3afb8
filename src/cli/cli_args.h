/* cli_args.h — the command-line conventions every command shares (issue 22), applied by main.c
 * before a command parses its arguments:
 *   --opt=value is --opt value;
 *   -o -s -r -t -l -b -q -j are --out --stack --recipe --tokens --layers --backend --quiet --json
 *     where the command has that long option;
 *   a long option the command's --help does not list is refused (exit 2) with the closest one
 *     ("did you mean --stack?");
 *   --color=auto|always|never and --no-color (every command; NO_COLOR set and not empty means
 *     never unless --color=always) are taken out and answered by nd_cli_color();
 *   --quiet and -q (every command) are taken out: no progress on stderr (util/progress.h).
 * A command's options are read from its own --help text, so the help is the list. */
#ifndef ND_CLI_ARGS_H
#define ND_CLI_ARGS_H
#include <stdio.h>

/* Rewrite argc and argv (argv[0]: the command name) in place of the originals; the new array lives
 * until nd_cli_args_free. Returns 0, or an exit code after printing the error. */
int nd_cli_args(const char *cmd, int (*run)(int argc, char **argv), int *argc, char ***argv);
void nd_cli_args_free(void);
/* Colours on stream f: --color=always, or auto (the default) with f a terminal and no NO_COLOR. */
int nd_cli_color(FILE *f);
#endif

/* next_command.h — the `nvfp4dbg trace ...` command that reruns this run with repairs applied: the
 * one the diagnosis prints and stores (next_command) and the one --apply-repair prints. It repeats
 * every option that decides what the run computes (recipe, stack, reference checkpoint, layers,
 * mode, reference numerics, expert parallelism, where the tokens came from and the --tokenizer, the overrides), each
 * word shell-quoted (util/shquote.h), so that pasting it reruns the same model on the same tokens;
 * its trace goes beside this run's (--out X-repaired.h5: an earlier trace is never replaced
 * without --force, and this run's is the "before" of `report --against`). */
#ifndef ND_NEXT_COMMAND_H
#define ND_NEXT_COMMAND_H
#include <stddef.h>
#include "pipeline/pipeline.h"

/* Write the command with o's options and the n extra overrides into out (capacity cap). When the
 * tokens' option does not fit, it is left out and the command ends with a shell comment saying so
 * (never a command cut in the middle of a word). */
void nd_next_command(const nd_trace_opts *o, const char *const *extra, int n, char *out, size_t cap);
#endif

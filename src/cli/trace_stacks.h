/* trace_stacks.h — the stack sweep of `trace --stacks` (trace_stacks.c). */
#ifndef ND_TRACE_STACKS_H
#define ND_TRACE_STACKS_H
#include <jansson.h>
#include "pipeline/pipeline.h"

/* Replay the model under each stack profile named by spec ("all" or "a,b,c"); print a table, or
 * with json return the list through *out. */
int nd_trace_stack_sweep(const nd_trace_opts *base, const char *spec, int json, json_t **out, nd_err *e);
/* Every profile of a --stacks list loads (exit 2 naming the first that does not), checked before
 * the replay so that a misspelt name never costs a whole run (nor replaces the trace). */
int nd_trace_stacks_check(const char *spec, nd_err *e);
#endif

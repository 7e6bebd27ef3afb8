/* trace_findings.h — the static findings that break the stack a trace ran (trace_findings.c). */
#ifndef ND_TRACE_FINDINGS_H
#define ND_TRACE_FINDINGS_H
#include <jansson.h>
#include "util/err.h"
#include "trace/trace.h"

/* Print them (json 0: code, module and message; 2: code and module, the summary's brief form) or
 * with json 1 return them as a list in *out (each with "overridden"); nothing when there are none.
 * A finding on a module that one of the run's overrides (NAME=VALUE, NAME "<module>.<knob>")
 * replaces a value of is not printed as breaking the run: one line counts them. */
/* *n_err (may be NULL) counts the printed ones on a module in the replayed layers [layer_lo,
 * layer_hi] (layer_hi < 0: all) that the replay did not judge, and the run exits 1 for them: a module
 * no row of the run exercised (rows[0..nrows)) -- an expert no token was routed to breaks the stack
 * for other prompts though this replay never ran it -- or one it ran whose finding no replay can
 * clear (what the weights or the config mean moves both paths alike; *n_blind, may be NULL, counts
 * these). A module the replay ran and found healthy clears a finding about its production inputs. */
int nd_trace_stack_findings(const char *ckpt_dir, const char *stack_name, const char *const *ovr, int n_ovr, int json,
                            int layer_lo, int layer_hi, const nd_row *rows, int64_t nrows, int *n_err, int *n_blind,
                            json_t **out, nd_err *e);
#endif

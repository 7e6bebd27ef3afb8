/* catalogue.h — every cause code, once: what it means, what proves it, the repair that is tried
 * for it and what to do next. `nvfp4dbg explain CODE`, the trace's closing lines and
 * docs/causes.md are printed from this table (SPEC §7). */
#ifndef ND_CATALOGUE_H
#define ND_CATALOGUE_H

typedef struct nd_cause {
    const char *code;
    const char *sentence;   /* what happened, one sentence */
    const char *evidence;   /* what proves it: a repair that restores the stage, or a static fact */
    const char *repair;     /* the candidate transform(s) tried for it ("" when none) */
    const char *next_step;  /* what the user does next */
} nd_cause;

/* The table (n entries). */
const nd_cause *nd_causes(int *n);
/* One entry by code; NULL when unknown. */
const nd_cause *nd_cause_find(const char *code);

#endif

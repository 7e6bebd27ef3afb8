/* diagnose.h — the cause of a diverged stage, proven by repair (issue 13, SPEC §7).
 *
 * The diagnosis sits above the pipeline: for a diverged row it replays that stage alone
 * (nd_stage_replay, the same single-stage entry point repro, replay and bisect use), once as it
 * is and once per candidate repair (repair.h), and names the cause of the repair that brings the
 * stage's error back to its quantization floor. A static fact that proves a cause on its own (a
 * non-finite scale, NaN block scales) counts as well and is reported as such. When nothing
 * restores the stage the cause is accumulated_error (finite output) or unknown, with the tries. */
#ifndef ND_DIAGNOSE_H
#define ND_DIAGNOSE_H
#include "trace/trace.h"
#include "pipeline/pipeline.h"
#include "repair.h"

#define ND_DIAG_MAX_SHARD_OVR 8
#define ND_DIAG_OVR_MAX (ND_REPAIR_MAX_OVR + ND_DIAG_MAX_SHARD_OVR) /* nd_diagnosis_overrides' most */

typedef struct nd_diag_try {
    nd_repair rep;
    nd_row row;          /* the stage replayed with the repair */
    int restored;        /* its verdict is ok: SQNR within the margin of its floor, no NaN */
    int failed;          /* the replay itself failed (message in row.verdict) */
} nd_diag_try;

enum { ND_PROOF_NONE = 0, ND_PROOF_REPAIR, ND_PROOF_STATIC };

typedef struct nd_diagnosis {
    char row[ND_NAME_LEN];
    char cause[ND_VERDICT_LEN];
    int proof;                 /* ND_PROOF_* */
    int chosen;                /* index in tries of the repair that proves it, -1 none */
    nd_row base;               /* the stage replayed as it is */
    nd_stage_info info;
    int n_tries;
    nd_diag_try tries[ND_REPAIR_MAX];
    /* the same cause proven on the fused shards of this stage (q_proj's k_proj and v_proj): their
     * repairs' overrides, applied with this one (a fix of one shard leaves the others broken) */
    int n_shard_ovr;
    char shard_ovr[ND_DIAG_MAX_SHARD_OVR][320];
    char evidence[512];        /* one sentence */
    char next_command[ND_CMD_LEN]; /* the whole-run command with the repair ("" when none) */
    char next_step[320];       /* without a command: what to do, when the catalogue's words do not fit the run */
} nd_diagnosis;

/* Diagnose one diverged row of a run made with opts o. */
int nd_diagnose_row(const nd_trace_opts *o, const nd_row *row, nd_diagnosis *d, nd_err *e);

/* After nd_pipeline_trace: diagnose the first divergence (and up to max_extra further diverged
 * isolated rows), fill res->summary (cause, message, evidence, repair, next command). Returns the
 * diagnoses through *out (caller frees) and their count. */
int nd_diagnose_run(const nd_trace_opts *o, nd_trace_result *res, int max_extra, nd_diagnosis **out, int *n_out,
                    nd_err *e);

/* The --override arguments of a diagnosis (the repair's and its fused shards'), for re-running the
 * whole model. */
int nd_diagnosis_overrides(const nd_diagnosis *d, const char **out, int cap);
#endif

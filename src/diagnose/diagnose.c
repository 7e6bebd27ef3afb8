/* diagnose.c — counterfactual diagnosis (diagnose.h). */
#include "diagnose.h"
#include "next_command.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalogue.h"
#include "ckpt/findings.h"
#include "ckpt_repair.h"
#include "verdict.h"

static int is_static(const char *code) { return !strcmp(code, "nonfinite_scale") || !strcmp(code, "nan_weight_scale"); }

/* A static fact on the module that proves a cause on its own. */
static const char *static_cause(const nd_row *r, const nd_stage_info *in) {
    if (is_static(r->finding)) return r->finding;
    if (in->found && in->nan_block_scales > 0) return "nan_weight_scale";
    if (in->found && in->nvfp4_w4a4 && (!isfinite(in->mult) || in->mult == 0 || !isfinite(in->alpha) || in->alpha == 0))
        return "nonfinite_scale";
    if (in->found && in->act_fp8 && in->has_input_scale && (!isfinite(in->mult) || in->mult == 0)) return "nonfinite_scale";
    return NULL;
}

static int broken_output(const nd_row *r) {
    return r->prod_nan + r->prod_inf + r->ref_nan + r->ref_inf > 0 || (r->ref_amax > 0 && r->prod_amax == 0);
}

/* A repair restores the stage when its replayed row passes the verdict rule AND its SQNR is back
 * within the margin of the floor measured WITHOUT the repair, and better than before: a repair
 * that only lowers the floor (a multiplier moved away from 2688/amax makes the healthy
 * quantization worse too) proves nothing. */
static int restored(const nd_row *base, const nd_row *t, double margin) {
    /* a stage whose replay is healthy has nothing to restore: any repair that moves its SQNR up
     * by noise would otherwise "prove" a cause on a clean checkpoint */
    if (!nd_verdict_bad(base->verdict) && !broken_output(base)) return 0;
    if (nd_verdict_bad(t->verdict) || t->prod_nan + t->prod_inf + t->ref_nan + t->ref_inf > 0) return 0;
    /* a router that picked other experts: restored when it picks the reference's again */
    if (!strcmp(base->verdict, "routing_divergence")) return 1;
    if (!isfinite(margin)) margin = 6.0;
    if (isfinite(base->floor_sqnr_db) && !(t->sqnr_db >= base->floor_sqnr_db - margin)) return 0;
    /* better than before; a base with NaN/Inf or an empty output is improved by any repair that
     * clears them (its SQNR is taken over the finite elements only and says nothing) */
    if (broken_output(base)) return 1;
    return !(t->sqnr_db <= base->sqnr_db);
}

/* The command that applies the repair (and its fused shards') to the whole run (next_command.h) */
static void command(const nd_trace_opts *o, const nd_diagnosis *d, char *out, size_t cap) {
    const char *ovr[ND_DIAG_OVR_MAX];
    int n = nd_diagnosis_overrides(d, ovr, (int)(sizeof ovr / sizeof ovr[0]));
    nd_next_command(o, ovr, n, out, cap);
}

/* " (floor X dB)" for rows that have a floor (quantized linears); composite rows have none */
static void floor_text(const nd_row *r, char *out, size_t cap) {
    if (isfinite(r->floor_sqnr_db)) snprintf(out, cap, " (floor %.1f dB)", r->floor_sqnr_db);
    else out[0] = 0;
}

int nd_diagnose_row(const nd_trace_opts *o, const nd_row *row, nd_diagnosis *d, nd_err *e) {
    memset(d, 0, sizeof *d);
    snprintf(d->row, sizeof d->row, "%s", row->name);
    d->chosen = -1;
    if (!strcmp(row->verdict, "nan_input") || !strcmp(row->verdict, ND_VERDICT_DRIFT)) {
        /* not this stage's own fault: nothing of it to repair (an isolated router row that routes
         * otherwise is: its repairs are tried below) */
        snprintf(d->cause, sizeof d->cause, "%s", row->verdict);
        d->base = *row;
        nd_row_evidence(row, d->evidence, sizeof d->evidence);
        return 0;
    }
    /* the first replay records the stage's inputs; the candidates run that stage alone from them
     * (pipeline.h nd_stage_replay; in full when a repair names what an earlier stage read) */
    nd_stage_rec *rec = NULL;
    int rc0 = nd_stage_replay(o, row->name, NULL, 0, &rec, &d->base, &d->info, e);
    if (rc0) { nd_stage_rec_free(rec); return rc0; }
    if (!strcmp(row->mode, "captured") && !nd_verdict_bad(d->base.verdict) && !broken_output(&d->base)) {
        /* the serving stack's own output diverged, but this stage replayed from the same
         * reference input is healthy: nothing in the checkpoint or the stack profile explains it,
         * and no repair of ours can change a captured tensor */
        nd_stage_rec_free(rec);
        char cap[160], rep[160];
        nd_row_evidence(row, cap, sizeof cap);
        nd_row_evidence(&d->base, rep, sizeof rep);
        snprintf(d->cause, sizeof d->cause, "%s", row->in_nonfinite > 0 ? "nan_input" : "stack_kernel");
        snprintf(d->evidence, sizeof d->evidence, "the captured output: %s%s; the replay of the stage: %s", cap,
                 row->in_nonfinite > 0 ? " (its captured input holds NaN/Inf)" : "", rep);
        d->base = *row;
        return 0;
    }
    nd_repair reps[ND_REPAIR_MAX];
    /* repairs read from the checkpoint (a scale the loader does not read) come first: they assume
     * least (the value is in the file) */
    int nrep = nd_ckpt_repairs_for(o->ckpt_dir, &d->base, &d->info, reps, ND_REPAIR_MAX);
    nrep += nd_repairs_for(&d->base, &d->info, reps + nrep, ND_REPAIR_MAX - nrep);
    for (int i = 0; i < nrep; i++) {
        nd_diag_try *t = &d->tries[d->n_tries++];
        t->rep = reps[i];
        const char *ovr[ND_REPAIR_MAX_OVR];
        for (int j = 0; j < reps[i].n_ovr; j++) ovr[j] = reps[i].ovr[j];
        nd_err e2 = {0};
        nd_stage_info scratch;
        if (nd_stage_replay(o, row->name, ovr, reps[i].n_ovr, &rec, &t->row, &scratch, &e2)) {
            t->failed = 1;
            snprintf(t->row.verdict, sizeof t->row.verdict, "replay failed");
            continue;
        }
        t->restored = restored(&d->base, &t->row, d->info.floor_margin_db);
    }
    nd_stage_rec_free(rec); /* the host copies of the inputs: this row is done */
    /* Several repairs can restore a stage (a reciprocal and a power of two both bring an inverted
     * multiplier back within 2x of 2688/amax). Each restores it to its floor, so SQNR cannot
     * rank them; the candidates are listed from the fewest assumptions (repair.c: one exact
     * reciprocal before a guessed factor, the smallest factor first), and the first that
     * restores is named. The others are reported as also consistent. */
    for (int i = 0; i < d->n_tries && d->chosen < 0; i++)
        if (d->tries[i].restored) d->chosen = i;
    const char *st = static_cause(&d->base, &d->info);
    if (!st) st = static_cause(row, &d->info);
    /* a non-finite multiplier that loading the scale the loader skipped restores is that scale's fault */
    if (st && d->chosen >= 0 && !strcmp(d->tries[d->chosen].rep.cause, "scale_not_loaded")) st = NULL;
    /* NaN-looking block-scale bytes that decode right in their own layout or encoding are that
     * representation's fault (an E8M0 exponent of 127 is E4M3's NaN byte) */
    if (st && d->chosen >= 0 && (!strcmp(d->tries[d->chosen].rep.cause, "scale_encoding_mismatch") ||
                                 !strcmp(d->tries[d->chosen].rep.cause, "scale_layout_mismatch")))
        st = NULL;
    char ckpt_fact[256] = "";
    if (!st && d->chosen < 0) st = nd_ckpt_static_cause(o->ckpt_dir, &d->info, d->base.weight_rel_l2, ckpt_fact, sizeof ckpt_fact);
    /* a broken output no repair restores: a NaN/Inf stored in a tensor the stage reads is the fact */
    if (!st && d->chosen < 0 && broken_output(&d->base))
        st = nd_ckpt_nonfinite_tensor(o->ckpt_dir, d->row, &d->info, ckpt_fact, sizeof ckpt_fact);
    char before[160];
    nd_row_evidence(&d->base, before, sizeof before);
    if (st) {
        d->proof = ND_PROOF_STATIC;
        snprintf(d->cause, sizeof d->cause, "%s", st);
        if (d->chosen >= 0) {
            char fl[48];
            floor_text(&d->tries[d->chosen].row, fl, sizeof fl);
            snprintf(d->evidence, sizeof d->evidence, "static fact (%s); repair %s restores the stage: SQNR %.1f -> %.1f dB%s",
                     st, d->tries[d->chosen].rep.name, d->base.sqnr_db, d->tries[d->chosen].row.sqnr_db, fl);
        }
        else if (ckpt_fact[0])
            snprintf(d->evidence, sizeof d->evidence, "%s; %s", ckpt_fact, before);
        else
            snprintf(d->evidence, sizeof d->evidence, "static fact (%s) on the module; %s", st, before);
    } else if (d->chosen >= 0) {
        const nd_diag_try *t = &d->tries[d->chosen];
        d->proof = ND_PROOF_REPAIR;
        snprintf(d->cause, sizeof d->cause, "%s", t->rep.cause);
        char fl[48];
        floor_text(&t->row, fl, sizeof fl);
        int len = isfinite(d->base.topk_agree) && d->base.topk_agree < 1
                      ? snprintf(d->evidence, sizeof d->evidence, "repair %s (%s) restores the stage: top-k agreement %.3f -> %.3f",
                                 t->rep.name, t->rep.what, d->base.topk_agree, t->row.topk_agree)
                      : snprintf(d->evidence, sizeof d->evidence, "repair %s (%s) restores the stage: SQNR %.1f -> %.1f dB%s",
                                 t->rep.name, t->rep.what, d->base.sqnr_db, t->row.sqnr_db, fl);
        /* other causes whose repairs restore it too */
        for (int i = 0; i < d->n_tries && len > 0 && (size_t)len < sizeof d->evidence; i++)
            if (d->tries[i].restored && strcmp(d->tries[i].rep.cause, t->rep.cause) && !strstr(d->evidence, d->tries[i].rep.cause))
                len += snprintf(d->evidence + len, sizeof d->evidence - (size_t)len, "; also consistent: %s", d->tries[i].rep.cause);
    } else {
        snprintf(d->cause, sizeof d->cause, "%s", broken_output(&d->base) ? "unknown" : "accumulated_error");
        snprintf(d->evidence, sizeof d->evidence, "%s; none of %d candidate repairs restores it", before, d->n_tries);
        /* the catalogue's next step suggests the original, which this run already has */
        if (o->ref_ckpt)
            snprintf(d->next_step, sizeof d->next_step, "the original was given and no repair explains the difference: "
                     "make a bundle of the stage (nvfp4dbg repro TRACE --stage %s) and compare its operands with the "
                     "original's, or try another --stack", d->row);
    }
    if (d->chosen >= 0) command(o, d, d->next_command, sizeof d->next_command);
    return 0;
}

int nd_diagnosis_overrides(const nd_diagnosis *d, const char **out, int cap) {
    int n = 0;
    if (d->chosen < 0) return 0;
    const nd_repair *rp = &d->tries[d->chosen].rep;
    for (int i = 0; i < rp->n_ovr && n < cap; i++) out[n++] = rp->ovr[i];
    for (int i = 0; i < d->n_shard_ovr && n < cap; i++) out[n++] = d->shard_ovr[i];
    return n;
}

/* "<prefix>.<knob>=v" names what it repairs: does it cover stage `row` (the prefix, or a stage below it)? */
static int override_covers(const char *o, const char *row) {
    const char *eq = strchr(o, '=');
    if (!eq) return 0;
    const char *dot = eq;
    while (dot > o && *dot != '.') dot--;
    if (!strncmp(o, "model.", 6)) o += 6;
    const size_t l = dot > o ? (size_t)(dot - o) : 0;
    return l && !strncmp(row, o, l) && (row[l] == 0 || row[l] == '.');
}

/* The proven repair's overrides name what it repairs ("<prefix>.<knob>=v"; a module path or a
 * stage name): a row of that stage or below it ("layers.1.mlp.experts.4" covers both of the
 * expert's exchanged projections) is explained by the same cause. */
static int covered_by_repair(const nd_diagnosis *d, const char *row) {
    const char *ovr[ND_DIAG_OVR_MAX];
    const int n = nd_diagnosis_overrides(d, ovr, (int)(sizeof ovr / sizeof ovr[0]));
    for (int k = 0; k < n; k++)
        if (override_covers(ovr[k], row)) return 1;
    return 0;
}

/* The fused shards of a stage whose cause a repair proved (q_proj of q/k/v, gate_proj of gate/up):
 * each diverged shard the repair does not already cover is diagnosed on its own, and when a repair
 * proves the same cause there, its overrides join the diagnosis' (issue 36: a next command that
 * fixes one shard of two leaves the run broken). A shard with another cause is left to its own
 * diagnosis. */
static int add_fused_shards(const nd_trace_opts *o, const nd_trace_result *res, nd_diagnosis *d, nd_err *e) {
    if (d->chosen < 0) return 0;
    nd_diagnosis *sd = malloc(sizeof *sd);
    if (!sd) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    char shards[160] = "";
    for (int64_t i = 0; i < res->nrows; i++) {
        const nd_row *r = &res->rows[i];
        if (strcmp(r->mode, "isolated") || !nd_row_diverged(r) || !nd_fused_shards(d->row, r->name) || covered_by_repair(d, r->name))
            continue;
        int rc = nd_diagnose_row(o, r, sd, e);
        if (rc) { free(sd); return nd_wrap(e, "diagnosing %s (a fused shard of %s)", r->name, d->row); }
        if (sd->chosen < 0 || strcmp(sd->cause, d->cause)) continue;
        const nd_repair *rp = &sd->tries[sd->chosen].rep;
        for (int k = 0; k < rp->n_ovr && d->n_shard_ovr < ND_DIAG_MAX_SHARD_OVR; k++)
            snprintf(d->shard_ovr[d->n_shard_ovr++], sizeof d->shard_ovr[0], "%s", rp->ovr[k]);
        const char *dot = strrchr(r->name, '.');
        const size_t l = strlen(shards);
        snprintf(shards + l, sizeof shards - l, "%s%s", l ? ", " : "", dot ? dot + 1 : r->name);
    }
    free(sd);
    if (shards[0]) {
        const size_t len = strlen(d->evidence);
        snprintf(d->evidence + len, sizeof d->evidence - len, "; the same repair restores the fused %s", shards);
    }
    if (d->n_shard_ovr) command(o, d, d->next_command, sizeof d->next_command);
    return 0;
}

int nd_diagnose_run(const nd_trace_opts *o, nd_trace_result *res, int max_extra, nd_diagnosis **out, int *n_out, nd_err *e) {
    *out = NULL;
    *n_out = 0;
    nd_trace_summary *s = &res->summary;
    if (strcmp(s->status, "diverged")) return 0;
    /* the first divergence, then further diverged isolated rows (other names) */
    const nd_row *todo[16];
    int n = 0;
    for (int64_t i = 0; i < res->nrows && n < 16; i++)
        if (!strcmp(res->rows[i].name, s->first_divergence) && !strcmp(res->rows[i].mode, s->first_divergence_mode)) {
            todo[n++] = &res->rows[i];
            break;
        }
    for (int64_t i = 0; i < res->nrows && n < 1 + max_extra && n < 16; i++) {
        const nd_row *r = &res->rows[i];
        if (strcmp(r->mode, "isolated") || !nd_row_diverged(r) || !strcmp(r->name, s->first_divergence)) continue;
        todo[n++] = r;
    }
    if (!n) return 0;
    nd_diagnosis *ds = calloc((size_t)n, sizeof *ds);
    if (!ds) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < n; i++) {
        int rc = nd_diagnose_row(o, todo[i], &ds[i], e);
        if (!rc) rc = add_fused_shards(o, res, &ds[i], e);
        if (rc) { free(ds); return nd_wrap(e, "diagnosing %s", todo[i]->name); }
    }
    /* a proven cause is the diverged stage's verdict: its rows (in memory and in the trace) say it,
     * so that the table, the rows and the closing line agree (a row's verdict is its cause code,
     * SPEC §6; the row's own rules may have said only accumulated_error) */
    for (int i = 0; i < n; i++) {
        if (ds[i].proof == ND_PROOF_NONE) continue;
        for (int64_t j = 0; j < res->nrows; j++) {
            nd_row *row = &res->rows[j];
            if (!nd_verdict_bad(row->verdict) || !strcmp(row->verdict, ds[i].cause)) continue;
            if (strcmp(row->name, ds[i].row) && !covered_by_repair(&ds[i], row->name)) continue;
            snprintf(row->verdict, sizeof row->verdict, "%s", ds[i].cause);
            if (res->tw && nd_trace_set_verdict(res->tw, j, row, e)) { free(ds); return e->code; }
        }
    }
    const nd_diagnosis *d = &ds[0];
    const nd_cause *c = nd_cause_find(d->cause);
    snprintf(s->cause, sizeof s->cause, "%s", d->cause);
    snprintf(s->evidence, sizeof s->evidence, "%s", d->evidence);
    snprintf(s->next_command, sizeof s->next_command, "%s", d->next_command);
    snprintf(s->repair, sizeof s->repair, "%s", d->chosen >= 0 ? d->tries[d->chosen].rep.name : "");
    s->sqnr_before_db = d->base.sqnr_db;
    s->sqnr_after_db = d->chosen >= 0 ? d->tries[d->chosen].row.sqnr_db : NAN;
    s->floor_db = d->chosen >= 0 ? d->tries[d->chosen].row.floor_sqnr_db : d->base.floor_sqnr_db;
    char fig[256];
    nd_row_evidence(d->chosen >= 0 || d->proof ? &d->base : todo[0], fig, sizeof fig);
    snprintf(s->message, sizeof s->message, "first divergence at %s (%s)%s: %s: %s: %s", s->first_divergence,
             s->first_divergence_mode, res->note, fig, d->cause, c ? c->sentence : "");
    *out = ds;
    *n_out = n;
    return 0;
}

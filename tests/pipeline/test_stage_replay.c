/* test_stage_replay.c — a single stage replayed from its recorded inputs (issue 23,
 * pipeline.h nd_stage_replay) gives the row the full replay gives, on golden/seed-bug-v4 (CPU):
 *   q_a_proj with the diagnosis's repair (its own input_global_scale = 719.799134): the recorded
 *     replay runs the stage alone and its row equals, figure for figure, the full replay's
 *   a routed expert's down_proj (its stage reads the router's decision) with an override of its
 *     own input scale: the same
 *   an override of a module an earlier stage reads (layer 0's q_a_proj input scale, looked up
 *     before the routed experts run) falls back to the full replay, and still equals it
 *   DeepSeek-V3's routed expert on layer 1 (golden/conformance/deepseek_v3/nvfp4), whose dense
 *     "layers.1.mlp" stage could make the row and is skipped on a MoE layer: the record still
 *     serves, and equals the full replay
 *   a bad override is exit 2 either way;
 *   chained mode (bisect's probes): the row's chained figures equal those of a whole chained
 *     trace, with and without stages run at their NVFP4 floor (ref_only), for rows of layer 1
 *     (the layer-0 stages before them run unreported on both paths) and the head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "pipeline/pipeline.h"

static int same_row(const nd_row *a, const nd_row *b) {
    /* bit-equal figures: the same inputs, the same kernels */
    return !strcmp(a->verdict, b->verdict) && !strcmp(a->name, b->name) && a->index == b->index &&
           !memcmp(&a->sqnr_db, &b->sqnr_db, sizeof a->sqnr_db) && !memcmp(&a->floor_sqnr_db, &b->floor_sqnr_db, sizeof a->floor_sqnr_db) &&
           !memcmp(&a->ref_amax, &b->ref_amax, sizeof a->ref_amax) && !memcmp(&a->prod_amax, &b->prod_amax, sizeof a->prod_amax) &&
           a->prod_nan == b->prod_nan && a->prod_inf == b->prod_inf;
}

static void one(const nd_trace_opts *o, const char *row, const char *good, const char *earlier) {
    nd_err e = {0};
    nd_stage_rec *rec = NULL;
    nd_row base, fast, full;
    nd_stage_info info, scratch;
    CHECK(nd_stage_replay(o, row, NULL, 0, &rec, &base, &info, &e) == 0, "%s: %s", row, e.msg);
    CHECK(rec != NULL && !nd_stage_rec_fast(rec), "%s: the first replay runs in full", row);
    nd_row plain;
    CHECK(nd_stage_replay(o, row, NULL, 0, NULL, &plain, &scratch, &e) == 0, "%s", e.msg);
    CHECK(same_row(&base, &plain), "%s: recording changes nothing (%.4f vs %.4f dB)", row, base.sqnr_db, plain.sqnr_db);
    const char *ov[1] = {good};
    CHECK(nd_stage_replay(o, row, ov, 1, &rec, &fast, &scratch, &e) == 0, "%s", e.msg);
    CHECK(nd_stage_rec_fast(rec), "%s: %s runs the stage alone", row, good);
    CHECK(nd_stage_replay(o, row, ov, 1, NULL, &full, &scratch, &e) == 0, "%s", e.msg);
    CHECK(same_row(&fast, &full), "%s with %s: alone %s %.6f dB, full %s %.6f dB", row, good, fast.verdict, fast.sqnr_db,
          full.verdict, full.sqnr_db);
    CHECK(!(fast.sqnr_db == base.sqnr_db), "%s: the override changes the row (%.4f dB)", row, fast.sqnr_db);
    if (earlier) {
        ov[0] = earlier;
        CHECK(nd_stage_replay(o, row, ov, 1, &rec, &fast, &scratch, &e) == 0, "%s", e.msg);
        CHECK(!nd_stage_rec_fast(rec), "%s: %s (read before it) replays in full", row, earlier);
        CHECK(nd_stage_replay(o, row, ov, 1, NULL, &full, &scratch, &e) == 0, "%s", e.msg);
        CHECK(same_row(&fast, &full), "%s with %s", row, earlier);
    }
    ov[0] = "model.layers.0.self_attn.q_a_proj.input_global_scale=abc";
    nd_err e2 = {0};
    CHECK_EQ_INT(nd_stage_replay(o, row, ov, 1, &rec, &fast, &scratch, &e2), ND_EXIT_BADINPUT);
    nd_stage_rec_free(rec);
}

/* the chained row `row` of a whole chained trace */
static int chained_row(const nd_trace_opts *o, const char *row, nd_row *out) {
    nd_err e = {0};
    nd_trace_result res;
    int rc = nd_pipeline_trace(o, &res, &e), hit = 0;
    for (int64_t i = 0; !rc && i < res.nrows; i++)
        if (!strcmp(res.rows[i].name, row) && !strcmp(res.rows[i].mode, "chained")) { *out = res.rows[i]; hit = 1; }
    nd_trace_result_free(&res);
    return rc ? rc : !hit;
}

static void chained(const nd_trace_opts *base, const char *row, const char *const *off, int n_off) {
    nd_trace_opts o = *base;
    o.modes = ND_MODES_CHAINED;
    o.ref_only = off;
    o.n_ref_only = n_off;
    o.ref_only_floor = 1;
    nd_row whole, one_stage;
    nd_err e = {0};
    CHECK(chained_row(&o, row, &whole) == 0, "%s: no chained row in the whole trace", row);
    CHECK(nd_stage_replay(&o, row, NULL, 0, NULL, &one_stage, NULL, &e) == 0, "%s: %s", row, e.msg);
    CHECK(!strcmp(one_stage.mode, "chained"), "%s: mode %s", row, one_stage.mode);
    one_stage.index = whole.index; /* its place among the rows: the replay reports only this one */
    CHECK(same_row(&whole, &one_stage) && !memcmp(&whole.cosine, &one_stage.cosine, sizeof whole.cosine),
          "%s (%d stages at their floor): whole trace cos %.9f %s, replay cos %.9f %s", row, n_off, whole.cosine, whole.verdict,
          one_stage.cosine, one_stage.verdict);
}

int main(void) {
    const char *root = getenv("ND_SOURCE_ROOT");
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/golden/seed-bug-v4", root ? root : ".");
    nd_trace_opts o;
    memset(&o, 0, sizeof o);
    o.ckpt_dir = ck;
    o.backend = "cpu";
    o.layer_hi = -1;
    one(&o, "layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.q_a_proj.input_global_scale=719.799134", NULL);
    one(&o, "layers.0.mlp.experts.1.down_proj", "model.layers.0.mlp.experts.1.down_proj.input_global_scale=100",
        "model.layers.0.self_attn.q_a_proj.input_global_scale=719.799134");
    static const char *const floor_qa[] = {"layers.0.self_attn.q_a_proj"};
    chained(&o, "layers.1.self_attn.q_b_proj", NULL, 0);
    chained(&o, "layers.1.self_attn.q_b_proj", floor_qa, 1);
    chained(&o, "layers.1.mlp.experts.2.up_proj", NULL, 0);
    chained(&o, "lm_head", floor_qa, 1);
    snprintf(ck, sizeof ck, "%s/golden/conformance/deepseek_v3/nvfp4", root ? root : ".");
    one(&o, "layers.1.mlp.experts.0.down_proj", "model.layers.1.mlp.experts.0.down_proj.input_global_scale=100",
        "model.layers.0.self_attn.q_b_proj.input_global_scale=100");
    return nd_test_report("stage_replay");
}

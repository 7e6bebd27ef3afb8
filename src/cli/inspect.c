/* inspect.c — `nvfp4dbg inspect CKPT [--stack NAME|all]... [--json]`: format, architecture, per-module
 * quantization and static scale findings (SPEC §3). Every finding lists the serving-stack profiles
 * it breaks (SPEC §7), computed from the profiles themselves: each recipes/stack-*.yaml is loaded and
 * nd_stack_breaks applies the finding's kind to its keys (rules in ckpt/findings.h). A finding is an
 * error when it breaks a stack judged (--stack, repeatable, or all; default exact, the stack trace
 * uses by default), else a warning. Exit 0 clean or warnings only, 1 when a finding is an error,
 * 2 bad usage, an unknown or malformed profile, or a checkpoint that cannot be read or bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "util/term.h"
#include "cli.h"
#include "inspect_load.h"
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"
#include "ckpt/audit.h"
#include "ckpt/tp_split.h"
#include "cli/inspect_kv.h"
#include "pipeline/stack.h"
#include "pipeline/pipeline.h"
#include "recipe/recipe.h"

static const char *wfmt_str(const nd_module *m) {
    switch (m->wfmt) {
    case ND_WF_NVFP4: return "nvfp4";
    case ND_WF_MXFP4: return "mxfp4";
    case ND_WF_FP8: return "fp8";
    case ND_WF_DENSE: return m->weight ? (m->weight->dtype == ND_DT_BF16 ? "bf16" : m->weight->dtype == ND_DT_F16 ? "f16" : "f32") : "dense";
    }
    return "?";
}

static const char *conv_str(nd_conv c) {
    switch (c) {
    case ND_CONV_CT: return "compressed-tensors";
    case ND_CONV_MODELOPT: return "modelopt";
    case ND_CONV_DEEPSEEK: return "deepseek";
    case ND_CONV_NONE: break;
    }
    return "none";
}

static const char *fp8_kind_str(int k) {
    static const char *const s[] = {"tensor", "channel", "block-f32", "block-e8m0"};
    return k >= 0 && k < 4 ? s[k] : "?";
}

/* The scheme the loader resolved for a module, as the replay runs it (issue 33 item 4): weight and
 * activation bits, the block (group) size and the scale layout: "W4A4 g16" (NVFP4 with its
 * activations quantized), "W4A16 g16" (NVFP4 weights only), "W4A8 g32" (ModelOpt W4A8_NVFP4_FP8:
 * NVFP4 weights in 32-blocks, FP8 activations), " awq" after any of them where the input is multiplied
 * by an AWQ pre_quant_scale first, "W4A16 g32" (MXFP4), "W8A8 b128x128"
 * (FP8 with block scales), "W8A8 channel", "-" for a dense weight. */
static void scheme_str(const nd_module *m, char *out, size_t cap) {
    switch (m->wfmt) {
    case ND_WF_NVFP4:
        snprintf(out, cap, "%s g%d%s", m->act_quant ? "W4A4" : m->act_fp8 ? "W4A8" : "W4A16", m->block, m->pre_quant_scale ? " awq" : "");
        return;
    case ND_WF_MXFP4: snprintf(out, cap, "W4A16 g32"); return;
    case ND_WF_FP8:
        if (m->fp8_scale_kind >= 2) snprintf(out, cap, "W8A8 b%dx%d", m->bn, m->bk);
        else snprintf(out, cap, "W8A8 %s", fp8_kind_str(m->fp8_scale_kind));
        return;
    case ND_WF_DENSE: break;
    }
    snprintf(out, cap, "-");
}

static const char *scale_dtype_str(const nd_module *m) {
    switch (m->wfmt) {
    case ND_WF_NVFP4: return "e4m3 blocks, f32 global";
    case ND_WF_MXFP4: return "e8m0 blocks";
    case ND_WF_FP8: return m->fp8_scale_kind == 3 ? "e8m0 blocks" : "f32";
    case ND_WF_DENSE: break;
    }
    return "none";
}

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *jvalues(const nd_tview *t) {
    if (!t) return json_null();
    json_t *a = json_array();
    for (int64_t i = 0; i < t->numel && i < 64; i++) json_array_append_new(a, jnum(nd_tview_get_f32(t, i)));
    return a;
}

static json_t *module_json(const nd_ckpt *c, const nd_module *m, const nd_scale_stats *st) {
    json_t *o = json_object();
    json_object_set_new(o, "path", json_string(m->path));
    json_object_set_new(o, "format", json_string(wfmt_str(m)));
    json_object_set_new(o, "convention", json_string(conv_str(m->conv)));
    char sch[32];
    scheme_str(m, sch, sizeof sch);
    json_object_set_new(o, "scheme", json_string(sch));
    json_object_set_new(o, "weight_bits", json_integer(m->wfmt == ND_WF_NVFP4 || m->wfmt == ND_WF_MXFP4 ? 4 : m->wfmt == ND_WF_FP8 ? 8
                                                       : m->weight->dtype == ND_DT_F32 ? 32 : 16));
    json_object_set_new(o, "act_bits", json_integer(m->wfmt == ND_WF_NVFP4 && m->act_quant ? 4 : m->wfmt == ND_WF_FP8 || m->act_fp8 ? 8 : 16));
    json_object_set_new(o, "group", m->wfmt == ND_WF_NVFP4 ? json_integer(m->block) : m->wfmt == ND_WF_MXFP4 ? json_integer(32) : json_null());
    json_object_set_new(o, "scale_dtypes", json_string(scale_dtype_str(m)));
    json_object_set_new(o, "out_features", json_integer(m->out_features));
    json_object_set_new(o, "in_features", json_integer(m->in_features));
    json_object_set_new(o, "weight_dtype", json_string(nd_dtype_str(m->weight->dtype)));
    json_object_set_new(o, "ignored_by_config", json_boolean(nd_ckpt_module_ignored(c, m->path)));
    if (m->wfmt == ND_WF_FP8) {
        json_object_set_new(o, "fp8_scale_kind", json_string(fp8_kind_str(m->fp8_scale_kind)));
        json_object_set_new(o, "block", json_pack("[ii]", m->bn, m->bk));
    }
    if (m->wfmt == ND_WF_NVFP4) {
        json_object_set_new(o, "act_quant", json_boolean(m->act_quant));
        json_object_set_new(o, "n_shards", json_integer(m->n_shards));
        json_object_set_new(o, "weight_global_tensor", m->weight_global ? json_string(m->weight_global->name) : json_null());
        json_object_set_new(o, "weight_global_raw", jvalues(m->weight_global));
        json_object_set_new(o, "weight_global_div", jnum(m->weight_global_div));
        json_object_set_new(o, "input_global_tensor", m->input_global ? json_string(m->input_global->name) : json_null());
        json_object_set_new(o, "input_global_raw", jvalues(m->input_global));
        json_object_set_new(o, "input_global_mult", jnum(m->input_global_mult));
    }
    if (m->weight_scale) {
        json_object_set_new(o, "block_scales", json_pack("{s:s,s:I,s:o,s:o,s:I,s:I,s:I,s:o}",
            "dtype", nd_dtype_str(m->weight_scale->dtype), "count", (json_int_t)st->count,
            "min", jnum(st->min), "max", jnum(st->max), "zeros", (json_int_t)st->zeros,
            "nan", (json_int_t)st->nan, "inf", (json_int_t)st->inf,
            "share_at_448", st->count && m->weight_scale->dtype == ND_DT_F8_E4M3 ? json_real((double)st->at_max / (double)st->count) : json_null()));
    }
    return o;
}

static json_t *quant_json(const nd_ckpt *c) {
    json_t *o = json_object();
    json_object_set_new(o, "format", json_string(nd_ckpt_format_str(c)));
    const nd_model_cfg *cfg = nd_ckpt_config(c);
    const char *s;
    if ((s = nd_cfg_string(cfg, "quantization_config.quant_method"))) json_object_set_new(o, "quant_method", json_string(s));
    if ((s = nd_cfg_string(cfg, "quantization_config.format"))) json_object_set_new(o, "ct_format", json_string(s));
    return o;
}

static void fmt_val(char *b, size_t n, double v) {
    if (isnan(v)) snprintf(b, n, "nan");
    else snprintf(b, n, "%.5g", v);
}

/* The profiles findings are judged against: every shipped one, plus any --stack FILE outside the
 * recipe directory; judged[i] marks those the user asked about. */
#define MAX_STACKS 32
typedef struct stack_set {
    nd_stack *s;              /* n profiles, by the name --stack takes */
    char name[MAX_STACKS][64];
    int judged[MAX_STACKS];
    int n;
} stack_set;

static int find_stack(const stack_set *ss, const char *name) {
    for (int i = 0; i < ss->n; i++)
        if (!strcmp(ss->name[i], name)) return i;
    return -1;
}

/* Mark one --stack argument (NAME, FILE, "all", or a comma-separated list of these) as judged. */
static int judge_stack(stack_set *ss, const char *arg, nd_err *e) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", arg);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) {
            for (int i = 0; i < ss->n; i++) ss->judged[i] = 1;
            continue;
        }
        int i = find_stack(ss, t);
        if (i < 0) {
            if (ss->n >= MAX_STACKS) return nd_fail(e, ND_EXIT_BADINPUT, "--stack: at most %d profiles", MAX_STACKS);
            ND_TRY(nd_stack_load(t, &ss->s[ss->n], e));
            i = ss->n++;
            snprintf(ss->name[i], sizeof ss->name[i], "%s", t);
        }
        ss->judged[i] = 1;
    }
    return 0;
}

/* Every shipped profile (a malformed one is bad input, as for trace --stacks all), then the judged. */
static int load_stacks(stack_set *ss, char **args, int nargs, nd_err *e) {
    memset(ss, 0, sizeof *ss);
    ss->s = calloc(MAX_STACKS, sizeof *ss->s);
    if (!ss->s) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    ND_TRY(nd_stack_names(ss->name, MAX_STACKS, &ss->n, e));
    for (int i = 0; i < ss->n; i++) ND_TRY(nd_stack_load(ss->name[i], &ss->s[i], e));
    if (!nargs) return judge_stack(ss, "exact", e);
    for (int i = 0; i < nargs; i++) ND_TRY(judge_stack(ss, args[i], e));
    return 0;
}

/* Severity of every finding: an error when it breaks a judged stack, else a warning. */
static void judge_findings(const stack_set *ss, nd_findings *f) {
    for (size_t i = 0; i < f->n; i++) {
        f->v[i].sev = ND_SEV_WARNING;
        for (int j = 0; j < ss->n; j++)
            if (ss->judged[j] && nd_stack_breaks(&ss->s[j], f->v[i].kind)) f->v[i].sev = ND_SEV_ERROR;
    }
}

/* The profiles a finding of this kind breaks, or (judged_only) the judged ones. */
static json_t *stack_list_json(const stack_set *ss, nd_break_kind kind, int judged_only) {
    json_t *a = json_array();
    for (int j = 0; j < ss->n; j++)
        if (judged_only ? ss->judged[j] : nd_stack_breaks(&ss->s[j], kind)) json_array_append_new(a, json_string(ss->name[j]));
    return a;
}

static void print_stack_list(const stack_set *ss, nd_break_kind kind, int judged_only) {
    int first = 1;
    for (int j = 0; j < ss->n; j++)
        if (judged_only ? ss->judged[j] : nd_stack_breaks(&ss->s[j], kind)) {
            printf("%s%s", first ? "" : ", ", ss->name[j]);
            first = 0;
        }
}

/* The family trace would replay this checkpoint as: the recipe matching its model_type and the
 * naming of its tensors that recipe recognised (issue 32). recipe[0] = 0 when none matches (then
 * why holds the reason); inspect itself needs no recipe. */
typedef struct family_id {
    char recipe[64], naming[32], why[1100];
    char load[160];  /* the load check (inspect_load.h): "" when no recipe matched */
} family_id;

static void identify_family(const nd_ckpt *c, family_id *fi) {
    memset(fi, 0, sizeof *fi);
    nd_err e = {0};
    nd_recipe *r = NULL;
    const nd_model_cfg *cfg = nd_ckpt_config(c);
    if (nd_recipe_for_model_type(cfg->model_type, &r, &e)) {
        snprintf(fi->why, sizeof fi->why, "none: %s", e.msg); /* trace would stop with this; inspect goes on */
        return;
    }
    snprintf(fi->recipe, sizeof fi->recipe, "%s", r->name);
    const nd_naming *nm = nd_naming_pick(r, c);
    snprintf(fi->naming, sizeof fi->naming, "%s", nm ? nm->name : "canonical");
    nd_recipe_free(r);
}

/* What the text output shows of the modules: the table when asked (--modules), never with
 * --findings, and by default only when there are no findings and at most this many modules (a deep
 * model's table runs to thousands of lines; the findings are what a user reads first). */
enum { SHOW_DEFAULT, SHOW_MODULES, SHOW_FINDINGS };
#define INSPECT_TABLE_MAX 100

static void print_findings(const nd_findings *f, const stack_set *ss) {
    char b1[4200], b2[1024];
    for (size_t i = 0; i < f->n; i++) {
        char msg[4 * sizeof f->v[i].msg];
        printf("  %-7s %-20s %s: %s\n", nd_severity_str(f->v[i].sev), f->v[i].code, nd_term_safe(f->v[i].module, b1, sizeof b1),
               nd_term_safe(f->v[i].msg, msg, sizeof msg));
        if (f->v[i].tensor[0] && (f->v[i].row >= 0 || f->v[i].col >= 0)) {
            /* only the coordinates the finding has (a row-parallel split names a column alone) */
            char rc[64] = "", cc[64] = "";
            if (f->v[i].row >= 0) snprintf(rc, sizeof rc, " block row %lld", (long long)f->v[i].row);
            if (f->v[i].col >= 0) snprintf(cc, sizeof cc, " block col %lld", (long long)f->v[i].col);
            printf("          at: %s%s%s\n", nd_term_safe(f->v[i].tensor, b2, sizeof b2), rc, cc);
        }
        printf("          breaks_stacks: [");
        print_stack_list(ss, f->v[i].kind, 0);
        printf("]\n");
    }
}

/* "modules: 1234 (nvfp4 1200, dense 34)" */
/* "schemes     W4A4 g16 (nvfp4) 14, dense 2": what the replay will run, before it runs */
static void print_schemes(const nd_module *mods, size_t n) {
    char names[8][48];
    size_t count[8], k = 0;
    for (size_t i = 0; i < n; i++) {
        char sch[32], key[48];
        scheme_str(&mods[i], sch, sizeof sch);
        if (!strcmp(sch, "-")) snprintf(key, sizeof key, "%s", wfmt_str(&mods[i]));
        else snprintf(key, sizeof key, "%s (%s)", sch, wfmt_str(&mods[i]));
        size_t j = 0;
        while (j < k && strcmp(names[j], key)) j++;
        if (j == k && k < 8) { snprintf(names[k], sizeof names[k], "%s", key); count[k++] = 0; }
        if (j < k) count[j]++;
    }
    printf("schemes     ");
    for (size_t j = 0; j < k; j++) printf("%s%s %zu", j ? ", " : "", names[j], count[j]);
    printf("%s\n", k ? "" : "none");
}

static void print_module_counts(const nd_module *mods, size_t n) {
    const char *names[8];
    size_t count[8], k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *w = wfmt_str(&mods[i]);
        size_t j = 0;
        while (j < k && strcmp(names[j], w)) j++;
        if (j == k && k < 8) { names[k] = w; count[k++] = 0; }
        if (j < k) count[j]++;
    }
    printf("modules: %zu (", n);
    for (size_t j = 0; j < k; j++) printf("%s%s %zu", j ? ", " : "", names[j], count[j]);
    printf("); inspect --modules lists them\n");
}

static void print_table(const nd_ckpt *c, const nd_module *mods, const nd_scale_stats *st, size_t n, const nd_findings *f,
                        const stack_set *ss, const family_id *fi, int show) {
    const nd_model_cfg *cfg = nd_ckpt_config(c);
    /* every string that came from the checkpoint's files is made safe for the terminal (issue 37) */
    char b1[4200], b2[1024], b3[1024];
    printf("checkpoint  %s\n", nd_term_safe(nd_ckpt_dir(c), b1, sizeof b1));
    printf("format      %s", nd_ckpt_format_str(c));
    const char *s = nd_cfg_string(cfg, "quantization_config.format");
    if (s) printf(" (%s)", nd_term_safe(s, b2, sizeof b2));
    printf("\nmodel       %s%s%s%s, %lld layers, hidden %lld, vocab %lld\n", nd_term_safe(cfg->model_type, b2, sizeof b2),
           cfg->architecture[0] ? " (" : "", nd_term_safe(cfg->architecture, b3, sizeof b3), cfg->architecture[0] ? ")" : "",
           (long long)cfg->num_hidden_layers, (long long)cfg->hidden_size, (long long)cfg->vocab_size);
    if (fi->recipe[0]) printf("family      recipe %s, naming %s\nreplay      %s\n", fi->recipe, fi->naming, fi->load);
    else printf("family      %s\n", nd_term_safe(fi->why, b2, sizeof b2));
    size_t un = nd_ckpt_unaccounted(c);
    printf("tensors     %zu, modules %zu, %zu tensor%s no loader of the format reads (inspect --json: audit)\n",
           nd_ckpt_count(c), n, un, un == 1 ? "" : "s");
    print_schemes(mods, n);
    printf("\n");
    /* the findings first: what a user came for */
    if (f->n) {
        printf("findings:\n");
        print_findings(f, ss);
        printf("\n");
    }
    const int table = show == SHOW_MODULES || (show == SHOW_DEFAULT && !f->n && n <= INSPECT_TABLE_MAX);
    if (!table) {
        if (show != SHOW_FINDINGS) print_module_counts(mods, n);
    } else {
    printf("%-48s %-6s %-13s %-8s %-13s %-11s %-11s %-9s %-9s %6s %5s %7s\n", "module", "format", "scheme", "conv", "shape",
           "w_global", "in_global", "bs_min", "bs_max", "zeros", "nan", "at448");
    for (size_t i = 0; i < n; i++) {
        const nd_module *m = &mods[i];
        char shape[32], wg[24] = "-", ig[24] = "-", mn[16] = "-", mx[16] = "-", z[16] = "-", na[16] = "-", at[16] = "-";
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)m->out_features, (long long)m->in_features);
        if (m->wfmt == ND_WF_NVFP4) {
            fmt_val(wg, sizeof wg, m->weight_global_div);
            if (m->input_global || m->act_quant) fmt_val(ig, sizeof ig, m->input_global_mult);
        }
        if (m->weight_scale) {
            fmt_val(mn, sizeof mn, st[i].min);
            fmt_val(mx, sizeof mx, st[i].max);
            snprintf(z, sizeof z, "%lld", (long long)st[i].zeros);
            snprintf(na, sizeof na, "%lld", (long long)(st[i].nan + st[i].inf));
            if (m->weight_scale->dtype == ND_DT_F8_E4M3 && st[i].count)
                snprintf(at, sizeof at, "%.3f", (double)st[i].at_max / (double)st[i].count);
        }
        const char *cv = m->conv == ND_CONV_CT ? "ct" : m->conv == ND_CONV_MODELOPT ? "modelopt" : m->conv == ND_CONV_DEEPSEEK ? "deepseek" : "-";
        char sch[32];
        scheme_str(m, sch, sizeof sch);
        printf("%-48s %-6s %-13s %-8s %-13s %-11s %-11s %-9s %-9s %6s %5s %7s\n", nd_term_safe(m->path, b1, sizeof b1), wfmt_str(m), sch, cv,
               shape, wg, ig, mn, mx, z, na, at);
    }
    printf("\nscheme: weight/activation bits as replayed and the block (g16: NVFP4's 16, g32: MXFP4's 32;\n"
           "bNxK: FP8 block scales); w_global: weight dequant divisor (2688/amax(W) when healthy);\n"
           "in_global: activation quantizer multiplier (2688/amax(x)); both normalised from the\n"
           "checkpoint's convention.\n");
    }
    if (show != SHOW_FINDINGS) nd_inspect_kv_print(c);
    /* the closing line: the count, as the exit code judges it */
    size_t ne = nd_findings_count(f, ND_SEV_ERROR), nw = nd_findings_count(f, ND_SEV_WARNING);
    printf("\nfindings: %zu error%s, %zu warning%s (judged against: ", ne, ne == 1 ? "" : "s", nw,
           nw == 1 ? "" : "s");
    print_stack_list(ss, ND_BREAKS_NONE, 1);
    printf("; an error when it breaks a stack judged)\n");
    /* without a recipe there was no load check: "0 errors" would read as "it loads" (round 24) */
    if (!fi->recipe[0]) printf("not checked: whether trace can load it (no recipe matches its model_type; trace refuses it)\n");
}

static void usage(FILE *o) {
    fprintf(o, "usage: nvfp4dbg inspect CKPT [--stack NAME|FILE|all]... [--tp N] [--modules|--findings] [--json]\n\n"
               "Format, architecture, per-module quantization (format, shapes, global scales, block-scale\n"
               "statistics) and static scale findings of a checkpoint folder. Each finding lists the\n"
               "serving-stack profiles (recipes/stack-*.yaml) it breaks (breaks_stacks); it is an error\n"
               "when it breaks a stack judged, else a warning.\n\n"
               "  --stack NAME|FILE|all  judge the findings against this profile (repeatable or comma-\n"
               "                         separated; all = every shipped profile). Default: exact, the\n"
               "                         stack trace uses by default, which keeps each fused shard's own\n"
               "                         scales: fused shards with different global scales are then a\n"
               "                         warning naming the fusing stacks (vllm, ...) they break\n"
               "  --tp N                 also check the tensor-parallel split of every NVFP4 linear over N\n"
               "                         ranks: partial 16-blocks and kernel-tile remainders per rank\n"
               "                         (padding_scale_contamination)\n"
               "  --modules              list every module (format, shape, scales, block-scale statistics);\n"
               "                         by default the list is shown only when there are no findings and\n"
               "                         at most 100 modules, else counted on one line\n"
               "  --findings             the findings only (no module list or KV-cache table)\n"
               "  --json                 one JSON document (each finding with severity, breaks_stacks and\n"
               "                         coordinates; audit: the config against the tensors per module)\n\n"
               "Exit 0: no error finding; 1: an error finding; 2: bad usage, unknown stack profile or\n"
               "unreadable checkpoint.\n"
               "\nexample: nvfp4dbg inspect golden/seed-bug-v4\n"
               "example: nvfp4dbg inspect golden/conformance/deepseek_v4/nvfp4 --stack vllm\n");
}

int nd_cmd_inspect(int argc, char **argv) {
    const char *dir = NULL;
    int as_json = 0, nst = 0, tp = 0, show = SHOW_DEFAULT;
    char *stack_args[MAX_STACKS];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--json")) as_json = 1;
        else if (!strcmp(argv[i], "--modules") || !strcmp(argv[i], "--findings")) {
            const int want = argv[i][2] == 'm' ? SHOW_MODULES : SHOW_FINDINGS;
            if (show != SHOW_DEFAULT && show != want) return nd_cli_usage_error("inspect", "--modules and --findings exclude each other");
            show = want;
        }
        else if (!strcmp(argv[i], "--tp") || !strncmp(argv[i], "--tp=", 5)) {
            char *v = argv[i][4] == '=' ? argv[i] + 5 : i + 1 < argc ? argv[++i] : NULL, *end = NULL;
            long t = v ? strtol(v, &end, 10) : 0;
            if (!v || !*v || *end || t < 1 || t > 4096) return nd_cli_usage_error("inspect", "--tp needs a rank count from 1 to 4096");
            tp = (int)t;
        }
        else if (!strcmp(argv[i], "--stack") || !strncmp(argv[i], "--stack=", 8)) {
            char *v = argv[i][7] == '=' ? argv[i] + 8 : i + 1 < argc ? argv[++i] : NULL;
            if (!v || !*v) return nd_cli_usage_error("inspect", "--stack needs a profile name, a file or all");
            if (nst == MAX_STACKS) return nd_cli_usage_error("inspect", "at most %d --stack options", MAX_STACKS);
            stack_args[nst++] = v;
        }
        else if (argv[i][0] == '-' && argv[i][1]) return nd_cli_usage_error("inspect", "unknown option '%s'", argv[i]);
        else if (dir) return nd_cli_usage_error("inspect", "more than one checkpoint given ('%s', '%s')", dir, argv[i]);
        else dir = argv[i];
    }
    if (!dir) return nd_cli_usage_error("inspect", "no checkpoint folder given");
    nd_err e = {0};
    stack_set ss;
    if (load_stacks(&ss, stack_args, nst, &e)) {
        free(ss.s);
        return nd_cli_error(&e);
    }
    nd_ckpt *c = NULL;
    if (nd_ckpt_open(dir, &c, &e)) {
        free(ss.s);
        return nd_cli_error(&e);
    }
    nd_findings f;
    nd_findings_init(&f);
    nd_scale_stats *st = NULL;
    size_t n = nd_ckpt_module_count(c);
    nd_module *mods = calloc(n ? n : 1, sizeof *mods);
    int rc = mods ? nd_ckpt_check(c, &f, &st, &e) : nd_fail(&e, ND_EXIT_INTERNAL, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) rc = nd_ckpt_module(c, nd_ckpt_module_path(c, i), &mods[i], &e);
    if (!rc && tp) rc = nd_tp_check(c, tp, &f, &e);
    if (!rc) judge_findings(&ss, &f);
    family_id fi;
    if (!rc) identify_family(c, &fi);
    /* a checkpoint trace cannot read is an error finding (never "0 errors"); the static findings
     * are still listed */
    if (!rc && fi.recipe[0]) {
        rc = nd_inspect_load_check(c, fi.load, sizeof fi.load, &e);
        if (rc == ND_EXIT_BADINPUT && strncmp(e.msg, "NVFP4DBG_INSPECT_LOAD_LIMIT", 27)) {
            snprintf(fi.load, sizeof fi.load, "failed (finding unreplayable)");
            rc = nd_findings_add(&f, ND_BREAKS_ALL, "unreplayable", "-", "", "%s", e.msg);
            e = (nd_err){0};
        }
    }
    if (rc) {
        rc = nd_cli_error(&e);
    } else if (as_json) {
        json_t *root = json_object();
        const nd_model_cfg *cfg = nd_ckpt_config(c);
        json_object_set_new(root, "checkpoint", json_string(nd_ckpt_dir(c)));
        json_object_set_new(root, "format", json_string(nd_ckpt_format_str(c)));
        json_object_set_new(root, "quantization", quant_json(c));
        json_object_set_new(root, "model_type", json_string(cfg->model_type));
        json_object_set_new(root, "architecture", json_string(cfg->architecture));
        json_object_set_new(root, "num_hidden_layers", json_integer(cfg->num_hidden_layers));
        json_object_set_new(root, "hidden_size", json_integer(cfg->hidden_size));
        json_object_set_new(root, "recipe", fi.recipe[0] ? json_string(fi.recipe) : json_null());
        json_object_set_new(root, "naming", fi.recipe[0] ? json_string(fi.naming) : json_null());
        json_object_set_new(root, "replay", fi.load[0] ? json_string(fi.load) : json_null());
        json_object_set_new(root, "tensors", json_integer((json_int_t)nd_ckpt_count(c)));
        json_t *ms = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(ms, module_json(c, &mods[i], &st[i]));
        json_object_set_new(root, "modules", ms);
        json_object_set_new(root, "kv_cache", nd_inspect_kv_json(c));
        json_t *fs = json_array();
        for (size_t i = 0; i < f.n; i++)
            json_array_append_new(fs, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:o}", "severity", nd_severity_str(f.v[i].sev),
                                                "code", f.v[i].code, "module", f.v[i].module, "tensor", f.v[i].tensor,
                                                "message", f.v[i].msg, "breaks", nd_break_kind_str(f.v[i].kind),
                                                "breaks_stacks", stack_list_json(&ss, f.v[i].kind, 0),
                                                "coord", f.v[i].row >= 0 || f.v[i].col >= 0 ?
                                                    json_pack("{s:I,s:I}", "block_row", (json_int_t)f.v[i].row,
                                                              "block_col", (json_int_t)f.v[i].col) : json_null()));
        json_object_set_new(root, "findings", fs);
        json_object_set_new(root, "audit", nd_ckpt_inventory_json(c));
        if (tp) json_object_set_new(root, "tp", json_integer(tp));
        json_object_set_new(root, "stacks_judged", stack_list_json(&ss, ND_BREAKS_NONE, 1));
        json_t *known = json_array();
        for (int j = 0; j < ss.n; j++) json_array_append_new(known, json_string(ss.name[j]));
        json_object_set_new(root, "stacks_known", known);
        json_object_set_new(root, "errors", json_integer((json_int_t)nd_findings_count(&f, ND_SEV_ERROR)));
        json_object_set_new(root, "warnings", json_integer((json_int_t)nd_findings_count(&f, ND_SEV_WARNING)));
        json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        fputc('\n', stdout);
        json_decref(root);
    } else {
        print_table(c, mods, st, n, &f, &ss, &fi, show);
    }
    if (!rc) rc = nd_findings_count(&f, ND_SEV_ERROR) ? ND_EXIT_FINDING : ND_EXIT_OK;
    fflush(stdout);
    free(mods);
    free(st);
    nd_findings_free(&f);
    nd_ckpt_close(c);
    free(ss.s);
    return rc;
}

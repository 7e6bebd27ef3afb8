/* synth.c — `nvfp4dbg synth OUTDIR --recipe NAME ...`: argument parsing for nd_synth_run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "cli.h"
#include "util/term.h"
#include "synth/synth.h"
#include "synth/synth_from.h"

static void usage(FILE *f) {
    char known[1024];
    nd_synth_recipe_names(known, sizeof known); /* the recipes with a synth: section */
    fprintf(f,
            "usage: nvfp4dbg synth OUTDIR --recipe NAME [--size tiny|small|full]\n"
            "                      [--format compressed-tensors|modelopt] [--seed N] [--layers N]\n"
            "                      [--unequal-fused-scales] [--inject FAULT[=F]@MODULE ...] [--force] [--json]\n"
            "       nvfp4dbg synth OUTDIR --from CKPT --inject FAULT[=F]@MODULE ... [--force]\n\n"
            "Writes a synthetic checkpoint in the real on-disk format to OUTDIR, the unquantized\n"
            "original it was made from to OUTDIR/original/, and the list of injected faults to\n"
            "OUTDIR.faults.json (next to OUTDIR, not inside it).\n\n"
            "  --recipe   a recipe with a synth: section (%s), or its file\n"
            "  --size     tiny (default; CPU tests) | small | full (real dimensions; 1 layer by default)\n"
            "  --format   compressed-tensors (default) | modelopt\n"
            "  --seed     weight generator seed (default 0); the same seed gives the same files\n"
            "  --layers   number of layers (default: the size's)\n"
            "  --experts  routed experts per MoE layer (recipes whose synth: names experts:, e.g. deepseek_v4;\n"
            "             default: the size's)\n"
            "  --unequal-fused-scales  fused shards (q/k/v, gate/up, q_a/kv) keep each their own weight\n"
            "             global scale, as writers that calibrate shards separately produce (default: one\n"
            "             shared value per fused group)\n"
            "  --from CKPT  plant the faults into a checkpoint another tool wrote (compressed-tensors or\n"
            "             ModelOpt NVFP4): OUTDIR gets its files and all its tensors, the named ones changed\n"
            "             exactly as synth changes its own (no original is written). OUTDIR must be new\n"
            "             or empty; only --inject goes with --from. MODULE is looked up as model.MODULE,\n"
            "             then as given (the checkpoint's own names work)\n"
            "  --inject   FAULT@MODULE, any number; MODULE is a stage name such as\n"
            "             layers.0.self_attn.q_a_proj or layers.1.mlp.experts.3.up_proj. Faults:\n"
            "             input-scale-inverted, input-scale-mul=F, input-scale-inf,\n"
            "             weight-global-scale-zero, weight-global-scale-negative, weight-scale-nan, nibble-swap,\n"
            "             fused-scale-mismatch=F, missing-input-scale, weight-global-scale-mul=F,\n"
            "             scale-pow2, scale-swizzled, scale-transposed, scale-encoding=e8m0,\n"
            "             scale-row-stride=M (scale rows padded to a multiple M), weight-mul=F,\n"
            "             scale-exponent-shift=K (block scales' exponent written K too low);\n"
            "             with --from only: config-ignore, dequantize, scale-renamed,\n"
            "             weight-scale-renamed, scale-missing-expert, quantize,\n"
            "             router-bias-offset=F (a router's correction bias plus F),\n"
            "             quantize-unignored, gate-up-swap (an MLP's or expert's gate and up\n"
            "             stored exchanged) (docs/synth.md)\n"
            "  --force    OUTDIR may hold an earlier synth output: exactly the files synth wrote there\n"
            "             (listed in OUTDIR/.nvfp4dbg-synth) are replaced; a folder holding anything else is\n"
            "             refused. Without --force, OUTDIR must be new or empty\n"
            "  --json     print a JSON summary on stdout\n\n"
            "example: nvfp4dbg synth v4-seed-bug --recipe deepseek_v4 --inject input-scale-inverted@layers.0.self_attn.q_a_proj\n"
            "         nvfp4dbg synth q-inverted --from golden/conformance/llama/nvfp4 --inject input-scale-inverted@layers.0.self_attn.q_proj\n", known);
}

/* "--name VALUE" or "--name=VALUE"; returns the value or NULL when argv[*i] is not this option. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n)) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n]) return NULL;
    if (*i + 1 >= argc) { *missing = 1; return NULL; }
    return argv[++*i];
}

/* An integer option value in lo..hi into *out; 0, or the usage error naming the option. */
static int int_value(const char *name, const char *v, long lo, long hi, int *out) {
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) return nd_cli_usage_error("synth", "%s '%s' is not a number in %ld..%ld", name, v, lo, hi);
    *out = (int)x;
    return 0;
}

int nd_cmd_synth(int argc, char **argv) {
    nd_synth_opts o = {.recipe = NULL, .size = ND_SYNTH_TINY, .format = ND_SYNTH_CT,
                       .calibrate = nd_synth_pipeline_calibrate};
    const char **inj = calloc((size_t)(argc > 0 ? argc : 1), sizeof *inj);
    int json = 0, rc = 0, gen_opts = 0; /* gen_opts: a generator option was given (not for --from) */
    const char *from = NULL;
    nd_err e = {0};
    if (!inj) return ND_EXIT_INTERNAL;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *v;
        int missing = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); free(inj); return 0; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if ((v = opt_value(argc, argv, &i, "--recipe", &missing))) { o.recipe = v; gen_opts = 1; continue; }
        if (!missing && (v = opt_value(argc, argv, &i, "--size", &missing))) {
            gen_opts = 1;
            rc = nd_synth_size_from_name(v, &o.size, &e);
            continue;
        }
        if (!missing && (v = opt_value(argc, argv, &i, "--format", &missing))) {
            gen_opts = 1;
            rc = nd_synth_format_from_name(v, &o.format, &e);
            continue;
        }
        if (!missing && (v = opt_value(argc, argv, &i, "--seed", &missing))) {
            char *end = NULL;
            gen_opts = 1;
            errno = 0;
            o.seed = strtoull(v, &end, 0);
            if (!*v || *end || errno || v[0] == '-') rc = nd_cli_usage_error("synth", "--seed '%s' is not a number", v);
            continue;
        }
        if (!missing && (v = opt_value(argc, argv, &i, "--layers", &missing))) {
            gen_opts = 1;
            rc = int_value("--layers", v, 1, 64, &o.layers);
            continue;
        }
        if (!missing && (v = opt_value(argc, argv, &i, "--experts", &missing))) {
            gen_opts = 1;
            rc = int_value("--experts", v, 1, 4096, &o.experts);
            continue;
        }
        if (!missing && (v = opt_value(argc, argv, &i, "--inject", &missing))) { inj[o.n_injects++] = v; continue; }
        if (!strcmp(a, "--unequal-fused-scales")) { o.unequal_fused = 1; gen_opts = 1; continue; }
        if (!strcmp(a, "--force")) { o.force = 1; continue; }
        if (!missing && (v = opt_value(argc, argv, &i, "--from", &missing))) { from = v; continue; }
        if (missing) { rc = nd_cli_usage_error("synth", "%s needs a value", a); break; }
        if (a[0] == '-' && a[1]) { rc = nd_cli_usage_error("synth", "unknown option '%s'", a); break; }
        if (o.outdir) { rc = nd_cli_usage_error("synth", "more than one output directory ('%s', '%s')", o.outdir, a); break; }
        o.outdir = a;
    }
    if (!rc && !o.outdir) rc = nd_cli_usage_error("synth", "no output directory");
    if (!rc && from) {
        /* planting into another writer's checkpoint: the generator's options mean nothing there */
        if (gen_opts || json)
            rc = nd_cli_usage_error("synth", "--from takes only --inject and --force (the checkpoint fixes recipe, size, format, "
                                    "seed and fused scales; --recipe/--size/--format/--seed/--layers/--experts/"
                                    "--unequal-fused-scales/--json are for generated checkpoints)");
        else if (!o.n_injects) rc = nd_cli_usage_error("synth", "--from needs at least one --inject");
        else if ((rc = nd_synth_from(from, o.outdir, inj, o.n_injects, o.force, &e))) rc = nd_cli_error(&e);
        else {
            char od[16384], fr[16384];
            nd_term_safe(o.outdir, od, sizeof od);
            printf("wrote %s: the tensors of %s with %d fault(s), listed in %s.faults.json\n", od, nd_term_safe(from, fr, sizeof fr),
                   o.n_injects, od);
        }
        free(inj);
        return rc;
    }
    if (!rc && !o.recipe) rc = nd_cli_usage_error("synth", "--recipe is required");
    if (rc) {
        free(inj);
        return e.code ? nd_cli_error(&e) : rc;
    }
    o.injects = inj;
    rc = nd_synth_run(&o, &e);
    if (rc) {
        free(inj);
        return nd_cli_error(&e);
    }
    static const char *const fmt_name[] = {"compressed-tensors", "modelopt"};
    static const char *const size_name[] = {"tiny", "small", "full"};
    size_t n = strlen(o.outdir);
    while (n > 1 && o.outdir[n - 1] == '/') n--;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)n, o.outdir);
    if (json) {
        json_t *j = json_object();
        char buf[4200];
        json_object_set_new(j, "checkpoint", json_string(dir));
        snprintf(buf, sizeof buf, "%s/original", dir);
        json_object_set_new(j, "original", json_string(buf));
        snprintf(buf, sizeof buf, "%s.faults.json", dir);
        json_object_set_new(j, "faults_file", json_string(buf));
        json_object_set_new(j, "recipe", json_string(o.recipe));
        json_object_set_new(j, "size", json_string(size_name[o.size]));
        json_object_set_new(j, "format", json_string(fmt_name[o.format]));
        json_object_set_new(j, "seed", json_integer((json_int_t)o.seed));
        json_object_set_new(j, "faults", json_integer(o.n_injects));
        char *txt = json_dumps(j, JSON_PRESERVE_ORDER);
        if (txt) printf("%s\n", txt);
        free(txt);
        json_decref(j);
    } else {
        char ds[16384], rs[1024];
        nd_term_safe(dir, ds, sizeof ds);
        printf("wrote %s (%s %s, %s NVFP4, seed %llu), original in %s/original, %d fault(s) listed in %s.faults.json\n",
               ds, nd_term_safe(o.recipe, rs, sizeof rs), size_name[o.size], fmt_name[o.format], (unsigned long long)o.seed, ds, o.n_injects, ds);
    }
    free(inj);
    return 0;
}

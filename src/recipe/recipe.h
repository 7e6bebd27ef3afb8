/* recipe.h — a model family's stages as plain C structs (parsed from recipes/<name>.yaml with
 * libyaml; the pipeline never touches YAML).
 *
 * A recipe lists stages in three sections: `prologue` (once), `layer` (repeated for every
 * replayed layer, `{L}` in templates is the layer index) and `epilogue`. Each stage names its
 * op, the checkpoint module or tensors it uses (templates over {L}), its input and output
 * buffers, and free-form attributes. An attribute value starting with `$` is a config.json key
 * ("$rms_norm_eps"); `{L}` inside any string is the layer index.
 *
 * A recipe may extend another (`extends:`) and edit its stages, and name fused-module groups in a
 * `fuse:` table (recipe_extends.h); what the loader returns is the resolved recipe, each stage with
 * the file and line it was written at.
 */
#ifndef ND_RECIPE_H
#define ND_RECIPE_H
#include <stddef.h>

#include "util/err.h"

#define ND_RECIPE_MAX_IO 6
#define ND_RECIPE_MAX_STAGES 1024   /* per section; the largest shipped recipe has fewer than 100 */
#define ND_RECIPE_MAX_ATTRS 24
#define ND_RECIPE_MAX_MATCH 8
#define ND_RECIPE_MAX_RENAME 96
#define ND_RECIPE_MAX_CHAIN 8           /* a recipe and the recipes it extends (recipe_extends.h) */

typedef struct nd_attr {
    char key[48];
    char value[192];
    const char *file;                   /* where the attribute was written (one of nd_recipe.files) */
    int line;
} nd_attr;

/* the longest stage name a trace stores, expanded (trace.h's ND_NAME_LEN - 1; pipeline/run.c checks) */
#define ND_STAGE_NAME_MAX 95

typedef struct nd_stage_def {
    char name[128];                     /* stage name template, e.g. "layers.{L}.self_attn.q_a_proj" */
    char op[32];
    char module[160];                   /* module path template (linear ops), may be empty */
    char in[ND_RECIPE_MAX_IO][32];
    int n_in;
    char out[ND_RECIPE_MAX_IO][32];
    int n_out;
    char when_has[160];                 /* run only when this tensor exists (template) */
    char when_missing[160];             /* run only when this tensor does not exist */
    char when_config[160];              /* run only when this config.json value ({L} expanded; a dotted
                                         * path, list items by index) is nonzero / true (SmolLM3's
                                         * no_rope_layers.{L}); absent is exit 2 */
    nd_attr attrs[ND_RECIPE_MAX_ATTRS];
    int n_attrs;
    int line;                           /* line in the YAML file, for messages */
    const char *file;                   /* that file: the recipe or one it extends (nd_stage_file) */
} nd_stage_def;

/* Alternate tensor naming: a checkpoint whose tensors match `detect` is read through `rename`
 * pairs (canonical prefix template -> on-disk template; {L} and {E} are captured). */
typedef struct nd_naming {
    char name[32];
    char detect[160];
    char from[ND_RECIPE_MAX_RENAME][128];
    char to[ND_RECIPE_MAX_RENAME][128];
    int n_rename;
} nd_naming;

typedef struct nd_thresholds {
    double min_cosine;        /* fallback fixed thresholds (documented in the recipe) */
    double min_sqnr_db;
    double floor_margin_db;   /* a quantized stage diverges when sqnr < floor - margin */
    double chained_min_cosine;
} nd_thresholds;

#define ND_RECIPE_MAX_REQUIRES 8

typedef struct nd_recipe {
    char name[64];
    char path[512];
    char files[ND_RECIPE_MAX_CHAIN][512]; /* path, then the recipes it extends, nearest first */
    int n_files;
    char match[ND_RECIPE_MAX_MATCH][64];  /* config.json model_type values */
    char unsupported[ND_RECIPE_MAX_MATCH][64]; /* config keys the recipe does not model: set (not null,
                                                * 0 or false) is exit 2 (Gemma's logit soft-capping) */
    int n_unsupported;
    /* `requires:` config keys whose string value must be one of a list (hidden_act: [silu, swish]):
     * the recipe computes that and nothing else; another value is exit 2. An absent key is fine. */
    char req_key[ND_RECIPE_MAX_REQUIRES][32];
    char req_val[ND_RECIPE_MAX_REQUIRES][8][32];
    int n_req, n_req_val[ND_RECIPE_MAX_REQUIRES];
    int n_match;
    nd_thresholds th;
    nd_naming namings[4];
    int n_namings;
    nd_stage_def *prologue, *layer, *epilogue;
    int n_prologue, n_layer, n_epilogue;
    struct nd_synth_spec *synth;        /* the `synth:` section (recipe_synth.h); NULL when none */
} nd_recipe;

/* Load a recipe by file path or by name (searched in $NVFP4DBG_RECIPES, the installed recipes
 * folder, then the source tree's recipes/). Errors name the file and line (exit 2). */
int nd_recipe_load(const char *name_or_path, nd_recipe **out, nd_err *e);
/* The FNV-1a 64 hash of a recipe file's bytes as 16 hex digits in out (a trace records it, repro
 * checks that it replays the same recipe). */
int nd_recipe_file_hash(const char *path, char out[17], nd_err *e);
/* The same over a loaded recipe's files, the recipes it extends included (rc->files in order): an
 * edited parent is another recipe too. */
int nd_recipe_hash(const nd_recipe *rc, char out[17], nd_err *e);
/* Pick the recipe whose `match` lists model_type (exit 2 when none). */
int nd_recipe_for_model_type(const char *model_type, nd_recipe **out, nd_err *e);
void nd_recipe_free(nd_recipe *r);
/* The file a stage was written in, for "FILE:LINE: ..." messages (the recipe's own path when the
 * stage was not read from a file). */
static inline const char *nd_stage_file(const nd_recipe *r, const nd_stage_def *s) {
    return s->file ? s->file : r->path;
}
/* Attribute lookup; NULL when absent. */
const char *nd_stage_attr(const nd_stage_def *s, const char *key);
/* Resolve the recipes folder (for listing and for messages). */
const char *nd_recipe_dir(void);
/* The files a run reads for recipe and stack-profile arguments, as inputs that no output may
 * replace (util/outfile.h): the recipe folder once (a recipe or profile named by its name or a
 * model type lives there), then each entry of the comma-separated names that is a file path (has
 * a '/' or ends in .yaml). Appends to in[*n] while *n < cap; the copies live in buf. NULL names
 * are skipped. */
void nd_recipe_inputs(const char *const *names, int n_names, const char **in, int *n, int cap, char *buf, size_t bufcap);

#endif

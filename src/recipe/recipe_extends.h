/* recipe_extends.h — a recipe that extends another, its stage-list edits and the `fuse:` table
 * (internal to src/recipe; docs/families.md "Adding a family" shows them in use).
 *
 *   extends: llama            the parent: NAME.yaml in this file's folder, then $NVFP4DBG_RECIPES,
 *                             the installed and the source recipes; or a path (relative to this file)
 * The child starts from its parent's document: each top-level section the child does not write
 * (thresholds, naming, prologue, layer, epilogue, synth, ...) is the parent's as written there; a
 * section the child writes replaces the parent's whole. `recipe`, `match` and `description` are the
 * child's own (a child without `match` is picked only by --recipe). Edits of the inherited stages,
 * applied in the order written, each a mapping or a list of mappings:
 *   insert_after:  {stage: NAME, stages: [STAGE, ...]}
 *   insert_before: {stage: NAME, stages: [STAGE, ...]}
 *   replace:       {stage: NAME, with: [STAGE, ...]}        (with: [] removes it)
 *   remove:        [NAME, ...]
 *   set:           {stage: NAME, attrs: {KEY: VALUE, ...}}   (module, in, out, when_* and attributes)
 * NAME is a stage name as written ("layers.{L}.mlp"); where two stages share it (alternatives by
 * when_has / when_missing), the edit adds `when_has:` or `when_missing:` to pick one.
 *   fuse: {qkv: [q_proj, k_proj, v_proj]}   fused-module lists, inherited and extended by name; a
 *                             linear stage's `fused: qkv` becomes its module's siblings (the names
 *                             under the module's parent: "model.layers.{L}.self_attn.q_proj,...")
 * Every problem (a cycle, a missing parent, an edit naming no stage, an unknown fuse name) is exit 2
 * "FILE:LINE: ..." in the file that says it; an inherited stage keeps the file and line it was
 * written at, for the messages of later checks. */
#ifndef ND_RECIPE_EXTENDS_H
#define ND_RECIPE_EXTENDS_H

#include <yaml.h>
#include "recipe/recipe.h"
#include "recipe/yaml_doc.h"

/* How recipe.c's parser reads one file of the chain. */
typedef struct nd_rctx {
    yaml_document_t *doc;
    const char *path;       /* the file (one of nd_recipe.files) */
    nd_err *e;
    nd_ydoc *d;
    int index;              /* its place in the chain: 0 the recipe, n-1 the first ancestor */
    const struct nd_rchain *chain;
} nd_rctx;

/* recipe.c: one stage, and one key of a stage (a repeated attribute replaces the first). */
int nd_recipe_parse_stage(nd_rctx *y, yaml_node_t *n, nd_stage_def *s);
int nd_recipe_stage_key(nd_rctx *y, nd_stage_def *s, yaml_node_t *kn, yaml_node_t *vn);

#define ND_FUSE_MAX 16
#define ND_FUSE_MAX_MEMBERS 8

typedef struct nd_fuse {
    char name[32];
    char member[ND_FUSE_MAX_MEMBERS][96];
    int n_member;
} nd_fuse;

typedef struct nd_rchain {
    nd_ydoc docs[ND_RECIPE_MAX_CHAIN];  /* [0] the recipe, [i+1] what [i] extends */
    int n;
    nd_fuse fuse[ND_FUSE_MAX];
    int n_fuse;
} nd_rchain;

/* Load path and every recipe it extends into c (the paths into r->files). */
int nd_rchain_load(nd_rchain *c, const char *path, nd_recipe *r, nd_err *e);
void nd_rchain_free(nd_rchain *c);
/* 1 when file `index` of the chain leaves top-level key k to someone else: the edit and fuse keys
 * (nd_rchain_edit), extends, the identity keys of an ancestor, and a section a nearer file writes. */
int nd_rchain_skip(const nd_rchain *c, int index, const char *k);
/* Apply file `index`'s fuse table and stage edits to r. */
int nd_rchain_edit(nd_rchain *c, int index, nd_recipe *r, nd_err *e);
/* Expand `fused: NAME` of every stage through the fuse tables (after the whole chain). */
int nd_rchain_fuse(const nd_rchain *c, nd_recipe *r, nd_err *e);

#endif

/* op_desc.h — what each recipe op takes: its attributes with their type, whether they are
 * required, their default and their meaning (issue 23). One table (op_desc.c) serves three uses:
 *   - every recipe is checked against it when it is loaded for a run: an unknown op, an unknown or
 *     misspelled attribute ("did you mean"), a missing required one, or a value of the wrong type is
 *     exit 2 naming the recipe file, the line, the stage, the op and the attribute, instead of an op
 *     silently falling back to a default;
 *   - `nvfp4dbg explain --ops [--markdown]` prints it (docs/ops.md is that output);
 *   - tests check that every op the pipeline runs has a descriptor and that every attribute name
 *     the ops read is declared.
 * Values are checked for their syntax only: a number attribute is a number, a config.json key
 * ("$head_dim") or a sum of those; the config's values are known when the stage runs. */
#ifndef ND_OP_DESC_H
#define ND_OP_DESC_H
#include "util/err.h"
#include "recipe/recipe.h"

typedef enum nd_attr_kind {
    ND_AK_NUM = 0,  /* a number, "$config_key", or a sum of them ("$a+-$b") */
    ND_AK_FLAG,     /* 0 or 1 (or a config key) */
    ND_AK_TENSOR,   /* a checkpoint tensor or module name template ({L} is the layer) */
    ND_AK_TEXT,     /* free text with the op's own syntax (sizes lists, module lists, variants) */
} nd_attr_kind;

typedef struct nd_attr_desc {
    const char *name;
    nd_attr_kind kind;
    int required;
    const char *dflt;     /* the default in words ("" when required or none) */
    const char *doc;
} nd_attr_desc;

#define ND_OP_MAX_ATTRS 16

typedef struct nd_op_desc {
    const char *name;
    const char *doc;
    int module;           /* 1: the stage names a checkpoint module (`module:` key) */
    nd_attr_desc attrs[ND_OP_MAX_ATTRS];
} nd_op_desc;

/* Every op, in the order of docs/ops.md. */
const nd_op_desc *nd_op_descs(int *n);
const nd_op_desc *nd_op_desc_find(const char *op);
/* Attributes every op accepts (the reference-numerics variant `tf`). */
const nd_attr_desc *nd_op_common_attrs(int *n);
/* Check every stage of the recipe against the table (exit 2 on the first violation). */
int nd_op_validate_recipe(const nd_recipe *rc, nd_err *e);
/* The `tf:` variants the reference numerics know, NULL-terminated (ref_numerics.c, beside nd_stage_tf). */
extern const char *const ND_TF_VARIANTS[];

#endif

/* ref_config.h — --reference-checkpoint's config.json must describe the checkpoint's model. */
#ifndef ND_REF_CONFIG_H
#define ND_REF_CONFIG_H

#include "ckpt/ckpt.h"
#include "recipe/recipe.h"
#include "util/err.h"

/* 0 when every value the model is built from agrees; else exit 2 naming both folders and the key. */
int nd_ref_config_check(const nd_recipe *rc, const nd_ckpt *ck, const nd_ckpt *ref, nd_err *e);

#endif

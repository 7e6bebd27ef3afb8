/* inspect_load.h — inspect's load check: the checkpoint replayed as trace would read it. */
#ifndef ND_INSPECT_LOAD_H
#define ND_INSPECT_LOAD_H
#include <stddef.h>
#include "ckpt/ckpt.h"
#include "util/err.h"

/* Replay one token through every stage on the reference path (CPU, no trace file), the loader
 * trace uses: a checkpoint inspect passes must be one trace can read (a missing tensor, a layer
 * without tensors, an empty file fail here as they fail trace). Checkpoints whose tensors exceed
 * the limit (NVFP4DBG_INSPECT_LOAD_LIMIT bytes, default 4 GiB) are not replayed: *status says
 * so. Returns exit 2 with trace's message when the replay fails (inspect makes it the error
 * finding unreplayable); status "ok" when it ran. */
int nd_inspect_load_check(const nd_ckpt *c, char *status, size_t cap, nd_err *e);

#endif

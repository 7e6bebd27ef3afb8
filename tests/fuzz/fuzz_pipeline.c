/* fuzz_pipeline.c — config.json through the whole trace: the input is the config.json of a scratch
 * checkpoint folder whose model.safetensors is a copy of the small llama conformance checkpoint
 * (golden/conformance/llama/nvfp4), traced with nd_pipeline_trace on the CPU backend, 4 tokens,
 * both modes, no trace file and --max-memory 256 MiB.
 *
 * The source root is ND_SOURCE_ROOT, else the current folder; NVFP4DBG_RECIPES defaults to
 * ROOT/recipes. Oracle: the run ends with exit class 0, 1 or 2, never 3; a non-zero class is the
 * one nd_err holds, and a class 2 has a message. No crash, leak or hang (libFuzzer -timeout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "pipeline/pipeline.h"
#include "fuzz_common.h"

#define SRC_CKPT "golden/conformance/llama/nvfp4/model.safetensors"

static int g_ready;

/* Copy the conformance weights into the scratch checkpoint folder (once per process). */
static void setup(void) {
    const char *root = getenv("ND_SOURCE_ROOT");
    if (!root || !*root) root = ".";
    char p[1024];
    snprintf(p, sizeof p, "%s/recipes", root);
    setenv("NVFP4DBG_RECIPES", p, 0);
    snprintf(p, sizeof p, "%s/%s", root, SRC_CKPT);
    FILE *f = fopen(p, "rb");
    FZ_ASSERT(f != NULL, "cannot open %s (set ND_SOURCE_ROOT to the source tree)", p);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = n > 0 ? malloc((size_t)n) : NULL;
    FZ_ASSERT(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", p);
    fclose(f);
    mkdir(fz_path("ckpt"), 0700);
    fz_write("ckpt/model.safetensors", buf, (size_t)n);
    free(buf);
    g_ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_ready) setup();
    fz_write("ckpt/config.json", data, size);
    static const int64_t tokens[4] = {1, 17, 42, 5};
    nd_trace_opts o;
    memset(&o, 0, sizeof o);
    o.ckpt_dir = fz_path("ckpt");
    o.backend = "cpu";
    o.tokens = tokens;
    o.ntok = 4;
    o.layer_lo = 0;
    o.layer_hi = -1;
    o.modes = ND_MODES_BOTH;
    o.max_memory = (uint64_t)256 << 20;
    nd_trace_result res;
    nd_err e = {0};
    int rc = nd_pipeline_trace(&o, &res, &e);
    FZ_ASSERT(rc == 0 || rc == ND_EXIT_FINDING || rc == ND_EXIT_BADINPUT, "exit class %d: %s", rc, e.msg);
    if (rc) {
        FZ_ASSERT(rc == e.code, "returned %d but nd_err holds %d (%s)", rc, e.code, e.msg);
        FZ_ASSERT(rc != ND_EXIT_BADINPUT || e.msg[0], "exit 2 without a message");
    } else {
        FZ_ASSERT(res.nrows > 0 && res.rows, "a completed run without rows");
        for (int64_t i = 0; i < res.nrows; i++)
            FZ_ASSERT(res.rows[i].name[0] && res.rows[i].mode[0], "row %lld without a name or mode", (long long)i);
    }
    nd_trace_result_free(&res);
    return 0;
}

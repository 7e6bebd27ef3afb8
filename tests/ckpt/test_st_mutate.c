/* Deterministic mutations of a valid safetensors file (header bytes, length prefix, truncation):
 * nd_st_open must either accept the file with every tensor inside it, or reject it as bad input
 * with a message naming the file. Run under the sanitizers this also shows no out-of-bounds read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt_fixture.h"
#include "nd_test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static unsigned char *slurp(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    if (b && fread(b, 1, *n, f) != *n) { free(b); b = NULL; }
    fclose(f);
    return b;
}

int main(void) {
    char dir[256], src[512], dst[512];
    if (fx_tmpdir(dir, sizeof dir, "mut")) return 1;
    fx x;
    if (fx_begin(&x, dir, "src.safetensors")) return 1;
    float ig = 100.0f;
    fx_nvfp4_ct(&x, "model.layers.0.self_attn.q_a_proj", 16, 32, 2000.0f, &ig, 0x7e);
    fx_dense(&x, "lm_head", 4, 8);
    if (fx_end(&x)) return 1;
    snprintf(src, sizeof src, "%s/src.safetensors", dir);
    snprintf(dst, sizeof dst, "%s/mut.safetensors", dir);
    size_t n;
    unsigned char *orig = slurp(src, &n), *buf = malloc(n + 64);
    CHECK(orig && buf, "cannot read fixture");
    if (!orig || !buf) return nd_test_report("test_st_mutate");
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)orig[i] << (8 * i);
    int accepted = 0, rejected = 0, badmsg = 0, outside = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, orig, n);
        size_t len = n;
        int kind = (int)(next() % 4);
        if (kind == 0) {            /* flip bytes in the header */
            int k = 1 + (int)(next() % 4);
            for (int j = 0; j < k; j++) buf[8 + next() % hl] = (unsigned char)next();
        } else if (kind == 1) {     /* replace a digit by another digit: offsets and shapes change */
            for (int tries = 0; tries < 64; tries++) {
                size_t p = 8 + next() % hl;
                if (buf[p] >= '0' && buf[p] <= '9') { buf[p] = (unsigned char)('0' + next() % 10); break; }
            }
        } else if (kind == 2) {     /* a wrong length prefix */
            uint64_t v = next() % 4 ? hl + (next() % 64) - 32 : next();
            for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(v >> (8 * i));
        } else {                    /* truncation */
            len = next() % n;
        }
        FILE *f = fopen(dst, "wb");
        if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) { CHECK(0, "cannot write"); break; }
        nd_st_file *sf = NULL;
        nd_err e = {0};
        int rc = nd_st_open(dst, &sf, &e);
        if (rc == 0) {
            accepted++;
            for (size_t i = 0; i < nd_st_count(sf); i++) {
                const nd_tview *t = nd_st_at(sf, i);
                /* touch the first and last byte of every accepted tensor */
                volatile unsigned char s = 0;
                if (t->nbytes) s = ((const unsigned char *)t->data)[0] ^ ((const unsigned char *)t->data)[t->nbytes - 1];
                (void)s;
                if (t->nbytes != (size_t)t->numel * nd_dtype_size(t->dtype)) outside++;
            }
            nd_st_close(sf);
        } else {
            rejected++;
            if (rc != ND_EXIT_BADINPUT || strncmp(e.msg, dst, strlen(dst)) != 0) {
                badmsg++;
                fprintf(stderr, "iteration %d: rc %d, message: %s\n", it, rc, e.msg);
            }
        }
    }
    printf("mutations: %d accepted, %d rejected\n", accepted, rejected);
    CHECK(rejected > 1000, "only %d of 3000 mutations rejected", rejected);
    CHECK(accepted > 0, "no mutation accepted (the digit changes that stay consistent should be)");
    CHECK_EQ_INT(badmsg, 0);
    CHECK_EQ_INT(outside, 0);
    free(orig);
    free(buf);
    fx_rmrf(dir);
    return nd_test_report("test_st_mutate");
}

/* bench_kernels.c — the CUDA backend's kernels against the card's own ceilings, in one run.
 *
 * Ceilings, measured first: device-to-device cudaMemcpy bandwidth (bytes read + written) and a
 * plain cuBLAS GEMM on each shape (BF16 operands already in BF16, FP32 output, FP32 compute; and
 * plain FP32 SGEMM for the reference path). Then, at DeepSeek-V4 sizes (hidden 7168, q_lora 1536,
 * 128 heads x head_dim 512, experts inter 3072; 1..4096 tokens): dequant_nvfp4, quant_nvfp4 and
 * the compare probe as a share of copy bandwidth (their minimal bytes over time), and the
 * production (bf16_exact) and reference GEMMs as a share of the plain cuBLAS GEMM.
 *
 * Method: CUDA events on the backend's stream, 3 warm-ups, median of REPS; every input set is
 * rotated through copies totalling more than 4x the L2 so no run reads a cached tensor. Inputs are
 * random, never zeros. Each memory-bound op is timed twice: one call alone between two events
 * (launch latency and, for compare and quant statistics, the result's round trip to the host
 * included), and per op in a sequence of SEQ calls as a traced layer issues them, with the probe
 * results deferred (backend.h defer_results) and the sequence's one flush_results inside the
 * timing. --json FILE writes the figures as bench/results/<date>-<device>.json (kernels part).
 * Usage: bench_kernels [--quick] [--kernels] [--only LABEL] [--shape SHAPE]
 * (--kernels: skip the GEMMs; --only/--shape: time only the rows with that kernel label and shape,
 * e.g. --only quant_nvfp4 --shape "[4096, 7168]", for a profiler)
 */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "cuda/nd_cuda.h"
#include "numerics/nd_numerics.h"

enum { WARM = 3, SEQ = 20 };
static int REPS = 15;
static nd_backend *B;
static cudaStream_t ST;
static size_t L2;

#define DIE(...) do { fprintf(stderr, "bench_kernels: " __VA_ARGS__); fputc('\n', stderr); exit(3); } while (0)
#define CK(call) do { cudaError_t rc_ = (call); if (rc_ != cudaSuccess) DIE("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(rc_)); } while (0)
#define BL(call) do { cublasStatus_t rc_ = (call); if (rc_ != CUBLAS_STATUS_SUCCESS) DIE("%s:%d: %s: %s", __FILE__, __LINE__, #call, cublasGetStatusString(rc_)); } while (0)
#define RUN(expr) do { nd_err e = {0}; if ((expr) != 0) DIE("%s:%d: %s", __FILE__, __LINE__, e.msg); } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27; return rng * 2685821657736338717ULL; }
static float rnd_normal(void) {
    double u = ((rnd() >> 11) + 1.0) / 9007199254740993.0, v = (rnd() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void *dalloc(size_t bytes) { void *p; CK(cudaMalloc(&p, bytes)); return p; }
/* Random floats on the device, made on the host in one chunk and replicated. */
static void fill_floats(float *d, size_t n, float scale, int fp4_exact) {
    const size_t chunk = n < ((size_t)1 << 22) ? n : ((size_t)1 << 22);
    float *h = malloc(chunk * 4);
    for (size_t i = 0; i < chunk; i++) {
        if (fp4_exact) {
            static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
            const float s = (float)(1u << (rnd() % 6)) * 0.125f * (1.0f + 0.125f * (float)(rnd() % 8));
            h[i] = ((rnd() & 1) ? -1.0f : 1.0f) * e2m1[rnd() % 8] * s;
        } else h[i] = rnd_normal() * scale;
    }
    for (size_t off = 0; off < n; off += chunk) CK(cudaMemcpy(d + off, h, (n - off < chunk ? n - off : chunk) * 4, cudaMemcpyHostToDevice));
    free(h);
}
static void fill_bytes(uint8_t *d, size_t n) {
    uint8_t *h = malloc(n);
    for (size_t i = 0; i < n; i++) h[i] = (uint8_t)rnd();
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    free(h);
}
/* Copies so that the rotation covers > 4x L2. */
static int copies_for(size_t bytes) {
    size_t c = (4 * L2) / (bytes ? bytes : 1) + 1;
    return (int)(c < 2 ? 2 : c > 64 ? 64 : c);
}

typedef void (*run_fn)(void *ctx, int rep);
static int cmp_f(const void *a, const void *b) { float x = *(const float *)a, y = *(const float *)b; return (x > y) - (x < y); }
/* Median milliseconds of fn over REPS, after WARM runs, with events on the backend stream. */
static double time_ms(run_fn fn, void *ctx) {
    cudaEvent_t ev[2];
    CK(cudaEventCreate(&ev[0]));
    CK(cudaEventCreate(&ev[1]));
    for (int i = 0; i < WARM; i++) fn(ctx, i);
    CK(cudaStreamSynchronize(ST));
    float *t = malloc((size_t)REPS * sizeof *t);
    for (int i = 0; i < REPS; i++) {
        CK(cudaEventRecord(ev[0], ST));
        fn(ctx, WARM + i);
        CK(cudaEventRecord(ev[1], ST));
        CK(cudaEventSynchronize(ev[1]));
        CK(cudaEventElapsedTime(&t[i], ev[0], ev[1]));
    }
    CK(cudaGetLastError());
    qsort(t, (size_t)REPS, sizeof *t, cmp_f);
    const double med = t[REPS / 2];
    free(t);
    CK(cudaEventDestroy(ev[0]));
    CK(cudaEventDestroy(ev[1]));
    return med;
}

/* Median per-op milliseconds of SEQ consecutive calls of fn (deferred probe results, flushed once
 * inside the timed region), over REPS sequences. */
static double time_seq(run_fn fn, void *ctx) {
    cudaEvent_t ev[2];
    CK(cudaEventCreate(&ev[0]));
    CK(cudaEventCreate(&ev[1]));
    nd_err e = {0};
    B->defer_results = 1;
    for (int i = 0; i < WARM; i++) fn(ctx, i);
    if (B->flush_results(B, &e)) DIE("%s", e.msg);
    CK(cudaStreamSynchronize(ST));
    float *t = malloc((size_t)REPS * sizeof *t);
    for (int i = 0; i < REPS; i++) {
        CK(cudaEventRecord(ev[0], ST));
        for (int j = 0; j < SEQ; j++) fn(ctx, WARM + i * SEQ + j);
        if (B->flush_results(B, &e)) DIE("%s", e.msg);
        CK(cudaEventRecord(ev[1], ST));
        CK(cudaEventSynchronize(ev[1]));
        CK(cudaEventElapsedTime(&t[i], ev[0], ev[1]));
    }
    B->defer_results = 0;
    CK(cudaGetLastError());
    qsort(t, (size_t)REPS, sizeof *t, cmp_f);
    const double med = t[REPS / 2] / SEQ;
    free(t);
    CK(cudaEventDestroy(ev[0]));
    CK(cudaEventDestroy(ev[1]));
    return med;
}

/* ---- ceilings ---- */
typedef struct { void *src, *dst; size_t bytes; } copy_ctx;
static void run_copy(void *c, int rep) {
    copy_ctx *x = c;
    (void)rep;
    CK(cudaMemcpyAsync(x->dst, x->src, x->bytes, cudaMemcpyDeviceToDevice, ST));
}

/* the same bytes as an op, copied: slices of one buffer in rotation */
typedef struct { char *src, *dst; size_t bytes; int ncopy; } rcopy_ctx;
static void run_rcopy(void *c, int rep) {
    rcopy_ctx *x = c;
    const size_t off = (size_t)(rep % x->ncopy) * x->bytes;
    CK(cudaMemcpyAsync(x->dst + off, x->src + off, x->bytes, cudaMemcpyDeviceToDevice, ST));
}
/* the same written bytes, written only (cudaMemset): the ceiling of an op that mostly writes */
static void run_rset(void *c, int rep) {
    rcopy_ctx *x = c;
    const size_t off = (size_t)(rep % x->ncopy) * x->bytes;
    CK(cudaMemsetAsync(x->dst + off, 0x3c, x->bytes, ST));
}

/* ---- kernels ---- */
typedef struct {
    int ncopy;
    int64_t rows, k;
    uint8_t **packed, **sf;
    float **out;
} dq_ctx;
static void run_dequant(void *c, int rep) {
    dq_ctx *x = c;
    const int i = rep % x->ncopy;
    RUN(B->dequant_nvfp4(B, x->packed[i], x->sf[i], 2688.0f, x->rows, x->k, x->out[i], &e));
}

typedef struct {
    int ncopy, stats;
    int64_t rows, k;
    float **x;
    uint8_t **codes, **sf;
} q_ctx;
static nd_qstats qst[SEQ + WARM]; /* results stay valid until the sequence's flush */
static void run_quant(void *c, int rep) {
    q_ctx *q = c;
    const int i = rep % q->ncopy;
    RUN(B->quant_nvfp4(B, q->x[i], 2688.0f / 4.0f, ND_QSEM_KERNEL, q->rows, q->k, q->codes[i], q->sf[i],
                       q->stats ? &qst[rep % (SEQ + WARM)] : NULL, &e));
}

typedef struct {
    int ncopy;
    int64_t n, block;
    float **ref, **prod;
} c_ctx;
static nd_cmp cmpo[SEQ + WARM];
static void run_compare(void *c, int rep) {
    c_ctx *x = c;
    const int i = rep % x->ncopy;
    RUN(B->compare(B, x->ref[i], x->prod[i], x->n, x->block, &cmpo[rep % (SEQ + WARM)], &e));
}

typedef struct {
    int ncopy, mode; /* 0 backend ref, 1 backend prod, 2 plain bf16, 3 plain sgemm */
    int64_t m, n, k;
    float **x, **w, **y;
    void **xb, **wb; /* bf16 copies for the plain BF16 GEMM */
    cublasHandle_t h;
} g_ctx;
static void run_gemm(void *c, int rep) {
    g_ctx *g = c;
    const int i = rep % g->ncopy;
    const float one = 1.0f, zero = 0.0f;
    if (g->mode <= 1) {
        RUN(B->gemm(B, g->x[i], g->w[i], g->y[i], g->m, g->n, g->k, 1.0f, g->mode, &e));
    } else if (g->mode == 2) {
        BL(cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &one, g->wb[i], CUDA_R_16BF,
                        (int)g->k, g->xb[i], CUDA_R_16BF, (int)g->k, &zero, g->y[i], CUDA_R_32F, (int)g->n,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
        BL(cublasSgemm(g->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &one, g->w[i], (int)g->k,
                       g->x[i], (int)g->k, &zero, g->y[i], (int)g->n));
    }
}

static double copy_bw; /* GB/s */
static const char *only_label, *only_shape;
static FILE *json;
static const char *json_commit;
static int json_rows;

/* A memory-bound op: alone and in a sequence, as shares of copy bandwidth; returns the sequence's
 * milliseconds per op. */
static double mem_row(const char *kernel, const char *shape, run_fn fn, void *ctx, double bytes) {
    const double ms = time_ms(fn, ctx), sq = time_seq(fn, ctx);
    const double pct = 100.0 * bytes / ms / 1e6 / copy_bw, spct = 100.0 * bytes / sq / 1e6 / copy_bw;
    printf("%-22s %-15s alone %8.1f us %5.1f%% of copy | in a sequence %8.1f us %8.0f GB/s %5.1f%% of copy\n", kernel,
           shape, ms * 1e3, pct, sq * 1e3, bytes / sq / 1e6, spct);
    fflush(stdout);
    if (json)
        fprintf(json, "%s    {\"op\": \"%s\", \"shape\": \"%s\", \"us\": %.2f, \"pct_of_copy\": %.2f, \"alone_us\": %.2f, "
                "\"alone_pct_of_copy\": %.2f}", json_rows++ ? ",\n" : "", kernel + strspn(kernel, " "), shape, sq * 1e3, spct, ms * 1e3, pct);
    return sq;
}
/* 1 if the row (label, shape) is to be timed */
static int want(const char *label, const char *shape) {
    return (!only_label || strcmp(only_label, label) == 0) && (!only_shape || strcmp(only_shape, shape) == 0);
}

static void row(const char *kernel, const char *shape, double ms, double bytes, double flops, const char *ceil_name,
                double ceil_ms) {
    char perf[48];
    if (flops > 0) snprintf(perf, sizeof perf, "%8.1f TFLOP/s", flops / ms / 1e9);
    else snprintf(perf, sizeof perf, "%8.0f GB/s", bytes / ms / 1e6);
    double ratio = 0;
    if (flops > 0) ratio = ceil_ms / ms;
    else ratio = (bytes / ms / 1e6) / copy_bw;
    printf("%-26s %-22s %10.1f us %s   %5.1f%% of %s\n", kernel, shape, ms * 1e3, perf, 100.0 * ratio, ceil_name);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int quick = 0, kernels_only = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--quick") == 0) quick = 1;
        else if (strcmp(argv[a], "--kernels") == 0) kernels_only = 1;
        else if (strcmp(argv[a], "--only") == 0 && a + 1 < argc) only_label = argv[++a];
        else if (strcmp(argv[a], "--shape") == 0 && a + 1 < argc) only_shape = argv[++a];
        else if (strcmp(argv[a], "--json") == 0 && a + 2 < argc) {
            if (!(json = fopen(argv[++a], "w"))) DIE("cannot write %s", argv[a]);
            json_commit = argv[++a];
        }
        else DIE("unknown argument %s (usage: bench_kernels [--quick] [--kernels] [--only LABEL] [--shape SHAPE] [--json FILE COMMIT])", argv[a]);
    }
    if (quick) REPS = 5;
    nd_err e = {0};
    if (nd_backend_cuda_create(&B, 0, &e)) DIE("%s", e.msg);
    ST = (cudaStream_t)nd_backend_cuda_stream(B);
    struct cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    L2 = (size_t)p.l2CacheSize;
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("bench_kernels: %s, %d SMs, L2 %.0f MB, %s; median of %d after %d warm-ups\n", B->device,
           p.multiProcessorCount, L2 / 1e6, date, REPS, WARM);

    /* ceiling 1: device-to-device copy, 2 GiB, bytes read + written */
    {
        copy_ctx c = {dalloc((size_t)2 << 30), dalloc((size_t)2 << 30), (size_t)2 << 30};
        fill_bytes(c.src, 1 << 20);
        const double ms = time_ms(run_copy, &c);
        copy_bw = 2.0 * (double)c.bytes / ms / 1e6;
        printf("%-26s %-22s %10.1f us %8.0f GB/s   (ceiling for memory-bound kernels)\n", "cudaMemcpy D2D",
               "2 GiB", ms * 1e3, copy_bw);
        CK(cudaFree(c.src));
        CK(cudaFree(c.dst));
    }
    if (json)
        fprintf(json, "{\"device\": \"%s\", \"date\": \"%.10s\", \"commit\": \"%s\", \"copy_gbps\": %.0f,\n"
                "  \"note\": \"us and pct_of_copy: per op in a sequence of %d calls with deferred probe results and one "
                "flush; alone_*: one call between two events\",\n  \"layer\": [],\n  \"kernels\": [\n",
                B->device, date, json_commit, copy_bw, SEQ);

    /* dequant_nvfp4 on weight shapes: reads N*K/2 codes + N*K/16 scales, writes N*K floats */
    static const int64_t wshapes[][2] = {{1536, 7168}, {3072, 7168}, {7168, 3072}, {65536, 1536}};
    for (size_t s = 0; s < 4; s++) {
        dq_ctx c = {0, wshapes[s][0], wshapes[s][1], NULL, NULL, NULL};
        const size_t ne = (size_t)(c.rows * c.k);
        c.ncopy = copies_for(ne * 4 + ne / 2);
        if (ne * 4 * (size_t)c.ncopy > ((size_t)24 << 30)) c.ncopy = 2;
        c.packed = calloc((size_t)c.ncopy, sizeof *c.packed);
        c.sf = calloc((size_t)c.ncopy, sizeof *c.sf);
        c.out = calloc((size_t)c.ncopy, sizeof *c.out);
        for (int i = 0; i < c.ncopy; i++) {
            c.packed[i] = dalloc(ne / 2); fill_bytes(c.packed[i], ne / 2);
            c.sf[i] = dalloc(ne / 16);
            uint8_t *h = malloc(ne / 16);
            for (size_t j = 0; j < ne / 16; j++) h[j] = (uint8_t)(0x28 + rnd() % 0x40); /* finite scales */
            CK(cudaMemcpy(c.sf[i], h, ne / 16, cudaMemcpyHostToDevice));
            free(h);
            c.out[i] = dalloc(ne * 4);
        }
        char shape[32];
        snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)c.rows, (long long)c.k);
        if (want("dequant_nvfp4", shape)) {
            const double dq = mem_row("dequant_nvfp4", shape, run_dequant, &c, (double)ne * (4 + 0.5 + 1.0 / 16));
            /* what a plain copy of the same bytes reaches at this size (the ceiling is 2 GiB) */
            rcopy_ctx rc = {NULL, NULL, (size_t)((double)ne * (4 + 0.5 + 1.0 / 16) / 2) & ~(size_t)255, 0};
            rc.ncopy = copies_for(rc.bytes * 2);
            rc.src = dalloc(rc.bytes * (size_t)rc.ncopy);
            rc.dst = dalloc(rc.bytes * (size_t)rc.ncopy);
            CK(cudaMemset(rc.src, 0x3c, rc.bytes * (size_t)rc.ncopy));
            mem_row("  copy, same bytes", shape, run_rcopy, &rc, (double)rc.bytes * 2);
            CK(cudaFree(rc.src));
            CK(cudaFree(rc.dst));
            /* and a write-only pass over its output (4 bytes an element: 88% of its traffic) */
            rcopy_ctx ws = {NULL, NULL, ne * 4, 0};
            ws.ncopy = copies_for(ws.bytes);
            ws.dst = dalloc(ws.bytes * (size_t)ws.ncopy);
            const double wt = mem_row("  memset, its output", shape, run_rset, &ws, (double)ws.bytes);
            printf("%-22s %-15s dequant_nvfp4 takes %.2fx the time of writing its output alone\n", "  write ceiling", shape,
                   dq / wt);
            CK(cudaFree(ws.dst));
        }
        for (int i = 0; i < c.ncopy; i++) { CK(cudaFree(c.packed[i])); CK(cudaFree(c.sf[i])); CK(cudaFree(c.out[i])); }
        free(c.packed); free(c.sf); free(c.out);
    }

    /* quant_nvfp4 and compare on activations [tokens, hidden] */
    static const int64_t toks[] = {1, 16, 128, 1024, 4096};
    static const int64_t widths[] = {7168, 3072};
    for (size_t wi = 0; wi < 2; wi++)
        for (size_t ti = 0; ti < 5; ti++) {
            const int64_t M = toks[ti], K = widths[wi];
            const size_t ne = (size_t)(M * K);
            const int nc = copies_for(ne * 8);
            float **x = calloc((size_t)nc, sizeof *x), **y = calloc((size_t)nc, sizeof *y);
            uint8_t **codes = calloc((size_t)nc, sizeof *codes), **sf = calloc((size_t)nc, sizeof *sf);
            for (int i = 0; i < nc; i++) {
                x[i] = dalloc(ne * 4); fill_floats(x[i], ne, 1.0f, 0);
                y[i] = dalloc(ne * 4); fill_floats(y[i], ne, 1.0f, 0);
                codes[i] = dalloc(ne / 2);
                sf[i] = dalloc(ne / 16);
            }
            char shape[32];
            snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)M, (long long)K);
            for (int st = 0; st < 2; st++) {
                q_ctx q = {nc, st, M, K, x, codes, sf};
                const char *label = st ? "quant_nvfp4 (+stats)" : "quant_nvfp4";
                if (want(label, shape)) mem_row(label, shape, run_quant, &q, (double)ne * (4 + 0.5 + 1.0 / 16));
            }
            static const int64_t blocks[] = {16, 0};
            for (int bi = 0; bi < 2; bi++) {
                c_ctx c = {nc, (int64_t)ne, blocks[bi] ? blocks[bi] : K, x, y};
                const char *label = bi ? "compare (block=row)" : "compare (block=16)";
                if (want(label, shape)) mem_row(label, shape, run_compare, &c, (double)ne * 8);
            }
            for (int i = 0; i < nc; i++) {
                CK(cudaFree(x[i])); CK(cudaFree(y[i])); CK(cudaFree(codes[i])); CK(cudaFree(sf[i]));
            }
            free(x); free(y); free(codes); free(sf);
        }

    if (json) {
        fprintf(json, "\n  ]\n}\n");
        fclose(json);
        json = NULL;
    }
    if (kernels_only) {
        B->destroy(B);
        return 0;
    }
    /* GEMMs: y[M,N] = x[M,K] w[N,K]^T at the V4 projection shapes */
    cublasHandle_t h;
    BL(cublasCreate(&h));
    BL(cublasSetStream(h, ST));
    static const int64_t gshapes[][3] = {{1536, 7168, 0}, {3072, 7168, 0}, {7168, 3072, 0}, {65536, 1536, 0}};
    static const char *gname[] = {"q_a_proj", "expert up/gate", "expert down", "q_b_proj"};
    static const int64_t gm[] = {1, 32, 512, 4096};
    for (size_t s = 0; s < 4; s++)
        for (size_t mi = 0; mi < 4; mi++) {
            const int64_t N = gshapes[s][0], K = gshapes[s][1], M = gm[mi];
            const size_t wb = (size_t)(N * K) * 6 + (size_t)(M * K) * 6; /* f32 + bf16 copies */
            int nc = copies_for((size_t)(N * K) * 4);
            if (wb * (size_t)nc > ((size_t)40 << 30)) nc = 2;
            g_ctx g = {nc, 0, M, N, K, calloc((size_t)nc, sizeof(float *)), calloc((size_t)nc, sizeof(float *)),
                       calloc((size_t)nc, sizeof(float *)), calloc((size_t)nc, sizeof(void *)),
                       calloc((size_t)nc, sizeof(void *)), h};
            for (int i = 0; i < nc; i++) {
                g.x[i] = dalloc((size_t)(M * K) * 4); fill_floats(g.x[i], (size_t)(M * K), 1.0f, 1);
                g.w[i] = dalloc((size_t)(N * K) * 4); fill_floats(g.w[i], (size_t)(N * K), 1.0f, 1);
                g.y[i] = dalloc((size_t)(M * N) * 4);
                g.xb[i] = dalloc((size_t)(M * K) * 2);
                g.wb[i] = dalloc((size_t)(N * K) * 2);
                /* plain BF16 operands: the backend's own conversion, done once up front */
                RUN(B->gemm(B, g.x[i], g.w[i], g.y[i], M, N, K, 1.0f, 1, &e)); /* warms the handle */
            }
            /* fill bf16 copies by truncation on the host (values are exact in bf16) */
            for (int i = 0; i < nc; i++) {
                const size_t nx = (size_t)(M * K), nw = (size_t)(N * K);
                float *hx = malloc(nx * 4), *hw = malloc(nw * 4);
                uint16_t *bx = malloc(nx * 2), *bw = malloc(nw * 2);
                CK(cudaMemcpy(hx, g.x[i], nx * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(hw, g.w[i], nw * 4, cudaMemcpyDeviceToHost));
                for (size_t j = 0; j < nx; j++) { uint32_t u; memcpy(&u, &hx[j], 4); bx[j] = (uint16_t)(u >> 16); }
                for (size_t j = 0; j < nw; j++) { uint32_t u; memcpy(&u, &hw[j], 4); bw[j] = (uint16_t)(u >> 16); }
                CK(cudaMemcpy(g.xb[i], bx, nx * 2, cudaMemcpyHostToDevice));
                CK(cudaMemcpy(g.wb[i], bw, nw * 2, cudaMemcpyHostToDevice));
                free(hx); free(hw); free(bx); free(bw);
            }
            const double flops = 2.0 * (double)M * (double)N * (double)K;
            double t[6];
            for (int mode = 0; mode < 4; mode++) { g.mode = mode; t[mode] = time_ms(run_gemm, &g); }
            /* the backend's two production variants, forced (t[1] is its own choice by M) */
            g.mode = 1;
            setenv("ND_CUDA_GEMM_EXPLICIT_BF16", "1", 1);
            t[4] = time_ms(run_gemm, &g);
            setenv("ND_CUDA_GEMM_EXPLICIT_BF16", "0", 1);
            t[5] = time_ms(run_gemm, &g);
            unsetenv("ND_CUDA_GEMM_EXPLICIT_BF16");
            char shape[48];
            snprintf(shape, sizeof shape, "%s M=%lld", gname[s], (long long)M);
            row("cuBLAS BF16 (ceiling)", shape, t[2], 0, flops, "itself", t[2]);
            row("gemm prod (bf16_exact)", shape, t[1], 0, flops, "cuBLAS BF16", t[2]);
            row("  prod, explicit bf16 pass", shape, t[4], 0, flops, "cuBLAS BF16", t[2]);
            row("  prod, FAST_16BF", shape, t[5], 0, flops, "cuBLAS BF16", t[2]);
            row("cuBLAS SGEMM (ceiling)", shape, t[3], 0, flops, "itself", t[3]);
            row("gemm ref (FP32 pedantic)", shape, t[0], 0, flops, "cuBLAS SGEMM", t[3]);
            for (int i = 0; i < nc; i++) {
                CK(cudaFree(g.x[i])); CK(cudaFree(g.w[i])); CK(cudaFree(g.y[i]));
                CK(cudaFree(g.xb[i])); CK(cudaFree(g.wb[i]));
            }
            free(g.x); free(g.w); free(g.y); free(g.xb); free(g.wb);
        }
    BL(cublasDestroy(h));
    B->destroy(B);
    return 0;
}

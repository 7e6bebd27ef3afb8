/* cuda_results.cuh — probe results kept on the device (issue 20). compare and quant_nvfp4 write
 * their totals into a slot of one device buffer; the host fields are filled when the buffer comes
 * back in one copy: at once, or, while b->defer_results is set, at b->flush_results (or when the
 * buffer is full). Slots are zero when handed out (the buffer is cleared after every flush), so
 * counters can be summed into them with atomics. */
#ifndef ND_CUDA_RESULTS_CUH
#define ND_CUDA_RESULTS_CUH

#include "cuda_common.cuh"

/* The compare probe's partial and total (same fields as nd_cmp; amax as float bit patterns of
 * |x|, counts as 64-bit). */
struct cmp_part {
    double rr, pp, rp, ee, maxerr, bee, brr;
    long long bidx;
    unsigned long long rnan, pnan, rinf, pinf;
    unsigned ramax, pamax; /* bits of max |x| over finite x */
};

/* quant_nvfp4's counters, in this order in a slot */
enum { QS_SAT, QS_NONZERO, QS_ZERO_SCALE, QS_448, QS_NAN, QS_N };

enum { ND_RES_SLOT_BYTES = 128, ND_RES_SLOTS = 1024 };
enum nd_res_kind { ND_RES_CMP = 1, ND_RES_QSTATS = 2 };

/* A zeroed slot for one result, its host destination recorded. kind: nd_res_kind; for
 * ND_RES_CMP a = n, b_ = 1 if prod was given; for ND_RES_QSTATS a = n_elems, b_ = n_blocks.
 * *ticket: a device counter at 0 for a kernel's last-block election (it must leave it at 0). */
int nd_cuda_result_slot(nd_backend *b, int kind, void *host_dst, int64_t a, int64_t b_, void **slot,
                        unsigned **ticket, nd_err *e);
/* After the kernel that fills the slot: flush now unless b->defer_results is set. */
int nd_cuda_result_queued(nd_backend *b, nd_err *e);
void nd_cuda_results_free(nd_cuda *c);

#endif

/* nd_test.h — minimal test harness: CHECK records a failure with file:line and goes on;
 * ND_TEST_MAIN prints "N passed, N failed" and returns nonzero on any failure. */
#ifndef ND_TEST_H
#define ND_TEST_H
#include <stdio.h>
#include <math.h>

static int nd_t_pass, nd_t_fail;
#define CHECK(cond, ...) do { if (cond) nd_t_pass++; else { nd_t_fail++; \
    fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_EQ_INT(a, b) CHECK((long long)(a) == (long long)(b), "%lld != %lld", (long long)(a), (long long)(b))
#define CHECK_NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %.3g)", (double)(a), (double)(b), (double)(tol))
static inline int nd_test_report(const char *name) {
    printf("%s: %d passed, %d failed\n", name, nd_t_pass, nd_t_fail);
    return nd_t_fail ? 1 : 0;
}
#endif

/* err.h — errors as values.
 *
 * Every fallible function returns an int status (0 = ok) and, on failure, fills an nd_err with
 * the exit class and a one-line message of the form "FILE: what is wrong". Only main() turns an
 * nd_err into text on stderr and an exit code (SPEC §3: 2 = bad input/usage, 3 = internal or
 * device failure).
 */
#ifndef ND_ERR_H
#define ND_ERR_H

#include <stdarg.h>

enum nd_exit {
    ND_EXIT_OK = 0,
    ND_EXIT_FINDING = 1,   /* a divergence, regression or finding */
    ND_EXIT_BADINPUT = 2,  /* bad usage or bad input */
    ND_EXIT_INTERNAL = 3,  /* internal or device failure */
};

typedef struct nd_err {
    int code;        /* an nd_exit value; 0 when no error */
    char msg[8192];  /* two paths of PATH_MAX-ish length and the reason fit whole */
} nd_err;

/* Record an error and return its code, so callers can `return nd_fail(e, ...)`. A NULL e is
 * allowed (the message is dropped). */
int nd_fail(nd_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefix an existing message with context ("while loading X: ...") and return its code. */
int nd_wrap(nd_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Replace every occurrence of `from` in the message by `to`: a writer that stages its output in a
 * temporary folder names the output the user asked for, not the temporary it removes. */
void nd_err_swap(nd_err *e, const char *from, const char *to);

#define ND_TRY(expr) do { int nd_rc_ = (expr); if (nd_rc_) return nd_rc_; } while (0)

#endif

/* progress.h — progress of a long command on stderr (issue 22). On a terminal: a bar redrawn in
 * place and erased at the end. Anywhere else (a log, a CI job): a plain line at most every
 * NVFP4DBG_PROGRESS_INTERVAL seconds (default 5; the first one after that long, so a short run
 * prints none) and a closing line when any was printed. Nothing at all after
 * nd_progress_set_quiet(1) (--quiet).
 *
 * A progress started while another is running is nested: it prints nothing itself and moves the
 * outer one's bar within its current step (a trace's layers inside one bisect trace, the tensors
 * synth writes inside one of its phases). One thread, one outer progress at a time. */
#ifndef ND_PROGRESS_H
#define ND_PROGRESS_H
#include <stdint.h>

typedef struct nd_progress {
    char what[64];           /* "trace", "synth", ... */
    char unit[32];           /* "layers", "steps" ("" none) */
    char detail[128];        /* the current step in words */
    int64_t total, done;     /* total 0: unknown (a count without a bar) */
    int64_t sub_i, sub_n;    /* a nested progress's position within the current step */
    char sub_unit[32];       /* and its unit */
    double t0, last;
    int tty, lines, drawn, active;
    struct nd_progress *parent;
} nd_progress;

void nd_progress_set_quiet(int quiet);
int nd_progress_quiet(void);
void nd_progress_start(nd_progress *p, const char *what, const char *unit, int64_t total);
/* done steps finished; detail (may be NULL) names the one under way */
void nd_progress_update(nd_progress *p, int64_t done, const char *detail);
void nd_progress_end(nd_progress *p);
/* 1 while an outer progress runs (inner loops start a nested one only then) */
int nd_progress_active(void);
/* Erase a bar drawn on the terminal before other text goes to stderr (an error); the next
 * update draws it again. */
void nd_progress_clear(void);
#endif

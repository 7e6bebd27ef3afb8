/* progress.c — see progress.h. */
#include "progress.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int quiet;
static nd_progress *current;

void nd_progress_set_quiet(int q) { quiet = q; }
int nd_progress_active(void) { return current != NULL; }

void nd_progress_clear(void) {
    if (current && current->tty && current->drawn && !quiet) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        current->drawn = 0;
    }
}
int nd_progress_quiet(void) { return quiet; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double interval_s(void) {
    const char *s = getenv("NVFP4DBG_PROGRESS_INTERVAL");
    if (s && *s) {
        char *end;
        double v = strtod(s, &end);
        if (!*end && v >= 0 && v < 1e6) return v;
    }
    return 5.0;
}

/* the share of the work done, counting a nested progress's part of the current step */
static double fraction(const nd_progress *p) {
    if (p->total <= 0) return -1;
    double f = (double)p->done;
    if (p->sub_n > 0 && p->done < p->total) f += (double)p->sub_i / (double)p->sub_n;
    f /= (double)p->total;
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

static void draw(nd_progress *p, int final) {
    if (quiet) return;
    double t = now_s(), f = fraction(p);
    char count[64] = "";
    if (p->total > 0) snprintf(count, sizeof count, "%lld/%lld%s%s", (long long)p->done, (long long)p->total, p->unit[0] ? " " : "", p->unit);
    else snprintf(count, sizeof count, "%lld%s%s", (long long)p->done, p->unit[0] ? " " : "", p->unit);
    char detail[200];
    /* a nested progress's count after the step's words: "writing ... (12/80)" */
    if (p->sub_n > 0 && !final)
        snprintf(detail, sizeof detail, "%s%s%lld/%lld%s%s", p->detail, p->detail[0] ? ", " : "", (long long)p->sub_i, (long long)p->sub_n,
                 p->sub_unit[0] ? " " : "", p->sub_unit);
    else snprintf(detail, sizeof detail, "%s", p->detail);
    if (p->tty) {
        if (final) {
            if (p->drawn) fputs("\r\033[K", stderr);
        } else {
            const int w = 24;
            int fill = f < 0 ? 0 : (int)(f * w + 0.5);
            fprintf(stderr, "\r%s ", p->what);
            if (f >= 0) fprintf(stderr, "[%.*s%*s] ", fill, "########################", w - fill, "");
            fprintf(stderr, "%s%s%s  %.0f s\033[K", count, detail[0] ? "  " : "", detail, t - p->t0);
            p->drawn = 1;
        }
        fflush(stderr);
        return;
    }
    if (final) {
        if (p->lines) fprintf(stderr, "nvfp4dbg: %s: done, %s in %.1f s\n", p->what, count, t - p->t0);
    } else if (t - (p->lines ? p->last : p->t0) >= interval_s()) {
        if (f >= 0) fprintf(stderr, "nvfp4dbg: %s: %s (%.0f%%)%s%s, %.1f s\n", p->what, count, 100 * f, detail[0] ? ", " : "", detail, t - p->t0);
        else fprintf(stderr, "nvfp4dbg: %s: %s%s%s, %.1f s\n", p->what, count, detail[0] ? ", " : "", detail, t - p->t0);
        p->lines++;
        p->last = t;
    } else {
        return;
    }
    fflush(stderr);
}

void nd_progress_start(nd_progress *p, const char *what, const char *unit, int64_t total) {
    memset(p, 0, sizeof *p);
    snprintf(p->what, sizeof p->what, "%s", what ? what : "");
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->t0 = p->last = now_s();
    p->active = 1;
    if (current) { p->parent = current; return; }
    p->tty = isatty(2);
    current = p;
}

void nd_progress_update(nd_progress *p, int64_t done, const char *detail) {
    if (!p->active) return;
    p->done = done;
    if (detail) snprintf(p->detail, sizeof p->detail, "%s", detail);
    if (p->parent) {
        p->parent->sub_i = done;
        p->parent->sub_n = p->total;
        snprintf(p->parent->sub_unit, sizeof p->parent->sub_unit, "%s", p->unit);
        draw(p->parent, 0);
        return;
    }
    p->sub_i = p->sub_n = 0;
    draw(p, 0);
}

void nd_progress_end(nd_progress *p) {
    if (!p->active) return;
    p->active = 0;
    if (p->parent) {
        p->parent->sub_i = p->parent->sub_n = 0;
        return;
    }
    if (p->total > 0) p->done = p->total;
    draw(p, 1);
    current = NULL;
}

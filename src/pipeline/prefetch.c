/* prefetch.c — host-side double buffering of routed experts (prefetch.h). */
#include <stdlib.h>
#include <string.h>
#include "host_copy.h"
#include "prefetch.h"
#include "run.h"
#include "sink.h"

/* The copy thread: reads the mapped bytes into the slot's area and drops their pages. The main
 * thread touches neither the area nor the slot's plan until it joins (slot_wait). */
static void *slot_run(void *arg) {
    nd_prefetch_slot *s = arg;
    for (int i = 0; i < s->n; i++) {
        /* a few threads only: the main thread and the device keep working meanwhile */
        nd_memcpy_parallel(s->area + s->off[i], s->views[i].data, s->views[i].nbytes, 4);
        nd_ckpt_release(s->ck, &s->views[i]);
    }
    return NULL;
}

static void slot_wait(nd_prefetch_slot *s) {
    if (s->running) pthread_join(s->tid, NULL);
    s->running = 0;
}

/* NVFP4DBG_PREFETCH=1 / =0 turns it on / off whatever the backend says (tests run it on the CPU). */
static int wanted(const nd_run *r) {
    const char *env = getenv("NVFP4DBG_PREFETCH");
    if (env && *env) return env[0] == '1';
    return r->be->staging_pays;
}

void nd_prefetch_modules(nd_run *r, const char *const *modules, int n) {
    if (!r->be->host_alloc || nd_sink_calibrating(r) || !wanted(r)) return;
    nd_prefetch_slot *s = &r->prefetch.slot[r->prefetch.next];
    slot_wait(s); /* two prefetches ago: its expert has been uploaded since */
    s->n = 0;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        nd_module m;
        nd_err quiet = {0};
        if (nd_run_module(r, 0, modules[i], &m, &quiet)) continue;
        const nd_tview *v[2] = {m.weight, m.weight_scale};
        for (int k = 0; k < 2 && s->n < ND_PREFETCH_MAX; k++) {
            if (!v[k] || !v[k]->nbytes) continue;
            s->views[s->n] = *v[k];
            s->off[s->n] = total;
            total += (v[k]->nbytes + 255) & ~(size_t)255;
            s->n++;
        }
    }
    if (!s->n) return;
    if (total > s->cap) {
        nd_err quiet = {0};
        if (s->area) r->be->host_free(r->be, s->area);
        s->area = r->be->host_alloc(r->be, total + total / 4, &quiet);
        s->cap = s->area ? total + total / 4 : 0;
        if (!s->area) { s->n = 0; return; }
    }
    s->ck = r->ck;
    s->running = pthread_create(&s->tid, NULL, slot_run, s) == 0;
    if (!s->running) { s->n = 0; return; }
    r->prefetch.next ^= 1;
}

const void *nd_prefetch_take(nd_run *r, const nd_tview *t) {
    for (int k = 0; k < 2; k++) {
        nd_prefetch_slot *s = &r->prefetch.slot[k];
        for (int i = 0; i < s->n; i++)
            if (s->views[i].data == t->data && s->views[i].nbytes == t->nbytes) {
                slot_wait(s);
                return s->area + s->off[i];
            }
    }
    return NULL;
}

void nd_prefetch_close(nd_run *r) {
    for (int k = 0; k < 2; k++) {
        nd_prefetch_slot *s = &r->prefetch.slot[k];
        slot_wait(s);
        if (s->area) r->be->host_free(r->be, s->area);
        s->area = NULL;
        s->cap = 0;
        s->n = 0;
    }
}

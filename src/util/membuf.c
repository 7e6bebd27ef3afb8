/* membuf.c — see membuf.h. */
#include "membuf.h"
#include <stdlib.h>
#include <string.h>

int nd_membuf_append(void *data, unsigned char *buf, size_t size) {
    nd_membuf *m = data;
    if (m->n + size + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->n + size + 1) cap *= 2;
        char *np = realloc(m->p, cap);
        if (!np) return 0;
        m->p = np;
        m->cap = cap;
    }
    memcpy(m->p + m->n, buf, size);
    m->n += size;
    m->p[m->n] = 0;
    return 1;
}

/* term.c — see term.h. */
#include "term.h"
#include <stdio.h>

const char *nd_term_safe(const char *in, char *out, size_t cap) {
    size_t o = 0;
    if (!cap) return out;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p && o + 1 < cap; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            if (o + 5 >= cap) break;
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o] = 0;
    return out;
}

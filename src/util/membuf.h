/* membuf.h — a growing byte buffer that a writer callback appends to (libyaml's emitter output
 * handler has this signature): the bundle's replay recipe and sensitivity's llmcompressor recipe
 * are emitted into one before they are written through util/outfile.h. */
#ifndef ND_MEMBUF_H
#define ND_MEMBUF_H
#include <stddef.h>

typedef struct nd_membuf {
    char *p;        /* NUL-terminated after each append; free() it */
    size_t n, cap;
} nd_membuf;

/* Append size bytes of buf to the nd_membuf at data: 1, or 0 when out of memory (the emitter's
 * convention). */
int nd_membuf_append(void *data, unsigned char *buf, size_t size);
#endif

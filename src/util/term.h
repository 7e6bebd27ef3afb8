/* term.h — text taken from files (tensor, stage and module names, config strings) made safe for a
 * terminal: control characters would otherwise move the cursor, recolour or retitle it. */
#ifndef ND_TERM_H
#define ND_TERM_H
#include <stddef.h>

/* out = in with every byte below 0x20 and 0x7F written as \xNN (always terminated); returns out. */
const char *nd_term_safe(const char *in, char *out, size_t cap);
#endif

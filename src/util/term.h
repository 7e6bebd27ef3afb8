/* term.h — text taken from files (tensor, stage and module names, config strings) made safe for a
 * terminal: control characters would otherwise move the cursor, recolour or retitle it. */
#ifndef ND_TERM_H
#define ND_TERM_H
#include <stddef.h>

/* out = in with every byte below 0x20 and 0x7F written as \xNN (always terminated); returns out. */
const char *nd_term_safe(const char *in, char *out, size_t cap);
/* The length of the valid UTF-8 sequence at p (its lead byte >= 0x80), 0 when it is not one (a stray
 * continuation byte, an overlong or surrogate form, a truncated sequence). */
unsigned nd_utf8_len(const unsigned char *p);
/* Columns of the terminal on fd (ioctl TIOCGWINSZ), else $COLUMNS, else 0: no limit (a pipe or a
 * file gets whole lines). At least 20. */
int nd_term_width(int fd);
/* Print text from column col (the caller already printed that much of the line), wrapped at
 * spaces to width columns, continuation lines indented by indent; ends with a newline. width 0:
 * one line. Words are never cut. */
#include <stdio.h>
void nd_term_wrap(FILE *f, const char *text, int indent, int col, int width);
#endif

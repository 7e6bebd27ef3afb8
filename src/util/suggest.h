/* suggest.h — "did you mean": the known name closest to a misspelt one (issue 22). */
#ifndef ND_SUGGEST_H
#define ND_SUGGEST_H
#include <stddef.h>

/* Optimal string alignment distance (Levenshtein with adjacent transpositions) of a and b, at most
 * 255 bytes of each compared (longer strings: their lengths' difference added). */
int nd_edit_distance(const char *a, const char *b);
/* The candidate closest to word: within max(2, strlen(word) / 3) edits, or one that word is a
 * prefix of (4 bytes at least) or that is a prefix of word; NULL when none is that close. Ties:
 * the first. */
const char *nd_suggest(const char *word, const char *const *cands, size_t n);
#endif

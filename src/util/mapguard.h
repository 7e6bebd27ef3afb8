/* mapguard.h — a mapped input file that shrinks (or whose disk fails) while it is read raises
 * SIGBUS at the read; without a handler the process dies with no word. Mapped files register
 * their range here; the SIGBUS handler (installed once by main) names the file whose range holds
 * the faulting address, removes the run's temporaries and exits 2 (bad input: the file changed
 * under us). The registry is a fixed array the handler reads without locks or allocation. */
#ifndef ND_MAPGUARD_H
#define ND_MAPGUARD_H
#include <stddef.h>

#define ND_MAPGUARD_SLOTS 4096

void nd_mapguard_install(void);
/* Register [base, base + len) as the mapping of path; returns a slot (>= 0) or -1 when full (the
 * file is then read unguarded: a SIGBUS there still exits 2, with a message naming no file). */
int nd_mapguard_add(const void *base, size_t len, const char *path);
void nd_mapguard_drop(int slot);
/* The partial output a run keeps if it stops there (a trace's OUT.incomplete, which holds the rows
 * written before), named by the handler's message; NULL: none (the message says nothing was written).
 * The path is copied. */
void nd_mapguard_partial(const char *path);

#endif

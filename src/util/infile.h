/* infile.h — input files must be regular files (or symlinks to them): opening a FIFO or a
 * character device for reading blocks forever, and a folder is never what was meant. */
#ifndef ND_INFILE_H
#define ND_INFILE_H
#include <stddef.h>
#include "util/err.h"

/* 0 when path is a regular file or does not exist (the caller's open reports that); else exit 2
 * with "PATH: not a regular file (...)". */
int nd_input_regular(const char *path, nd_err *e);

/* The whole of a regular file as a NUL-terminated text (*out malloc'd, *len its bytes). A missing
 * file: 0 with *out NULL when missing_ok, else exit 2 "PATH: cannot open WHAT". Larger than max
 * bytes: exit 2 "PATH: WHAT larger than N MiB". */
int nd_read_text(const char *path, const char *what, size_t max, int missing_ok, char **out, size_t *len, nd_err *e);
#endif

/* infile.h — input files must be regular files (or symlinks to them): opening a FIFO or a
 * character device for reading blocks forever, and a folder is never what was meant. */
#ifndef ND_INFILE_H
#define ND_INFILE_H
#include "util/err.h"

/* 0 when path is a regular file or does not exist (the caller's open reports that); else exit 2
 * with "PATH: not a regular file (...)". */
int nd_input_regular(const char *path, nd_err *e);
#endif

/* infile.h — input files must be regular files (or symlinks to them): opening a FIFO or a
 * character device for reading blocks forever, and a folder is never what was meant. */
#ifndef ND_INFILE_H
#define ND_INFILE_H
#include <stddef.h>
#include "util/err.h"

#include <stdio.h>

/* Open path for reading without ever blocking on a FIFO or a device, and check on the open
 * descriptor that it is a regular file: the descriptor, -1 when it cannot be opened (errno set),
 * -2 when it is not a regular file (*kind says what it is: "a FIFO", "a folder", ...). */
int nd_open_regular(const char *path, const char **kind);
/* The same as a FILE* ("rb"); NULL with *kind set when not a regular file, NULL with *kind NULL
 * and errno set when it cannot be opened. */
FILE *nd_fopen_regular(const char *path, const char **kind);

/* The first cap - 1 bytes of the regular file at path, NUL-terminated (a NUL inside ends the text
 * early); 0 bytes when it cannot be read. Returns the bytes read. For "is this our own file?"
 * checks before replacing an output. */
size_t nd_read_head(const char *path, char *buf, size_t cap);

/* 0 when path is a regular file or does not exist (the caller's open reports that); else exit 2
 * with "PATH: not a regular file (...)". */
int nd_input_regular(const char *path, nd_err *e);

/* The whole of a regular file as a NUL-terminated text (*out malloc'd, *len its bytes). A missing
 * file: 0 with *out NULL when missing_ok, else exit 2 "PATH: cannot open WHAT". Larger than max
 * bytes: exit 2 "PATH: WHAT larger than N MiB". A NUL byte inside: exit 2 naming its offset. */
int nd_read_text(const char *path, const char *what, size_t max, int missing_ok, char **out, size_t *len, nd_err *e);

/* Files of a checkpoint folder are read (and copied by synth --from) only when they lie inside it:
 * a symbolic link must resolve to a regular file inside dir, or, when dir is a Hugging Face cache
 * snapshot (".../snapshots/REV"), inside that repository's blobs/ folder (where the Hub's
 * downloads keep every file). A link out of the folder could carry a private file into a
 * checkpoint someone shares. 0 when path (an entry of dir) is allowed; else exit 2 naming the link
 * and where it leads. Non-links pass (callers check their type). */
int nd_member_link_ok(const char *dir, const char *path, nd_err *e);
/* nd_member_link_ok for every entry of dir (not recursive) but the weight shards (*.safetensors),
 * which may live on another disk: they are parsed as safetensors, so no other file passes for one,
 * and synth --from writes them anew rather than copying. */
int nd_dir_links_ok(const char *dir, nd_err *e);
#endif

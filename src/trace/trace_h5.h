/* trace_h5.h — internal helpers shared by the trace writer and reader (not part of the API):
 * HDF5 error capture into nd_err, string attributes, and the compound type of one nd_row. */
#ifndef ND_TRACE_H5_H
#define ND_TRACE_H5_H

#include <hdf5.h>
#include <stddef.h>
#include "trace/trace.h"

/* Silence HDF5's automatic error printing (we report through nd_err instead). */
void nd_h5_quiet(void);

/* Fill e with "PATH: WHAT (FILE:LINE: <innermost HDF5 message>)" and return code. */
int nd_h5_fail(nd_err *e, int code, const char *path, const char *src, int line, const char *what);
#define ND_H5_FAIL(e, code, path, what) nd_h5_fail((e), (code), (path), __FILE__, __LINE__, (what))

/* Close any kind of HDF5 identifier (ignores invalid or negative ids). */
void nd_h5_close(hid_t id);

/* 1 when dataset d, read as nelem elements of esize bytes each (its file type size), is backed by
 * what the file stores. HDF5 reads unwritten chunks as fill values, so a tiny file can declare a
 * dataset of any extent: readers check this before allocating. Unfiltered data must be on disk
 * but for one chunk (a killed writer may leave the last one unallocated); filtered data may
 * expand 1032:1 at most (deflate's limit). */
int nd_h5_backed(hid_t d, unsigned long long nelem, size_t esize);

/* Write a scalar fixed-length string attribute sized to hold `cap` bytes (cap 0: strlen + 1). */
int nd_h5_put_str_attr(hid_t obj, const char *name, const char *value, size_t cap, const char *path,
                       nd_err *e);
/* Overwrite an existing string attribute (created by nd_h5_put_str_attr). */
/* Every link in group g and below it is a hard link: an external or soft link (to another file, a FIFO, a path
 * outside the trace) is refused, exit 2 naming the link (issue 21). */
int nd_h5_hard_links_only(hid_t g, const char *where, const char *path, nd_err *e);
/* Every field of compound file type ft lies inside its record: libhdf5 1.10 converts a record with a
 * field offset past its end by reading far outside the buffer (docs/fuzzing.md F12). Exit 2 naming
 * the table (`what`). */
int nd_h5_compound_fits(hid_t ft, const char *what, const char *path, nd_err *e);
/* Dataset `name` of loc does not keep its data in external files (an External Data Files message,
 * which H5Dread follows: another file is read, a FIFO blocks; docs/fuzzing.md F10). Checked from
 * the object header's message summary before the dataset is opened. Exit 2 naming the dataset. */
int nd_h5_no_external_data(hid_t loc, const char *name, const char *path, nd_err *e);
/* Open an HDF5 file read-only: as an SWMR reader first (it opens a trace whose writer was killed:
 * its superblock still says "open for SWMR writing"), then plainly (files written without SWMR).
 * SWMR readers retry a metadata read whose checksum fails (100 times by default, with growing
 * sleeps) in case a live writer was mid-update; on a truncated or corrupt file that turns into a
 * hang, so only a few times. A negative id when neither opens it (HDF5's error stack holds why). */
hid_t nd_h5_open_read(const char *path);
/* A scalar float64 attribute: create (put) or overwrite in place (set). */
int nd_h5_put_f64_attr(hid_t obj, const char *name, double value, const char *path, nd_err *e);
int nd_h5_set_f64_attr(hid_t obj, const char *name, double value, const char *path, nd_err *e);
/* Read one; returns 1 when absent. */
int nd_h5_get_f64_attr(hid_t obj, const char *name, double *out, const char *path, nd_err *e);
int nd_h5_set_str_attr(hid_t obj, const char *name, const char *value, const char *path, nd_err *e);
/* Read a scalar string attribute (fixed- or variable-length) into dst[cap], always terminated.
 * Returns 0, or 1 when the attribute does not exist, or an nd_exit code on a read error. */
int nd_h5_get_str_attr(hid_t obj, const char *name, char *dst, size_t cap, const char *path,
                       nd_err *e);

/* The fields of /stages, in order, with their kind; the table both writer and reader use. */
enum nd_field_kind { ND_F_I32, ND_F_I64, ND_F_U8, ND_F_F64, ND_F_STR };
typedef struct nd_field {
    const char *name;
    size_t offset, size;  /* in nd_row */
    enum nd_field_kind kind;
    int spec;             /* 1: required by SPEC §6; 0: an addition (absent in a file = default) */
} nd_field;
extern const nd_field nd_fields[];
extern const int nd_nfields;

/* Memory compound type of nd_row with the fields `use[i]` != 0 (use NULL for all). */
hid_t nd_h5_row_type(const unsigned char *use);

#endif

/* infile.c — see infile.h. */
#include "infile.h"
#include <sys/stat.h>

int nd_input_regular(const char *path, nd_err *e) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return 0;
    const char *what = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file";
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s); refusing to read it", path, what);
}

/* table.c — see table.h. */
#include "table.h"
#include <string.h>

const void *nd_table_find(const void *table, size_t n, size_t size, size_t name_off, const char *name) {
    const char *row = table;
    for (size_t i = 0; i < n; i++, row += size) {
        const char *nm = *(const char *const *)(row + name_off);
        if (nm && !strcmp(nm, name)) return row;
    }
    return NULL;
}

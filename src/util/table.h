/* table.h — static tables of structs: their length and lookup by a name field. */
#ifndef ND_TABLE_H
#define ND_TABLE_H
#include <stddef.h>

#define ND_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The first of the n entries of `size` bytes at table whose `const char *` at name_off equals
 * name (entries whose name is NULL are skipped); NULL when none does. */
const void *nd_table_find(const void *table, size_t n, size_t size, size_t name_off, const char *name);
#endif

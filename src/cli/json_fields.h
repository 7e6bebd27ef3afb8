/* json_fields.h — a struct's fields into a JSON object from a table of {key, offset, kind}:
 * the --json output of trace and compare lists what it writes once, as data. */
#ifndef ND_CLI_JSON_FIELDS_H
#define ND_CLI_JSON_FIELDS_H
#include <jansson.h>
#include <stddef.h>

typedef enum {
    ND_J_STR,    /* char array in the struct */
    ND_J_I32,    /* int32_t / int */
    ND_J_I64,    /* int64_t */
    ND_J_BOOL8,  /* uint8_t, as true or false */
    ND_J_REAL,   /* double, written as is */
    ND_J_FINITE, /* double; JSON has no NaN: a non-finite value is null */
    ND_J_SPELLED,/* double; a non-finite value as the string "nan", "inf" or "-inf" */
} nd_jkind;

typedef struct nd_jfield {
    const char *key;
    size_t off;
    nd_jkind kind;
} nd_jfield;

/* A field written under its own name, and one written under another key. */
#define ND_JF(type, member, kind) {#member, offsetof(type, member), kind}
#define ND_JF_KEY(type, key, member, kind) {key, offsetof(type, member), kind}
#define ND_JF_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Sets o[f[i].key] from the field at base + f[i].off, in the table's order. */
void nd_json_put_fields(json_t *o, const void *base, const nd_jfield *f, size_t n);
/* A number, or null when it is not finite. */
json_t *nd_json_finite(double v);

#endif

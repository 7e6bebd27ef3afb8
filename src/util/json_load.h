/* json_load.h — JSON files as the ecosystem writes them. transformers writes integers past 2^63
 * into tokenizer and model configs (model_max_length = 1000000000000000019884624838656, its
 * VERY_LARGE_INTEGER), which jansson refuses as "too big integer". These loaders read such a
 * document again with every number as a real and turn the integral values that fit an int64 back
 * into integers, so callers see what they always saw and a huge integer reads as a (large) real.
 * Flags and errors are jansson's. */
#ifndef ND_JSON_LOAD_H
#define ND_JSON_LOAD_H
#include <jansson.h>

/* the largest JSON file nd_json_load_file parses (config.json, indexes, tokenizer configs) */
#define ND_JSON_FILE_MAX (64 << 20)
json_t *nd_json_load_file(const char *path, size_t flags, json_error_t *err);
json_t *nd_json_loadb(const char *buf, size_t len, size_t flags, json_error_t *err);
#endif

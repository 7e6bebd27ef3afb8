/* synth_json.h — small helpers for building config.json objects in key order. */
#ifndef ND_SYNTH_JSON_H
#define ND_SYNTH_JSON_H
#include <jansson.h>
static inline void sy_ji(json_t *o, const char *k, long long v) { json_object_set_new(o, k, json_integer(v)); }
static inline void sy_jf(json_t *o, const char *k, double v) { json_object_set_new(o, k, json_real(v)); }
static inline void sy_js(json_t *o, const char *k, const char *v) { json_object_set_new(o, k, json_string(v)); }
static inline void sy_jb(json_t *o, const char *k, int v) { json_object_set_new(o, k, json_boolean(v)); }
static inline json_t *sy_jstrs(const char *const *v) {
    json_t *a = json_array();
    for (; v && *v; v++) json_array_append_new(a, json_string(*v));
    return a;
}
/* config.json's first keys, in the order transformers writes them: architectures [arch],
 * model_type, vocab_size, hidden_size. */
static inline void sy_config_head(json_t *c, const char *arch, const char *model_type, long long vocab, long long hidden) {
    json_t *a = json_array();
    json_array_append_new(a, json_string(arch));
    json_object_set_new(c, "architectures", a);
    sy_js(c, "model_type", model_type);
    sy_ji(c, "vocab_size", vocab);
    sy_ji(c, "hidden_size", hidden);
}
#endif

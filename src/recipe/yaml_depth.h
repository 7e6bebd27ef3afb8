/* yaml_depth.h — a nesting bound for the YAML loaders (recipe, stack profile, tolerances).
 *
 * libyaml 0.2.5 has no nesting limit, and inside flow collections its scanner walks the whole
 * stack of open levels for every token, so a 200 KB file of "[[[[..." keeps yaml_parser_load busy
 * for minutes. nd_yaml_depth_ok() runs the event parser first and stops at the first collection
 * nested deeper than `max`; syntax errors are left to the real load that follows, which reports
 * them with its own message. It also notes the first explicit tag (`!!str 1.0`): a tag changes what
 * a value is in a way the document API no longer shows (the node keeps the default tag), so the
 * readers refuse tagged values instead of reading "!!str 1.0" as the number 1. The file is rewound
 * either way. */
#ifndef ND_YAML_DEPTH_H
#define ND_YAML_DEPTH_H

#include <stdio.h>
#include <yaml.h>

#define ND_YAML_MAX_DEPTH 64

/* 1 when no collection is nested deeper than max; 0 and *line (1-based) otherwise. *tag_line: the
 * line of the first explicitly tagged node, 0 when none. */
static inline int nd_yaml_depth_ok(FILE *f, int max, int *line, int *tag_line) {
    yaml_parser_t p;
    yaml_event_t ev;
    int depth = 0, ok = 1;
    if (!yaml_parser_initialize(&p)) return 1; /* the real load reports the failure */
    yaml_parser_set_input_file(&p, f);
    *tag_line = 0;
    while (yaml_parser_parse(&p, &ev)) {
        int done = ev.type == YAML_STREAM_END_EVENT;
        const yaml_char_t *tag = ev.type == YAML_SCALAR_EVENT ? ev.data.scalar.tag
                                 : ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag
                                 : ev.type == YAML_MAPPING_START_EVENT ? ev.data.mapping_start.tag : NULL;
        if (tag && !*tag_line) *tag_line = (int)ev.start_mark.line + 1;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            if (++depth > max) { ok = 0; *line = (int)ev.start_mark.line + 1; done = 1; }
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&ev);
        if (done) break;
    }
    yaml_parser_delete(&p);
    rewind(f);
    return ok;
}

#endif

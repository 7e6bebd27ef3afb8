/* conf_main.h — the main of the per-module conformance tests (include after ../nd_test.h): on every
 * backend present (CPU always, CUDA when visible), fn over the modules recorded in REC
 * (conf_each_module), checked: every model's recording and checkpoint open, want modules visited.
 * begin(b) runs before a backend's modules and end(b) after them, when given. */
#ifndef ND_CONF_MAIN_H
#define ND_CONF_MAIN_H

#include "../nd_test.h"
#include "conf_backend.h"

static inline int conf_main(const char *name, const char *rec, const char *suffix, conf_module_fn fn, int want,
                            void (*begin)(nd_backend *), void (*end)(nd_backend *)) {
    nd_backend *be[2];
    const int nbe = conf_backends(be);
    CHECK(nbe >= 1, "no CPU backend");
    for (int bi = 0; bi < nbe; bi++) {
        if (begin) begin(be[bi]);
        int missing;
        const int modules = conf_each_module(be[bi], rec, suffix, fn, &missing);
        CHECK_EQ_INT(missing, 0);
        CHECK_EQ_INT(modules, want);
        if (end) end(be[bi]);
    }
    conf_backends_free(be, nbe);
    return nd_test_report(name);
}

#endif

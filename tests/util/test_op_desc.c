/* test_op_desc.c — the op descriptor table and the ops the pipeline runs are the same set: every
 * op nd_op_lookup knows has a descriptor and every descriptor names a runnable op; every
 * descriptor's attributes are unique, documented, and required ones have no default. */
#include <string.h>
#include "nd_test.h"
#include "pipeline/op_desc.h"
#include "pipeline/run.h"

int main(void) {
    int n;
    const nd_op_desc *d = nd_op_descs(&n);
    CHECK(n == nd_op_count(), "%d descriptors, %d ops", n, nd_op_count());
    for (int i = 0; i < nd_op_count(); i++)
        CHECK(nd_op_desc_find(nd_op_name(i)) != NULL, "op %s has no descriptor", nd_op_name(i));
    for (int i = 0; i < n; i++) {
        CHECK(nd_op_lookup(d[i].name) != NULL, "descriptor %s names no op", d[i].name);
        CHECK(d[i].doc && d[i].doc[0], "op %s undocumented", d[i].name);
        for (int a = 0; a < ND_OP_MAX_ATTRS && d[i].attrs[a].name; a++) {
            const nd_attr_desc *x = &d[i].attrs[a];
            CHECK(x->doc && x->doc[0], "%s.%s undocumented", d[i].name, x->name);
            CHECK(!x->required || !x->dflt[0], "%s.%s is required and has a default", d[i].name, x->name);
            for (int b = a + 1; b < ND_OP_MAX_ATTRS && d[i].attrs[b].name; b++)
                CHECK(strcmp(x->name, d[i].attrs[b].name), "%s.%s declared twice", d[i].name, x->name);
        }
    }
    return nd_test_report("op_desc");
}

/* mk_bundle_lie.c — a bundle whose stage names a module its tensors lack: IN's /text/stage_yaml with
 * every "q_a_proj" written "q_zz_pro" (same length; the bad-input corpus: replay's message must name the
 * bundle, not the temporary folder it unpacks into).
 * With "esc" as a third argument, instead: the rows' name, mode and verdict end in terminal escapes
 * (an OSC title and a colour), as a tampered bundle carries them (replay must escape them).
 * With "norows": the first input holds 0 rows (a stage replayed on nothing). With "opyaml": the
 * stage_yaml's op is "identity" while the bundle's op and rows say otherwise. With "inflate": the first
 * input replaced by a gzip dataset of zeros declaring 1 GiB in a few MB (a decompression bomb). With
 * "routing-rows", IN is a trace: a copy whose first /routing/<stage>/ref declares 2^20 rows of zeros. With
 * "badroute": every expert id of the first input carrying a routing decision is -2000000000. With
 * "fewtok": /tokens cut to its first id while the inputs keep their rows (positions past the run's).
 *   usage: mk_bundle_lie IN.h5 OUT.h5 [esc|norows|opyaml|inflate|routing-rows|badroute|fewtok] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>
#include "trace/bundle_file.h"

/* a copy of the trace IN whose first /routing/<stage>/ref is a [2^20, k] gzip dataset of zeros */
static int routing_rows(const char *in, const char *out) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", in, out);
    if (system(cmd)) { fprintf(stderr, "mk_bundle_lie: cannot copy %s\n", in); return 1; }
    hid_t f = H5Fopen(out, H5F_ACC_RDWR, H5P_DEFAULT);
    char stage[256] = "", name[400];
    if (f < 0 || H5Lget_name_by_idx(f, "routing", H5_INDEX_NAME, H5_ITER_INC, 0, stage, sizeof stage, H5P_DEFAULT) <= 0) {
        fprintf(stderr, "mk_bundle_lie: %s has no /routing\n", in);
        if (f >= 0) H5Fclose(f);
        return 1;
    }
    snprintf(name, sizeof name, "routing/%s/ref", stage);
    hsize_t dims[2] = {1u << 20, 4}, chunk[2] = {1u << 16, 4};
    hid_t sp = H5Screate_simple(2, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE), d = -1;
    int32_t *zero = calloc(dims[0] * dims[1], sizeof(int32_t));
    if (zero && H5Ldelete(f, name, H5P_DEFAULT) >= 0 && H5Pset_chunk(pl, 2, chunk) >= 0 && H5Pset_deflate(pl, 9) >= 0)
        d = H5Dcreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    int rc = d < 0 || H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, zero) < 0;
    free(zero);
    if (d >= 0) H5Dclose(d);
    H5Pclose(pl);
    H5Sclose(sp);
    H5Fclose(f);
    if (rc) fprintf(stderr, "mk_bundle_lie: cannot write %s\n", name);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3 && !(argc == 4 && (!strcmp(argv[3], "esc") || !strcmp(argv[3], "norows") || !strcmp(argv[3], "opyaml") ||
                                     !strcmp(argv[3], "inflate") || !strcmp(argv[3], "routing-rows") ||
                                     !strcmp(argv[3], "badroute") || !strcmp(argv[3], "fewtok")))) {
        fprintf(stderr, "usage: mk_bundle_lie IN.h5 OUT.h5 [esc|norows|opyaml|inflate|routing-rows|badroute|fewtok]\n");
        return 2;
    }
    if (argc == 4 && !strcmp(argv[3], "routing-rows")) return routing_rows(argv[1], argv[2]);
    nd_err e = {0};
    nd_bundle *b = NULL;
    if (nd_bundle_read(argv[1], &b, &e)) { fprintf(stderr, "mk_bundle_lie: %s\n", e.msg); return 1; }
    int n = 0;
    if (argc == 4 && !strcmp(argv[3], "badroute")) {
        for (int i = 0; i < b->n_in && !n; i++)
            if (b->in[i].idx) {
                for (int64_t j = 0; j < b->in[i].rows * b->in[i].k; j++) b->in[i].idx[j] = -2000000000;
                n = 1;
            }
        int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
        if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", n ? e.msg : "no routing decision in the bundle");
        nd_bundle_free(b);
        return rc ? 1 : 0;
    }
    if (argc == 4 && !strcmp(argv[3], "inflate")) {
        int rc = b->n_in > 0 ? nd_bundle_write(argv[2], b, &e) : 1;
        char name[300];
        snprintf(name, sizeof name, "inputs/%s", b->n_in > 0 ? b->in[0].name : "");
        const int64_t rows = b->n_in > 0 ? b->in[0].rows : 0;
        nd_bundle_free(b);
        if (rc) { fprintf(stderr, "mk_bundle_lie: %s\n", rows ? e.msg : "no input"); return 1; }
        /* [rows, 2^28 / rows] float32 zeros, chunks of 1 MiB compressed: 1 GiB declared */
        hsize_t dims[2] = {(hsize_t)rows, (hsize_t)((1u << 28) / rows)}, chunk[2] = {1, 1u << 18};
        hid_t f = H5Fopen(argv[2], H5F_ACC_RDWR, H5P_DEFAULT), sp = H5Screate_simple(2, dims, NULL), pl = H5Pcreate(H5P_DATASET_CREATE);
        float *zero = calloc(chunk[1], sizeof(float));
        hid_t d = -1;
        if (f >= 0 && zero && H5Ldelete(f, name, H5P_DEFAULT) >= 0 && H5Pset_chunk(pl, 2, chunk) >= 0 && H5Pset_deflate(pl, 9) >= 0)
            d = H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
        rc = d < 0;
        for (hsize_t r = 0; r < dims[0] && !rc; r++)
            for (hsize_t c = 0; c < dims[1] && !rc; c += chunk[1]) {
                hsize_t off[2] = {r, c}, cnt[2] = {1, chunk[1]};
                hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, cnt, NULL);
                rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, off, NULL, cnt, NULL) < 0 ||
                     H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, zero) < 0;
                H5Sclose(ms);
                H5Sclose(fs);
            }
        free(zero);
        if (d >= 0) H5Dclose(d);
        H5Pclose(pl);
        H5Sclose(sp);
        if (f >= 0) H5Fclose(f);
        if (rc) fprintf(stderr, "mk_bundle_lie: cannot write the inflated input\n");
        return rc ? 1 : 0;
    }
    if (argc == 4 && strcmp(argv[3], "esc")) {
        if (!strcmp(argv[3], "norows")) {
            n = b->n_in > 0;
            if (n) b->in[0].rows = 0;
        } else if (!strcmp(argv[3], "fewtok")) {
            n = b->ntok > 1;
            if (n) b->ntok = 1;
        } else {
            /* the op's value as repro writes it (a quoted flow mapping) or plain */
            char want[48], *p;
            static const char *const forms[][2] = {{"\"op\": \"%s\"", "\"op\": \"identity\""}, {"op: \"%s\"", "op: \"identity\""},
                                                   {"op: %s", "op: identity"}};
            const char *rep = NULL;
            p = NULL;
            for (size_t k = 0; k < sizeof forms / sizeof forms[0] && !p; k++) {
                snprintf(want, sizeof want, forms[k][0], b->op);
                if ((p = strstr(b->stage_yaml, want))) rep = forms[k][1];
            }
            if (p) {
                const size_t head = (size_t)(p - b->stage_yaml), tail = strlen(p + strlen(want)), rl = strlen(rep);
                char *y = malloc(head + rl + tail + 1);
                if (y) {
                    memcpy(y, b->stage_yaml, head);
                    memcpy(y + head, rep, rl);
                    memcpy(y + head + rl, p + strlen(want), tail + 1);
                    free(b->stage_yaml);
                    b->stage_yaml = y;
                    n = 1;
                }
            }
        }
        int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
        if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", n ? e.msg : "nothing to change");
        nd_bundle_free(b);
        return rc ? 1 : 0;
    }
    if (argc == 4) {
        static const char esc[] = "\033]0;T\007\033[31m";
        for (int i = 0; i < b->n_rows; i++, n++) {
            nd_row *r = &b->rows[i];
            size_t len = strlen(r->name);
            if (len + sizeof esc > sizeof r->name) len = sizeof r->name - sizeof esc;
            memcpy(r->name + len, esc, sizeof esc);
            snprintf(r->mode, sizeof r->mode, "iso%s", esc);
            snprintf(r->verdict, sizeof r->verdict, "ok%s", esc);
        }
        int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
        if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", n ? e.msg : "no rows in the bundle");
        nd_bundle_free(b);
        return rc ? 1 : 0;
    }
    for (char *p = b->stage_yaml; (p = strstr(p, "q_a_proj")); p += 8) { memcpy(p, "q_zz_pro", 8); n++; }
    int rc = n ? nd_bundle_write(argv[2], b, &e) : 1;
    if (!n) fprintf(stderr, "mk_bundle_lie: no q_a_proj in the stage\n");
    else if (rc) fprintf(stderr, "mk_bundle_lie: %s\n", e.msg);
    nd_bundle_free(b);
    return rc ? 1 : 0;
}

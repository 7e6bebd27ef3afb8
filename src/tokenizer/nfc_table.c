/* nfc_table.c — the NFC quick check's Unicode tables (nfc_table.h), built from the rows that
 * tools/conformance/make_nfc_table.py generates into nfc_table.inc. */
#include "nfc_table.h"

#define ND_NFC_SUSPECT(first, last) {first, last, 1},
const nd_urange nd_nfc_suspect[] = {
#include "nfc_table.inc"
};
#undef ND_NFC_SUSPECT
const int nd_nfc_suspect_n = (int)(sizeof nd_nfc_suspect / sizeof nd_nfc_suspect[0]);

#define ND_NFC_CCC(first, last, ccc) {first, last, ccc},
const nd_urange nd_nfc_ccc[] = {
#include "nfc_table.inc"
};
#undef ND_NFC_CCC
const int nd_nfc_ccc_n = (int)(sizeof nd_nfc_ccc / sizeof nd_nfc_ccc[0]);

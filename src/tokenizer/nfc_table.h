/* nfc_table.h — Unicode data for the NFC quick check (nfc_table.c, from the generated nfc_table.inc). */
#ifndef ND_NFC_TABLE_H
#define ND_NFC_TABLE_H
#include <stdint.h>
typedef struct nd_urange { uint32_t lo, hi; int32_t val; } nd_urange;
extern const nd_urange nd_nfc_suspect[];   /* NFC_Quick_Check No or Maybe */
extern const int nd_nfc_suspect_n;
extern const nd_urange nd_nfc_ccc[];       /* canonical combining class, runs of one value */
extern const int nd_nfc_ccc_n;
#endif

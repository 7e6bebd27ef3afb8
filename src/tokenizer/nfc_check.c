/* nfc_check.c — Unicode's NFC quick check (UAX #15): text passes when no code point is NFC_QC No
 * or Maybe and the combining marks stand in canonical order; such text is unchanged by NFC. Text
 * that does not pass might change, and nvfp4dbg does not implement the normalization itself, so
 * the caller refuses it (an NFC normalizer would give other ids). ASCII always passes. */
#include "tok_internal.h"
#include "nfc_table.h"

static int32_t lookup(const nd_urange *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return r[mid].val;
    }
    return 0;
}

int tok_nfc_suspect(const char *str, size_t len, size_t *at) {
    const unsigned char *s = (const unsigned char *)str;
    int32_t last = 0;
    for (size_t i = 0; i < len; ) {
        size_t n = tok_u8len(s[i]);
        uint32_t cp = n == 1 ? s[i] : n == 2 ? s[i] & 0x1Fu : n == 3 ? s[i] & 0x0Fu : s[i] & 0x07u;
        for (size_t k = 1; k < n && i + k < len; k++) cp = cp << 6 | (s[i + k] & 0x3Fu);
        if (cp >= 0x80) {
            int32_t ccc = lookup(nd_nfc_ccc, nd_nfc_ccc_n, cp);
            if (lookup(nd_nfc_suspect, nd_nfc_suspect_n, cp) || (ccc && last > ccc)) { *at = i; return 1; }
            last = ccc;
        } else last = 0;
        i += n;
    }
    return 0;
}

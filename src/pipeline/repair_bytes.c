/* repair_bytes.c — see repair_bytes.h. */
#include "repair_bytes.h"
#include <stdlib.h>
#include <string.h>

void nd_swap_nibbles(const uint8_t *src, uint8_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = (uint8_t)((src[i] >> 4) | (src[i] << 4));
}

static int e4m3_nan(uint8_t b) { return (b & 0x7f) == 0x7f; }

int64_t nd_fix_nan_block_scales(uint8_t *sf, int64_t rows, int64_t cols) {
    int64_t fixed = 0;
    uint8_t *orig = malloc(cols > 0 ? (size_t)cols : 1);
    if (!orig) return -1;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = sf + r * cols;
        memcpy(orig, row, (size_t)cols); /* neighbours are looked up among the stored values */
        for (int64_t j = 0; j < cols; j++) {
            if (!e4m3_nan(orig[j])) continue;
            uint8_t v = 0;
            for (int64_t d = 1; d < cols; d++) { /* nearest finite neighbour, left first */
                if (j - d >= 0 && !e4m3_nan(orig[j - d])) { v = orig[j - d]; break; }
                if (j + d < cols && !e4m3_nan(orig[j + d])) { v = orig[j + d]; break; }
            }
            row[j] = v;
            fixed++;
        }
    }
    free(orig);
    return fixed;
}

/* repair_bytes.h — byte-level repairs of a module's stored weight (the diagnosis's candidate
 * transforms that re-read the checkpoint another way). Each is its own inverse or has one. */
#ifndef ND_REPAIR_BYTES_H
#define ND_REPAIR_BYTES_H
#include <stddef.h>
#include <stdint.h>

/* dst[i] = src[i] with its two 4-bit codes swapped; applying it twice gives src back. */
void nd_swap_nibbles(const uint8_t *src, uint8_t *dst, size_t n);
/* Replace every NaN e4m3 block scale (0x7F/0xFF) of an [rows, cols] scale matrix by its nearest
 * finite stored neighbour in the row (left first at equal distance), or by 0 when the row has none.
 * Returns how many were replaced (-1: out of memory). */
int64_t nd_fix_nan_block_scales(uint8_t *sf, int64_t rows, int64_t cols);

#endif

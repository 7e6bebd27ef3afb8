/* suggest.c — see suggest.h. */
#include "suggest.h"
#include <string.h>

#define MAXL 255

int nd_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), extra = 0;
    if (la > MAXL) { extra += la - MAXL; la = MAXL; }
    if (lb > MAXL) { extra += lb - MAXL; lb = MAXL; }
    static int d[MAXL + 1][MAXL + 1]; /* one caller at a time: the command line is read before any thread starts */
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v) v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb] + (int)extra;
}

const char *nd_suggest(const char *word, const char *const *cands, size_t n) {
    if (!word || !*word) return NULL;
    size_t lw = strlen(word);
    int limit = (int)(lw / 3) > 2 ? (int)(lw / 3) : 2, best = limit + 1;
    const char *pick = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i] || !*cands[i]) continue;
        int dist = nd_edit_distance(word, cands[i]);
        if (dist < best) { best = dist; pick = cands[i]; }
    }
    if (pick) return pick;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i]) continue;
        size_t lc = strlen(cands[i]);
        if ((lw >= 4 && lw < lc && !strncmp(word, cands[i], lw)) || (lc >= 4 && lc < lw && !strncmp(word, cands[i], lc))) return cands[i];
    }
    return NULL;
}

/* next_command.c — see next_command.h. */
#include "next_command.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/shquote.h"

/* append " opt word" (word quoted; opt alone when word is NULL) */
static void add(char *out, size_t cap, const char *opt, const char *word) {
    const size_t n = strnlen(out, cap);
    snprintf(out + n, cap - n, " %s%s", opt, word ? " " : "");
    if (word) nd_shquote_cat(out, cap, word);
}

/* everything but the tokens' option and the overrides */
static void head(const nd_trace_opts *o, char *out, size_t cap) {
    snprintf(out, cap, "nvfp4dbg trace ");
    nd_shquote_cat(out, cap, o->ckpt_dir);
    if (o->recipe) add(out, cap, "--recipe", o->recipe);
    if (o->stack && strcmp(o->stack, "exact")) add(out, cap, "--stack", o->stack);
    if (o->ref_ckpt) add(out, cap, "--reference-checkpoint", o->ref_ckpt);
    if (o->layer_hi >= 0) {
        char l[48];
        if (o->layer_lo == o->layer_hi) snprintf(l, sizeof l, "%d", o->layer_lo);
        else snprintf(l, sizeof l, "%d-%d", o->layer_lo, o->layer_hi);
        add(out, cap, "--layers", l);
    }
    if (o->modes == ND_MODES_ISOLATED) add(out, cap, "--mode", "isolated");
    else if (o->modes == ND_MODES_CHAINED) add(out, cap, "--mode", "chained");
    if (o->ref_numerics && strcmp(o->ref_numerics, "fp32")) add(out, cap, "--ref-numerics", o->ref_numerics);
    if (o->ep > 1) {
        char n[16];
        snprintf(n, sizeof n, "%d", o->ep);
        add(out, cap, "--ep", n);
    }
}

/* The trace the rerun writes: beside this run's, never over it (an existing trace is refused
 * without --force, and this one is the "before" of `report --against`): X.h5 -> X-repaired.h5,
 * X-repaired.h5 -> X-repaired-2.h5, X-repaired-N.h5 -> X-repaired-(N+1).h5. */
static void repaired_path(const char *path, char *out, size_t cap) {
    size_t l = strlen(path);
    if (l > 3 && !strcmp(path + l - 3, ".h5")) l -= 3;
    size_t k = l;
    while (k > 0 && path[k - 1] >= '0' && path[k - 1] <= '9') k--;
    static const char tag[] = "-repaired";
    const size_t tl = sizeof tag - 1;
    if (k < l && k > tl && path[k - 1] == '-' && !strncmp(path + k - 1 - tl, tag, tl) && l - k < 9)
        snprintf(out, cap, "%.*s%ld.h5", (int)k, path, strtol(path + k, NULL, 10) + 1);
    else if (l >= tl && !strncmp(path + l - tl, tag, tl))
        snprintf(out, cap, "%.*s-2.h5", (int)l, path);
    else
        snprintf(out, cap, "%.*s%s.h5", (int)l, path, tag);
    /* a file name past NAME_MAX cannot be created: the stem is cut so that its suffix fits */
    const char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out;
    if (strlen(base) > 255) {
        const char *suf = strstr(base, tag);
        char keep[64];
        snprintf(keep, sizeof keep, "%s", suf ? suf : ".h5");
        snprintf((char *)base + 255 - strlen(keep), cap - (size_t)(base - out) - (255 - strlen(keep)), "%s", keep);
    }
}

void nd_next_command(const nd_trace_opts *o, const char *const *extra, int n, char *out, size_t cap) {
    char buf[16384];
    head(o, buf, sizeof buf);
    const size_t head_len = strlen(buf);
    if (o->tokens_opt) add(buf, sizeof buf, o->tokens_opt, o->tokens_val);
    if (o->tokens_opt && o->prompt_chat) add(buf, sizeof buf, "--chat", NULL);
    if (o->tokens_opt && o->tokenizer) add(buf, sizeof buf, "--tokenizer", o->tokenizer);
    const size_t tok_len = strlen(buf) - head_len;
    char tail[ND_CMD_LEN] = "";
    for (int i = 0; i < o->n_overrides; i++) add(tail, sizeof tail, "--override", o->overrides[i]);
    for (int i = 0; i < n; i++) add(tail, sizeof tail, "--override", extra[i]);
    if (o->out_path) {
        char rp[4200];
        repaired_path(o->out_path, rp, sizeof rp);
        add(tail, sizeof tail, "--out", rp);
    }
    if (strlen(buf) + strlen(tail) < cap) {
        snprintf(out, cap, "%s%s", buf, tail);
        return;
    }
    /* too long for the field: the tokens' option (a long --prompt or --tokens) goes */
    buf[head_len] = 0;
    char note[96];
    snprintf(note, sizeof note, "  # and this run's %s (too long to repeat here)", o->tokens_opt ? o->tokens_opt : "options");
    if (tok_len && head_len + strlen(tail) + strlen(note) < cap) snprintf(out, cap, "%s%s%s", buf, tail, note);
    else out[0] = 0; /* no command rather than one that runs without its overrides or --out */
}

/* cli_args.c — see cli_args.h. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli_args.h"
#include "cli.h"
#include "util/suggest.h"
#include "util/progress.h"

enum { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER };
static int color_mode = COLOR_AUTO;
static char **own_argv;

int nd_cli_color(FILE *f) {
    if (color_mode == COLOR_ALWAYS) return 1;
    if (color_mode == COLOR_NEVER) return 0;
    const char *nc = getenv("NO_COLOR");
    if (nc && *nc) return 0;
    return isatty(fileno(f));
}

void nd_cli_args_free(void) {
    free(own_argv);
    own_argv = NULL;
}

#define MAX_OPTS 128
typedef struct opt_list {
    int n;
    char name[MAX_OPTS][40];   /* "--out" */
    int takes_value[MAX_OPTS];
} opt_list;

/* The command's --help, run into a temporary file. */
static char *help_text(int (*run)(int, char **), const char *cmd) {
    FILE *tmp = tmpfile();
    if (!tmp) return NULL;
    fflush(stdout);
    int saved = dup(1);
    if (saved < 0) { fclose(tmp); return NULL; }
    char *av[3] = {(char *)cmd, "--help", NULL};
    dup2(fileno(tmp), 1);
    run(2, av);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    long len = ftell(tmp);
    if (len <= 0) { fclose(tmp); return NULL; }
    char *s = malloc((size_t)len + 1);
    rewind(tmp);
    if (s && fread(s, 1, (size_t)len, tmp) != (size_t)len) { free(s); s = NULL; }
    if (s) s[len] = 0;
    fclose(tmp);
    return s;
}

/* Every --name in the text; it takes a value when some mention is followed by '=' or by one space
 * and a word ("--out FILE"), not by two spaces or the end of the line ("--json   one JSON ..."). */
static void scan_options(const char *text, opt_list *o) {
    for (const char *p = text; (p = strstr(p, "--")); p += 2) {
        if (p > text && !strchr(" \t\n(,[|'`", p[-1])) continue;
        const char *q = p + 2;
        if (!(*q >= 'a' && *q <= 'z')) continue;
        while ((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '-') q++;
        size_t len = (size_t)(q - p);
        if (len >= sizeof o->name[0]) continue;
        int value = *q == '=' || (q[0] == ' ' && q[1] && q[1] != ' ' && q[1] != '\n' && q[1] != '(');
        int k;
        for (k = 0; k < o->n; k++)
            if (strlen(o->name[k]) == len && !strncmp(o->name[k], p, len)) break;
        if (k == o->n) {
            if (o->n == MAX_OPTS) continue;
            memcpy(o->name[k], p, len);
            o->name[k][len] = 0;
            o->takes_value[k] = 0;
            o->n++;
        }
        o->takes_value[k] |= value;
    }
}

static int find(const opt_list *o, const char *name, size_t len) {
    for (int k = 0; k < o->n; k++)
        if (strlen(o->name[k]) == len && !strncmp(o->name[k], name, len)) return k;
    return -1;
}

static const struct { const char *s, *l; } shorts[] = {
    {"-o", "--out"}, {"-s", "--stack"}, {"-r", "--recipe"}, {"-t", "--tokens"}, {"-l", "--layers"},
    {"-b", "--backend"}, {"-q", "--quiet"}, {"-j", "--json"},
};

static int set_color(const char *cmd, const char *v) {
    if (!strcmp(v, "auto")) color_mode = COLOR_AUTO;
    else if (!strcmp(v, "always")) color_mode = COLOR_ALWAYS;
    else if (!strcmp(v, "never")) color_mode = COLOR_NEVER;
    else return nd_cli_usage_error(cmd, "--color=%s: expected auto, always or never", v);
    return 0;
}

int nd_cli_args(const char *cmd, int (*run)(int, char **), int *argc, char ***argv) {
    int n = *argc;
    char **in = *argv;
    int help = 0;
    for (int i = 1; i < n; i++)
        if (!strcmp(in[i], "--help") || !strcmp(in[i], "-h")) help = 1;
    if (help) return 0; /* the command prints its usage */
    char *text = help_text(run, cmd);
    opt_list *o = calloc(1, sizeof *o);
    if (!o) { free(text); return ND_EXIT_INTERNAL; }
    if (text) scan_options(text, o);
    free(text);
    /* each --opt=value can become two words: at most 2n */
    own_argv = calloc((size_t)(2 * n + 1), sizeof *own_argv);
    if (!own_argv) { free(o); return ND_EXIT_INTERNAL; }
    int m = 0, rc = 0, rest = 0;
    own_argv[m++] = in[0];
    for (int i = 1; i < n && !rc; i++) {
        char *a = in[i];
        if (rest || a[0] != '-' || !a[1]) { own_argv[m++] = a; continue; }
        if (!strcmp(a, "--")) { rest = 1; own_argv[m++] = a; continue; }
        if (!strcmp(a, "-q")) { nd_progress_set_quiet(1); continue; }
        /* a short option with its value attached, as getopt takes it: -svllm, -s=vllm */
        int attached = 0;
        if (a[1] != '-' && a[2]) {
            for (size_t s = 0; s < sizeof shorts / sizeof shorts[0] && !attached; s++) {
                const int k = a[1] == shorts[s].s[1] ? find(o, shorts[s].l, strlen(shorts[s].l)) : -1;
                if (k < 0 || !o->takes_value[k]) continue;
                own_argv[m++] = (char *)shorts[s].l;
                own_argv[m++] = a + (a[2] == '=' ? 3 : 2);
                attached = 1;
            }
        }
        if (attached) continue;
        for (size_t s = 0; s < sizeof shorts / sizeof shorts[0]; s++)
            if (!strcmp(a, shorts[s].s) && find(o, shorts[s].l, strlen(shorts[s].l)) >= 0) { a = (char *)shorts[s].l; break; }
        if (a[1] != '-') { own_argv[m++] = a; continue; } /* -h, a negative number, a command's own */
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (!strncmp(a, "--color", len) && len == 7) {
            if (eq) rc = set_color(cmd, eq + 1);
            else if (i + 1 < n) rc = set_color(cmd, in[++i]);
            else rc = nd_cli_usage_error(cmd, "--color needs a value: auto, always or never");
            continue;
        }
        if (!strcmp(a, "--no-color")) { color_mode = COLOR_NEVER; continue; }
        if (!strcmp(a, "--quiet")) { nd_progress_set_quiet(1); continue; }
        int k = o->n ? find(o, a, len) : 0;
        if (k < 0) {
            const char *cands[MAX_OPTS + 2];
            int nc = 0;
            for (int j = 0; j < o->n; j++) cands[nc++] = o->name[j];
            cands[nc++] = "--color";
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)(len < 63 ? len : 63), a);
            const char *best = nd_suggest(word, cands, (size_t)nc);
            if (best) rc = nd_cli_usage_error(cmd, "unknown option '%s'; did you mean %s?", word, best);
            else rc = nd_cli_usage_error(cmd, "unknown option '%s'", word);
            break;
        }
        if (eq) {
            if (o->n && !o->takes_value[k]) { rc = nd_cli_usage_error(cmd, "%.*s takes no value (got %s)", (int)len, a, a); break; }
            /* split in place: the option name ends where '=' was */
            a[len] = 0;
            own_argv[m++] = a;
            own_argv[m++] = a + len + 1;
            continue;
        }
        own_argv[m++] = a;
        /* the value of an option that takes one is not an option itself (--override --x is a value) */
        if (o->n && o->takes_value[k] && i + 1 < n) own_argv[m++] = in[++i];
    }
    free(o);
    own_argv[m] = NULL;
    *argc = m;
    *argv = own_argv;
    return rc;
}

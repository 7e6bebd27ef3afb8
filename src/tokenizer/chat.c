/* chat.c — `--chat` without Jinja: the chat formats of the supported families as a table, one
 * picked by signature strings found in tokenizer_config.json's chat_template, each rendering one
 * user turn with the generation prompt exactly as the family's template does (checked against
 * transformers' apply_chat_template on golden/tokenizers/). A template that matches no row is
 * refused (exit 2). */
#include <jansson.h>
#include "util/json_load.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tokenizer.h"
#include "util/infile.h"

enum { NO_TRIM, TRIM };
typedef struct chat_fmt {
    const char *name;
    const char *sig[3];      /* all must appear in the template */
    const char *not_sig;     /* must not appear (NULL: no such rule) */
    int bos;                 /* the template writes bos_token first */
    int trim;                /* the user text goes through Jinja's |trim */
    const char *pre, *post;  /* around the user text ("%DATE%" in pre: the Llama 3 date line) */
    const char *user;        /* the template's expression of the user text with what is written on either
                              * side of it (user_expr_at's pattern); NULL: the signature holds it */
} chat_fmt;

#define L3_SYS "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: %DATE%\n\n<|eot_id|>"
#define L3_USER "<|start_header_id|>user<|end_header_id|>\n\n"
#define L3_GEN "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
#define QWEN_GEN "<|im_end|>\n<|im_start|>assistant\n"
/* user_expr_at patterns: '@' is the message's content (message.content, message['content'] or
 * message["content"]), '~' a newline written as is or as \n, ' ' any run of blanks (none too) */
#define L3_EXPR "'<|end_header_id|>~~' + @ | trim + '<|eot_id|>'"
#define CHATML_EXPR "'~' + @ + '<|im_end|>'"
static const chat_fmt formats[] = {
    /* Llama 3.1-3.3: a system block with the knowledge cut-off and the date (3.2+: today's) */
    {"llama3.1", {"<|start_header_id|>", "Cutting Knowledge Date: December 2023", "'<|start_header_id|>assistant<|end_header_id|>\\n\\n'"}, NULL, 1, TRIM, L3_SYS L3_USER, L3_GEN, L3_EXPR},
    {"llama3", {"<|start_header_id|>", "'<|start_header_id|>assistant<|end_header_id|>\n\n'", NULL}, "Cutting Knowledge", 1, TRIM, L3_USER, L3_GEN, L3_EXPR},
    {"qwen2.5", {"<|im_start|>", "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "'<|im_start|>assistant\\n'"}, NULL, 0, NO_TRIM,
     "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\n", QWEN_GEN, CHATML_EXPR},
    {"qwen2", {"<|im_start|>", "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n'", "'<|im_start|>assistant\\n'"}, NULL, 0, NO_TRIM,
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n", QWEN_GEN, CHATML_EXPR},
    /* ChatML without a default system message (Qwen3; its thinking switch adds nothing by default) */
    {"chatml", {"<|im_start|>", "'<|im_start|>assistant\\n'", NULL}, "'<|im_start|>system\\nYou are", 0, NO_TRIM, "<|im_start|>user\n", QWEN_GEN, CHATML_EXPR},
    {"deepseek-v3", {"<｜User｜>", "{{'<｜Assistant｜>'}}", NULL}, NULL, 1, NO_TRIM, "<｜User｜>", "<｜Assistant｜>", "'<｜User｜>' + @}}"},
    {"mistral-v1", {"'[INST] ' + message['content'] + ' [/INST]'", NULL, NULL}, NULL, 1, NO_TRIM, "[INST] ", " [/INST]", NULL},
    {"mistral-v3", {"\"[INST] \" + message[\"content\"] + \"[/INST]\"", NULL, NULL}, NULL, 1, NO_TRIM, "[INST] ", "[/INST]", NULL},
    {"mistral-tekken", {"\"[INST]\" + message[\"content\"] + \"[/INST]\"", NULL, NULL}, NULL, 1, NO_TRIM, "[INST]", "[/INST]", NULL},
};

/* A newline in a template's string literal: written as is, or as the escape \n. Returns its length
 * at s (0: none). */
static size_t newline_at(const char *s) { return *s == '\n' ? 1 : (s[0] == '\\' && s[1] == 'n') ? 2 : 0; }

/* Does the template's text at s match pattern p (see L3_EXPR)? Returns the length matched, 0 if not. */
static size_t user_expr_at(const char *s, const char *p) {
    const char *s0 = s;
    for (; *p; p++) {
        if (*p == ' ') { while (*s == ' ' || *s == '\t') s++; continue; }
        if (*p == '~') { size_t n = newline_at(s); if (!n) return 0; s += n; continue; }
        if (*p == '@') {
            static const char *const forms[] = {"message.content", "message['content']", "message[\"content\"]"};
            size_t n = 0;
            for (int k = 0; k < 3 && !n; k++) if (!strncmp(s, forms[k], strlen(forms[k]))) n = strlen(forms[k]);
            if (!n) return 0;
            s += n;
            continue;
        }
        if (*s != *p) return 0;
        s++;
    }
    return (size_t)(s - s0);
}

/* The template writes the user text exactly as the row renders it: the row's expression occurs, and no
 * message content goes through a filter (|upper, |replace ...) other than the |trim the row applies.
 * A template that adds to or changes the user turn is one the table does not render (refused). */
static int user_turn_as_row(const chat_fmt *f, const char *tmpl) {
    if (f->user) {
        int found = 0;
        for (const char *q = tmpl; *q && !found; q++) found = user_expr_at(q, f->user) != 0;
        if (!found) return 0;
    }
    static const char *const forms[] = {"message.content", "message['content']", "message[\"content\"]"};
    for (int k = 0; k < 3; k++)
        for (const char *q = strstr(tmpl, forms[k]); q; q = strstr(q + 1, forms[k])) {
            const char *r = q + strlen(forms[k]);
            while (*r == ' ' || *r == '\t') r++;
            if (*r != '|') continue;
            r++;
            while (*r == ' ' || *r == '\t') r++;
            if (!(f->trim && !strncmp(r, "trim", 4))) return 0;
        }
    return 1;
}

/* The family of a format row (rows of one family refine each other, first match wins; rows of two
 * families both matching mean a template this table cannot render) */
static int family_of(const char *name) {
    return !strncmp(name, "llama", 5) ? 0 : !strncmp(name, "qwen", 4) || !strncmp(name, "chatml", 6) ? 1
         : !strncmp(name, "deepseek", 8) ? 2 : 3;
}

static const char *token_text(json_t *v) {   /* "..." or {"content": "..."} */
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content"))) return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static int render(const chat_fmt *f, const char *tmpl, const char *bos, const char *text, char **out) {
    char date[32] = "26 Jul 2024";
    if (strstr(tmpl, "strftime_now")) {   /* transformers passes today's date to the Llama 3.2+ template */
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(date, sizeof date, "%d %b %Y", &tm);
    }
    size_t tl = strlen(text);
    const char *ts = text;
    if (f->trim) {
        while (tl && is_ws(*ts)) { ts++; tl--; }
        while (tl && is_ws(ts[tl - 1])) tl--;
    }
    const char *pre = f->pre, *d = strstr(pre, "%DATE%");
    size_t n = strlen(bos) + strlen(pre) + strlen(date) + tl + strlen(f->post) + 1;
    char *o = malloc(n);
    if (!o) return -1;
    if (d) snprintf(o, n, "%s%.*s%s%s%.*s%s", f->bos ? bos : "", (int)(d - pre), pre, date, d + 6, (int)tl, ts, f->post);
    else snprintf(o, n, "%s%s%.*s%s", f->bos ? bos : "", pre, (int)tl, ts, f->post);
    *out = o;
    return 0;
}

/* chat_template.jinja in the folder of config_path: *out malloc'd text, or NULL when there is none */
static int read_jinja(const char *config_path, char **out, nd_err *e) {
    *out = NULL;
    char path[4096];
    const char *slash = strrchr(config_path, '/');
    snprintf(path, sizeof path, "%.*schat_template.jinja", slash ? (int)(slash - config_path + 1) : 0, config_path);
    char *buf = NULL;
    size_t n = 0;
    ND_TRY(nd_read_text(path, "chat template", 64u << 20, 1, &buf, &n, e));
    (void)n; /* a NUL byte is refused by nd_read_text */
    *out = buf;
    return 0;
}


/* The "pre" of a ChatML template that writes a default system message when the conversation has
 * none: {{ '<|im_start|>system\nMSG<|im_end|>\n' }} under `messages[0]['role'] != 'system'`, and
 * the generation prompt '<|im_start|>assistant\n'. MSG must be a plain literal (no quote, brace or
 * backslash other than \n). Malloc'd "<|im_start|>system\nMSG<|im_end|>\n<|im_start|>user\n", or NULL. */
static char *chatml_default_system(const char *tmpl) {
    const char *gen = strstr(tmpl, "'<|im_start|>assistant");
    if (!gen || !newline_at(gen + strlen("'<|im_start|>assistant")) || !strstr(tmpl, "!= 'system'")) return NULL;
    const char *p = strstr(tmpl, "'<|im_start|>system");
    if (!p) return NULL;
    p += strlen("'<|im_start|>system");
    size_t nl = newline_at(p);
    if (!nl) return NULL;
    p += nl;
    const char *end = strstr(p, "<|im_end|>");
    if (!end || end == p) return NULL;
    size_t cap = (size_t)(end - p) + 64, o = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    o += (size_t)snprintf(out, cap, "<|im_start|>system\n");
    for (const char *q = p; q < end; q++) {
        if (*q == '\'' || *q == '"' || *q == '{' || *q == '}') { free(out); return NULL; }
        if (*q == '\\') {
            if (q[1] != 'n') { free(out); return NULL; }
            out[o++] = '\n';
            q++;
        } else out[o++] = *q;
    }
    const char *tail = "<|im_end|>\n<|im_start|>user\n";
    nl = newline_at(end + strlen("<|im_end|>"));
    if (!nl || end[strlen("<|im_end|>") + nl] != '\'') { free(out); return NULL; }
    snprintf(out + o, cap - o, "%s", tail);
    return out;
}

int nd_chat_render(const char *config_path, const char *text, char **out, const char **name, nd_err *e) {
    *out = NULL;
    ND_TRY(nd_input_regular(config_path, e));
    json_error_t je;
    json_t *root = nd_json_load_file(config_path, 0, &je);
    if (!root) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read (needed for --chat): %s", config_path, je.text);
    json_t *ct = json_object_get(root, "chat_template");
    const char *tmpl = json_is_string(ct) ? json_string_value(ct) : NULL;
    char *jinja = NULL;
    if (json_is_array(ct)) {   /* [{"name": "default", "template": ...}, ...] */
        size_t i;
        json_t *x;
        json_array_foreach(ct, i, x) {
            json_t *nm = json_object_get(x, "name");
            if (json_is_string(nm) && !strcmp(json_string_value(nm), "default") && json_is_string(json_object_get(x, "template")))
                tmpl = json_string_value(json_object_get(x, "template"));
        }
    }
    /* transformers 4.50+ and 5.x save the template beside the config as chat_template.jinja; that
     * file takes priority over the config's entry when both exist (tokenization_utils_base.py:
     * "independent chat template file(s) ... take priority over template entries in the tokenizer
     * config") */
    int jrc = read_jinja(config_path, &jinja, e);
    if (jrc) {
        json_decref(root);
        return jrc;
    }
    if (jinja) tmpl = jinja;
    if (!tmpl) {
        json_decref(root);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: no chat_template, and no chat_template.jinja beside it (a base model?): "
                       "use --prompt without --chat", config_path);
    }
    const char *bos = token_text(json_object_get(root, "bos_token"));
    /* the file the template came from, for the messages */
    char src[4200];
    const char *slash = strrchr(config_path, '/');
    if (jinja) snprintf(src, sizeof src, "%.*schat_template.jinja", slash ? (int)(slash - config_path + 1) : 0, config_path);
    else snprintf(src, sizeof src, "%s", config_path);
    const chat_fmt *f = NULL, *other = NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        int ok = !formats[i].not_sig || !strstr(tmpl, formats[i].not_sig);
        for (int k = 0; k < 3 && ok; k++) ok = !formats[i].sig[k] || strstr(tmpl, formats[i].sig[k]);
        if (!ok) continue;
        if (!f) f = &formats[i];
        else if (!other && family_of(formats[i].name) != family_of(f->name)) other = &formats[i];
    }
    if (other) {
        /* what transformers renders is neither: never one of them silently */
        int rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: the chat template matches two formats (%s and %s); nvfp4dbg renders only a "
                         "template it recognises as one: use --prompt without --chat and write the turn markers into the prompt",
                         src, f->name, other->name);
        free(jinja);
        json_decref(root);
        return rc;
    }
    /* ChatML with a default system message of its own (SmolLM2: "You are a helpful AI assistant named
     * SmolLM, ..."), the message read from the template's literal */
    chat_fmt own;
    char *own_pre = NULL;
    if (!f && (own_pre = chatml_default_system(tmpl))) {
        own = (chat_fmt){"chatml-system", {NULL, NULL, NULL}, NULL, 0, NO_TRIM, own_pre, QWEN_GEN, CHATML_EXPR};
        f = &own;
    }
    int rc = 0;
    if (f && !user_turn_as_row(f, tmpl))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: the chat template looks like %s but writes the user turn otherwise (text added to it, "
                     "a filter on it): nvfp4dbg renders only the turn as the family's template writes it (docs/tokenizer.md); use "
                     "--prompt without --chat and write the turn as the template would", src, f->name);
    else if (!f)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: chat_template not recognised (nvfp4dbg knows the ChatML/Qwen, Llama 3, DeepSeek-V3 and "
                     "Mistral [INST] templates, docs/tokenizer.md); use --prompt without --chat and write the turn markers into the prompt",
                     src);
    else if (f->bos && !bos)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: the %s chat template writes bos_token, which the file does not set", config_path, f->name);
    else if (render(f, tmpl, bos ? bos : "", text, out)) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    else *name = f->name;
    free(own_pre);
    free(jinja);
    json_decref(root);
    return rc;
}

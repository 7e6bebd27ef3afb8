/* test_report_page.c — HTML escaping, and the page's structure on a synthetic trace of 60
 * layers x 30 stages x 2 modes with routing in every layer: size bound, element counts, every
 * untrusted string escaped, the first divergence marked; OUT.tmp + rename; the routing loader on
 * a real (written, then read) trace file. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nd_test.h"
#include "report/report.h"
#include "report/report_internal.h"

enum { NLAYERS = 60, PER_LAYER = 30, NTOK = 16, TOPK = 8, NEXPERTS = 256 };
#define EVIL "<script>alert(1)</script>"

static size_t count(const char *hay, const char *needle) {
    size_t n = 0, len = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + len, needle)) n++;
    return n;
}

static void test_escape(void) {
    char b[128];
    size_t need = nd_html_escape_buf(b, sizeof b, "<a href=\"x\">&'\x01\tz");
    CHECK(!strcmp(b, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&#xFFFD;\tz"), "escaped: %s", b);
    CHECK_EQ_INT(need, strlen(b));
    /* a cut never leaves half an entity, and the return says how much was needed */
    char s[5];
    need = nd_html_escape_buf(s, sizeof s, "ab<cd");
    CHECK(!strcmp(s, "ab"), "cut: '%s'", s);
    CHECK_EQ_INT(need, strlen("ab&lt;cd"));
    CHECK_EQ_INT(nd_html_escape_buf(s, sizeof s, ""), 0);
    CHECK(s[0] == 0, "empty");
    /* bytes that start no valid UTF-8 sequence (the 8-bit CSI 0x9B, 0xFF) become U+FFFD in a page
     * declared UTF-8 (round 19); a valid sequence stays whole */
    need = nd_html_escape_buf(b, sizeof b, "a\x9b b\xff c\xc3\xa9");
    CHECK(!strcmp(b, "a&#xFFFD; b&#xFFFD; c\xc3\xa9"), "invalid UTF-8: %s", b);
    CHECK_EQ_INT(need, strlen(b));
    /* UTF-8 passes through unchanged */
    nd_html_escape_buf(b, sizeof b, "\xc3\xa9t\xc3\xa9");
    CHECK(!strcmp(b, "\xc3\xa9t\xc3\xa9"), "utf-8: %s", b);
    /* the FILE* variant gives the same bytes */
    char *mem = NULL;
    size_t ml = 0;
    FILE *f = open_memstream(&mem, &ml);
    nd_html_escape(f, "<a href=\"x\">&'\x01\tz");
    fclose(f);
    CHECK(mem && !strcmp(mem, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&#xFFFD;\tz"), "stream: %s", mem ? mem : "(null)");
    free(mem);
}

static const char *kinds[PER_LAYER] = {
    "input_layernorm", "self_attn.q_a_proj", "self_attn.kv_proj", "self_attn.q_a_norm", "self_attn.q_b_proj",
    "self_attn.q_rope", "self_attn.attention", "self_attn.o_a_proj", "self_attn.o_b_proj", "attn_hc.post",
    "post_attention_layernorm", "mlp.gate", "mlp.experts.0.gate_proj", "mlp.experts.0.up_proj", "mlp.experts.0.down_proj",
    "mlp.experts.1.gate_proj", "mlp.experts.1.up_proj", "mlp.experts.1.down_proj", "mlp.experts.2.gate_proj",
    "mlp.experts.2.up_proj", "mlp.experts.2.down_proj", "mlp.experts", "mlp.shared_experts.gate_proj",
    "mlp.shared_experts.up_proj", "mlp.shared_experts.down_proj", "mlp.shared_experts", "mlp", "ffn_hc.pre",
    "ffn_hc.post", EVIL};

static int is_linear(int k) { return strstr(kinds[k], "_proj") != NULL; }

/* 60 x 30 stages, two rows each; layer 37's q_a_proj is the first divergence. */
static nd_trace *synthetic(void) {
    nd_trace *t = calloc(1, sizeof *t);
    t->nrows = (int64_t)NLAYERS * PER_LAYER * 2;
    t->rows = calloc((size_t)t->nrows, sizeof *t->rows);
    snprintf(t->schema, sizeof t->schema, "nvfp4dbg-trace/1");
    snprintf(t->checkpoint, sizeof t->checkpoint, "ckpt\"><img src=x onerror=alert(2)>");
    snprintf(t->recipe, sizeof t->recipe, "deepseek_v4");
    snprintf(t->modes, sizeof t->modes, "isolated,chained");
    snprintf(t->device, sizeof t->device, "<b>dev</b>");
    t->ntokens = NTOK;
    int64_t i = 0;
    for (int L = 0; L < NLAYERS; L++)
        for (int k = 0; k < PER_LAYER; k++)
            for (int md = 0; md < 2; md++, i++) {
                nd_row *r = &t->rows[i];
                r->index = (int32_t)i;
                r->layer = L;
                snprintf(r->name, sizeof r->name, "layers.%d.%s", L, kinds[k]);
                snprintf(r->op, sizeof r->op, "%s", is_linear(k) ? "linear" : k == 11 ? "router" : "rmsnorm");
                snprintf(r->mode, sizeof r->mode, "%s", md ? "chained" : "isolated");
                r->quantized = (uint8_t)is_linear(k);
                r->numel = 4096;
                r->ref_amax = 1.0 + 0.01 * k;
                r->prod_amax = r->ref_amax * (md ? 1.02 : 1.0);
                r->cosine = is_linear(k) ? 0.995 - md * 0.001 * L : 1.0;
                r->sqnr_db = is_linear(k) ? 20.0 - md * 0.2 * L : 200.0;
                r->floor_sqnr_db = is_linear(k) ? 20.5 : NAN;
                r->scale_ratio = is_linear(k) ? 0.8 + 0.01 * k : NAN;
                r->sat_frac = NAN;
                r->topk_agree = k == 11 ? 1.0 : NAN;
                snprintf(r->verdict, sizeof r->verdict, "ok");
                if (L == 37 && k == 1 && md == 0) {
                    r->prod_amax = 0;
                    r->cosine = 0;
                    r->sqnr_db = 0;
                    r->scale_ratio = 1.45e-6;
                    snprintf(r->verdict, sizeof r->verdict, "scale_inverted");
                }
                if (L >= 50 && md == 1) r->prod_nan = 100 * (L - 49);
            }
    t->has_summary = 1;
    snprintf(t->summary.status, sizeof t->summary.status, "diverged");
    snprintf(t->summary.first_divergence, sizeof t->summary.first_divergence, "layers.37.self_attn.q_a_proj");
    snprintf(t->summary.first_divergence_mode, sizeof t->summary.first_divergence_mode, "isolated");
    snprintf(t->summary.cause, sizeof t->summary.cause, "scale_inverted");
    snprintf(t->summary.message, sizeof t->summary.message, "multiplier 1.45e-06 x healthy & <inverted> " EVIL);
    snprintf(t->summary.evidence, sizeof t->summary.evidence, "repair input_scale_reciprocal restores the stage: SQNR 0.0 -> 20.4 dB");
    snprintf(t->summary.next_command, sizeof t->summary.next_command,
             "nvfp4dbg trace ckpt --override model.layers.37.self_attn.q_a_proj.input_global_scale=719.8");
    t->tokens = calloc(NTOK, sizeof *t->tokens);
    for (int k = 0; k < NTOK; k++) t->tokens[k] = 1000 + k;
    return t;
}

/* synthetic()'s row of stage layers.L.kind in mode */
static nd_row *row_of(nd_trace *t, int L, const char *kind, const char *mode) {
    char name[256];
    snprintf(name, sizeof name, "layers.%d.%s", L, kind);
    for (int64_t i = 0; i < t->nrows; i++)
        if (!strcmp(t->rows[i].name, name) && !strcmp(t->rows[i].mode, mode)) return &t->rows[i];
    return NULL;
}

static nd_report_routing synthetic_routing(void) {
    nd_report_routing rt = {0};
    rt.n = NLAYERS;
    rt.picks = calloc(NLAYERS, sizeof *rt.picks);
    uint32_t s = 12345;
    for (int L = 0; L < NLAYERS; L++) {
        nd_report_pick *p = &rt.picks[L];
        snprintf(p->stage, sizeof p->stage, "layers.%d.mlp.gate", L);
        snprintf(p->op, sizeof p->op, "router");
        p->layer = L;
        p->t = NTOK;
        p->k = TOPK;
        p->ref = malloc(NTOK * TOPK * sizeof(int32_t));
        p->prod = malloc(NTOK * TOPK * sizeof(int32_t));
        for (int j = 0; j < NTOK * TOPK; j++) {
            /* distinct experts within a token, as a router picks them */
            if (j % TOPK == 0) s = s * 1664525u + 1013904223u;
            p->ref[j] = (int32_t)(((s >> 8) + 17u * (uint32_t)(j % TOPK)) % NEXPERTS);
            /* layer 40: token 3's last slot picks another expert on the production path */
            p->prod[j] = (L == 40 && j == 3 * TOPK + TOPK - 1) ? (p->ref[j] + 1) % NEXPERTS : p->ref[j];
        }
    }
    return rt;
}

/* The part of the page between the first occurrence of open and the next close. */
static char *slice(const char *page, const char *open, const char *close) {
    const char *a = strstr(page, open);
    const char *b = a ? strstr(a, close) : NULL;
    if (!a || !b) return NULL;
    return strndup(a, (size_t)(b - a));
}

/* The page as one string (with `against` when not NULL). */
static char *page_of(const nd_trace *t, const nd_report_routing *rt, const char *name, const nd_report_against *ag) {
    char *page = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&page, &len);
    nd_err e = {0};
    int rc = nd_report_html(f, t, rt, name, ag, &e);
    fclose(f);
    CHECK_EQ_INT(rc, 0);
    return page;
}

static void test_page(void) {
    nd_trace *t = synthetic();
    nd_report_routing rt = synthetic_routing();
    char *page = page_of(t, &rt, "synthetic <60x30>.h5", NULL);
    const size_t len = strlen(page);
    printf("page: %zu bytes for %lld rows\n", len, (long long)t->nrows);
    CHECK(len > 200000 && len < 3u * 1024 * 1024, "page size %zu outside (200 kB, 3 MB)", len);
    CHECK(!strncmp(page, "<!DOCTYPE html>", 15), "doctype");
    CHECK(len > 8 && !strcmp(page + len - 8, "</html>\n"), "ends with </html>");
    /* untrusted strings never reach the page raw */
    CHECK_EQ_INT(count(page, "<script"), 1);
    CHECK_EQ_INT(count(page, "<img"), 0);
    CHECK_EQ_INT(count(page, "<b>dev"), 0);
    CHECK(count(page, "&lt;script&gt;alert(1)&lt;/script&gt;") >= (size_t)NLAYERS * 2, "escaped stage names: %zu",
          count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    CHECK(count(page, "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;") >= 2, "escaped checkpoint");
    CHECK(count(page, "healthy &amp; &lt;inverted&gt;") == 1, "escaped message shown once");
    CHECK(count(page, "&lt;60x30&gt;.h5") == 2, "escaped source name in the title line and the metadata");
    /* structure: 4 charts, each drawn for 3 widths (wide, medium, narrow; dense: 1800 stages), + one routing strip per MoE layer */
    CHECK_EQ_INT(count(page, "<svg class=\"chart "), 12);
    CHECK_EQ_INT(count(page, " wide dense\" viewBox=\"0 0 1320 "), 4);
    CHECK_EQ_INT(count(page, " medium dense\" viewBox=\"0 0 760 "), 4);
    CHECK_EQ_INT(count(page, " narrow dense\" viewBox=\"0 0 380 "), 4);
    CHECK_EQ_INT(count(page, "<svg class=\"rstrip\""), NLAYERS);
    CHECK_EQ_INT(count(page, "<svg"), 12 + NLAYERS);
    CHECK_EQ_INT(count(page, "</svg>"), 12 + NLAYERS);
    CHECK_EQ_INT(count(page, "<section"), count(page, "</section>"));
    /* one line per mode on cosine and SQNR, reference + two modes on amax and NaN/Inf */
    CHECK_EQ_INT(count(page, "<path class=\"iso\""), 12);
    CHECK_EQ_INT(count(page, "<path class=\"chain\""), 12);
    CHECK_EQ_INT(count(page, "<path class=\"thr\""), 6);
    /* the first divergence: marked on every chart, its row outlined, named in the banner; the
     * phone's drawing says only "first divergence", the stage in every marker's tooltip */
    CHECK_EQ_INT(count(page, "<g class=\"mark\">"), 12);
    CHECK_EQ_INT(count(page, "<title>first divergence: layers.37.self_attn.q_a_proj (isolated)</title>"), 12);
    CHECK_EQ_INT(count(page, ">first divergence: layers.37.self_attn.q_a_proj (isolated)</text>"), 8);
    CHECK_EQ_INT(count(page, ">first divergence</text>"), 4);
    CHECK_EQ_INT(count(page, "id=\"first-row\""), 1);
    CHECK_EQ_INT(count(page, "href=\"#first-row\""), 1);
    CHECK(strstr(page, "<div class=\"banner diverged\"") != NULL, "diverged banner");
    /* the table of all stages: every row, in one collapsible group per layer (all 60 present, each
     * with its header row), only the first divergence's layer open */
    char *table = slice(page, "<section id=\"stages\">", "</section>");
    CHECK(table != NULL, "stage section");
    if (table) {
        CHECK_EQ_INT(count(table, "<tr"), t->nrows + NLAYERS);
        CHECK_EQ_INT(count(table, "<details class=\"grp"), NLAYERS);
        CHECK_EQ_INT(count(table, "</details>"), NLAYERS);
        int present = 0;
        char id[48];
        for (int L = 0; L < NLAYERS; L++) {
            snprintf(id, sizeof id, "id=\"layer-%d\"", L);
            present += count(table, id) == 1;
        }
        CHECK_EQ_INT(present, NLAYERS);
        CHECK_EQ_INT(count(table, " open>"), 1);
        CHECK_EQ_INT(count(table, "<details class=\"grp bad\" id=\"layer-37\" open>"), 1);
        /* each group holds exactly its layer's rows: layer 12's group has 60 rows, all of layer 12 */
        char *g12 = slice(table, "id=\"layer-12\"", "</details>");
        CHECK(g12 && count(g12, "<tr") == 1 + PER_LAYER * 2 && count(g12, "<td>layers.12.") == PER_LAYER * 2 &&
                  count(g12, "<td>layers.") == PER_LAYER * 2, "layer 12 group: %zu rows", g12 ? count(g12, "<tr") : 0);
        CHECK(g12 && strstr(g12, "<b>layer 12</b> <span class=\"gs\">60 rows; worst <code>self_attn.q_a_proj</code> "
                                 "(isolated) cosine 0.995, rel L2 0, SQNR 20 dB, <span>ok</span>"),
              "layer 12 group summary");
        free(g12);
        CHECK_EQ_INT(count(table, "<tr class=\"bad\">"), 0); /* the only bad row is the first divergence */
        CHECK_EQ_INT(count(table, "class=\"first bad\""), 1);
        CHECK(strstr(table, "<b>layer 37</b> <span class=\"gs\">60 rows, <span class=\"bad\">1 flagged</span>; worst "
                            "<code>self_attn.q_a_proj</code> (isolated) cosine 0, rel L2 0, SQNR 0 dB, <span class=\"bad\">"
                            "scale_inverted</span></span> <span class=\"fd\">first divergence</span></summary>"),
              "layer 37 group summary");
        CHECK(strstr(table, "<b>layer 55</b> <span class=\"gs\">60 rows, <span class=\"bad\">NaN/Inf up to 600</span>"),
              "layer 55: the largest NaN count of the layer");
    }
    free(table);
    /* layers at a glance: one line per layer, worst row and its figures, NaN maximum, link */
    char *lay = slice(page, "id=\"layer-table\"", "</table>");
    CHECK(lay != NULL, "layer table");
    if (lay) {
        CHECK_EQ_INT(count(lay, "<tr"), NLAYERS + 1);
        CHECK(strstr(lay, "<tr><td><a href=\"#layer-5\">5</a><td>60<td>0<td>self_attn.q_a_proj<td>isolated<td>0.995<td>0"
                          "<td>20<td>20.5<td>0<td>ok\n"), "layer 5 line");
        CHECK(strstr(lay, "<tr><td><a href=\"#layer-55\">55</a><td>60<td>0<td>self_attn.q_a_proj<td>isolated<td>0.995<td>0"
                          "<td>20<td>20.5<td>600<td>ok\n"), "layer 55 line");
        CHECK(strstr(lay, "<tr class=\"first bad\"><td><a href=\"#layer-37\">37</a><td>60<td>1<td>self_attn.q_a_proj"
                          "<td>isolated<td>0<td>0<td>0<td>20.5<td>0<td>scale_inverted\n"), "layer 37 line");
    }
    free(lay);
    /* flagged list: exactly the one non-ok row */
    char *flag = slice(page, "id=\"flagged-table\"", "</table>");
    CHECK(flag && count(flag, "<tr") == 2, "flagged rows: %zu", flag ? count(flag, "<tr") : 0);
    free(flag);
    /* scale ratio map: one row per layer, 11 columns (the expert columns aggregate 3 experts) */
    char *heat = slice(page, "<table class=\"heat\">", "</table>");
    CHECK(heat != NULL, "heat map");
    if (heat) {
        CHECK_EQ_INT(count(heat, "<tr>"), NLAYERS + 1);
        CHECK_EQ_INT(count(heat, "<th>"), NLAYERS);   /* row labels; every column header has a title */
        CHECK_EQ_INT(count(heat, "<th title=\"scale ratio of "), 11);
        CHECK_EQ_INT(count(heat, "<th title=\"decoder layer"), 1);
        CHECK_EQ_INT(count(heat, "mlp.<wbr>experts.<wbr>*.<wbr>gate_proj</th>"), 1);
        CHECK_EQ_INT(count(heat, "(worst of 3;"), NLAYERS * 3);
        CHECK_EQ_INT(count(heat, "<td class=\"bad\""), 1);
        CHECK_EQ_INT(count(heat, ">1.45e-06</td>"), 1);
    }
    free(heat);
    /* routing: layer 40 disagrees on 1 of 128 picks, one token; every other layer agrees */
    CHECK_EQ_INT(count(page, "100.0% of picks agree"), NLAYERS - 1);
    CHECK_EQ_INT(count(page, "99.2% of picks agree"), 1);
    CHECK_EQ_INT(count(page, "1 token with different experts"), 1);
    CHECK_EQ_INT(count(page, "token 3: reference {"), 1);
    /* NaN in the chained rows of layers 50..59: the no-NaN note must not appear */
    CHECK_EQ_INT(count(page, "No NaN or Inf in any stage"), 0);
    free(page);
    nd_report_routing_free(&rt);
    nd_trace_free(t);
}

/* A clean trace with one mode: no mark, ok banner, no-NaN note, the chained line absent. */
static void test_clean_single_mode(void) {
    nd_trace *t = synthetic();
    int64_t n = 0;
    for (int64_t i = 0; i < t->nrows; i++) {
        if (strcmp(t->rows[i].mode, "isolated")) continue;
        t->rows[n] = t->rows[i];
        snprintf(t->rows[n].verdict, sizeof t->rows[n].verdict, "ok");
        t->rows[n].prod_nan = 0;
        n++;
    }
    t->nrows = n;
    memset(&t->summary, 0, sizeof t->summary);
    snprintf(t->summary.status, sizeof t->summary.status, "ok");
    char *page = page_of(t, NULL, NULL, NULL);
    CHECK_EQ_INT(count(page, "<g class=\"mark\">"), 0);
    CHECK_EQ_INT(count(page, "<path class=\"chain\""), 0);
    CHECK_EQ_INT(count(page, "<path class=\"iso\""), 12);
    CHECK(strstr(page, "<div class=\"banner ok\"") != NULL, "ok banner");
    CHECK_EQ_INT(count(page, "No NaN or Inf in any stage"), 1);
    CHECK_EQ_INT(count(page, "Every stage's verdict is ok"), 1);
    CHECK_EQ_INT(count(page, "No routing recorded"), 1);
    free(page);
    /* an unfinished run: the banner says so */
    t->has_summary = 0;
    page = page_of(t, NULL, NULL, NULL);
    CHECK(strstr(page, "<div class=\"banner incomplete\"") && strstr(page, "did not finish"), "incomplete banner");
    free(page);
    nd_trace_free(t);
}

/* Rows of mode "captured" (trace --prod-dump) get their own line on every chart. */
static void test_captured_mode(void) {
    nd_trace *t = synthetic();
    for (int64_t i = 0; i < t->nrows; i++)
        if (!strcmp(t->rows[i].mode, "chained")) snprintf(t->rows[i].mode, sizeof t->rows[i].mode, "captured");
    char *page = page_of(t, NULL, NULL, NULL);
    CHECK_EQ_INT(count(page, "<path class=\"capt\" d=\"M"), 12);
    CHECK_EQ_INT(count(page, "<path class=\"chain\""), 0);
    CHECK_EQ_INT(count(page, "<path class=\"iso\" d=\"M"), 12);
    CHECK_EQ_INT(count(page, "<i class=\"sw capt\"></i>captured</span>"), 2);
    CHECK_EQ_INT(count(page, "<i class=\"sw capt\"></i>production, captured</span>"), 2);
    free(page);
    nd_trace_free(t);
}


static size_t offset(const char *page, const char *needle) {
    const char *p = strstr(page, needle);
    return p ? (size_t)(p - page) : (size_t)-1;
}

/* The summary header comes first: status, first divergence, cause, evidence, next command, message,
 * before the metadata and every section. */
static void test_summary_header(void) {
    nd_trace *t = synthetic();
    char *page = page_of(t, NULL, "s.h5", NULL);
    size_t v = offset(page, "<div class=\"banner diverged\" id=\"verdict\">");
    size_t cause = offset(page, "<dd id=\"verdict-cause\"><code class=\"cause\">scale_inverted</code>");
    CHECK(v != (size_t)-1 && cause != (size_t)-1, "summary header with the cause");
    CHECK(cause > v && cause < offset(page, "<table class=\"meta\">") && cause < offset(page, "<section"),
          "cause before the metadata and every section");
    CHECK(strstr(page, "<dd id=\"verdict-status\"><b>diverged</b>") != NULL, "status");
    CHECK(strstr(page, "<dt>first divergence<dd><a href=\"#first-row\"><code>layers.37.self_attn.q_a_proj</code></a> "
                       "(isolated), layer 37") != NULL, "first divergence with its layer");
    CHECK(strstr(page, "<dt>evidence<dd>repair input_scale_reciprocal restores the stage: SQNR 0.0 -&gt; 20.4 dB") != NULL,
          "evidence");
    CHECK(strstr(page, "<dt>next<dd><code class=\"cmd\">nvfp4dbg trace ckpt --override "
                       "model.layers.37.self_attn.q_a_proj.input_global_scale=719.8</code>") != NULL, "next command");
    CHECK(strstr(page, "<code>nvfp4dbg explain scale_inverted</code>") != NULL, "explain hint");
    free(page);
    /* an older trace without evidence attributes: no empty items */
    t->summary.evidence[0] = t->summary.next_command[0] = 0;
    page = page_of(t, NULL, "s.h5", NULL);
    CHECK_EQ_INT(count(page, "<dt>evidence"), 0);
    CHECK_EQ_INT(count(page, "<dt>next"), 0);
    CHECK_EQ_INT(count(page, "id=\"verdict-cause\""), 1);
    free(page);
    nd_trace_free(t);
}

/* Every column header of the stage, layer and comparison tables explains its metric in a title,
 * and the glossary lists the same texts. */
static void test_tooltips(void) {
    nd_trace *t = synthetic();
    nd_trace *o = synthetic();
    nd_report_against ag = {o, "o.h5"};
    char *page = page_of(t, NULL, "s.h5", &ag);
    static const char *const secs[][2] = {{"<section id=\"stages\">", "</section>"}, {"<section id=\"flagged\">", "</section>"},
                                          {"<section id=\"layers\">", "</section>"}, {"<section id=\"against\">", "</section>"}};
    for (size_t k = 0; k < sizeof secs / sizeof secs[0]; k++) {
        char *sec = slice(page, secs[k][0], secs[k][1]);
        CHECK(sec != NULL, "section %s", secs[k][0]);
        if (!sec) continue;
        size_t th = count(sec, "<th>") + count(sec, "<th "), titled = count(sec, "<th title=\"") + count(sec, "<th class=\"num\" title=\"");
        CHECK(th > 10 && th == titled, "%s: %zu headers, %zu with a tooltip", secs[k][0], th, titled);
        free(sec);
    }
    /* the metrics the issue names, each with its text: 60 layer groups + flagged table + glossary
     * (+ the layer table, + 60 comparison groups for those shown there) */
    static const struct { const char *key; size_t n; } want[] = {
        {"cosine", 61 + 1 + 1 + 2 * 60}, {"rel_l2", 61 + 1 + 1 + 2 * 60}, {"sqnr", 61 + 1 + 1 + 2 * 60},
        {"floor", 61 + 1 + 1}, {"ref_amax", 61 + 1}, {"prod_amax", 61 + 1 + 2 * 60}, {"ref_nan", 61 + 1},
        {"prod_nan", 61 + 1 + 1 + 2 * 60}, {"sat_frac", 61 + 1}, {"zero_block_frac", 61 + 1},
        {"verdict", 61 + 1 + 1 + 2 * 60}, {"delta", 1 + 3 * 60}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const char *tip = nd_rmetric_tip(want[k].key);
        CHECK(tip != NULL && strlen(tip) > 20, "tip of %s", want[k].key);
        if (!tip) continue;
        char esc[1024], attr[1100];
        nd_html_escape_buf(esc, sizeof esc, tip);
        snprintf(attr, sizeof attr, "title=\"%s\"", esc);
        size_t in_titles = count(page, attr), all = count(page, esc);
        CHECK(in_titles + 1 == want[k].n && all == want[k].n, "%s: %zu titles, %zu in all, expected %zu", want[k].key,
              in_titles, all, want[k].n);
    }
    /* scale ratio: the stage tables, the glossary, and inside the 11 column titles of the heat map */
    {
        char esc[1024];
        nd_html_escape_buf(esc, sizeof esc, nd_rmetric_tip("scale_ratio"));
        CHECK_EQ_INT(count(page, esc), 61 + 1 + 11);
    }
    CHECK(strstr(nd_rmetric_tip("scale_ratio"), "2688") && strstr(nd_rmetric_tip("floor"), "6 dB") &&
              strstr(nd_rmetric_tip("cosine"), "all-zero"), "tips say what the numbers mean");
    CHECK(nd_rmetric_tip("no_such_metric") == NULL, "unknown key");
    CHECK_EQ_INT(count(page, "<details id=\"glossary\">"), 1);
    free(page);
    nd_trace_free(o);
    nd_trace_free(t);
}

/* --against: the other trace is the run after a fix (layer 37's stage healthy, status ok), with
 * chained SQNR drifting half as fast, one stage of layer 59 missing (2 rows) and one extra row. */
static void test_against(void) {
    nd_trace *t = synthetic();
    nd_trace *o = synthetic();
    int64_t n = 0;
    for (int64_t i = 0; i < o->nrows; i++) {
        nd_row r = o->rows[i];
        if (r.layer == 59 && strstr(r.name, "<script>")) continue;   /* the hostile stage of layer 59 */
        if (!strcmp(r.name, "layers.37.self_attn.q_a_proj") && !strcmp(r.mode, "isolated")) {
            r.prod_amax = r.ref_amax;
            r.cosine = 0.995;
            r.sqnr_db = 20.0;
            r.scale_ratio = 0.81;
            snprintf(r.verdict, sizeof r.verdict, "ok");
        }
        if (!strcmp(r.mode, "chained") && strstr(r.name, "_proj")) r.sqnr_db = 20.0 - 0.1 * r.layer;
        o->rows[n++] = r;
    }
    o->nrows = n;
    o->rows = realloc(o->rows, (size_t)(n + 1) * sizeof *o->rows);
    nd_row *x = &o->rows[o->nrows++];
    *x = o->rows[0];
    snprintf(x->name, sizeof x->name, "layers.2.extra_probe");
    memset(&o->summary, 0, sizeof o->summary);
    snprintf(o->summary.status, sizeof o->summary.status, "ok");
    nd_report_against ag = {o, "fixed \"<b>\".h5"};
    char *page = page_of(t, NULL, "run.h5", &ag);
    /* both verdicts on top, the run's first */
    size_t v = offset(page, "id=\"verdict\">"), vo = offset(page, "<div class=\"banner ok\" id=\"verdict-other\">");
    CHECK(v != (size_t)-1 && vo != (size_t)-1 && v < vo && vo < offset(page, "<section"), "both summaries first");
    CHECK(strstr(page, "<div class=\"btitle\">other: fixed &quot;&lt;b&gt;&quot;.h5</div>") != NULL, "other's name escaped");
    CHECK_EQ_INT(count(page, "<b>\""), 0);
    /* the charts draw the other trace over the run's: both modes on each of the 12 drawings, in
     * the legend of each chart */
    char *charts = slice(page, "<section id=\"charts\">", "</section>");
    CHECK(charts != NULL, "charts section");
    if (charts) {
        CHECK_EQ_INT(count(charts, "<path class=\"oiso\" d=\"M"), 12);
        CHECK_EQ_INT(count(charts, "<path class=\"ochain\" d=\"M"), 12);
        CHECK_EQ_INT(count(charts, "<i class=\"sw oiso\"></i>other trace, isolated</span>"), 4);
        CHECK_EQ_INT(count(charts, "<i class=\"sw iso\"></i>run, isolated</span>"), 2);
        free(charts);
    }
    char *sec = slice(page, "<section id=\"against\">", "</section>");
    CHECK(sec != NULL, "against section");
    if (sec) {
        CHECK(strstr(sec, "<p id=\"against-counts\">3598 rows matched, <b>1 with a different verdict</b>, 2 only in the run, "
                          "1 only in the other.</p>"), "counts");
        CHECK(strstr(sec, "<tr class=\"changed\"><td>status<td>diverged<td>ok\n") &&
                  strstr(sec, "<tr class=\"changed\"><td>first divergence<td>layers.37.self_attn.q_a_proj<td>-\n") &&
                  strstr(sec, "<tr class=\"changed\"><td>cause<td>scale_inverted<td>-\n") &&
                  strstr(sec, "<tr class=\"changed\"><td>rows<td>3600<td>3599\n") &&
                  strstr(sec, "<tr><td>stack<td>-<td>-\n"),
              "summaries side by side");
        /* every layer is a group; the changed one open, and its row with both figures and differences */
        CHECK_EQ_INT(count(sec, "<details class=\"grp"), NLAYERS + 1);
        CHECK_EQ_INT(count(sec, "id=\"against-layer-"), NLAYERS);
        CHECK_EQ_INT(count(sec, " open>"), 2);
        CHECK(strstr(sec, "<details class=\"grp chg\" id=\"against-layer-37\" open>") != NULL, "layer 37 open");
        CHECK(strstr(sec, "<tr class=\"first changed\"><td>layers.37.self_attn.q_a_proj<td>isolated"
                          "<td>0<td>0.995<td class=\"d\">-0.995<td>0<td>0<td class=\"d\">0<td>0<td>20<td class=\"d\">-20"
                          "<td>0<td>1.01<td>0<td>0<td>scale_inverted<td>ok\n"),
              "the fixed stage: run, other, difference");
        /* chained drift: run 20 - 0.2 L, other 20 - 0.1 L; at layer 10 -1 dB, same cosine */
        CHECK(strstr(sec, "<tr><td>layers.10.self_attn.q_a_proj<td>chained<td>0.985<td>0.985<td class=\"d\">0"
                          "<td>0<td>0<td class=\"d\">0<td>18<td>19<td class=\"d\">-1<td>1.03<td>1.03<td>0<td>0<td>ok<td>ok\n"),
              "a chained row's SQNR difference");
        CHECK(strstr(sec, "<b>layer 10</b> <span class=\"gs\">60 rows; largest SQNR change -1 dB at <code>self_attn.q_a_proj"
                          "</code> (chained)</span>"), "layer 10 summary: the largest change");
        CHECK(strstr(sec, "<b>layer 0</b> <span class=\"gs\">60 rows; SQNR equal in every matched row</span>"),
              "layer 0: nothing differs");
        /* rows only in one trace: the run's hostile stage of layer 59 (escaped), the other's extra stage */
        CHECK_EQ_INT(count(sec, "<tr class=\"only\">"), 2);
        CHECK_EQ_INT(count(sec, "<tr class=\"only\"><td>layers.59.&lt;script&gt;alert(1)&lt;/script&gt;<td>"), 2);
        CHECK(strstr(sec, "2 only in the run") != NULL, "layer 59 summary");
        char *only = slice(sec, "id=\"against-only-other\"", "</details>");
        CHECK(only && count(only, "<tr>") == 2 && strstr(only, "<td>layers.2.extra_probe<td>"), "only in the other");
        free(only);
        CHECK_EQ_INT(count(sec, "<script"), 0);
    }
    free(sec);
    CHECK_EQ_INT(count(page, "<script"), 1);
    free(page);

    /* incomparable traces are refused with exit 2, naming both files and the difference */
    nd_err e = {0};
    CHECK_EQ_INT(nd_trace_comparable("a.h5", t, "b.h5", o, &e), 0);
    o->tokens[5] = 7;
    CHECK_EQ_INT(nd_trace_comparable("a.h5", t, "b.h5", o, &e), ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, "a.h5 and b.h5 are not comparable: token 5 differs (1005 vs 7)") != NULL, "msg: %s", e.msg);
    o->ntokens = NTOK - 1;
    CHECK_EQ_INT(nd_trace_comparable("a.h5", t, "b.h5", o, &e), ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, "made from 16 and 15 tokens") != NULL, "msg: %s", e.msg);
    o->ntokens = NTOK;
    o->tokens[5] = 1005;
    snprintf(o->recipe, sizeof o->recipe, "llama");
    CHECK_EQ_INT(nd_trace_comparable("a.h5", t, "b.h5", o, &e), ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, "recipes deepseek_v4 and llama") != NULL, "msg: %s", e.msg);
    nd_trace_free(o);
    nd_trace_free(t);
}

/* Hostile strings where the new parts of the page show them: the worst stage of a group, the
 * verdict, the evidence and next command. */
static void test_hostile_summary(void) {
    nd_trace *t = synthetic();
    nd_row *r = row_of(t, 3, EVIL, "isolated");
    snprintf(r->verdict, sizeof r->verdict, "<b>bad</b>");
    r->cosine = 0.5;
    snprintf(t->summary.evidence, sizeof t->summary.evidence, "x <img src=y onerror=alert(3)>");
    snprintf(t->summary.next_command, sizeof t->summary.next_command, "nvfp4dbg trace '</code><script>' --override a=1");
    snprintf(t->summary.cause, sizeof t->summary.cause, "<i>c</i>");
    char *page = page_of(t, NULL, "s.h5", NULL);
    CHECK_EQ_INT(count(page, "<script"), 1);
    CHECK_EQ_INT(count(page, "<img"), 0);
    CHECK_EQ_INT(count(page, "<b>bad"), 0);
    CHECK_EQ_INT(count(page, "<i>c"), 0);
    /* the bad verdict: the group summary, the layer table, the flagged table, the row */
    CHECK_EQ_INT(count(page, "&lt;b&gt;bad&lt;/b&gt;"), 4);
    CHECK(strstr(page, "<b>layer 3</b> <span class=\"gs\">60 rows, <span class=\"bad\">1 flagged</span>; worst <code>"
                       "&lt;script&gt;alert(1)&lt;/script&gt;</code> (isolated) cosine 0.5,") != NULL,
          "hostile worst stage escaped in the group summary");
    CHECK(strstr(page, "<td><a href=\"#layer-3\">3</a><td>60<td>1<td>&lt;script&gt;alert(1)&lt;/script&gt;<td>isolated") != NULL,
          "and in the layer table");
    CHECK(strstr(page, "x &lt;img src=y onerror=alert(3)&gt;") != NULL, "evidence escaped");
    CHECK(strstr(page, "&#39;&lt;/code&gt;&lt;script&gt;&#39; --override") != NULL, "next command escaped");
    CHECK_EQ_INT(count(page, "&lt;i&gt;c&lt;/i&gt;"), 1);   /* the cause, escaped; no explain hint for a non-code */
    free(page);
    nd_trace_free(t);
}

/* Both outputs exactly zero (a zero weight scale on both paths): the trace stores cosine 1 and
 * SQNR 200, the tables say all-zero instead; a zero reference with a non-zero production is
 * shown as measured. */
static void test_all_zero(void) {
    nd_trace *t = synthetic();
    for (int md = 0; md < 2; md++) {
        nd_row *r = row_of(t, 4, "mlp.shared_experts.up_proj", md ? "chained" : "isolated");
        r->ref_amax = 0;
        r->prod_amax = md ? 0.5 : 0;
        r->cosine = 1;
        r->rel_l2 = 0;
        r->sqnr_db = 200;
    }
    char *page = page_of(t, NULL, "s.h5", NULL);
    char *g4 = slice(page, "id=\"layer-4\"", "</details>");
    CHECK(g4 && strstr(g4, "<td>layers.4.mlp.shared_experts.up_proj<td>4<td>linear<td>isolated<td>yes<td>4096<td>0<td>0<td>0<td>0"
                           "<td>all-zero<td>-<td>-<td>20.5<td>"),
          "all-zero row");
    CHECK(g4 && strstr(g4, "<td>layers.4.mlp.shared_experts.up_proj<td>4<td>linear<td>chained<td>yes<td>4096<td>0<td>0.5<td>0<td>0"
                           "<td>1<td>0<td>200<td>20.5<td>"),
          "a zero reference with a non-zero production output is not all-zero");
    free(g4);
    free(page);
    nd_trace_free(t);
}

static void test_write_and_routing_load(const char *dir) {
    char path[512], tmp[600], bad[600];
    snprintf(path, sizeof path, "%s/t.h5", dir);
    nd_trace_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.tool_version = "0.1.0";
    meta.checkpoint = "ckpt";
    meta.checkpoint_format = "compressed-tensors";
    meta.recipe = "deepseek_v4";
    meta.stack = "exact";
    meta.backend = "cpu";
    meta.device = "host";
    meta.modes = "isolated,chained";
    nd_trace_w *w = NULL;
    nd_err e = {0};
    const int64_t toks[3] = {11, 12, 13}; /* a routing decision is [tokens, k] */
    CHECK_EQ_INT(nd_trace_create(path, &meta, toks, 3, &w, &e), 0);
    if (!w) { fprintf(stderr, "%s\n", e.msg); return; }
    const char *names[3] = {"layers.0.mlp.gate", "layers.0.mlp.experts.0.up_proj", "layers.1.mlp.gate"};
    const char *ops[3] = {"router", "linear", "router"};
    for (int i = 0; i < 6; i++) {
        nd_row r;
        memset(&r, 0, sizeof r);
        r.index = i;
        r.layer = i / 4;
        snprintf(r.name, sizeof r.name, "%s", names[i / 2]);
        snprintf(r.op, sizeof r.op, "%s", ops[i / 2]);
        snprintf(r.mode, sizeof r.mode, "%s", i % 2 ? "chained" : "isolated");
        snprintf(r.verdict, sizeof r.verdict, "ok");
        r.cosine = 1;
        r.sqnr_db = 200;
        r.floor_sqnr_db = r.scale_ratio = r.sat_frac = r.topk_agree = r.weight_rel_l2 = NAN;
        CHECK_EQ_INT(nd_trace_append(w, &r, &e), 0);
    }
    int32_t ref[3 * 2] = {0, 5, 2, 3, 7, 1}, prod[3 * 2] = {0, 5, 3, 2, 7, 4};
    CHECK_EQ_INT(nd_trace_put_routing(w, "layers.0.mlp.gate", "ref", ref, 3, 2, &e), 0);
    CHECK_EQ_INT(nd_trace_put_routing(w, "layers.0.mlp.gate", "prod", prod, 3, 2, &e), 0);
    nd_trace_summary s;
    memset(&s, 0, sizeof s);
    snprintf(s.status, sizeof s.status, "ok");
    /* a crafted trace's stored next command is never offered as one to run */
    snprintf(s.next_command, sizeof s.next_command, "nvfp4dbg trace x; touch /tmp/pwned #");
    /* ... nor a crafted cause as an explain command */
    snprintf(s.cause, sizeof s.cause, "x; touch /tmp/owned");
    CHECK_EQ_INT(nd_trace_finish(w, &s, &e), 0);
    nd_trace *t = NULL;
    CHECK_EQ_INT(nd_trace_read(path, &t, &e), 0);
    if (!t) { fprintf(stderr, "%s\n", e.msg); return; }
    nd_report_routing rt;
    CHECK_EQ_INT(nd_report_routing_load(path, t, &rt, &e), 0);
    CHECK_EQ_INT(rt.n, 1);           /* one entry per stage, not per mode */
    CHECK_EQ_INT(rt.nmissing, 1);    /* layers.1.mlp.gate has no /routing entry */
    if (rt.n == 1) {
        CHECK(!strcmp(rt.picks[0].stage, "layers.0.mlp.gate"), "stage %s", rt.picks[0].stage);
        CHECK_EQ_INT(rt.picks[0].t, 3);
        CHECK_EQ_INT(rt.picks[0].k, 2);
        CHECK(rt.picks[0].ref && rt.picks[0].prod && !memcmp(rt.picks[0].ref, ref, sizeof ref) &&
                  !memcmp(rt.picks[0].prod, prod, sizeof prod), "picks read back");
    }
    /* token 1 ({2,3} vs {3,2}) agrees as a set; token 2 differs in one slot: 5 of 6 picks agree */
    snprintf(path, sizeof path, "%s/page.html", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK_EQ_INT(nd_report_write(path, t, &rt, "t.h5", NULL, &e), 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 1000, "page written");
    CHECK(stat(tmp, &st) != 0, "no .tmp left behind");
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 20);
    size_t got = f ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    if (f) fclose(f);
    CHECK(got > 0 && strstr(buf, "83.3% of picks agree") && strstr(buf, "1 token with different experts") &&
              strstr(buf, "token 2: reference {7, 1}, production {7, 4}"), "routing figures in the page");
    CHECK(strstr(buf, "1 router stage without a /routing entry") != NULL, "missing routing noted");
    CHECK(!strstr(buf, "touch /tmp/pwned") && strstr(buf, "not shown: the trace's stored command is not one nvfp4dbg writes"),
          "a crafted next command is not shown");
    CHECK(!strstr(buf, "nvfp4dbg explain x;") && strstr(buf, "(not a cause code)"), "a crafted cause is not an explain command");
    free(buf);
    /* an output folder that does not exist: exit 2, nothing created */
    snprintf(bad, sizeof bad, "%s/no/such/dir/page.html", dir);
    CHECK_EQ_INT(nd_report_write(bad, t, &rt, "t.h5", NULL, &e), ND_EXIT_BADINPUT);
    CHECK(strstr(e.msg, "no/such/dir/page.html: ") != NULL && strstr(e.msg, "No such file") != NULL, "message names the output and why: %s", e.msg);
    nd_report_routing_free(&rt);
    nd_trace_free(t);
}

int main(void) {
    char dir[] = "test-report-XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_escape();
    test_page();
    test_clean_single_mode();
    test_captured_mode();
    test_summary_header();
    test_tooltips();
    test_against();
    test_hostile_summary();
    test_all_zero();
    test_write_and_routing_load(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    return nd_test_report("report_page");
}

/* rules.c - GET /rules: each rule's formula, parameters and constraints,
 * straight from the library's self-description, and the body fields the
 * field table gives its route: those the rule takes, and those that do
 * not apply to it, so a client sees which option applies where. */
#include "srv.h"

typedef struct {
    srv_buf *b;
    int rule;     /* a rule, or SRV_MODEL_MULTIHEAD */
    int linear;   /* multi-head: -1 either attention, else 0 softmax or 1 linear */
    int applies;  /* list the fields that apply (1) or those refused (0) */
    int n;
} field_writer;

static void put_field(void *ud, const srv_field *f)
{
    field_writer *w = ud;
    int applies = w->linear < 0 ? srv_field_applies(f, w->rule) : srv_field_applies_mha(f, w->linear);
    if (applies != w->applies)
        return;
    srv_buf *b = w->b;
    if (w->n++)
        srv_buf_putc(b, ',');
    if (!w->applies) {
        srv_buf_json_str(b, f->name);
        return;
    }
    unsigned req = w->rule == SRV_MODEL_MULTIHEAD ? SRV_F_REQ_MHA : SRV_F_REQ_ATT;
    srv_buf_puts(b, "{\"name\":");
    srv_buf_json_str(b, f->name);
    srv_buf_puts(b, ",\"type\":");
    srv_buf_json_str(b, srv_field_type(f));
    srv_buf_puts(b, (f->where & req) ? ",\"required\":true" : ",\"required\":false");
    srv_buf_puts(b, ",\"description\":");
    srv_buf_json_str(b, f->desc);
    srv_buf_putc(b, '}');
}

/* "fields": what the route takes; "not_applicable": the options it answers with
 * 422 (they have no meaning for the rule). */
static void put_fields(srv_buf *b, int rule)
{
    unsigned where = (rule == SRV_MODEL_MULTIHEAD ? SRV_F_MHA : SRV_F_ATT) | SRV_F_BODY;
    field_writer w = {b, rule, -1, 1, 0};
    srv_buf_puts(b, ",\"fields\":[");
    srv_fields_each(where, put_field, &w);
    srv_buf_puts(b, "],\"not_applicable\":[");
    w.applies = 0;
    w.n = 0;
    srv_fields_each(where, put_field, &w);
    srv_buf_putc(b, ']');
}

/* /multihead's fields that one form of its attention refuses with 422
 * (feature_map on softmax; on linear what rule linear refuses). */
static void put_mha_by_attention(srv_buf *b)
{
    static const char *const forms[] = {"softmax", "linear"};
    srv_buf_puts(b, ",\"not_applicable_by_attention\":{");
    for (int linear = 0; linear < 2; linear++) {
        field_writer w = {b, SRV_MODEL_MULTIHEAD, linear, 0, 0};
        srv_buf_printf(b, "%s\"%s\":[", linear ? "," : "", forms[linear]);
        srv_fields_each(SRV_F_MHA | SRV_F_BODY, put_field, &w);
        srv_buf_putc(b, ']');
    }
    srv_buf_putc(b, '}');
}

void srv_rules_json(srv_buf *b)
{
    srv_buf_puts(b, "{\"rules\":[");
    for (int r = 0; r < ATTN_RULE_COUNT; r++) {
        const attn_rule_info *ri = attn_rule_describe((attn_rule)r);
        if (!ri)
            continue;
        if (r)
            srv_buf_putc(b, ',');
        srv_buf_puts(b, "{\"name\":");
        srv_buf_json_str(b, ri->name);
        srv_buf_puts(b, ",\"title\":");
        srv_buf_json_str(b, ri->title);
        srv_buf_puts(b, ",\"formula\":");
        srv_buf_json_str(b, ri->formula);
        srv_buf_printf(b, ",\"needs_same_dim\":%s,\"path\":\"/attention/%s\",\"params\":[",
                       ri->needs_same_dim ? "true" : "false", ri->name);
        for (size_t i = 0; i < ri->n_params; i++) {
            if (i)
                srv_buf_putc(b, ',');
            srv_buf_puts(b, "{\"name\":");
            srv_buf_json_str(b, ri->params[i].name);
            srv_buf_puts(b, ",\"shape\":");
            srv_buf_json_str(b, ri->params[i].shape);
            srv_buf_printf(b, ",\"optional\":%s}", ri->params[i].optional ? "true" : "false");
        }
        srv_buf_putc(b, ']');
        put_fields(b, r);
        srv_buf_putc(b, '}');
    }
    srv_buf_puts(b, "],\"multihead\":{\"path\":\"/multihead\"");
    put_fields(b, SRV_MODEL_MULTIHEAD);
    put_mha_by_attention(b);
    srv_buf_puts(b, "}}\n");
}

/* rules.c - GET /rules: each rule's formula, parameters and constraints,
 * straight from the library's self-description, and the body fields the
 * field table gives its route. */
#include "srv.h"

static void put_field(void *ud, const srv_field *f)
{
    srv_buf *b = ud;
    if (b->len && b->data[b->len - 1] != '[')
        srv_buf_putc(b, ',');
    srv_buf_puts(b, "{\"name\":");
    srv_buf_json_str(b, f->name);
    srv_buf_puts(b, ",\"type\":");
    srv_buf_json_str(b, srv_field_type(f));
    srv_buf_puts(b, (f->where & SRV_F_REQ_ATT) ? ",\"required\":true" : ",\"required\":false");
    srv_buf_puts(b, ",\"description\":");
    srv_buf_json_str(b, f->desc);
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
        srv_buf_puts(b, "],\"fields\":[");
        srv_fields_each(SRV_F_ATT | SRV_F_BODY, put_field, b);
        srv_buf_puts(b, "]}");
    }
    srv_buf_puts(b, "]}\n");
}

/* rules.c - GET /rules: each rule's formula, parameters and constraints,
 * straight from the library's self-description. */
#include "srv.h"

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
        srv_buf_puts(b, "]}");
    }
    srv_buf_puts(b, "]}\n");
}

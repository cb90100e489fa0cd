/* fuzz_common.h - what every fuzz target shares: the server's config with
 * caps small enough that one input computes in microseconds. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include "srv.h"

/* srv_cfg lives in main.c, which the targets do not link. */
srv_config srv_cfg;

/* Small caps keep each execution fast; depth as in production. */
static inline void fuzz_config(void)
{
    if (srv_cfg.max_body)
        return;
    srv_cfg.bind = "127.0.0.1";
    srv_cfg.threads = 1;
    srv_cfg.compute_threads = 1;
    srv_cfg.max_inflight = 2;
    srv_cfg.max_body = (size_t)1 << 20;
    srv_cfg.max_elements = 4096;
    srv_cfg.max_weights = 4096;
    srv_cfg.timeout = 1;
    srv_cfg.max_connections = 16;
    srv_cfg.max_depth = 32;
    srv_cfg.log_level = SRV_LOG_ERROR;
    /* sessions: a few, small, named by the inputs (see fuzz_request.c) */
    srv_cfg.max_sessions = 4;
    srv_cfg.session_memory = (size_t)1 << 20;
    srv_cfg.session_max_tokens = 256;
    srv_cfg.session_ttl = 60;
    srv_cfg.trust_session_id = 1;
}

#endif /* FUZZ_COMMON_H */

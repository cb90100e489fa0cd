/* bare_mhd.c - the baseline of the small-request row of `make bench`: a
 * libmicrohttpd server with the service's daemon flags, thread pool and
 * connection memory (server/http.c) that reads and discards any request body and answers a
 * fixed 200 with "{}". What is left between it and attn-server is the
 * service's own work per request.
 *
 * Usage: bare_mhd PORT [THREADS]   (listens on 127.0.0.1; THREADS default 4,
 * attn-server's default pool on two cores). Runs until SIGTERM or SIGINT. */
#include <microhttpd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct MHD_Response *fixed;
static char done_marker; /* con_cls after the body has been read */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    if (*upload_size) { /* a body chunk: consume and wait for the end */
        *upload_size = 0;
        return MHD_YES;
    }
    if (!*con_cls) { /* first call: headers only */
        *con_cls = &done_marker;
        return MHD_YES;
    }
    return MHD_queue_response(conn, MHD_HTTP_OK, fixed);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bare_mhd PORT [THREADS]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (port < 1 || port > 65535 || threads < 1 || threads > 1024) {
        fprintf(stderr, "bare_mhd: bad port or thread count\n");
        return 2;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    static char body[] = "{}";
    fixed = MHD_create_response_from_buffer(sizeof body - 1, body, MHD_RESPMEM_PERSISTENT);
    if (!fixed || MHD_add_response_header(fixed, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") != MHD_YES)
        return 1;

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME,
        (uint16_t)port, NULL, NULL, on_request, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads,
        MHD_OPTION_THREAD_STACK_SIZE, (size_t)1 << 20,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)256 << 10, /* CONN_MEMORY */
        MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_LIMIT, 1000u,
        MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "bare_mhd: cannot listen on 127.0.0.1:%d\n", port);
        return 1;
    }
    int sig = 0;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    MHD_destroy_response(fixed);
    return 0;
}

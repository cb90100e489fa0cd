/* http_bench.c - a C client for the service rows of `make bench`: posts one
 * body to one URL over a kept-alive loopback connection, REPS times after a
 * warm-up, and prints the medians as one JSON object: the client's wall
 * time per request (sent to answer fully read), the time to the answer's
 * status line (the rest of the wall is the answer's transfer), the wall
 * minus the Server-Timing compute of the same request (rest_ms: what the
 * service adds around the computation) and the Server-Timing parts (parse,
 * compute, encode) the server reported; best_wall_ms and best_rest_ms are
 * the least of each, steadier than medians on a shared machine. libcurl,
 * as a C program calling the service would; the answer is read (in 512 KiB
 * pieces) and dropped.
 *
 * Usage: http_bench [-H 'Name: value']... URL BODY_FILE [REPS [THEN_URL THEN_BODY_FILE]]
 *        (REPS default 9, at most 200; each -H adds a request header, and a
 *        Content-Type given so replaces the default application/json: the
 *        KServe binary rows send application/octet-stream and
 *        Inference-Header-Content-Length)
 * With THEN_URL, each timed request is followed by an untimed POST of
 * THEN_BODY_FILE there (the session rows truncate the cache back, so every
 * step runs at the same length). Exits 1 when a request fails or answers
 * other than 200. */
#include <curl/curl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPS 200

enum { PARSE, COMPUTE, ENCODE, PARTS };
static const char *const part_names[PARTS] = {"parse", "compute", "encode"};

typedef struct {
    double part[PARTS]; /* ms, from the last Server-Timing header */
    size_t bytes;       /* of the answer's body */
    double first_byte;  /* when the status line came (now()), then s from the start */
} reply;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    ((reply *)arg)->bytes += size * n;
    return size * n;
}

/* "Server-Timing: parse;dur=1.2, compute;dur=3.4, encode;dur=0.5" */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    reply *r = arg;
    size_t len = size * n;
    if (len > 5 && strncmp(p, "HTTP/", 5) == 0)
        r->first_byte = now();
    static const char key[] = "server-timing:";
    if (len < sizeof key || strncasecmp(p, key, sizeof key - 1) != 0)
        return len;
    char line[512];
    size_t k = len < sizeof line - 1 ? len : sizeof line - 1;
    memcpy(line, p, k);
    line[k] = '\0';
    for (int i = 0; i < PARTS; i++) {
        char pat[32];
        snprintf(pat, sizeof pat, "%s;dur=", part_names[i]);
        const char *at = strstr(line, pat);
        r->part[i] = at ? strtod(at + strlen(pat), NULL) : 0.0;
    }
    return len;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
            fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        *len = n < 0 ? 0 : (size_t)n;
    }
    fclose(f);
    return buf;
}

/* One POST; 0 when it answered 200. */
static int post(CURL *c, reply *r, double *seconds)
{
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    memset(r, 0, sizeof *r);
    double t0 = now();
    CURLcode rc = curl_easy_perform(c);
    *seconds = now() - t0;
    r->first_byte -= t0;
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || status != 200) {
        fprintf(stderr, "http_bench: %s, status %ld\n", curl_easy_strerror(rc), status);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct curl_slist *hdr = NULL;
    int typed = 0;
    while (argc > 2 && strcmp(argv[1], "-H") == 0) {
        hdr = curl_slist_append(hdr, argv[2]);
        typed |= strncasecmp(argv[2], "content-type:", 13) == 0;
        argc -= 2;
        argv += 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: http_bench [-H 'Name: value']... URL BODY_FILE [REPS [THEN_URL THEN_BODY_FILE]]\n");
        return 2;
    }
    int reps = argc > 3 ? atoi(argv[3]) : 9;
    size_t len = 0, then_len = 0;
    char *body = read_file(argv[2], &len);
    char *then = argc > 5 ? read_file(argv[5], &then_len) : NULL;
    if (reps < 1 || reps > MAX_REPS || !body || (argc > 5 && !then)) {
        fprintf(stderr, "http_bench: bad REPS (1..%d) or unreadable %s\n", MAX_REPS, argv[2]);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    if (!typed)
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
    hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip */
    reply r;
    curl_easy_setopt(c, CURLOPT_URL, argv[1]);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    /* Read the answer in 512 KiB pieces, as a client that expects megabytes
     * would: with libcurl's default 16 KiB, receiving a 2.8 MB answer on
     * loopback took this client about 0.5 ms more (its own recv calls, not
     * the server's work) */
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);

    double wall[MAX_REPS], first[MAX_REPS], rest[MAX_REPS], part[PARTS][MAX_REPS], t;
    reply after;
    int bad = post(c, &r, &t); /* warm-up */
    for (int i = 0; i <= reps && !bad; i++) {
        if (then) { /* untimed, on the same connection */
            curl_easy_setopt(c, CURLOPT_URL, argv[4]);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, then);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)then_len);
            bad = post(c, &after, &t);
            curl_easy_setopt(c, CURLOPT_URL, argv[1]);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        }
        if (i == reps || bad)
            break;
        bad = post(c, &r, &t);
        wall[i] = t * 1e3;
        first[i] = r.first_byte * 1e3;
        rest[i] = wall[i] - r.part[COMPUTE];
        for (int p = 0; p < PARTS; p++)
            part[p][i] = r.part[p];
    }
    if (!bad) {
        printf("{\"request_bytes\": %zu, \"response_bytes\": %zu, \"reps\": %d, \"wall_ms\": %.4f",
               len, r.bytes, reps, median(wall, reps));
        printf(", \"first_byte_ms\": %.4f, \"best_wall_ms\": %.4f", median(first, reps), wall[0]);
        double rest_med = median(rest, reps); /* sorts: rest[0] is the least */
        printf(", \"rest_ms\": %.4f, \"best_rest_ms\": %.4f", rest_med, rest[0]);
        for (int p = 0; p < PARTS; p++)
            printf(", \"%s_ms\": %.4f", part_names[p], median(part[p], reps));
        printf("}\n");
    }
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    free(body);
    free(then);
    return bad ? 1 : 0;
}

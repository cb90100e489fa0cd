/* static.c - the demo's files from srv_cfg.static_dir, with content types
 * and no way out of that directory. */
#include "srv.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".htm", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".jpg", "image/jpeg"},
    {".ico", "image/x-icon"},
    {".wasm", "application/wasm"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
    {".md", "text/markdown; charset=utf-8"},
    {".yaml", "application/yaml"},
    {".yml", "application/yaml"},
};

int srv_is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int srv_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void srv_exe_dir(char *out, size_t n)
{
    ssize_t k = readlink("/proc/self/exe", out, n - 1);
    if (k <= 0) {
        snprintf(out, n, ".");
        return;
    }
    out[k] = '\0';
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = '\0';
}

static const char *content_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strchr(dot, '/'))
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            if (strcasecmp(dot, types[i].ext) == 0)
                return types[i].type;
    return "application/octet-stream";
}

/* Only plain names: letters, digits, '-', '_', '.', and '/' between
 * segments; no segment may start with '.' (so no "..", no hidden files). */
static int safe_rel(const char *rel)
{
    if (!*rel || strlen(rel) > 512)
        return 0;
    int seg_start = 1;
    for (const char *p = rel; *p; p++) {
        char c = *p;
        if (c == '/') {
            if (seg_start)
                return 0; /* "//" or leading '/' */
            seg_start = 1;
            continue;
        }
        if (seg_start && c == '.')
            return 0;
        seg_start = 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return !seg_start;
}

int srv_static_open(const char *rel, const char **ctype, uint64_t *size)
{
    if (!srv_cfg.static_dir || !safe_rel(rel))
        return -1;
    char path[PATH_MAX], real[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", srv_cfg.static_dir, rel) >= sizeof path)
        return -1;
    /* A symlink inside the folder must not lead out of it either. */
    if (!realpath(path, real))
        return -1;
    size_t dl = strlen(srv_cfg.static_dir);
    if (strncmp(real, srv_cfg.static_dir, dl) != 0 || real[dl] != '/')
        return -1;
    int fd = open(real, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    *ctype = content_type(real);
    return fd;
}

/* kserve_infer.c - POST /v2/models/{name}/infer: the JSON header and its
 * binary tensor data to a job, and the job to the protocol's response; for
 * multihead-decode, Triton's sequence parameters to a decode session's
 * create, step and end (sessions.c: this file only adapts names). */
#include "srv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define KS_MAX_INPUTS 32 /* more than any model takes */

/* One $request_input as read, before it lands in the job. */
typedef struct {
    const char *name;  /* borrowed from the parsed header */
    int is_bool, is_int;  /* BOOL, INT64 or INT32 (indices), else FP32 */
    int int_bytes;        /* indices: 8 (INT64) or 4 (INT32) */
    int rank;
    int64_t shape[ATTN_MAX_RANK];
    int64_t count;
    float *f;          /* arena or codec owned */
    uint8_t *m;
    int64_t *ix;
    size_t n_ix;
} ks_input;

/* A multihead-decode request's sequence: the session it names. */
typedef struct {
    char id[40];      /* the session's id once known ("" before) */
    int created;      /* this request started it */
    int64_t length;   /* the cache's rows after the step */
} ks_seq;

/* The body: the JSON header, then binary tensor data from bin on. */
typedef struct {
    int model;
    unsigned where;    /* the field table's job bits for this request */
    ks_seq *seq;       /* multihead-decode only, else NULL */
    const char *bin;
    uint64_t bin_len, off; /* bytes after the header; bytes the inputs took */
} ks_body;

static int host_is_le(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Every key of obj must be one of allowed (NULL-terminated). */
static int only_keys(json_t *obj, const char *const *allowed, const char *what, srv_err *e)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int i = 0;
        while (allowed[i] && strcmp(key, allowed[i]))
            i++;
        if (allowed[i])
            continue;
        char list[300] = "";
        for (i = 0; allowed[i]; i++)
            srv_name_list(list, sizeof list, allowed[i]);
        return srv_fail(e, 400, "unknown_field", key, "unknown %s \"%.60s\"; expected one of: %s",
                        what, key, list);
    }
    return 0;
}

/* ---------------------------------------------------------------- the header */

/* Splits off the JSON header (Inference-Header-Content-Length bytes, else
 * all) and parses it into call->root. */
static int parse_header(const srv_target *t, const char *body, size_t len, srv_call *call,
                        ks_body *kb, srv_err *e)
{
    static const char hdr_name[] = "Inference-Header-Content-Length";
    size_t hl = len;
    if (t->len_hdr < 0)
        return srv_fail(e, 400, "invalid_field", hdr_name, "%s must be a decimal byte count", hdr_name);
    if (t->len_hdr > 0) {
        if (t->len_hdr_value > len)
            return srv_fail(e, 400, "invalid_field", hdr_name,
                            "%s is %llu but the body has only %zu bytes", hdr_name,
                            (unsigned long long)t->len_hdr_value, len);
        hl = (size_t)t->len_hdr_value;
    }
    const char *hdr = body;
    if (hl < len) {
        /* The scanner wants a NUL after the JSON: copy the header alone. */
        char *copy = srv_arena_alloc(&call->arena, hl + 1);
        if (!copy)
            return srv_fail(e, 503, "overloaded", "", "out of memory reading the request");
        memcpy(copy, body, hl);
        copy[hl] = '\0';
        hdr = copy;
    }
    kb->bin = body + hl;
    kb->bin_len = len - hl;
    kb->off = 0;
    return srv_call_parse(call, hdr, hl, "the JSON header", e);
}

/* Whether only a sequence's start takes the field name at place. */
static int start_only(const char *name, unsigned place)
{
    return srv_field_find(name, SRV_F_SES_NEW | place) && !srv_field_find(name, SRV_F_SES_STEP | place);
}

/* multihead-decode: a sequence's start takes the creation parameters (and
 * inputs) beside the step's; its other requests only the step's. */
static int decode_where(json_t *params, srv_job *j, srv_err *e)
{
    json_t *st = json_object_get(params, "sequence_start"), *v;
    if (st && !json_is_boolean(st))
        return srv_fail(e, 400, "invalid_field", "sequence_start", "sequence_start must be true or false");
    int start = json_is_true(st);
    j->ses.where = SRV_F_SES_STEP | (start ? SRV_F_SES_NEW : 0u);
    const char *key;
    json_object_foreach(params, key, v) {
        if (!start && start_only(key, SRV_F_KS_PARAM))
            return srv_fail(e, 400, "invalid_field", key,
                            "parameter %s is taken only with sequence_start: true (a sequence's "
                            "sizes and options are fixed when it starts)", key);
    }
    return 0;
}

/* obj[key] back into a Jansson string when the scanner lifted it out of
 * the envelope (a string of 256 bytes or more without escapes), checked
 * as Jansson checks the short ones: UTF-8, no control character. */
static int unlift(const srv_codec *c, json_t *obj, const char *key, srv_err *e)
{
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    const srv_blob *b = v ? srv_blob_of(c->scan, v) : NULL;
    if (!b || !b->is_string)
        return 0;
    json_t *s = NULL;
    size_t i = 0;
    while (i < b->len && (unsigned char)b->str[i] >= 0x20)
        i++;
    if (i < b->len || !(s = json_stringn(b->str, b->len)))
        return srv_fail(e, 400, "invalid_json", key,
                        "%s must be a JSON string of UTF-8 text without control characters", key);
    if (json_object_set_new(obj, key, s))
        return srv_fail(e, 503, "overloaded", "", "out of memory");
    return 0;
}

/* The strings the request names things with, whatever their length: its
 * id, model name and version, and each input's name and datatype and
 * output's name. */
static int unlift_names(const srv_codec *c, json_t *root, srv_err *e)
{
    if (unlift(c, root, "id", e) || unlift(c, root, "model_name", e) ||
        unlift(c, root, "model_version", e))
        return -1;
    json_t *ins = json_object_get(root, "inputs"), *outs = json_object_get(root, "outputs");
    for (size_t i = 0; json_is_array(ins) && i < json_array_size(ins); i++)
        if (unlift(c, json_array_get(ins, i), "name", e) ||
            unlift(c, json_array_get(ins, i), "datatype", e))
            return -1;
    for (size_t i = 0; json_is_array(outs) && i < json_array_size(outs); i++)
        if (unlift(c, json_array_get(outs, i), "name", e))
            return -1;
    return 0;
}

/* id, model_name, model_version and parameters; the parameters into the
 * job. */
static int read_top(json_t *root, ks_body *kb, srv_codec *c, srv_job *j, srv_err *e)
{
    static const char *const root_keys[] = {"id", "parameters", "inputs", "outputs",
                                            "model_name", "model_version", NULL};
    if (only_keys(root, root_keys, "field", e) || unlift_names(c, root, e))
        return -1;
    json_t *id = json_object_get(root, "id");
    if (id && !json_is_string(id))
        return srv_fail(e, 400, "invalid_field", "id", "id must be a string");
    char name[64];
    srv_kserve_model_name(kb->model, name, sizeof name);
    json_t *mn = json_object_get(root, "model_name");
    if (mn && (!json_is_string(mn) || strcmp(json_string_value(mn), name)))
        return srv_fail(e, 400, "invalid_field", "model_name",
                        "model_name does not match the model in the path (%s)", name);
    json_t *mv = json_object_get(root, "model_version");
    if (mv && (!json_is_string(mv) || strcmp(json_string_value(mv), SRV_KS_MODEL_VERSION)))
        return srv_fail(e, 400, "invalid_field", "model_version",
                        "model_version must be \"" SRV_KS_MODEL_VERSION "\", the only version of %s",
                        name);
    json_t *params = json_object_get(root, "parameters");
    if (params && !json_is_object(params))
        return srv_fail(e, 400, "invalid_field", "parameters", "parameters must be an object");
    if (!params) {
        params = json_object();
        if (!params || json_object_set_new(root, "parameters", params))
            return srv_fail(e, 503, "overloaded", "", "out of memory");
    }
    if (kb->model == SRV_MODEL_DECODE && decode_where(params, j, e))
        return -1;
    kb->where = kb->model == SRV_MODEL_DECODE ? srv_job_where(j) : srv_kserve_where(kb->model, 0);
    unsigned place = SRV_F_KS_PARAM | (kb->model == ATTN_RULE_CONCAT ? SRV_F_CONCAT : 0u);
    return srv_fields_read(params, place, "parameter", c, j, e);
}

/* ---------------------------------------------------------------- outputs */

typedef struct {
    const char *name; /* "output", "weights", "lse" or "layout" */
    int binary;
} ks_output;

typedef struct {
    ks_output o[4];
    int n;
} ks_outputs;

static int read_output(json_t *o, int bin_all, ks_outputs *outs, srv_err *e)
{
    static const char *const out_keys[] = {"name", "parameters", NULL};
    static const char *const out_param_keys[] = {"binary_data", NULL};
    json_t *nm, *p, *bd;
    if (!json_is_object(o) || !json_is_string(nm = json_object_get(o, "name")))
        return srv_fail(e, 400, "invalid_field", "outputs", "each output must be {\"name\": ...}");
    if (only_keys(o, out_keys, "output field", e))
        return -1;
    const char *s = json_string_value(nm);
    if (strcmp(s, "output") && strcmp(s, "weights") && strcmp(s, "lse") && strcmp(s, "layout"))
        return srv_fail(e, 400, "invalid_field", "outputs",
                        "no output named \"%.60s\"; the outputs are output, weights, lse (each "
                        "query row's log-sum-exp) and layout (a sparsity pattern's block layout)", s);
    for (int i = 0; i < outs->n; i++)
        if (!strcmp(outs->o[i].name, s))
            return srv_fail(e, 400, "invalid_field", "outputs", "output %s is listed twice", s);
    int bin = bin_all;
    if ((p = json_object_get(o, "parameters"))) {
        if (!json_is_object(p))
            return srv_fail(e, 400, "invalid_field", "outputs", "output %s: parameters must be an object", s);
        if (only_keys(p, out_param_keys, "output parameter", e))
            return -1;
        if ((bd = json_object_get(p, "binary_data")) && !json_is_boolean(bd))
            return srv_fail(e, 400, "invalid_field", "binary_data", "%s: binary_data must be true or false", s);
        bin = bd ? json_is_true(bd) : bin_all;
    }
    outs->o[outs->n++] = (ks_output){s, bin};
    return 0;
}

/* 400 when the parameter that makes an output (need_weights: weights,
 * return_layout: layout) is given and says otherwise than outputs, which
 * decides: the parameter would be ignored. */
static int output_agrees(json_t *root, const char *param, const char *output, int listed,
                         srv_err *e)
{
    json_t *v = json_object_get(json_object_get(root, "parameters"), param);
    if (!v || json_is_true(v) == listed)
        return 0;
    if (listed)
        return srv_fail(e, 400, "invalid_field", "outputs", "outputs asks for %s but %s is false",
                        output, param);
    return srv_fail(e, 400, "invalid_field", "outputs",
                    "%s is true but outputs does not ask for %s: add it to outputs, or leave %s out",
                    param, output, param);
}

/* The request's "outputs" (or output, weights unless need_weights is
 * false, lse with return_lse and layout with return_layout, when absent);
 * weights, lse and a layout not asked for are not built; asking for lse
 * is return_lse, for layout return_layout. */
static int read_outputs(json_t *root, srv_job *j, ks_outputs *outs, srv_err *e)
{
    json_t *jo = json_object_get(root, "outputs");
    int *nw = j->kind == SRV_JOB_MULTIHEAD ? &j->u.mha.opt.need_weights : &j->u.att.opt.need_weights;
    outs->n = 0;
    if (!jo || (json_is_array(jo) && json_array_size(jo) == 0)) { /* none named: all, as Triton */
        outs->o[outs->n++] = (ks_output){"output", j->binary_output};
        if (*nw)
            outs->o[outs->n++] = (ks_output){"weights", j->binary_output};
        if (j->return_lse)
            outs->o[outs->n++] = (ks_output){"lse", j->binary_output};
        if (j->return_layout)
            outs->o[outs->n++] = (ks_output){"layout", j->binary_output};
        return 0;
    }
    if (!json_is_array(jo))
        return srv_fail(e, 400, "invalid_field", "outputs", "outputs must be an array of {\"name\": ...}");
    if (json_array_size(jo) > 4)
        return srv_fail(e, 400, "invalid_field", "outputs",
                        "outputs lists %zu tensors; the models have at most four: output, weights, "
                        "lse and layout", json_array_size(jo));
    int want_w = 0, want_l = 0, want_lse = 0;
    for (size_t i = 0; i < json_array_size(jo); i++) {
        if (read_output(json_array_get(jo, i), j->binary_output, outs, e))
            return -1;
        want_w |= !strcmp(outs->o[outs->n - 1].name, "weights");
        want_lse |= !strcmp(outs->o[outs->n - 1].name, "lse");
        want_l |= !strcmp(outs->o[outs->n - 1].name, "layout");
    }
    if (output_agrees(root, "need_weights", "weights", want_w, e) ||
        output_agrees(root, "return_lse", "lse", want_lse, e) ||
        output_agrees(root, "return_layout", "layout", want_l, e))
        return -1;
    j->return_lse = want_lse;
    j->return_layout = want_l;
    *nw = want_w;
    return 0;
}

/* ---------------------------------------------------------------- inputs */

typedef struct {
    char s[400];
} name_list;

static void list_field(void *ud, const srv_field *f)
{
    srv_name_list(((name_list *)ud)->s, sizeof ((name_list *)ud)->s, f->name);
}

/* Which of the model's inputs name is: a field of the table (*f), or a
 * learned parameter of the rule (*f NULL). */
static int find_input(const ks_body *kb, const char *name, const srv_field **f, srv_err *e)
{
    unsigned where = kb->where | SRV_F_KS_INPUT;
    const attn_rule_info *ri = kb->model < ATTN_RULE_COUNT ? attn_rule_describe((attn_rule)kb->model) : NULL;
    if ((*f = srv_field_find(name, where)))
        return 0;
    if (kb->model == SRV_MODEL_DECODE && start_only(name, SRV_F_KS_INPUT))
        return srv_fail(e, 400, "invalid_field", name,
                        "input %.60s is taken only with sequence_start: true (a sequence's options "
                        "are fixed when it starts)", name);
    for (size_t i = 0; ri && i < ri->n_params; i++)
        if (!strcmp(ri->params[i].name, name))
            return 0;
    name_list l = {""};
    srv_fields_each(where, list_field, &l);
    for (size_t i = 0; ri && i < ri->n_params; i++)
        srv_name_list(l.s, sizeof l.s, ri->params[i].name);
    return srv_fail(e, 400, "invalid_field", name, "model has no input \"%.60s\"; its inputs are: %s",
                    name, l.s);
}

/* name, datatype and shape of one input, checked. */
static int read_input_head(const ks_body *kb, json_t *j, ks_input *in, srv_err *e)
{
    static const char *const in_keys[] = {"name", "shape", "datatype", "parameters", "data", NULL};
    const srv_field *f;
    if (!json_is_object(j))
        return srv_fail(e, 400, "invalid_field", "inputs", "each input must be an object");
    if (only_keys(j, in_keys, "input field", e))
        return -1;
    json_t *jn = json_object_get(j, "name"), *dt = json_object_get(j, "datatype");
    if (!json_is_string(jn))
        return srv_fail(e, 400, "invalid_field", "inputs", "each input needs a \"name\" string");
    const char *nm = in->name = json_string_value(jn);
    if (find_input(kb, nm, &f, e))
        return -1;
    in->is_bool = f && f->type == SRV_FT_MASK;
    in->is_int = f && f->type == SRV_FT_INDICES;
    const char *want = in->is_bool ? "BOOL" : in->is_int ? "INT64 or INT32" : "FP32";
    if (!json_is_string(dt))
        return srv_fail(e, 400, "invalid_field", nm, "input %s needs a \"datatype\" (%s)", nm, want);
    const char *got = json_string_value(dt);
    in->int_bytes = !strcmp(got, "INT32") ? 4 : 8;
    if (in->is_int ? strcmp(got, "INT64") && strcmp(got, "INT32") : strcmp(got, want))
        return srv_fail(e, 400, "invalid_field", nm, "input %s has datatype %.20s; this model takes it as %s",
                        nm, got, want);
    json_t *sh = json_object_get(j, "shape");
    if (!json_is_array(sh) || json_array_size(sh) < 1 || json_array_size(sh) > ATTN_MAX_RANK)
        return srv_fail(e, 400, "invalid_field", nm,
                        "input %s needs a \"shape\": an array of 1 to %d dimensions", nm, ATTN_MAX_RANK);
    in->rank = (int)json_array_size(sh);
    if (in->is_int && in->rank != 1)
        return srv_fail(e, 400, "invalid_field", nm, "input %s is a list of indices: its shape is [n]", nm);
    in->count = 1;
    for (int d = 0; d < in->rank; d++) {
        json_t *x = json_array_get(sh, (size_t)d);
        if (!json_is_integer(x) || json_integer_value(x) < 1)
            return srv_fail(e, 400, "invalid_field", nm,
                            "input %s: every dimension of its shape must be an integer of at least 1", nm);
        in->shape[d] = json_integer_value(x);
        if (!attn_size_mul(in->count, in->shape[d], &in->count))
            return srv_fail(e, 413, "too_large", nm, "input %s is too large: its size overflows", nm);
    }
    if (in->count > srv_cfg.max_elements)
        return srv_fail(e, 413, "too_large", nm,
                        "input %s has %lld elements; this server accepts at most %lld per tensor",
                        nm, (long long)in->count, (long long)srv_cfg.max_elements);
    return 0;
}

/* Little-endian int64 or int32 indices (src, a copy at dst) as int64. */
static int read_binary_ints(srv_call *call, const char *src, void *dst, ks_input *in, srv_err *e)
{
    in->n_ix = (size_t)in->count;
    if (in->int_bytes == 8 && host_is_le()) {
        in->ix = dst;
        return 0;
    }
    in->ix = srv_arena_alloc(&call->arena, (in->n_ix ? in->n_ix : 1) * sizeof *in->ix);
    if (!in->ix)
        return srv_fail(e, 503, "overloaded", in->name, "out of memory reading %s", in->name);
    const uint8_t *p = (const uint8_t *)src;
    for (int64_t i = 0; i < in->count; i++, p += in->int_bytes) {
        uint64_t x = 0;
        for (int k = in->int_bytes - 1; k >= 0; k--)
            x = x << 8 | p[k];
        in->ix[i] = in->int_bytes == 4 ? (int64_t)(int32_t)(uint32_t)x : (int64_t)x;
    }
    return 0;
}

/* The input's values from the binary section: size bytes at kb->off. */
static int read_binary(srv_call *call, ks_body *kb, json_t *bds, ks_input *in, srv_err *e)
{
    const char *nm = in->name;
    int64_t want, size = json_is_integer(bds) ? json_integer_value(bds) : -1;
    if (size < 0)
        return srv_fail(e, 400, "invalid_field", nm, "input %s: binary_data_size must be a byte count", nm);
    if (!attn_size_mul(in->count, in->is_bool ? 1 : in->is_int ? in->int_bytes : 4, &want) || size != want)
        return srv_fail(e, 400, "invalid_field", nm,
                        "input %s: binary_data_size is %lld but shape and datatype make %lld bytes",
                        nm, (long long)size, (long long)want);
    if ((uint64_t)size > kb->bin_len - kb->off)
        return srv_fail(e, 400, "invalid_field", nm,
                        "input %s: binary_data_size %lld reaches past the %llu bytes of binary "
                        "data after the JSON header", nm, (long long)size, (unsigned long long)kb->bin_len);
    const char *src = kb->bin + kb->off;
    kb->off += (uint64_t)size;
    int le = host_is_le();
    /* In place when the body put the binary section on an aligned address
     * (srv_body_align) and nothing needs swapping: the body outlives the
     * job. Else a copy (the body gives no alignment, or a big-endian host
     * swaps the bytes). */
    void *dst = (void *)(uintptr_t)src;
    if (!le || (uintptr_t)src % (in->is_int ? 8 : 4) != 0) {
        if (!(dst = srv_arena_alloc(&call->arena, size ? (size_t)size : 1)))
            return srv_fail(e, 503, "overloaded", nm, "out of memory reading %s", nm);
        memcpy(dst, src, (size_t)size);
    }
    if (in->is_int)
        return read_binary_ints(call, src, dst, in, e);
    in->m = in->is_bool ? dst : NULL;
    in->f = in->is_bool ? NULL : dst;
    if (in->is_bool) {
        for (int64_t i = 0; i < in->count; i++)
            if (in->m[i] > 1)
                return srv_fail(e, 400, "invalid_tensor", nm, "input %s: BOOL byte %lld is %u; it must be 0 or 1",
                                nm, (long long)i, (unsigned)in->m[i]);
        return 0;
    }
    for (int64_t i = 0; i < in->count && !le; i++) {
        uint8_t *p = (uint8_t *)&in->f[i], t0 = p[0], t1 = p[1];
        p[0] = p[3]; p[3] = t0; p[1] = p[2]; p[2] = t1;
    }
    /* read in place: most of it was checked as it came */
    int64_t known = dst == (void *)(uintptr_t)src ? (int64_t)(srv_body_finite_prefix(src) / 4) : 0;
    known = known < in->count ? known : in->count;
    int64_t bad = srv_first_nonfinite(in->f + known, in->count - known); /* vectorised */
    if (bad >= 0)
        return srv_fail(e, 400, "invalid_tensor", nm,
                        "input %s: element %lld is not a finite float32 value", nm, (long long)(known + bad));
    return 0;
}

/* The input's values from "data": flat or nested, row-major; only its
 * element count must agree with the declared shape. */
static int read_data(srv_codec *c, json_t *data, ks_input *in, srv_err *e)
{
    const char *nm = in->name;
    int rank;
    const int64_t *dshape;
    attn_mask mk;
    attn_tensor tt;
    if (in->is_int) {
        if (srv_read_indices(c, data, nm, &in->ix, &in->n_ix, e))
            return -1;
        if ((int64_t)in->n_ix != in->count)
            return srv_fail(e, 400, "invalid_tensor", nm, "input %s: its shape has %lld elements but its data has %zu",
                            nm, (long long)in->count, in->n_ix);
        return 0;
    }
    if (in->is_bool) {
        if (srv_decode_mask(c, data, nm, &mk, e))
            return -1;
        rank = mk.rank, dshape = mk.shape, in->m = (uint8_t *)mk.data;
    } else {
        if (srv_decode_tensor(c, data, nm, &tt, e))
            return -1;
        rank = tt.rank, dshape = tt.shape, in->f = (float *)tt.data;
    }
    int64_t dcount = 1;
    for (int d = 0; d < rank; d++)
        dcount *= dshape[d]; /* the codec checked this product */
    if (dcount != in->count)
        return srv_fail(e, 400, "invalid_tensor", nm, "input %s: its shape has %lld elements but its data has %lld",
                        nm, (long long)in->count, (long long)dcount);
    return 0;
}

/* Reads one $request_input: shape and datatype checked, its values taken
 * from "data" or from the binary section. */
static int read_input(srv_call *call, srv_codec *c, ks_body *kb, json_t *j, ks_input *in, srv_err *e)
{
    static const char *const in_param_keys[] = {"binary_data_size", NULL};
    if (read_input_head(kb, j, in, e))
        return -1;
    const char *nm = in->name;
    json_t *par = json_object_get(j, "parameters"), *bds = NULL, *data = json_object_get(j, "data");
    if (par) {
        if (!json_is_object(par))
            return srv_fail(e, 400, "invalid_field", nm, "input %s: parameters must be an object", nm);
        if (only_keys(par, in_param_keys, "input parameter", e))
            return -1;
        bds = json_object_get(par, "binary_data_size");
    }
    if (bds && data)
        return srv_fail(e, 400, "invalid_field", nm, "input %s has both \"data\" and binary_data_size; give one", nm);
    if (bds)
        return read_binary(call, kb, bds, in, e);
    if (!data)
        return srv_fail(e, 400, "missing_field", nm, "input %s has no \"data\" and no binary_data_size parameter", nm);
    return read_data(c, data, in, e);
}

/* One input into the job: a tensor or mask slot, or a learned parameter. */
static void put_input(srv_job *j, const ks_body *kb, const ks_input *in, attn_named *pn, size_t *np)
{
    const srv_field *f = srv_field_find(in->name, kb->where | SRV_F_KS_INPUT);
    attn_mask *mk = f ? srv_job_mask(j, f->slot) : NULL;
    attn_tensor *t = f ? srv_job_tensor(j, f->slot) : NULL;
    if (f)
        srv_job_note(j, f->slot);
    if (in->is_int) {
        srv_job_set_indices(j, f->slot, in->ix, in->n_ix);
        return;
    }
    if (mk) {
        mk->rank = in->rank;
        memcpy(mk->shape, in->shape, sizeof mk->shape);
        mk->data = in->m;
        return;
    }
    if (!t) /* a learned parameter, under its state_dict name */
        t = &pn[(*np)++].t, pn[*np - 1].name = in->name;
    t->rank = in->rank;
    memcpy(t->shape, in->shape, sizeof t->shape);
    t->data = in->f;
}

typedef struct {
    srv_job *j;
    const char *missing;
} req_check;

static void check_required(void *ud, const srv_field *f)
{
    req_check *rc = ud;
    unsigned req = rc->j->kind == SRV_JOB_MULTIHEAD ? SRV_F_REQ_MHA
                 : rc->j->kind == SRV_JOB_SESSION ? SRV_F_REQ_SES : SRV_F_REQ_ATT;
    if (!rc->missing && (f->where & req) && !srv_job_tensor(rc->j, f->slot)->rank)
        rc->missing = f->name;
}

static int read_inputs(srv_call *call, srv_codec *c, ks_body *kb, json_t *ji, srv_job *j, srv_err *e)
{
    if (!json_is_array(ji) || json_array_size(ji) == 0)
        return srv_fail(e, 400, "missing_field", "inputs", "inputs must be a non-empty array");
    size_t n = json_array_size(ji), np = 0;
    if (n > KS_MAX_INPUTS)
        return srv_fail(e, 400, "invalid_field", "inputs", "inputs has %zu tensors; at most %d", n, KS_MAX_INPUTS);
    ks_input in[KS_MAX_INPUTS];
    attn_named *pn = srv_arena_alloc(&call->arena, n * sizeof *pn);
    if (!pn)
        return srv_fail(e, 503, "overloaded", "", "out of memory");
    memset(in, 0, sizeof in);
    for (size_t i = 0; i < n; i++) {
        if (read_input(call, c, kb, json_array_get(ji, i), &in[i], e))
            return -1;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(in[k].name, in[i].name))
                return srv_fail(e, 400, "invalid_field", in[i].name, "input %s is given twice", in[i].name);
        /* alibi and sinks are parameters and inputs: one would be ignored */
        if (json_object_get(json_object_get(call->root, "parameters"), in[i].name))
            return srv_fail(e, 400, "invalid_field", in[i].name,
                            "%s is given both as a parameter and as an input; give it once",
                            in[i].name);
        put_input(j, kb, &in[i], pn, &np);
    }
    if (kb->off != kb->bin_len)
        return srv_fail(e, 400, "invalid_field", "binary_data_size",
                        "the body has %llu bytes of binary data after the JSON header but the "
                        "inputs' binary_data_size add up to %llu",
                        (unsigned long long)kb->bin_len, (unsigned long long)kb->off);
    srv_job_set_params(j, pn, np);
    req_check rc = {j, NULL};
    srv_fields_each(kb->where | SRV_F_KS_INPUT, check_required, &rc);
    if (rc.missing)
        return srv_fail(e, 400, "missing_field", rc.missing, "input %s is required", rc.missing);
    return 0;
}

/* ---------------------------------------------------------------- the response */

/* The layout output: BOOL (rows, cols), true/false or one byte each. */
static void put_layout(srv_buf *b, const srv_job *j, const ks_output *o, int first)
{
    int64_t rows = j->sh.layout_rows, cols = j->sh.layout_cols; /* rows * cols <= max_elements */
    srv_buf_printf(b, "%s{\"name\":\"layout\",\"datatype\":\"BOOL\",\"shape\":[%lld,%lld]",
                   first ? "" : ",", (long long)rows, (long long)cols);
    if (o->binary) {
        srv_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%lld}}", (long long)(rows * cols));
        return;
    }
    srv_buf_puts(b, ",\"data\":[");
    for (int64_t i = 0; i < rows * cols; i++)
        srv_buf_puts(b, j->layout[i] ? (i ? ",true" : "true") : (i ? ",false" : "false"));
    srv_buf_puts(b, "]}");
}

/* The float tensor an output names (output, weights or lse): its data,
 * rank, shape and count. */
static const float *float_output(const srv_job *j, const char *name, int *rank,
                                 const int64_t **shape, int64_t *count)
{
    if (!strcmp(name, "weights")) {
        *rank = j->sh.w_rank, *shape = j->sh.w_shape, *count = j->sh.w_count;
        return j->weights;
    }
    if (!strcmp(name, "lse")) {
        *rank = j->lse_rank, *shape = j->lse_shape, *count = 1;
        for (int d = 0; d < j->lse_rank; d++) *count *= j->lse_shape[d];
        return j->lse;
    }
    *rank = j->sh.out_rank, *shape = j->sh.out_shape, *count = j->sh.out_count;
    return j->out;
}

static void put_output(srv_buf *b, const srv_job *j, const ks_output *o, int first)
{
    if (!strcmp(o->name, "layout")) {
        put_layout(b, j, o, first);
        return;
    }
    int rank;
    const int64_t *shape;
    int64_t count;
    const float *data = float_output(j, o->name, &rank, &shape, &count);
    srv_buf_puts(b, first ? "{\"name\":\"" : ",{\"name\":\"");
    srv_buf_puts(b, o->name);
    srv_buf_puts(b, "\",\"datatype\":\"FP32\",\"shape\":[");
    for (int d = 0; d < rank; d++)
        srv_buf_printf(b, "%s%lld", d ? "," : "", (long long)shape[d]);
    srv_buf_putc(b, ']');
    if (o->binary) {
        /* count <= max_elements, so the product cannot overflow */
        srv_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%lld}}", (long long)count * 4);
        return;
    }
    int64_t flat[1] = {count};
    srv_buf_puts(b, ",\"data\":"); /* an lse of -inf (a row with no key) is null */
    srv_encode_tensor(b, data, 1, flat, 0);
    srv_buf_putc(b, '}');
}

/* The binary outputs, in order, little-endian, after the JSON header. */
static void put_binary(srv_buf *b, const srv_job *j, const ks_outputs *outs)
{
    int le = host_is_le();
    for (int i = 0; i < outs->n; i++) {
        if (!outs->o[i].binary)
            continue;
        if (!strcmp(outs->o[i].name, "layout")) {
            srv_buf_put(b, j->layout, (size_t)(j->sh.layout_rows * j->sh.layout_cols));
            continue;
        }
        int rank;
        const int64_t *shape;
        int64_t count;
        const float *src = float_output(j, outs->o[i].name, &rank, &shape, &count);
        if (le) {
            srv_buf_put(b, src, (size_t)count * 4);
            continue;
        }
        for (int64_t k = 0; k < count; k++) {
            uint8_t p[4], q[4];
            memcpy(p, &src[k], 4);
            q[0] = p[3], q[1] = p[2], q[2] = p[1], q[3] = p[0];
            srv_buf_put(b, q, 4);
        }
    }
}

static int write_response(srv_call *call, srv_reply *r, const ks_body *kb, const srv_job *j,
                          const ks_outputs *outs, srv_err *e)
{
    double t0 = srv_now_ms();
    srv_buf *b = &r->body;
    char name[64];
    srv_kserve_model_name(kb->model, name, sizeof name);
    double bytes = ((double)j->sh.out_count + (double)j->sh.w_count) * 16.0 + 512.0;
    if (bytes < 1e12)
        srv_buf_reserve(b, (size_t)bytes);
    srv_buf_puts(b, "{\"model_name\":");
    srv_buf_json_str(b, name);
    srv_buf_puts(b, ",\"model_version\":\"" SRV_KS_MODEL_VERSION "\"");
    json_t *id = json_object_get(call->root, "id");
    if (id) {
        srv_buf_puts(b, ",\"id\":");
        srv_buf_json_str(b, json_string_value(id));
    }
    if (kb->seq) {
        srv_buf_puts(b, ",\"parameters\":{\"sequence_id\":");
        srv_buf_json_str(b, kb->seq->id);
        srv_buf_printf(b, ",\"length\":%lld}", (long long)kb->seq->length);
    }
    srv_buf_puts(b, ",\"outputs\":[");
    int any_binary = 0;
    for (int i = 0; i < outs->n; i++) {
        put_output(b, j, &outs->o[i], i == 0);
        any_binary |= outs->o[i].binary;
    }
    srv_buf_puts(b, "]}");
    if (any_binary) {
        r->infer_header_len = b->len;
        r->ctype = "application/octet-stream";
        put_binary(b, j, outs);
    } else {
        srv_buf_putc(b, '\n');
    }
    call->t_encode = srv_now_ms() - t0;
    if (b->failed)
        return srv_fail(e, 413, "too_large", "", "not enough memory to write the response");
    return 0;
}

/* ---------------------------------------------------------------- sequences */

/* The session a multihead-decode request names, into sq->id ("" on a
 * start without an id: the server draws one). An id names a session only
 * if nobody could guess it: 32 lowercase hex digits, as the server draws
 * them (128 bits); Triton's integer ids are refused. */
static int decode_id(const srv_ses_fields *f, ks_seq *sq, srv_err *e)
{
    int none = f->seq_id_kind == 0 || (f->seq_id_kind == 1 && f->seq_num == 0) ||
               (f->seq_id_kind == 2 && !f->seq_text[0]);
    sq->id[0] = '\0';
    if (none && !f->seq_start)
        return srv_fail(e, 400, "missing_field", "sequence_id",
                        "multihead-decode needs the sequence_id parameter: the one the answer to "
                        "the sequence's start gave (or begin a sequence with sequence_start: true)");
    if (none)
        return 0;
    if (f->seq_id_kind == 1 || !srv_session_id_ok(f->seq_text, strlen(f->seq_text)))
        return srv_fail(e, 400, "invalid_field", "sequence_id",
                        "a sequence_id here is 32 lowercase hex digits (128 random bits), so that no "
                        "client can guess another's: start with sequence_start and no sequence_id "
                        "(the answer's sequence_id parameter names the sequence), or choose 128 "
                        "random bits yourself (Python: uuid.uuid4().hex)");
    memcpy(sq->id, f->seq_text, 33);
    return 0;
}

/* A multihead-decode request: the session started (sequence_start), then
 * the step, its result in the job as any model's. A start without an id
 * takes the balancer's (hdr: X-Session-Id, "" when not trusted), as
 * POST /sessions does, so that the sequence lives on the replica its id
 * hashes to. */
static int decode_run(srv_call *call, srv_job *j, const char *hdr, ks_seq *sq, srv_err *e)
{
    srv_step_result res;
    char want[40];
    call->t_parse = srv_now_ms() - call->t0;
    if (decode_id(&j->ses, sq, e) || srv_job_finish_options(j, e)) /* alibi and sinks inputs */
        return -1;
    if (j->ses.seq_start) {
        snprintf(want, sizeof want, "%s", sq->id[0] ? sq->id : hdr);
        if (srv_session_create(call, j, want, sq->id, e))
            return -1;
        sq->created = 1;
    }
    if (srv_session_step(call, sq->id, j, &res, e))
        return -1;
    sq->length = res.n;
    j->out = res.out;
    j->weights = res.w;
    j->sh.out_rank = 3;
    j->sh.out_shape[0] = res.Tq, j->sh.out_shape[1] = res.H, j->sh.out_shape[2] = res.d;
    j->sh.out_count = res.Tq * res.H * res.d; /* the query's size: checked by the codec */
    j->sh.w_rank = res.w ? 3 : 0;
    j->sh.w_shape[0] = res.H, j->sh.w_shape[1] = res.Tq, j->sh.w_shape[2] = res.n;
    j->sh.w_count = res.w ? res.H * res.Tq * res.n : 0; /* checked by the step's plan */
    j->lse = res.lse;
    j->lse_rank = 2;
    j->lse_shape[0] = res.H, j->lse_shape[1] = res.Tq;
    return 0;
}

/* Once answered: a sequence whose start failed leaves nothing behind, and
 * one whose end succeeded is freed. A failed request leaves the sequence
 * as it was, so the client may send it again. */
static void decode_finish(const srv_job *j, const ks_seq *sq, int rc)
{
    srv_err e;
    if (sq->id[0] && ((rc && sq->created) || (!rc && j->ses.seq_end)))
        srv_session_end(sq->id, &e);
}

static int decode_outputs(const ks_outputs *outs, srv_err *e)
{
    for (int i = 0; i < outs->n; i++)
        if (!strcmp(outs->o[i].name, "layout"))
            return srv_fail(e, 400, "invalid_field", "outputs",
                            "multihead-decode has no layout output; its outputs are output and weights");
    return 0;
}

/* ---------------------------------------------------------------- the route */

void srv_serve_v2_infer(const srv_target *t, const char *body, size_t len, srv_reply *r)
{
    srv_err e;
    srv_call call;
    srv_job j;
    int decode = t->model == SRV_MODEL_DECODE;
    ks_seq seq = {"", 0, 0};
    ks_body kb = {t->model, 0, decode ? &seq : NULL, NULL, 0, 0};
    ks_outputs outs;
    memset(&call, 0, sizeof call);
    call.t0 = srv_now_ms();
    if (decode)
        srv_job_init(&j, SRV_JOB_SESSION, ATTN_RULE_SCALED_DOT);
    else
        srv_job_init(&j, t->model == SRV_MODEL_MULTIHEAD ? SRV_JOB_MULTIHEAD : SRV_JOB_ATTENTION,
                     t->model == SRV_MODEL_MULTIHEAD ? ATTN_RULE_DOT : (attn_rule)t->model);
    srv_codec c = {&call.arena, &call.scan, srv_cfg.max_elements};
    int rc = parse_header(t, body ? body : "", body ? len : 0, &call, &kb, &e) ||
             read_top(call.root, &kb, &c, &j, &e) ||
             read_outputs(call.root, &j, &outs, &e) ||
             (decode && decode_outputs(&outs, &e)) ||
             read_inputs(&call, &c, &kb, json_object_get(call.root, "inputs"), &j, &e) ||
             srv_job_check_flat(&j, &e) ||
             (decode ? decode_run(&call, &j, t->session_hdr, &seq, &e) : srv_job_run(&call, &j, &e)) ||
             write_response(&call, r, &kb, &j, &outs, &e);
    if (decode)
        decode_finish(&j, &seq, rc);
    srv_reply_timings(r, &call);
    srv_call_free(&call);
    if (rc)
        srv_kserve_front.error(r, &e);
}

/* skyrl-sdk for C: helpers (strings, errors, messages, JSON, GSM8K) and the
 * glue between the plugin's `skyrl_*` functions and the bindings
 * `wit-bindgen c` generates for its world.
 *
 * `skyrl plugin build` compiles this file with one of SKYRL_WORLD_ENVIRONMENT,
 * SKYRL_WORLD_TOOL or SKYRL_WORLD_REWARD defined and the generated bindings
 * on the include path. Without any of them only the world-independent
 * helpers are compiled (for native unit tests of plugin logic; `skyrl_log`
 * then prints to stderr and tool calls fail). */

#include "skyrl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Allocation                                                          */
/* ------------------------------------------------------------------ */

static void *skyrl__alloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) abort();
    return p;
}

static void *skyrl__grow(void *ptr, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return ptr;
    size_t next = *cap ? *cap * 2 : 8;
    while (next < need) next *= 2;
    void *p = realloc(ptr, next * item);
    if (!p) abort();
    *cap = next;
    return p;
}

/* A malloc'd, NUL-terminated copy of `len` bytes. */
static char *skyrl__dupn(const char *bytes, size_t len) {
    char *p = skyrl__alloc(len + 1);
    if (len) memcpy(p, bytes, len);
    p[len] = '\0';
    return p;
}

static skyrl_str skyrl__own(const char *bytes, size_t len) {
    skyrl_str s = {skyrl__dupn(bytes, len), len};
    return s;
}

/* ------------------------------------------------------------------ */
/* Strings and buffers                                                 */
/* ------------------------------------------------------------------ */

skyrl_str skyrl_cstr(const char *text) {
    skyrl_str s = {text ? text : "", text ? strlen(text) : 0};
    return s;
}

bool skyrl_str_eq(const skyrl_str *s, const char *text) {
    size_t n = strlen(text);
    return s->len == n && (n == 0 || memcmp(s->ptr, text, n) == 0);
}

void skyrl_buf_append(skyrl_buf *buf, const char *bytes, size_t len) {
    buf->ptr = skyrl__grow(buf->ptr, &buf->cap, buf->len + len + 1, 1);
    if (len) memcpy(buf->ptr + buf->len, bytes, len);
    buf->len += len;
    buf->ptr[buf->len] = '\0';
}

void skyrl_buf_puts(skyrl_buf *buf, const char *text) {
    skyrl_buf_append(buf, text, strlen(text));
}

void skyrl_buf_vprintf(skyrl_buf *buf, const char *fmt, va_list args) {
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n <= 0) return;
    buf->ptr = skyrl__grow(buf->ptr, &buf->cap, buf->len + (size_t)n + 1, 1);
    vsnprintf(buf->ptr + buf->len, (size_t)n + 1, fmt, args);
    buf->len += (size_t)n;
}

void skyrl_buf_printf(skyrl_buf *buf, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    skyrl_buf_vprintf(buf, fmt, args);
    va_end(args);
}

void skyrl_buf_json_string(skyrl_buf *buf, const char *text, size_t len) {
    static const char hex[] = "0123456789abcdef";
    skyrl_buf_append(buf, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        const char *esc = NULL;
        char u[6];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0';
                u[4] = hex[c >> 4], u[5] = hex[c & 15];
            }
        }
        if (!esc && c >= 0x20) continue;
        skyrl_buf_append(buf, text + start, i - start);
        if (esc)
            skyrl_buf_puts(buf, esc);
        else
            skyrl_buf_append(buf, u, 6);
        start = i + 1;
    }
    skyrl_buf_append(buf, text + start, len - start);
    skyrl_buf_append(buf, "\"", 1);
}

void skyrl_buf_clear(skyrl_buf *buf) {
    buf->len = 0;
    if (buf->ptr) buf->ptr[0] = '\0';
}

void skyrl_buf_free(skyrl_buf *buf) {
    free(buf->ptr);
    buf->ptr = NULL;
    buf->len = buf->cap = 0;
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static bool skyrl__verror(skyrl_error *err, skyrl_error_kind kind, const char *fmt, va_list args) {
    if (!err) return false;
    skyrl_buf msg = {0};
    skyrl_buf_vprintf(&msg, fmt, args);
    free(err->message);
    err->kind = kind;
    err->message = msg.ptr ? msg.ptr : skyrl__dupn("", 0);
    return false;
}

bool skyrl_error_set(skyrl_error *err, skyrl_error_kind kind, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    skyrl__verror(err, kind, fmt, args);
    va_end(args);
    return false;
}

#define SKYRL__ERROR_FN(fn, kind)                                                                \
    bool fn(skyrl_error *err, const char *fmt, ...) {                                            \
        va_list args;                                                                            \
        va_start(args, fmt);                                                                     \
        skyrl__verror(err, kind, fmt, args);                                                     \
        va_end(args);                                                                            \
        return false;                                                                            \
    }
SKYRL__ERROR_FN(skyrl_config_error, SKYRL_INVALID_CONFIG)
SKYRL__ERROR_FN(skyrl_input_error, SKYRL_INVALID_INPUT)
SKYRL__ERROR_FN(skyrl_failed, SKYRL_FAILED)

void skyrl_error_clear(skyrl_error *err) {
    free(err->message);
    err->message = NULL;
    err->kind = SKYRL_OK;
}

/* ------------------------------------------------------------------ */
/* Messages                                                            */
/* ------------------------------------------------------------------ */

void skyrl_messages_pushn(skyrl_messages *list, const char *role, const char *content,
                          size_t content_len) {
    list->items = skyrl__grow(list->items, &list->cap, list->len + 1, sizeof(skyrl_message));
    skyrl_message *m = &list->items[list->len++];
    m->role = skyrl__own(role, strlen(role));
    m->content = skyrl__own(content, content_len);
}

void skyrl_messages_push(skyrl_messages *list, const char *role, const char *content) {
    skyrl_messages_pushn(list, role, content, strlen(content));
}

void skyrl_messages_set_content(skyrl_messages *list, size_t index, const char *content) {
    if (index >= list->len) return;
    skyrl_message *m = &list->items[index];
    free((char *)m->content.ptr);
    m->content = skyrl__own(content, strlen(content));
}

void skyrl_messages_clear(skyrl_messages *list) {
    for (size_t i = 0; i < list->len; i++) {
        free((char *)list->items[i].role.ptr);
        free((char *)list->items[i].content.ptr);
    }
    list->len = 0;
}

void skyrl_messages_free(skyrl_messages *list) {
    skyrl_messages_clear(list);
    free(list->items);
    list->items = NULL;
    list->cap = 0;
}

void skyrl_step_observe(skyrl_step *out, const char *role, const char *content) {
    skyrl_messages_push(&out->observations, role, content);
}

void skyrl_tool_specs_add(skyrl_tool_spec_list *specs, const char *name, const char *description,
                          const char *parameters_json) {
    if (!parameters_json) parameters_json = "{\"type\":\"object\"}";
    specs->items = skyrl__grow(specs->items, &specs->cap, specs->len + 1, sizeof(skyrl_tool_spec));
    skyrl_tool_spec *s = &specs->items[specs->len++];
    s->name = skyrl__own(name, strlen(name));
    s->description = skyrl__own(description, strlen(description));
    s->parameters_json = skyrl__own(parameters_json, strlen(parameters_json));
}

/* ------------------------------------------------------------------ */
/* JSON scanner                                                        */
/* ------------------------------------------------------------------ */

#define SKYRL__JSON_MAX_DEPTH 256

typedef struct {
    const char *p;
    const char *end;
} skyrl__json;

static bool skyrl__is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void skyrl__ws(skyrl__json *j) {
    while (j->p < j->end && skyrl__is_ws(*j->p)) j->p++;
}

static bool skyrl__digit(char c) { return c >= '0' && c <= '9'; }

static bool skyrl__hex(char c) {
    return skyrl__digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Skips a string literal starting at `"`. */
static bool skyrl__skip_string(skyrl__json *j) {
    if (j->p >= j->end || *j->p != '"') return false;
    j->p++;
    while (j->p < j->end) {
        unsigned char c = (unsigned char)*j->p;
        if (c == '"') {
            j->p++;
            return true;
        }
        if (c < 0x20) return false;
        if (c == '\\') {
            j->p++;
            if (j->p >= j->end) return false;
            char e = *j->p;
            if (e == 'u') {
                if (j->end - j->p < 5) return false;
                for (int k = 1; k <= 4; k++)
                    if (!skyrl__hex(j->p[k])) return false;
                j->p += 4;
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                return false;
            }
        }
        j->p++;
    }
    return false;
}

static bool skyrl__skip_number(skyrl__json *j) {
    const char *p = j->p, *end = j->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return false;
    if (*p == '0') {
        p++;
    } else if (skyrl__digit(*p)) {
        while (p < end && skyrl__digit(*p)) p++;
    } else {
        return false;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !skyrl__digit(*p)) return false;
        while (p < end && skyrl__digit(*p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !skyrl__digit(*p)) return false;
        while (p < end && skyrl__digit(*p)) p++;
    }
    j->p = p;
    return true;
}

static bool skyrl__skip_literal(skyrl__json *j, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return false;
    j->p += n;
    return true;
}

/* Skips one value (no surrounding whitespace). */
static bool skyrl__skip_value(skyrl__json *j, int depth) {
    if (j->p >= j->end || depth > SKYRL__JSON_MAX_DEPTH) return false;
    switch (*j->p) {
    case '"': return skyrl__skip_string(j);
    case 't': return skyrl__skip_literal(j, "true");
    case 'f': return skyrl__skip_literal(j, "false");
    case 'n': return skyrl__skip_literal(j, "null");
    case '[':
    case '{': {
        bool object = *j->p == '{';
        char close = object ? '}' : ']';
        j->p++;
        skyrl__ws(j);
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return true;
        }
        for (;;) {
            if (object) {
                if (!skyrl__skip_string(j)) return false;
                skyrl__ws(j);
                if (j->p >= j->end || *j->p != ':') return false;
                j->p++;
                skyrl__ws(j);
            }
            if (!skyrl__skip_value(j, depth + 1)) return false;
            skyrl__ws(j);
            if (j->p >= j->end) return false;
            if (*j->p == close) {
                j->p++;
                return true;
            }
            if (*j->p != ',') return false;
            j->p++;
            skyrl__ws(j);
        }
    }
    default: return skyrl__skip_number(j);
    }
}

bool skyrl_json_valid(const skyrl_str *json) {
    skyrl__json j = {json->ptr, json->ptr + json->len};
    skyrl__ws(&j);
    if (!skyrl__skip_value(&j, 0)) return false;
    skyrl__ws(&j);
    return j.p == j.end;
}

skyrl_json_type skyrl_json_typeof(const skyrl_str *value) {
    skyrl__json j = {value->ptr, value->ptr + value->len};
    skyrl__ws(&j);
    if (j.p >= j.end) return SKYRL_JSON_INVALID;
    switch (*j.p) {
    case '"': return SKYRL_JSON_STRING;
    case '{': return SKYRL_JSON_OBJECT;
    case '[': return SKYRL_JSON_ARRAY;
    case 't':
    case 'f': return SKYRL_JSON_BOOL;
    case 'n': return SKYRL_JSON_NULL;
    default: return (*j.p == '-' || skyrl__digit(*j.p)) ? SKYRL_JSON_NUMBER : SKYRL_JSON_INVALID;
    }
}

/* Within the object at j->p, moves j->p to the value of `key` (`len` bytes). */
static bool skyrl__find_key(skyrl__json *j, const char *key, size_t len) {
    skyrl__ws(j);
    if (j->p >= j->end || *j->p != '{') return false;
    j->p++;
    skyrl__ws(j);
    if (j->p < j->end && *j->p == '}') return false;
    for (;;) {
        const char *start = j->p;
        if (!skyrl__skip_string(j)) return false;
        bool match = (size_t)(j->p - start) == len + 2 && memcmp(start + 1, key, len) == 0;
        skyrl__ws(j);
        if (j->p >= j->end || *j->p != ':') return false;
        j->p++;
        skyrl__ws(j);
        if (match) return true;
        if (!skyrl__skip_value(j, 1)) return false;
        skyrl__ws(j);
        if (j->p >= j->end || *j->p != ',') return false;
        j->p++;
        skyrl__ws(j);
    }
}

bool skyrl_json_find(const skyrl_str *json, const char *path, skyrl_str *value) {
    skyrl__json j = {json->ptr, json->ptr + json->len};
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (!skyrl__find_key(&j, path, n)) return false;
        path += n;
        if (*path == '.') path++;
    }
    skyrl__ws(&j);
    const char *start = j.p;
    if (!skyrl__skip_value(&j, 0)) return false;
    value->ptr = start;
    value->len = (size_t)(j.p - start);
    return true;
}

static unsigned skyrl__hex4(const char *p) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        v = v * 16 + (unsigned)(skyrl__digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

static void skyrl__utf8(skyrl_buf *out, unsigned cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    skyrl_buf_append(out, b, n);
}

char *skyrl_json_text(const skyrl_str *value) {
    skyrl__json j = {value->ptr, value->ptr + value->len};
    skyrl__ws(&j);
    const char *start = j.p;
    if (!skyrl__skip_value(&j, 0)) return NULL;
    const char *stop = j.p;
    skyrl__ws(&j);
    if (j.p != j.end) return NULL;
    if (*start != '"') return skyrl__dupn(start, (size_t)(stop - start));
    /* A valid string literal: decode its escapes. */
    skyrl_buf out = {0};
    skyrl_buf_append(&out, "", 0);
    const char *p = start + 1, *end = stop - 1;
    while (p < end) {
        const char *run = p;
        while (p < end && *p != '\\') p++;
        skyrl_buf_append(&out, run, (size_t)(p - run));
        if (p >= end) break;
        char e = p[1];
        p += 2;
        switch (e) {
        case 'b': skyrl_buf_append(&out, "\b", 1); break;
        case 'f': skyrl_buf_append(&out, "\f", 1); break;
        case 'n': skyrl_buf_append(&out, "\n", 1); break;
        case 'r': skyrl_buf_append(&out, "\r", 1); break;
        case 't': skyrl_buf_append(&out, "\t", 1); break;
        case 'u': {
            unsigned cp = skyrl__hex4(p);
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                unsigned lo = skyrl__hex4(p + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* lone surrogate */
            skyrl__utf8(&out, cp);
            break;
        }
        default: skyrl_buf_append(&out, &e, 1); break; /* " \ / */
        }
    }
    return out.ptr;
}

bool skyrl_json_get_number(const skyrl_str *json, const char *path, double *out) {
    skyrl_str v;
    if (!skyrl_json_find(json, path, &v) || skyrl_json_typeof(&v) != SKYRL_JSON_NUMBER)
        return false;
    char *text = skyrl__dupn(v.ptr, v.len);
    *out = strtod(text, NULL);
    free(text);
    return true;
}

bool skyrl_json_get_bool(const skyrl_str *json, const char *path, bool *out) {
    skyrl_str v;
    if (!skyrl_json_find(json, path, &v) || skyrl_json_typeof(&v) != SKYRL_JSON_BOOL) return false;
    *out = v.ptr[0] == 't';
    return true;
}

char *skyrl_json_get_string(const skyrl_str *json, const char *path) {
    skyrl_str v;
    if (!skyrl_json_find(json, path, &v) || skyrl_json_typeof(&v) != SKYRL_JSON_STRING) return NULL;
    return skyrl_json_text(&v);
}

bool skyrl_extras_ground_truth(const skyrl_str *extras, char **out, skyrl_error *err) {
    skyrl_str v;
    if (!skyrl_json_find(extras, "reward_spec.ground_truth", &v))
        return skyrl_config_error(err, "extras.reward_spec.ground_truth is required");
    switch (skyrl_json_typeof(&v)) {
    case SKYRL_JSON_STRING:
    case SKYRL_JSON_NUMBER:
    case SKYRL_JSON_BOOL: *out = skyrl_json_text(&v); return *out != NULL;
    default:
        return skyrl_config_error(
            err, "extras.reward_spec.ground_truth must be a string or number, got %.*s",
            (int)(v.len > 200 ? 200 : v.len), v.ptr);
    }
}

bool skyrl_extras_max_turns(const skyrl_str *extras, long default_turns, long *out,
                            skyrl_error *err) {
    skyrl_str v;
    if (!skyrl_json_find(extras, "max_turns", &v) &&
        !skyrl_json_find(extras, "extra_info.max_turns", &v)) {
        *out = default_turns;
        return true;
    }
    char *text = skyrl_json_text(&v);
    skyrl_json_type type = skyrl_json_typeof(&v);
    bool ok = false;
    long turns = 0;
    if (text && (type == SKYRL_JSON_NUMBER || type == SKYRL_JSON_STRING)) {
        const char *p = text, *q;
        if (type == SKYRL_JSON_STRING)
            while (skyrl__is_ws(*p)) p++;
        q = p;
        unsigned long long n = 0;
        while (skyrl__digit(*q) && n <= 0xFFFFFFFFull) n = n * 10 + (unsigned)(*q++ - '0');
        if (type == SKYRL_JSON_STRING)
            while (skyrl__is_ws(*q)) q++;
        ok = q != p && *q == '\0' && n >= 1 && n <= 0xFFFFFFFFull;
        turns = (long)n;
    }
    free(text);
    if (!ok)
        return skyrl_config_error(err, "max_turns must be a positive integer, got %.*s",
                                  (int)(v.len > 200 ? 200 : v.len), v.ptr);
    *out = turns;
    return true;
}

/* ------------------------------------------------------------------ */
/* GSM8K                                                               */
/* ------------------------------------------------------------------ */

static bool skyrl__gsm8k_char(char c) { return skyrl__digit(c) || c == '.' || c == ','; }

char *skyrl_gsm8k_extract_answer(const char *response, size_t len) {
    /* Leftmost match of `#### (\-?[0-9\.\,]+)` (greedy, as Python's re). */
    for (size_t i = 0; i + 5 < len; i++) {
        if (memcmp(response + i, "#### ", 5) != 0) continue;
        size_t start = i + 5, p = start;
        if (p < len && response[p] == '-' && p + 1 < len && skyrl__gsm8k_char(response[p + 1]))
            p++;
        if (p >= len || !skyrl__gsm8k_char(response[p])) continue;
        while (p < len && skyrl__gsm8k_char(response[p])) p++;
        skyrl_buf out = {0};
        skyrl_buf_append(&out, "", 0);
        for (size_t k = start; k < p; k++)
            if (response[k] != ',' && response[k] != '$') skyrl_buf_append(&out, &response[k], 1);
        return out.ptr;
    }
    return NULL;
}

double skyrl_gsm8k_compute_score_ex(const char *response, size_t len, const char *ground_truth,
                                    double format_score, double score) {
    char *answer = skyrl_gsm8k_extract_answer(response, len);
    if (!answer) return 0.0;
    double result = strcmp(answer, ground_truth) == 0 ? score : format_score;
    free(answer);
    return result;
}

double skyrl_gsm8k_compute_score(const char *response, size_t len, const char *ground_truth) {
    return skyrl_gsm8k_compute_score_ex(response, len, ground_truth, 0.0, 1.0);
}

/* ------------------------------------------------------------------ */
/* World glue                                                          */
/* ------------------------------------------------------------------ */

#if defined(SKYRL_WORLD_ENVIRONMENT)
#include "environment_plugin.h"
#define SKYRL__W(name) environment_plugin_##name
#define SKYRL__KIND SKYRL_PLUGIN_TYPES_PLUGIN_KIND_ENVIRONMENT
#define SKYRL__FORCE_LINK __component_type_object_force_link_environment_plugin
#elif defined(SKYRL_WORLD_TOOL)
#include "tool_plugin.h"
#define SKYRL__W(name) tool_plugin_##name
#define SKYRL__KIND SKYRL_PLUGIN_TYPES_PLUGIN_KIND_TOOL
#define SKYRL__FORCE_LINK __component_type_object_force_link_tool_plugin
#elif defined(SKYRL_WORLD_REWARD)
#include "reward_plugin.h"
#define SKYRL__W(name) reward_plugin_##name
#define SKYRL__KIND SKYRL_PLUGIN_TYPES_PLUGIN_KIND_REWARD
#define SKYRL__FORCE_LINK __component_type_object_force_link_reward_plugin
#endif

#ifdef SKYRL__W

typedef SKYRL__W(string_t) skyrl__wstr;

/* `skyrl plugin build` embeds the world's type information itself (and runs
 * wit-bindgen with --no-object-file), so satisfy the generated code's
 * reference to the component-type object. Weak: linking that object in
 * as well still works. */
__attribute__((weak)) void SKYRL__FORCE_LINK(void) {}

/* A WIT string owning a copy of `len` bytes (NULL when empty, as the
 * generated post-return functions expect). */
static skyrl__wstr skyrl__wstr_copy(const char *bytes, size_t len) {
    skyrl__wstr s = {NULL, len};
    if (len) {
        s.ptr = skyrl__alloc(len);
        memcpy(s.ptr, bytes, len);
    }
    return s;
}

static skyrl__wstr skyrl__wstr_cstr(const char *text) {
    return skyrl__wstr_copy(text ? text : "", text ? strlen(text) : 0);
}

/* Takes a WIT string the host handed over: a NUL-terminated owned copy. */
static skyrl_str skyrl__take(skyrl__wstr *s) {
    skyrl_str out = skyrl__own((const char *)s->ptr, s->len);
    SKYRL__W(string_free)(s);
    return out;
}

static void skyrl__str_free(skyrl_str *s) {
    free((char *)s->ptr);
    s->ptr = NULL;
    s->len = 0;
}

/* A JSON object handed over by the host: empty text and null read as `{}`. */
__attribute__((unused)) static bool skyrl__json_object(skyrl_str *text, const char *what, skyrl_error *err) {
    size_t i = 0;
    while (i < text->len && skyrl__is_ws(text->ptr[i])) i++;
    if (i < text->len && !skyrl_json_valid(text))
        return skyrl_config_error(err, "%s is not valid JSON", what);
    skyrl_json_type type = skyrl_json_typeof(text);
    if (i == text->len || type == SKYRL_JSON_NULL) {
        skyrl__str_free(text);
        *text = skyrl__own("{}", 2);
        return true;
    }
    if (type != SKYRL_JSON_OBJECT)
        return skyrl_config_error(err, "%s must be a JSON object, got %.*s", what,
                                  (int)(text->len > 200 ? 200 : text->len), text->ptr);
    return true;
}

static void skyrl__to_plugin_error(skyrl_error *err, skyrl_plugin_types_plugin_error_t *out,
                                   const char *what) {
    switch (err->kind) {
    case SKYRL_INVALID_CONFIG: out->tag = SKYRL_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_CONFIG; break;
    case SKYRL_INVALID_INPUT: out->tag = SKYRL_PLUGIN_TYPES_PLUGIN_ERROR_INVALID_INPUT; break;
    default: out->tag = SKYRL_PLUGIN_TYPES_PLUGIN_ERROR_FAILED; break;
    }
    skyrl__wstr msg;
    if (err->message && err->message[0])
        msg = skyrl__wstr_cstr(err->message);
    else
        msg = skyrl__wstr_cstr(what);
    /* Every variant case holds one string at the same place. */
    out->val.failed = msg;
    skyrl_error_clear(err);
}

#define SKYRL__FAIL(err, out, what)                                                             \
    do {                                                                                         \
        if ((err)->kind == SKYRL_OK) (err)->kind = SKYRL_FAILED;                                 \
        skyrl__to_plugin_error((err), (out), (what));                                            \
    } while (0)

/* skyrl_messages -> WIT list<message> (empty: NULL pointer). */
#define SKYRL__MESSAGES_TO_WIT(list, wit)                                                        \
    do {                                                                                         \
        (wit)->len = (list)->len;                                                                \
        (wit)->ptr = NULL;                                                                       \
        if ((list)->len) {                                                                       \
            (wit)->ptr = skyrl__alloc((list)->len * sizeof(*(wit)->ptr));                        \
            for (size_t i_ = 0; i_ < (list)->len; i_++) {                                        \
                const skyrl_message *m_ = &(list)->items[i_];                                    \
                (wit)->ptr[i_].role = skyrl__wstr_copy(m_->role.ptr, m_->role.len);              \
                (wit)->ptr[i_].content = skyrl__wstr_copy(m_->content.ptr, m_->content.len);     \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* WIT list<message> handed over by the host -> skyrl_messages (frees it). */
#define SKYRL__MESSAGES_FROM_WIT(wit, list)                                                      \
    do {                                                                                         \
        for (size_t i_ = 0; i_ < (wit)->len; i_++) {                                             \
            skyrl_messages_pushn((list), "", "", 0);                                             \
            skyrl_message *m_ = &(list)->items[(list)->len - 1];                                 \
            skyrl__str_free(&m_->role);                                                          \
            skyrl__str_free(&m_->content);                                                       \
            m_->role = skyrl__take(&(wit)->ptr[i_].role);                                        \
            m_->content = skyrl__take(&(wit)->ptr[i_].content);                                  \
        }                                                                                        \
        if ((wit)->len) free((wit)->ptr);                                                        \
        (wit)->ptr = NULL;                                                                       \
        (wit)->len = 0;                                                                          \
    } while (0)

/* JSON text from a buffer; empty means `{}`. */
__attribute__((unused)) static skyrl__wstr skyrl__json_or_empty(const skyrl_buf *buf) {
    size_t i = 0;
    while (i < buf->len && skyrl__is_ws(buf->ptr[i])) i++;
    if (i == buf->len) return skyrl__wstr_copy("{}", 2);
    return skyrl__wstr_copy(buf->ptr, buf->len);
}

void exports_skyrl_plugin_plugin_info(exports_skyrl_plugin_plugin_plugin_info_t *ret) {
    const skyrl_plugin_info_t *info = &skyrl_plugin_info;
    ret->name = skyrl__wstr_cstr(info->name);
    ret->version = skyrl__wstr_cstr(info->version);
    ret->kind = SKYRL__KIND;
    ret->description = skyrl__wstr_cstr(info->description);
    size_t n = 0;
    while (info->uses_tools && info->uses_tools[n]) n++;
    ret->uses_tools.len = n;
    ret->uses_tools.ptr = NULL;
    if (n) {
        ret->uses_tools.ptr = skyrl__alloc(n * sizeof(skyrl__wstr));
        for (size_t i = 0; i < n; i++) ret->uses_tools.ptr[i] = skyrl__wstr_cstr(info->uses_tools[i]);
    }
}

/* Host imports. */

void skyrl_log(skyrl_log_level level, const char *fmt, ...) {
    skyrl_buf msg = {0};
    va_list args;
    va_start(args, fmt);
    skyrl_buf_vprintf(&msg, fmt, args);
    va_end(args);
    skyrl__wstr text = {(uint8_t *)(msg.ptr ? msg.ptr : ""), msg.len};
    if (level > SKYRL_LOG_ERROR) level = SKYRL_LOG_ERROR;
    skyrl_plugin_host_log((skyrl_plugin_host_log_level_t)level, &text);
    skyrl_buf_free(&msg);
}

static bool skyrl__call_tool(const char *name, const char *args_json, bool timed,
                             uint32_t timeout_ms, skyrl_buf *out, skyrl_error *err) {
    skyrl__wstr wname = {(uint8_t *)name, strlen(name)};
    skyrl__wstr wargs = {(uint8_t *)(args_json ? args_json : "{}"), args_json ? strlen(args_json) : 2};
    skyrl__wstr ok = {NULL, 0}, bad = {NULL, 0};
    bool success = timed ? skyrl_plugin_host_call_tool_timeout(&wname, &wargs, timeout_ms, &ok, &bad)
                         : skyrl_plugin_host_call_tool(&wname, &wargs, &ok, &bad);
    if (success) {
        skyrl_buf_append(out, (const char *)ok.ptr, ok.len);
        SKYRL__W(string_free)(&ok);
        return true;
    }
    skyrl_failed(err, "tool `%s` failed: %.*s", name, (int)bad.len, (const char *)bad.ptr);
    SKYRL__W(string_free)(&bad);
    return false;
}

bool skyrl_call_tool(const char *name, const char *args_json, skyrl_buf *out, skyrl_error *err) {
    return skyrl__call_tool(name, args_json, false, 0, out, err);
}

bool skyrl_call_tool_timeout(const char *name, const char *args_json, uint32_t timeout_ms,
                             skyrl_buf *out, skyrl_error *err) {
    return skyrl__call_tool(name, args_json, true, timeout_ms, out, err);
}

#else /* no world: native builds */

void skyrl_log(skyrl_log_level level, const char *fmt, ...) {
    static const char *const names[] = {"trace", "debug", "info", "warn", "error"};
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "[%s] ", names[level <= SKYRL_LOG_ERROR ? level : SKYRL_LOG_ERROR]);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
}

bool skyrl_call_tool(const char *name, const char *args_json, skyrl_buf *out, skyrl_error *err) {
    (void)args_json, (void)out;
    return skyrl_failed(err, "cannot call tool `%s`: not running inside a skyrl wasm host", name);
}

bool skyrl_call_tool_timeout(const char *name, const char *args_json, uint32_t timeout_ms,
                             skyrl_buf *out, skyrl_error *err) {
    (void)timeout_ms;
    return skyrl_call_tool(name, args_json, out, err);
}

#endif /* SKYRL__W */

/* ------------------------------------------------------------------ */
/* environment-plugin                                                  */
/* ------------------------------------------------------------------ */

#if defined(SKYRL_WORLD_ENVIRONMENT)

struct exports_skyrl_plugin_environment_env_t {
    void *state;
};

__attribute__((weak)) bool skyrl_env_init(void *state, skyrl_init *out, skyrl_error *err) {
    (void)state, (void)out, (void)err;
    return true;
}

__attribute__((weak)) void skyrl_env_metrics(void *state, skyrl_buf *out) { (void)state, (void)out; }

__attribute__((weak)) void skyrl_env_close(void *state) { (void)state; }

__attribute__((weak)) void skyrl_env_free(void *state) { free(state); }

bool exports_skyrl_plugin_environment_static_env_create(
    environment_plugin_string_t *config_json, environment_plugin_string_t *extras_json,
    exports_skyrl_plugin_environment_own_env_t *ret,
    exports_skyrl_plugin_environment_plugin_error_t *wit_err) {
    skyrl_str config = skyrl__take(config_json);
    skyrl_str extras = skyrl__take(extras_json);
    skyrl_error err = {SKYRL_OK, NULL};
    void *state = NULL;
    bool ok = skyrl__json_object(&config, "env config", &err) &&
              skyrl__json_object(&extras, "extras", &err) &&
              skyrl_env_create(&config, &extras, &state, &err);
    skyrl__str_free(&config);
    skyrl__str_free(&extras);
    if (!ok) {
        SKYRL__FAIL(&err, wit_err, "skyrl_env_create failed");
        return false;
    }
    exports_skyrl_plugin_environment_env_t *rep = skyrl__alloc(sizeof *rep);
    rep->state = state;
    *ret = exports_skyrl_plugin_environment_env_new(rep);
    return true;
}

bool exports_skyrl_plugin_environment_method_env_init(
    exports_skyrl_plugin_environment_borrow_env_t self,
    exports_skyrl_plugin_environment_list_message_t *prompt,
    exports_skyrl_plugin_environment_init_output_t *ret,
    exports_skyrl_plugin_environment_plugin_error_t *wit_err) {
    skyrl_init out = {{0}, {0}};
    SKYRL__MESSAGES_FROM_WIT(prompt, &out.prompt);
    skyrl_error err = {SKYRL_OK, NULL};
    bool ok = skyrl_env_init(self->state, &out, &err);
    if (ok) {
        SKYRL__MESSAGES_TO_WIT(&out.prompt, &ret->prompt);
        ret->metadata_json = skyrl__json_or_empty(&out.metadata);
    } else {
        SKYRL__FAIL(&err, wit_err, "skyrl_env_init failed");
    }
    skyrl_messages_free(&out.prompt);
    skyrl_buf_free(&out.metadata);
    return ok;
}

bool exports_skyrl_plugin_environment_method_env_step(
    exports_skyrl_plugin_environment_borrow_env_t self, environment_plugin_string_t *action,
    exports_skyrl_plugin_environment_step_output_t *ret,
    exports_skyrl_plugin_environment_plugin_error_t *wit_err) {
    skyrl_str text = skyrl__take(action);
    skyrl_step out = {{0}, 0.0, false, {0}};
    skyrl_error err = {SKYRL_OK, NULL};
    bool ok = skyrl_env_step(self->state, text.ptr, text.len, &out, &err);
    if (ok) {
        SKYRL__MESSAGES_TO_WIT(&out.observations, &ret->observations);
        ret->reward = out.reward;
        ret->done = out.done;
        ret->metadata_json = skyrl__json_or_empty(&out.metadata);
    } else {
        SKYRL__FAIL(&err, wit_err, "skyrl_env_step failed");
    }
    skyrl__str_free(&text);
    skyrl_messages_free(&out.observations);
    skyrl_buf_free(&out.metadata);
    return ok;
}

void exports_skyrl_plugin_environment_method_env_close(
    exports_skyrl_plugin_environment_borrow_env_t self) {
    skyrl_env_close(self->state);
}

void exports_skyrl_plugin_environment_method_env_metrics(
    exports_skyrl_plugin_environment_borrow_env_t self, environment_plugin_string_t *ret) {
    skyrl_buf out = {0};
    skyrl_env_metrics(self->state, &out);
    *ret = skyrl__json_or_empty(&out);
    skyrl_buf_free(&out);
}

void exports_skyrl_plugin_environment_env_destructor(exports_skyrl_plugin_environment_env_t *rep) {
    skyrl_env_free(rep->state);
    free(rep);
}

#endif /* SKYRL_WORLD_ENVIRONMENT */

/* ------------------------------------------------------------------ */
/* tool-plugin                                                         */
/* ------------------------------------------------------------------ */

#if defined(SKYRL_WORLD_TOOL)

void exports_skyrl_plugin_tool_specs(exports_skyrl_plugin_tool_list_tool_spec_t *ret) {
    skyrl_tool_spec_list specs = {NULL, 0, 0};
    skyrl_tool_specs(&specs);
    ret->len = specs.len;
    ret->ptr = specs.len ? skyrl__alloc(specs.len * sizeof(*ret->ptr)) : NULL;
    for (size_t i = 0; i < specs.len; i++) {
        skyrl_tool_spec *s = &specs.items[i];
        ret->ptr[i].name = skyrl__wstr_copy(s->name.ptr, s->name.len);
        ret->ptr[i].description = skyrl__wstr_copy(s->description.ptr, s->description.len);
        ret->ptr[i].parameters_json = skyrl__wstr_copy(s->parameters_json.ptr, s->parameters_json.len);
        skyrl__str_free(&s->name);
        skyrl__str_free(&s->description);
        skyrl__str_free(&s->parameters_json);
    }
    free(specs.items);
}

bool exports_skyrl_plugin_tool_call(tool_plugin_string_t *name, tool_plugin_string_t *args_json,
                                    tool_plugin_string_t *ret,
                                    exports_skyrl_plugin_tool_plugin_error_t *wit_err) {
    skyrl_str tool = skyrl__take(name);
    skyrl_str args = skyrl__take(args_json);
    skyrl_error err = {SKYRL_OK, NULL};
    skyrl_buf out = {0};
    bool ok = true;
    if (skyrl_json_typeof(&args) == SKYRL_JSON_INVALID && args.len == 0) {
        skyrl__str_free(&args);
        args = skyrl__own("{}", 2);
    }
    if (!skyrl_json_valid(&args))
        ok = skyrl_input_error(&err, "tool arguments are not JSON");
    else if (skyrl_json_typeof(&args) != SKYRL_JSON_OBJECT)
        ok = skyrl_input_error(&err, "tool arguments must be a JSON object");
    if (ok) ok = skyrl_tool_call(&tool, &args, &out, &err);
    if (ok)
        *ret = skyrl__wstr_copy(out.ptr, out.len);
    else
        SKYRL__FAIL(&err, wit_err, "skyrl_tool_call failed");
    skyrl__str_free(&tool);
    skyrl__str_free(&args);
    skyrl_buf_free(&out);
    return ok;
}

#endif /* SKYRL_WORLD_TOOL */

/* ------------------------------------------------------------------ */
/* reward-plugin                                                       */
/* ------------------------------------------------------------------ */

#if defined(SKYRL_WORLD_REWARD)

bool exports_skyrl_plugin_reward_score(exports_skyrl_plugin_reward_list_message_t *prompt,
                                       reward_plugin_string_t *response,
                                       reward_plugin_string_t *ground_truth_json,
                                       reward_plugin_string_t *extras_json, double *ret,
                                       exports_skyrl_plugin_reward_plugin_error_t *wit_err) {
    skyrl_messages messages = {NULL, 0, 0};
    SKYRL__MESSAGES_FROM_WIT(prompt, &messages);
    skyrl_str text = skyrl__take(response);
    skyrl_str truth = skyrl__take(ground_truth_json);
    skyrl_str extras = skyrl__take(extras_json);
    skyrl_error err = {SKYRL_OK, NULL};
    bool ok = true;
    size_t i = 0;
    while (i < truth.len && skyrl__is_ws(truth.ptr[i])) i++;
    if (i < truth.len && !skyrl_json_valid(&truth))
        ok = skyrl_config_error(&err, "ground truth is not JSON");
    if (ok) ok = skyrl__json_object(&extras, "extras", &err);
    double score = 0.0;
    if (ok) ok = skyrl_reward_score(&messages, &text, &truth, &extras, &score, &err);
    if (ok)
        *ret = score;
    else
        SKYRL__FAIL(&err, wit_err, "skyrl_reward_score failed");
    skyrl_messages_free(&messages);
    skyrl__str_free(&text);
    skyrl__str_free(&truth);
    skyrl__str_free(&extras);
    return ok;
}

#endif /* SKYRL_WORLD_REWARD */

/* skyrl-sdk for C: write skyrl environments, tools and rewards in C.
 *
 * `skyrl plugin build` compiles the plugin folder's `*.c` files together
 * with this SDK and the WIT bindings `wit-bindgen c` generates for the
 * plugin's world, for wasm32-wasi (clang + wasi-libc), and turns the core
 * module into a component. The author never sees the generated bindings:
 * they implement the `skyrl_env_*` (or `skyrl_tool_*`, `skyrl_reward_*`)
 * functions below and describe the plugin with `SKYRL_PLUGIN_INFO`.
 *
 * Conventions:
 * - Strings handed to the plugin are `skyrl_str` (pointer + length, always
 *   NUL-terminated as well; the SDK owns them for the duration of the call).
 * - Functions that can fail return `bool` (true = success) and take a
 *   `skyrl_error *err`; fail with `return skyrl_config_error(err, ...)` etc.
 * - Everything the plugin hands back (messages, buffers) is copied or owned
 *   by the SDK; the plugin never frees what it passed in.
 *
 * Everything outside the `SKYRL_WORLD_*` glue in skyrl.c is plain C99 and
 * builds natively, so plugin logic can be unit-tested without a wasm host.
 */
#ifndef SKYRL_H
#define SKYRL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SKYRL_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define SKYRL_PRINTF(fmt, args)
#endif

/* ------------------------------------------------------------------ */
/* Strings and buffers                                                 */
/* ------------------------------------------------------------------ */

/** A byte string: `len` bytes at `ptr` (UTF-8). Strings the SDK hands out
 *  also have a NUL after the last byte, so `ptr` works as a C string. */
typedef struct skyrl_str {
    const char *ptr;
    size_t len;
} skyrl_str;

/** A `skyrl_str` viewing the C string `text` (not copied). */
skyrl_str skyrl_cstr(const char *text);

/** True when `s` holds exactly the C string `text`. */
bool skyrl_str_eq(const skyrl_str *s, const char *text);

/** A growable byte buffer (always NUL-terminated once non-empty). Zero
 *  initialise it (`skyrl_buf b = {0};`); free with `skyrl_buf_free`. */
typedef struct skyrl_buf {
    char *ptr;
    size_t len;
    size_t cap;
} skyrl_buf;

void skyrl_buf_append(skyrl_buf *buf, const char *bytes, size_t len);
void skyrl_buf_puts(skyrl_buf *buf, const char *text);
void skyrl_buf_printf(skyrl_buf *buf, const char *fmt, ...) SKYRL_PRINTF(2, 3);
void skyrl_buf_vprintf(skyrl_buf *buf, const char *fmt, va_list args);
/** Appends `len` bytes of `text` as a JSON string literal (quoted, escaped). */
void skyrl_buf_json_string(skyrl_buf *buf, const char *text, size_t len);
/** Empties the buffer, keeping its memory. */
void skyrl_buf_clear(skyrl_buf *buf);
void skyrl_buf_free(skyrl_buf *buf);

/* ------------------------------------------------------------------ */
/* Errors (WIT `plugin-error`)                                         */
/* ------------------------------------------------------------------ */

typedef enum skyrl_error_kind {
    SKYRL_OK = 0,
    /** The JSON config or extras were unusable (`invalid-config`). */
    SKYRL_INVALID_CONFIG,
    /** The call's input was unusable: a bad action or arguments (`invalid-input`). */
    SKYRL_INVALID_INPUT,
    /** Anything else (`failed`). */
    SKYRL_FAILED,
} skyrl_error_kind;

typedef struct skyrl_error {
    skyrl_error_kind kind;
    /** malloc'd message (owned by the SDK), or NULL. */
    char *message;
} skyrl_error;

/** Set `err` and return false, so `return skyrl_config_error(err, ...);`
 *  reads naturally. A second call replaces the first error. */
bool skyrl_config_error(skyrl_error *err, const char *fmt, ...) SKYRL_PRINTF(2, 3);
bool skyrl_input_error(skyrl_error *err, const char *fmt, ...) SKYRL_PRINTF(2, 3);
bool skyrl_failed(skyrl_error *err, const char *fmt, ...) SKYRL_PRINTF(2, 3);
bool skyrl_error_set(skyrl_error *err, skyrl_error_kind kind, const char *fmt, ...)
    SKYRL_PRINTF(3, 4);
/** Frees the message and resets `err` to SKYRL_OK. */
void skyrl_error_clear(skyrl_error *err);

/* ------------------------------------------------------------------ */
/* Chat messages                                                       */
/* ------------------------------------------------------------------ */

/** One OpenAI-style chat message (strings owned by the list). */
typedef struct skyrl_message {
    skyrl_str role;
    skyrl_str content;
} skyrl_message;

typedef struct skyrl_messages {
    skyrl_message *items;
    size_t len;
    size_t cap;
} skyrl_messages;

/** Appends a copy of (`role`, `content`). */
void skyrl_messages_push(skyrl_messages *list, const char *role, const char *content);
/** As `skyrl_messages_push` with explicit content length. */
void skyrl_messages_pushn(skyrl_messages *list, const char *role, const char *content,
                          size_t content_len);
/** Replaces message `index`'s content with a copy of `content`. */
void skyrl_messages_set_content(skyrl_messages *list, size_t index, const char *content);
/** Removes every message. */
void skyrl_messages_clear(skyrl_messages *list);
void skyrl_messages_free(skyrl_messages *list);

/* ------------------------------------------------------------------ */
/* Minimal JSON reading                                                */
/* ------------------------------------------------------------------ */
/* A small hand-written scanner, enough for configs and extras:
 * - `path` is a '.'-separated list of object keys ("reward_spec.ground_truth");
 *   array indices are not supported, and keys are compared byte for byte
 *   with their raw JSON spelling (a key written with escape sequences does
 *   not match). With duplicate keys the first one wins.
 * - The text walked over must be valid JSON (RFC 8259 structure; numbers and
 *   literals are checked, strings' UTF-8 is not), nested at most 256 deep.
 * - Numbers are reported in the spelling they have in the text (the host
 *   serialises config and extras with serde_json, so that is the canonical
 *   JSON spelling: `1234`, `7.5`).
 */

typedef enum skyrl_json_type {
    SKYRL_JSON_INVALID = 0,
    SKYRL_JSON_NULL,
    SKYRL_JSON_BOOL,
    SKYRL_JSON_NUMBER,
    SKYRL_JSON_STRING,
    SKYRL_JSON_ARRAY,
    SKYRL_JSON_OBJECT,
} skyrl_json_type;

/** True when `json` is one valid JSON value (surrounding whitespace allowed). */
bool skyrl_json_valid(const skyrl_str *json);
/** The type of the (raw) JSON value `value`. */
skyrl_json_type skyrl_json_typeof(const skyrl_str *value);
/** Finds the value at `path` in `json` (a JSON object); `*value` is set to its
 *  raw text (a view into `json`). False when it is missing or `json` is
 *  malformed. A `path` of "" is the whole value. */
bool skyrl_json_find(const skyrl_str *json, const char *path, skyrl_str *value);
/** `value` as text, malloc'd: strings decoded (escapes, \uXXXX to UTF-8),
 *  numbers/booleans/null as written, objects and arrays as their raw text.
 *  NULL when `value` is not valid JSON. */
char *skyrl_json_text(const skyrl_str *value);
/** The number at `path`; false when missing or not a number. */
bool skyrl_json_get_number(const skyrl_str *json, const char *path, double *out);
/** The boolean at `path`; false when missing or not a boolean. */
bool skyrl_json_get_bool(const skyrl_str *json, const char *path, bool *out);
/** The string at `path`, decoded and malloc'd; NULL when missing or not a string. */
char *skyrl_json_get_string(const skyrl_str *json, const char *path);

/** `extras.reward_spec.ground_truth` as text, malloc'd into `*out`: strings
 *  as they are, numbers and booleans in their JSON spelling. Missing (or
 *  null) is an invalid-config error mentioning `ground_truth`, as are
 *  objects and arrays. */
bool skyrl_extras_ground_truth(const skyrl_str *extras, char **out, skyrl_error *err);
/** `max_turns` (set by the generator), else `extra_info.max_turns`, else
 *  `default_turns`; a value that is not a positive integer is an
 *  invalid-config error. */
bool skyrl_extras_max_turns(const skyrl_str *extras, long default_turns, long *out,
                            skyrl_error *err);

/* ------------------------------------------------------------------ */
/* GSM8K scoring (skyrl-gym `gsm8k.utils`, method "strict")            */
/* ------------------------------------------------------------------ */

/** The FIRST match of `#### (\-?[0-9\.\,]+)` in the response with `,` and
 *  `$` removed, malloc'd; NULL when there is none. */
char *skyrl_gsm8k_extract_answer(const char *response, size_t len);
/** No answer -> 0.0; answer == ground_truth (as strings) -> 1.0; else 0.0. */
double skyrl_gsm8k_compute_score(const char *response, size_t len, const char *ground_truth);
/** As skyrl-gym's `compute_score(solution, ground_truth, method="strict",
 *  format_score, score)`: no answer -> 0.0, equal -> `score`, else
 *  `format_score`. */
double skyrl_gsm8k_compute_score_ex(const char *response, size_t len, const char *ground_truth,
                                    double format_score, double score);

/* ------------------------------------------------------------------ */
/* Host imports                                                        */
/* ------------------------------------------------------------------ */

typedef enum skyrl_log_level {
    SKYRL_LOG_TRACE,
    SKYRL_LOG_DEBUG,
    SKYRL_LOG_INFO,
    SKYRL_LOG_WARN,
    SKYRL_LOG_ERROR,
} skyrl_log_level;

/** Writes a line into the host's `tracing` output (stderr outside a host). */
void skyrl_log(skyrl_log_level level, const char *fmt, ...) SKYRL_PRINTF(2, 3);

/** Calls tool `name` that another (tool) plugin provides, with `args_json`
 *  (a JSON object); the tool's output is appended to `out`. A failed call
 *  is a `failed` error carrying the host's message. Declare the tools in
 *  `SKYRL_PLUGIN_INFO`'s `uses_tools`. */
bool skyrl_call_tool(const char *name, const char *args_json, skyrl_buf *out, skyrl_error *err);
/** `skyrl_call_tool` that must finish within `timeout_ms` milliseconds. */
bool skyrl_call_tool_timeout(const char *name, const char *args_json, uint32_t timeout_ms,
                             skyrl_buf *out, skyrl_error *err);

/* ------------------------------------------------------------------ */
/* Self-description                                                    */
/* ------------------------------------------------------------------ */

typedef struct skyrl_plugin_info_t {
    const char *name;
    const char *version;
    const char *description;
    /** NULL-terminated names of the tools called through `skyrl_call_tool`. */
    const char *const *uses_tools;
} skyrl_plugin_info_t;

/** Defined by `SKYRL_PLUGIN_INFO` in exactly one of the plugin's files. */
extern const skyrl_plugin_info_t skyrl_plugin_info;

/** `SKYRL_PLUGIN_INFO("gsm8k_c", "0.1.0", "GSM8K in C")`, optionally followed
 *  by the names of tools the plugin calls: `..., "python")`. The kind comes
 *  from `skyrl-plugin.toml`. */
#define SKYRL_PLUGIN_INFO(name, version, description, ...)                               \
    static const char *const skyrl_uses_tools_[] = {__VA_ARGS__ __VA_OPT__(, ) (const char *)0}; \
    const skyrl_plugin_info_t skyrl_plugin_info = {(name), (version), (description),          \
                                                   skyrl_uses_tools_}

/* ------------------------------------------------------------------ */
/* Environments (kind = "environment")                                 */
/* ------------------------------------------------------------------ */
/* One env per episode. The host calls create, then init once, then step
 * until a step says done, then metrics and close; the env is then dropped
 * (skyrl_env_free). Only create and step are required. */

/** The result of `skyrl_env_init`: `prompt` starts as the prompt the host
 *  sent (edit it to rewrite the prompt); `metadata` is a JSON object (empty
 *  means `{}`). */
typedef struct skyrl_init {
    skyrl_messages prompt;
    skyrl_buf metadata;
} skyrl_init;

/** The result of one `skyrl_env_step`: starts zeroed (no observations,
 *  reward 0, not done, metadata `{}`). */
typedef struct skyrl_step {
    skyrl_messages observations;
    double reward;
    bool done;
    /** A JSON object; empty means `{}`. */
    skyrl_buf metadata;
} skyrl_step;

/** Adds an observation message shown to the model on the next turn. */
void skyrl_step_observe(skyrl_step *out, const char *role, const char *content);

/** Required: build one episode's state from the env config (JSON object)
 *  and the dataset row's extras (JSON object: `reward_spec`, `extra_info`,
 *  `max_turns`, ...). Store it in `*state` (malloc it: the default
 *  `skyrl_env_free` calls `free(state)`). Both texts have been checked to be
 *  JSON objects (an empty text reads as `{}`). */
bool skyrl_env_create(const skyrl_str *config_json, const skyrl_str *extras_json, void **state,
                      skyrl_error *err);
/** Optional: the (possibly rewritten) prompt and metadata. Default: the
 *  prompt unchanged, metadata `{}`. */
bool skyrl_env_init(void *state, skyrl_init *out, skyrl_error *err);
/** Required: one turn. `action` is the model's response (NUL-terminated). */
bool skyrl_env_step(void *state, const char *action, size_t len, skyrl_step *out,
                    skyrl_error *err);
/** Optional: episode metrics, a JSON object of numbers/bools appended to
 *  `out` (empty means `{}`). */
void skyrl_env_metrics(void *state, skyrl_buf *out);
/** Optional: release resources at the end of the episode (cannot fail). */
void skyrl_env_close(void *state);
/** Optional: free the state when the host drops the env. Default: `free(state)`. */
void skyrl_env_free(void *state);

/* ------------------------------------------------------------------ */
/* Tools (kind = "tool")                                               */
/* ------------------------------------------------------------------ */

typedef struct skyrl_tool_spec {
    skyrl_str name;
    skyrl_str description;
    /** JSON schema of the arguments object. */
    skyrl_str parameters_json;
} skyrl_tool_spec;

typedef struct skyrl_tool_spec_list {
    skyrl_tool_spec *items;
    size_t len;
    size_t cap;
} skyrl_tool_spec_list;

/** Adds a tool; `parameters_json` NULL means `{"type":"object"}`. */
void skyrl_tool_specs_add(skyrl_tool_spec_list *specs, const char *name, const char *description,
                          const char *parameters_json);

/** Required: the tools this plugin provides. */
void skyrl_tool_specs(skyrl_tool_spec_list *out);
/** Required: run tool `name`; `args_json` has been checked to be a JSON
 *  object. Append the output text (or JSON) to `out`. */
bool skyrl_tool_call(const skyrl_str *name, const skyrl_str *args_json, skyrl_buf *out,
                     skyrl_error *err);

/* ------------------------------------------------------------------ */
/* Rewards (kind = "reward")                                           */
/* ------------------------------------------------------------------ */

/** Required: score `response`. `ground_truth_json` is a JSON value (empty
 *  when there is none; `skyrl_json_text` turns it into text); `extras_json`
 *  has been checked to be a JSON object. */
bool skyrl_reward_score(const skyrl_messages *prompt, const skyrl_str *response,
                        const skyrl_str *ground_truth_json, const skyrl_str *extras_json,
                        double *score, skyrl_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SKYRL_H */

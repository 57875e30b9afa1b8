/* GSM8K (skyrl-gym `gsm8k`) in C: one step, done, no observations. The
 * reward is 1.0 when the first `#### <number>` of the response (commas and
 * `$` removed) equals `extras.reward_spec.ground_truth`, else 0.0 -- the
 * same env as envs/gsm8k (Rust) and envs/gsm8k_py (Python). */

#include <stdlib.h>

#include "skyrl.h"

typedef struct {
    char *ground_truth;
} gsm8k;

bool skyrl_env_create(const skyrl_str *config_json, const skyrl_str *extras_json, void **state,
                      skyrl_error *err) {
    (void)config_json;
    char *ground_truth;
    if (!skyrl_extras_ground_truth(extras_json, &ground_truth, err)) return false;
    gsm8k *env = malloc(sizeof *env);
    if (!env) return skyrl_failed(err, "out of memory");
    env->ground_truth = ground_truth;
    *state = env;
    return true;
}

bool skyrl_env_step(void *state, const char *action, size_t len, skyrl_step *out,
                    skyrl_error *err) {
    (void)err;
    gsm8k *env = state;
    out->reward = skyrl_gsm8k_compute_score(action, len, env->ground_truth);
    out->done = true;
    return true;
}

void skyrl_env_free(void *state) {
    gsm8k *env = state;
    free(env->ground_truth);
    free(env);
}

SKYRL_PLUGIN_INFO("gsm8k_c", "0.1.0",
                  "GSM8K math word problems, answer after '#### ' (C SDK)");

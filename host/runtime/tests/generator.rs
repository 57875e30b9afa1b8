//! Generator plugins: the `llm`/`envs` imports reach the host's
//! `GeneratorHost`, envs opened by the generator run in their own sandboxes,
//! and bad combinations fail clearly.

mod common;

use std::sync::{Arc, Mutex};

use common::{engine, load};
use serde_json::json;
use skyrl_runtime::{
    EnvInstance, GeneratorHost, GeneratorPrompt, LlmCompletion, LlmParams, Message, Plugin,
    PluginError, SandboxLimits,
};

/// A host whose "model" answers the `i`-th prompt of a batch with `answers[i % len]`
/// (one token per character), and whose envs are `string_transform`.
struct ScriptedHost {
    answers: Vec<&'static str>,
    env: Plugin,
    batches: Mutex<Vec<usize>>,
}

impl GeneratorHost for ScriptedHost {
    fn generate(
        &self,
        prompts: Vec<Vec<u32>>,
        params: &LlmParams,
    ) -> Result<Vec<LlmCompletion>, String> {
        self.batches.lock().unwrap().push(prompts.len());
        assert_eq!(params.max_tokens, 5);
        Ok((0..prompts.len())
            .map(|i| {
                let text = self.answers[i % self.answers.len()];
                LlmCompletion {
                    token_ids: text.bytes().map(u32::from).collect(),
                    logprobs: vec![-0.5; text.len()],
                    text: text.into(),
                    stop_reason: "stop".into(),
                }
            })
            .collect())
    }
    fn tokenize(&self, text: &str) -> Vec<u32> {
        text.bytes().map(u32::from).collect()
    }
    fn detokenize(&self, ids: &[u32]) -> String {
        ids.iter().map(|&b| b as u8 as char).collect()
    }
    fn apply_chat_template(&self, messages: &[Message], _add: bool) -> Vec<u32> {
        messages
            .iter()
            .flat_map(|m| m.content.bytes().map(u32::from))
            .collect()
    }
    fn open_env(&self, env_class: &str, extras_json: &str) -> Result<EnvInstance, String> {
        assert_eq!(env_class, "string_transform");
        let extras: serde_json::Value = serde_json::from_str(extras_json).unwrap();
        self.env
            .create_env(&json!({}), &extras)
            .map_err(|e| e.to_string())
    }
}

fn prompt() -> GeneratorPrompt {
    GeneratorPrompt {
        prompt: vec![Message::user("copy: cdca")],
        env_class: "string_transform".into(),
        extras: json!({
            "reward_spec": {"method": "rule", "ground_truth": "cdca"},
            "extra_info": {"task": "copy", "input": "cdca"},
        }),
        trajectory_id: "t0".into(),
    }
}

#[test]
fn best_of_n_keeps_the_candidate_the_env_scores_highest() {
    let pe = engine(SandboxLimits::default());
    let host = Arc::new(ScriptedHost {
        answers: vec!["zz", "cd", "cdca", "cdcx"],
        env: load(&pe, "string_transform"),
        batches: Mutex::new(Vec::new()),
    });
    let generator = load(&pe, "best_of_n");
    let mut g = generator.create_generator(host.clone()).unwrap();
    let out = g
        .generate(
            &[prompt(), prompt()],
            &json!({"max_tokens": 5, "temperature": 1.0, "seed": 1, "config": {"n": 4}}),
        )
        .unwrap();
    assert_eq!(out.len(), 2);
    for t in &out {
        assert_eq!(
            t.response_ids,
            "cdca".bytes().map(u32::from).collect::<Vec<_>>()
        );
        assert_eq!(t.loss_mask, vec![1; 4]);
        assert_eq!(t.rewards, vec![0.0, 0.0, 0.0, 1.0]);
        assert_eq!(t.rollout_logprobs, vec![-0.5; 4]);
        assert_eq!(
            t.prompt_token_ids,
            "copy: cdca".bytes().map(u32::from).collect::<Vec<_>>()
        );
    }
    // One batched call of n candidates per prompt.
    assert_eq!(*host.batches.lock().unwrap(), vec![4, 4]);
}

#[test]
fn generator_config_errors_and_wrong_worlds_are_clear() {
    let pe = engine(SandboxLimits::default());
    let host = Arc::new(ScriptedHost {
        answers: vec!["x"],
        env: load(&pe, "string_transform"),
        batches: Mutex::new(Vec::new()),
    });
    let generator = load(&pe, "best_of_n");
    let err = generator
        .create_generator(host.clone())
        .unwrap()
        .generate(&[prompt()], &json!({"max_tokens": 5, "config": {"n": 0}}))
        .unwrap_err();
    assert!(err.to_string().contains("n >= 1"), "{err}");
    // An env plugin is not a generator, and a generator is not an env.
    let env = load(&pe, "string_transform");
    assert!(matches!(
        env.create_generator(host).err().unwrap(),
        PluginError::WrongWorld { .. }
    ));
    assert!(matches!(
        generator.create_env(&json!({}), &json!({})).err().unwrap(),
        PluginError::WrongWorld { .. }
    ));
}

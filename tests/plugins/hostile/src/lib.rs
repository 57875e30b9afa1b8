//! A deliberately hostile environment for the host's sandbox tests.
//!
//! Env config `{"attack": "<name>"}` selects what `step` does:
//!
//! | attack        | behaviour at `step`                                              |
//! |---------------|------------------------------------------------------------------|
//! | `none`        | well behaved: logs one line, reward 1.0, done; metadata `instance_episodes`: episodes this instance has created |
//! | `loop`        | spins forever                                                    |
//! | `membomb`     | allocates and touches 16 MiB chunks until allocation fails       |
//! | `recursion`   | unbounded non-tail recursion until the wasm call stack runs out  |
//! | `trap`        | panics (a wasm trap)                                             |
//! | `read_passwd` | reads `/etc/passwd`; the content or the error text is the observation |
//!
//! `create` and `init` always behave; an unknown attack is `invalid-config`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_sdk::{parse_config, Environment, Extras, Message, Result, StepOutput};

/// What `step` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attack {
    /// Behave.
    #[default]
    None,
    /// Infinite loop.
    Loop,
    /// Exhaust memory.
    Membomb,
    /// Exhaust the stack.
    Recursion,
    /// Panic.
    Trap,
    /// Try to read a host file.
    ReadPasswd,
}

/// The env config.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The attack performed at `step`.
    pub attack: Attack,
}

/// A hostile episode.
pub struct Hostile {
    attack: Attack,
    /// Episodes created in this instance so far, this one included.
    instance_episodes: u32,
}

/// Episodes created in this instance (a module global, so it shows whether
/// the host reused the sandbox).
static EPISODES_CREATED: AtomicU32 = AtomicU32::new(0);

/// Size of one `membomb` chunk.
pub const CHUNK_BYTES: usize = 16 << 20;

/// Spins forever; `black_box` keeps the optimiser from removing the loop.
pub fn spin_forever() -> ! {
    let mut counter = 0u64;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Allocates `CHUNK_BYTES` chunks filled with a non-zero byte (so every page
/// is really written), until allocation fails (which aborts).
pub fn allocate_forever() -> ! {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        let chunk = vec![black_box(0xA5u8); CHUNK_BYTES];
        chunks.push(black_box(chunk));
    }
}

/// Recurses without bound until the wasm call stack is exhausted. Only
/// scalars live in each frame (no shadow-stack memory), and the result goes
/// through `black_box` before it is used, so the call is not a tail call and
/// cannot be turned into a loop.
#[inline(never)]
pub fn recurse(depth: u64) -> u64 {
    // Unreachable in practice; hidden from the optimiser by `black_box`.
    if black_box(depth) == u64::MAX {
        return 0;
    }
    let below = black_box(recurse(black_box(depth + 1)));
    below.wrapping_mul(31).wrapping_add(depth)
}

/// The observation text of `read_passwd`: the file content, or the error.
pub fn read_passwd() -> String {
    match std::fs::read_to_string("/etc/passwd") {
        Ok(content) => content,
        Err(e) => format!("error: {e}"),
    }
}

impl Environment for Hostile {
    fn create(config: &Value, _extras: &Extras) -> Result<Self> {
        let config: Config = parse_config(config)?;
        Ok(Self {
            attack: config.attack,
            instance_episodes: EPISODES_CREATED.fetch_add(1, Ordering::Relaxed) + 1,
        })
    }

    fn step(&mut self, _action: &str) -> Result<StepOutput> {
        match self.attack {
            Attack::None => {
                skyrl_sdk::info!("hostile plugin in harmless mode");
                Ok(StepOutput::done(1.0)
                    .with_metadata(json!({ "instance_episodes": self.instance_episodes })))
            }
            Attack::Loop => spin_forever(),
            Attack::Membomb => allocate_forever(),
            Attack::Recursion => {
                let n = recurse(0);
                Ok(StepOutput::done(n as f64))
            }
            Attack::Trap => panic!("hostile plugin: deliberate trap"),
            Attack::ReadPasswd => {
                let text = read_passwd();
                let read_ok = !text.starts_with("error: ");
                Ok(StepOutput {
                    observations: vec![Message::user(text)],
                    reward: 0.0,
                    done: true,
                    metadata: json!({ "read_ok": read_ok }),
                })
            }
        }
    }
}

skyrl_sdk::export_env!(
    Hostile,
    name = "hostile",
    version = "0.1.0",
    description =
        "Test plugin: loops, exhausts memory or stack, traps or reads host files on purpose"
);

#[cfg(test)]
mod tests {
    use super::*;

    fn env(config: Value) -> Result<Hostile> {
        Hostile::create(&config, &Extras::default())
    }

    #[test]
    fn config_selects_the_attack() {
        assert_eq!(env(json!({})).unwrap().attack, Attack::None);
        assert_eq!(
            env(json!({"attack": "membomb"})).unwrap().attack,
            Attack::Membomb
        );
        assert_eq!(
            env(json!({"attack": "read_passwd"})).unwrap().attack,
            Attack::ReadPasswd
        );
        assert!(matches!(
            env(json!({"attack": "fork_bomb"})),
            Err(skyrl_sdk::Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn harmless_mode_behaves() {
        let out = env(json!({"attack": "none"})).unwrap().step("x").unwrap();
        assert_eq!((out.reward, out.done), (1.0, true));
    }

    #[test]
    fn read_passwd_reports_content_or_error() {
        let out = env(json!({"attack": "read_passwd"}))
            .unwrap()
            .step("x")
            .unwrap();
        let text = &out.observations[0].content;
        // Natively the file normally exists; either way the outcome is reported.
        assert_eq!(out.metadata["read_ok"], !text.starts_with("error: "));
    }
}

//! Bearer keys of engine servers: the environment variables that carry them
//! (to `skyrl serve` and to the trainer's client alike), and fresh keys for
//! the servers a trainer starts.

/// `skyrl serve`'s API key (its `/v1/*` and token routes).
pub const API_KEY_VAR: &str = "SKYRL_API_KEY";
/// `skyrl serve`'s admin key (weight control and lifecycle routes).
pub const ADMIN_KEY_VAR: &str = "SKYRL_ADMIN_KEY";

/// `key` when set, else the variable `var`; empty values count as unset.
pub fn key_or_env(key: &Option<String>, var: &str) -> Option<String> {
    key.clone()
        .or_else(|| std::env::var(var).ok())
        .filter(|k| !k.is_empty())
}

/// A fresh random key (256 bits, hex).
pub fn random_key() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

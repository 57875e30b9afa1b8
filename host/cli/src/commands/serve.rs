//! `skyrl serve`: the built-in engine behind an OpenAI-compatible HTTP API.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use skyrl_inference::engine_settings::gpu_kv_budget;
use skyrl_inference::keys::{key_or_env, ADMIN_KEY_VAR, API_KEY_VAR};
use skyrl_model::{CausalLm, EngineSettings, InferenceEngine, LoadOptions, Tokenizer};
use skyrl_serve::auth::AuthKeys;
use skyrl_serve::limits::Limits;
use skyrl_serve::server::{serve_blocking, AppState};
use skyrl_serve::weights_root::WeightsRoot;
use skyrl_serve::{EngineWorker, LISTENING_PREFIX};

/// Flags keep vLLM's spelling (`vllm serve`), so launch scripts carry over.
#[derive(Args)]
pub struct ServeArgs {
    /// Hugging Face model directory (config, safetensors, tokenizer), or a hub
    /// name `org/name[@revision]` already in the Hugging Face cache
    /// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub).
    #[arg(long)]
    model: String,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Model name reported by /v1/models (default: the hub name as given, or
    /// the directory name).
    #[arg(long)]
    served_model_name: Option<String>,
    /// Most sequences running together (also the largest `n` of a request).
    #[arg(long, default_value_t = skyrl_model::engine::DEFAULT_MAX_BATCH)]
    max_num_seqs: usize,
    /// Most prompt tokens prefilled in one engine step (a longer prompt is
    /// admitted alone).
    #[arg(long, default_value_t = EngineSettings::default().max_num_batched_tokens)]
    max_num_batched_tokens: usize,
    /// Tokens per KV-cache block.
    #[arg(long, default_value_t = EngineSettings::default().block_size)]
    block_size: usize,
    /// Bytes of KV cache (keys and values of every layer; `8589934592`, `8G`,
    /// `512MiB`). Default: enough for `--max-num-seqs` sequences of the full
    /// context, at most 4 GiB. Too small for one full-context sequence is an error.
    #[arg(long, value_parser = parse_bytes)]
    kv_cache_memory_bytes: Option<u64>,
    /// On a GPU without `--kv-cache-memory-bytes`: share of the device memory
    /// for the weights, KV and activations (the KV pool gets half of what the
    /// weights leave; the rest holds the decode batch's contiguous KV copy).
    #[arg(long, default_value_t = 0.9)]
    gpu_memory_utilization: f64,
    /// Keep the KV of finished requests' prompt blocks for later requests with
    /// the same prefix (the default; samples of one prompt share it anyway).
    #[arg(long, overrides_with = "no_enable_prefix_caching")]
    enable_prefix_caching: bool,
    /// Turn prefix caching off.
    #[arg(long, overrides_with = "enable_prefix_caching")]
    no_enable_prefix_caching: bool,
    /// Key every `/v1/*` request must send as `Authorization: Bearer KEY`
    /// (default: `$SKYRL_API_KEY`). Prefer the variable: flags show in `ps`.
    #[arg(long)]
    api_key: Option<String>,
    /// Key of the weight-control and lifecycle routes (pause, weight updates,
    /// NCCL groups, sleep, cache resets; default: `$SKYRL_ADMIN_KEY`; without
    /// it they take the API key).
    #[arg(long)]
    admin_key: Option<String>,
    /// Directory under which `/update_weights_from_disk` and `reload_weights`
    /// may load weights (after resolving `..` and symbolic links); without it
    /// loads from disk are refused.
    #[arg(long)]
    weights_root: Option<PathBuf>,
    /// Generation requests in flight at once; more are answered 429 with
    /// `Retry-After` (a stream holds its slot until it ends).
    #[arg(long, default_value_t = 1024)]
    max_concurrent_requests: usize,
    /// Seconds a generation request may take before its answer (a stream's
    /// first event); later ones get a 504 and their sequences are aborted.
    /// 0: no deadline.
    #[arg(long, default_value_t = 0.0)]
    request_timeout_s: f64,
    /// Largest request body (`16MiB`, bytes or a unit as for
    /// `--kv-cache-memory-bytes`); larger ones get a 413.
    #[arg(long, value_parser = parse_bytes, default_value = "16MiB")]
    max_body_bytes: u64,
    /// Allow a non-loopback `--host` without any key (anyone who reaches the
    /// port can then replace the weights).
    #[arg(long)]
    insecure_no_auth: bool,
}

impl ServeArgs {
    /// The keys from the flags or the environment (empty values are unset).
    fn keys(&self) -> AuthKeys {
        AuthKeys {
            api_key: key_or_env(&self.api_key, API_KEY_VAR),
            admin_key: key_or_env(&self.admin_key, ADMIN_KEY_VAR),
        }
    }

    /// The engine sizing the flags ask for.
    fn settings(&self) -> EngineSettings {
        EngineSettings {
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            block_size: self.block_size,
            kv_cache_bytes: self.kv_cache_memory_bytes,
            enable_prefix_caching: self.enable_prefix_caching || !self.no_enable_prefix_caching,
        }
    }
}

/// A byte count: digits with an optional `K`/`M`/`G`/`T` (powers of 1000) or
/// `Ki`/`Mi`/`Gi`/`Ti` (powers of 1024) suffix, `B` allowed after it.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        "ti" => 1 << 40,
        _ => return Err(format!("`{text}` is not a byte count (e.g. 8G, 512MiB)")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{text}` is not a byte count (e.g. 8G, 512MiB)"))
}

/// Refuses a non-loopback bind without keys unless `--insecure-no-auth`.
fn check_exposure(addr: &SocketAddr, keys: &AuthKeys, insecure: bool) -> anyhow::Result<()> {
    if addr.ip().is_loopback() || keys.any() {
        return Ok(());
    }
    if !insecure {
        anyhow::bail!(
            "--host {} is reachable from other machines and no key is set: anyone could \
             pause generation or replace the weights. Set --api-key and --admin-key (or \
             SKYRL_API_KEY and SKYRL_ADMIN_KEY), or pass --insecure-no-auth",
            addr.ip()
        );
    }
    tracing::warn!(
        host = %addr.ip(),
        "serving without authentication on a non-loopback address (--insecure-no-auth)"
    );
    eprintln!(
        "warning: --insecure-no-auth: {} accepts weight updates from anyone who reaches it",
        addr
    );
    Ok(())
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let keys = args.keys();
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| format!("`{}:{}` is not a socket address", args.host, args.port))?;
    check_exposure(&addr, &keys, args.insecure_no_auth)?;
    let options = LoadOptions {
        device: tch::Device::cuda_if_available(),
        kind: tch::Kind::Float,
    };
    let model_dir = skyrl_model::resolve_model(&args.model)?;
    let model = CausalLm::from_pretrained(&model_dir, &options)
        .with_context(|| format!("cannot load the model from {}", model_dir.display()))?;
    let tokenizer = Tokenizer::from_dir(&model_dir)?;
    let mut settings = args.settings();
    if settings.kv_cache_bytes.is_none() {
        settings.kv_cache_bytes = gpu_kv_budget(&model, args.gpu_memory_utilization)?;
    }
    let engine = InferenceEngine::new(model, Some(Tokenizer::from_dir(&model_dir)?))
        .with_settings(settings)
        .context("bad engine settings")?;
    let model_name = args.served_model_name.unwrap_or_else(|| {
        if skyrl_model::hub::is_hub_name(&args.model) {
            return args.model.clone();
        }
        model_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "skyrl".into())
    });
    let worker = EngineWorker::spawn(engine);
    if !(args.request_timeout_s >= 0.0 && args.request_timeout_s.is_finite()) {
        anyhow::bail!(
            "--request-timeout-s must be >= 0, got {}",
            args.request_timeout_s
        );
    }
    let deadline = (args.request_timeout_s > 0.0)
        .then(|| std::time::Duration::from_secs_f64(args.request_timeout_s));
    let limits = Limits::new(args.max_concurrent_requests, deadline);
    let mut state = AppState::new(worker, tokenizer, model_name)
        .with_auth(keys)
        .with_limits(limits, args.max_body_bytes as usize);
    if let Some(dir) = &args.weights_root {
        let root = WeightsRoot::new(dir)
            .with_context(|| format!("--weights-root {} is not a directory", dir.display()))?;
        state = state.with_weights_root(root);
    }
    let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    println!("{LISTENING_PREFIX}{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    serve_blocking(state, listener)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn byte_counts_take_decimal_and_binary_units() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("8G"), Ok(8_000_000_000));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("2gi"), Ok(2 << 30));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("1.5G").is_err());
    }
}

//! Inference orchestration, side by side in one run (prints a table):
//! - rollout generation: the in-process engine vs one `skyrl serve` over HTTP
//!   (continuous batching, and with one sequence at a time) vs two servers
//!   behind the load-balancing client;
//! - weight sync: the colocated in-memory copy vs checkpoint-and-reload on one
//!   and on two servers.
//!
//! Servers run in this process on loopback (real HTTP, real engine threads).
//! Run: `cargo bench -p skyrl-serve --bench inference`.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use skyrl_inference::remote::{RemoteEngines, RemoteEnginesConfig};
use skyrl_inference::weight_sync::WeightSync;
use skyrl_inference::{placement::WeightSyncBackend, RolloutEngine};
use skyrl_model::{
    init_tiny_model, Arch, CausalLm, InferenceEngine, LoadOptions, SampleStream, SamplingParams,
    TinySize, Tokenizer,
};
use skyrl_serve::server::AppState;
use skyrl_serve::weights_root::WeightsRoot;
use skyrl_serve::EngineWorker;

const PROMPTS: usize = 128;
const MAX_TOKENS: usize = 24;
const REPEATS: usize = 5;

fn cpu() -> LoadOptions {
    LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    }
}

fn engine(dir: &Path) -> InferenceEngine {
    InferenceEngine::new(
        CausalLm::from_pretrained(dir, &cpu()).unwrap(),
        Some(Tokenizer::from_dir(dir).unwrap()),
    )
}

fn serve(dir: &Path, max_batch: usize) -> String {
    let worker = EngineWorker::spawn(engine(dir).with_max_batch(max_batch));
    // Checkpoint syncs write next to the model, under the bench's temp dir.
    let root = WeightsRoot::new(dir.parent().unwrap()).unwrap();
    let state = AppState::new(worker, Tokenizer::from_dir(dir).unwrap(), "bench".into())
        .with_weights_root(root);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
            .block_on(skyrl_serve::server::serve(state, listener))
            .unwrap();
    });
    url
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    xs[xs.len() / 2]
}

fn time<F: FnMut()>(mut f: F) -> f64 {
    f(); // warm-up
    median(
        (0..REPEATS)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn main() {
    tch::set_num_threads(1);
    for (name, size) in [("tiny", TinySize::Tiny), ("small", TinySize::Small)] {
        run(name, size);
    }
}

fn run(size_name: &str, size: TinySize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("model");
    init_tiny_model(Arch::Qwen2, size, &dir, 1).unwrap();
    let tok = Tokenizer::from_dir(&dir).unwrap();
    let prompts: Vec<Vec<i64>> = (0..PROMPTS)
        .map(|i| tok.encode(&format!("copy: {i:04} abcd"), false).unwrap())
        .collect();
    let params = SamplingParams {
        temperature: 1.0,
        max_tokens: MAX_TOKENS,
        ignore_eos: true,
        ..Default::default()
    };
    let streams = SampleStream::sequence(Some(7), PROMPTS);
    let sessions: Vec<String> = (0..PROMPTS).map(|i| format!("t{i}")).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let local = RolloutEngine::local(engine(&dir));
    let gen = |e: &RolloutEngine| {
        let (out, _) = rt
            .block_on(e.generate(&prompts, &streams, &params, &sessions))
            .unwrap();
        assert_eq!(out.len(), PROMPTS);
        e.end_sessions("t");
    };
    let remote = |urls: Vec<String>| {
        let c = RemoteEngines::new(RemoteEnginesConfig::new(urls)).unwrap();
        rt.block_on(c.wait_ready(Duration::from_secs(30))).unwrap();
        RolloutEngine::remote(c, None)
    };
    let one = remote(vec![serve(&dir, 256)]);
    let one_nobatch = remote(vec![serve(&dir, 1)]);
    let two = remote(vec![serve(&dir, 256), serve(&dir, 256)]);
    let t_local = time(|| gen(&local));
    let t_one = time(|| gen(&one));
    let t_nobatch = time(|| gen(&one_nobatch));
    let t_two = time(|| gen(&two));

    // Weight sync of the same model.
    let policy = CausalLm::from_pretrained(&dir, &cpu()).unwrap();
    let handle = rt.handle().clone();
    let mut colocated = WeightSync::new(WeightSyncBackend::Colocated, tmp.path().join("c"));
    let t_copy = time(|| {
        colocated.sync(&policy, &tok, &local, 1, &handle).unwrap();
    });
    let sync_time = |engines: &RolloutEngine, sub: &str| {
        let mut s = WeightSync::new(WeightSyncBackend::Checkpoint, tmp.path().join(sub));
        let mut bytes = 0;
        let t = time(|| {
            bytes = s.sync(&policy, &tok, engines, 1, &handle).unwrap().bytes;
        });
        (t, bytes)
    };
    let (t_ck1, bytes) = sync_time(&one, "s1");
    let (t_ck2, _) = sync_time(&two, "s2");

    let tokens = (PROMPTS * MAX_TOKENS) as f64;
    println!();
    println!(
        "== {size_name} model: rollout generation, {PROMPTS} prompts x {MAX_TOKENS} tokens, 1 torch thread, median of {REPEATS}"
    );
    println!(
        "{:<44} {:>10} {:>12} {:>10}",
        "engine", "seconds", "tokens/s", "vs local"
    );
    for (name, t) in [
        ("in-process engine (colocated)", t_local),
        ("1 skyrl serve, HTTP, continuous batching", t_one),
        ("1 skyrl serve, one sequence at a time", t_nobatch),
        ("2 skyrl serve, load-balanced", t_two),
    ] {
        println!(
            "{name:<44} {t:>10.3} {:>12.0} {:>9.2}x",
            tokens / t,
            t_local / t
        );
    }
    println!("batching speed-up on one server: {:.2}x", t_nobatch / t_one);
    println!();
    println!(
        "weight sync: {} KiB of safetensors, median of {REPEATS}",
        bytes / 1024
    );
    println!("{:<44} {:>10}", "strategy", "ms");
    println!("{:<44} {:>10.2}", "colocated in-memory copy", t_copy * 1e3);
    println!(
        "{:<44} {:>10.2}",
        "checkpoint + reload, 1 server",
        t_ck1 * 1e3
    );
    println!(
        "{:<44} {:>10.2}",
        "checkpoint + reload, 2 servers",
        t_ck2 * 1e3
    );
    println!(
        "checkpoint (1 server) / colocated: {:.1}x slower",
        t_ck1 / t_copy
    );
}

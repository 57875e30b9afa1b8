//! Plugin host benchmarks: component load (cold compile, disk cache, memory
//! cache), per-episode instance creation (pooling vs on-demand allocator),
//! env call latency, and episode throughput on one thread vs all cores.
//!
//! Run with `cargo bench -p skyrl-runtime --bench runtime` (about 70 s after
//! the build). Needs the built plugins: run `scripts/build-plugins` first; they
//! are read from `$SKYRL_PLUGIN_DIR`, else `<repo>/artifacts/plugins`.
//!
//! Criterion prints its usual per-benchmark report; a summary table with the
//! ratios follows at the end. Its latencies are the median over criterion's
//! samples of the time per iteration. Under `cargo test --benches` every
//! benchmark runs once as a smoke test and the throughput runs are short.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use serde_json::{json, Value};
use skyrl_runtime::{CacheOutcome, EngineOptions, Message, Plugin, PluginEngine};

/// The plugin components these benchmarks need.
const REQUIRED_PLUGINS: [&str; 2] = ["gsm8k", "string_transform"];
/// The environment whose component is loaded in the load benchmarks.
const LOAD_PLUGIN: &str = REQUIRED_PLUGINS[0];
/// How long each throughput run lasts in a full benchmark run.
const THROUGHPUT_RUN: Duration = Duration::from_millis(2500);
/// How long each throughput run lasts under `cargo test --benches`.
const THROUGHPUT_SMOKE_RUN: Duration = Duration::from_millis(200);

fn main() {
    let plugins = match PluginFiles::locate() {
        Ok(plugins) => plugins,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(1);
        }
    };
    let mode = RunMode::from_args();
    let recorder = Recorder::default();
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();

    let load_bytes =
        std::fs::read(plugins.path(LOAD_PLUGIN)).expect("reading the load-benchmark plugin");
    bench_component_load(&mut criterion, &recorder, &load_bytes);

    let gsm8k = Episode::gsm8k(plugins.path("gsm8k"));
    let string_transform = Episode::string_transform(plugins.path("string_transform"));
    let pooled = engine(true, None);
    let on_demand = engine(false, None);
    if !pooled.is_pooled() {
        eprintln!("note: the pooling allocator is unavailable here; the `pooling` rows use on-demand allocation");
    }
    bench_instance_creation(&mut criterion, &recorder, &gsm8k, &pooled, &on_demand);
    bench_env_latency(
        &mut criterion,
        &recorder,
        &[&gsm8k, &string_transform],
        &pooled,
    );
    criterion.final_summary();

    let run_for = match mode {
        RunMode::List => return,
        RunMode::Bench => THROUGHPUT_RUN,
        RunMode::Smoke => THROUGHPUT_SMOKE_RUN,
    };
    // The last row reuses sandboxes across episodes (episodes_per_instance).
    let throughput: Vec<ThroughputRow> = [
        (&gsm8k, &pooled, "pooling", 1),
        (&string_transform, &pooled, "pooling", 1),
        (&gsm8k, &on_demand, "on-demand", 1),
        (&gsm8k, &pooled, "pooling, reused", u32::MAX),
    ]
    .into_iter()
    .map(|(episode, engine, allocator, episodes_per_instance)| {
        let plugin = episode
            .load_checked(engine)
            .with_episodes_per_instance(episodes_per_instance);
        measure_throughput(episode, &plugin, allocator, run_for)
    })
    .collect();

    if mode == RunMode::Smoke {
        println!("\nsmoke run (not `cargo bench`): one iteration per benchmark, numbers are not measurements");
    }
    print_summary(&recorder, &plugins, load_bytes.len(), &throughput, run_for);
}

// ---- plugins and episodes ---------------------------------------------------

/// Where the built plugin components are.
struct PluginFiles {
    dir: PathBuf,
}

impl PluginFiles {
    /// Every plugin these benchmarks use, or a message naming the missing ones.
    fn locate() -> Result<Self, String> {
        let dir = std::env::var_os("SKYRL_PLUGIN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/plugins")
            });
        let files = Self {
            dir: dir.canonicalize().unwrap_or(dir),
        };
        let missing: Vec<String> = REQUIRED_PLUGINS
            .iter()
            .map(|name| files.path(name))
            .filter(|path| !path.is_file())
            .map(|path| path.display().to_string())
            .collect();
        if missing.is_empty() {
            Ok(files)
        } else {
            Err(format!(
                "missing plugin components: {}\nbuild them first with `scripts/build-plugins` \
                 (or point $SKYRL_PLUGIN_DIR at a folder holding them)",
                missing.join(", ")
            ))
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.wasm"))
    }
}

/// One benchmark episode: a plugin, its env config and dataset row, the
/// prompt, an action, and the reward that action must earn.
struct Episode {
    name: &'static str,
    wasm: PathBuf,
    config: Value,
    extras: Value,
    prompt: Vec<Message>,
    action: &'static str,
    reward: f64,
}

impl Episode {
    fn gsm8k(wasm: PathBuf) -> Self {
        Self {
            name: "gsm8k",
            wasm,
            config: json!({}),
            extras: json!({"reward_spec": {"method": "rule", "ground_truth": "72"}}),
            prompt: vec![Message::user(
                "Natalia sold clips to 48 of her friends in April, and then she sold half as many \
                 clips in May. How many clips did Natalia sell altogether in April and May?",
            )],
            action: "In May she sold 48 / 2 = 24 clips, so 48 + 24 = 72 in total.\n#### 72",
            reward: 1.0,
        }
    }

    fn string_transform(wasm: PathBuf) -> Self {
        Self {
            name: "string_transform",
            wasm,
            config: json!({}),
            extras: json!({
                "extra_info": {"task": "reverse", "input": "abcdd"},
                "reward_spec": {"ground_truth": "ddcba"},
            }),
            prompt: vec![Message::user("reverse: abcdd")],
            action: "ddcba",
            reward: 1.0,
        }
    }

    /// Load the plugin into `engine` and check one full episode earns the
    /// expected reward, so the benchmarks time real work.
    fn load_checked(&self, engine: &PluginEngine) -> Plugin {
        let plugin = Plugin::load(engine, &self.wasm)
            .unwrap_or_else(|e| panic!("loading {}: {e}", self.wasm.display()));
        let reward = run_episode(&plugin, self);
        assert_eq!(
            reward, self.reward,
            "{}: action {:?} earned {reward}, expected {}",
            self.name, self.action, self.reward
        );
        plugin
    }
}

/// create → init → step → close; returns the step's reward.
fn run_episode(plugin: &Plugin, episode: &Episode) -> f64 {
    let mut env = plugin
        .create_env(&episode.config, &episode.extras)
        .expect("create_env");
    env.init(&episode.prompt).expect("init");
    let out = env.step(episode.action).expect("step");
    assert!(out.done, "{} is single-step", episode.name);
    env.close().expect("close");
    out.reward
}

fn engine(pooling: bool, cache_dir: Option<PathBuf>) -> PluginEngine {
    PluginEngine::new(EngineOptions {
        pooling,
        cache_dir,
        ..EngineOptions::default()
    })
    .expect("creating the plugin engine")
}

/// What criterion was asked to do, mirroring its own argument handling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunMode {
    /// `cargo bench`: real measurements.
    Bench,
    /// `cargo test --benches` or `-- --test`: run everything once.
    Smoke,
    /// `-- --list`: criterion only lists the benchmarks.
    List,
}

impl RunMode {
    fn from_args() -> Self {
        let args: Vec<String> = std::env::args().collect();
        let has = |flag: &str| args.iter().any(|a| a == flag);
        if has("--list") {
            Self::List
        } else if has("--bench") && !has("--test") {
            Self::Bench
        } else {
            Self::Smoke
        }
    }
}

// ---- recording --------------------------------------------------------------

/// Time per iteration of every criterion sample, by benchmark id.
#[derive(Default, Clone)]
struct Recorder {
    samples: Arc<Mutex<BTreeMap<String, Vec<f64>>>>,
}

impl Recorder {
    /// Note that `iters` iterations of `id` took `elapsed`; returns `elapsed`.
    fn record(&self, id: &str, iters: u64, elapsed: Duration) -> Duration {
        let per_iter = elapsed.as_secs_f64() / iters.max(1) as f64;
        self.samples
            .lock()
            .expect("recorder lock")
            .entry(id.to_string())
            .or_default()
            .push(per_iter);
        elapsed
    }

    /// Median seconds per iteration of `id`, if it ran (criterion filters may skip it).
    fn median(&self, id: &str) -> Option<f64> {
        let samples = self.samples.lock().expect("recorder lock");
        let mut values = samples.get(id)?.clone();
        values.sort_by(f64::total_cmp);
        let mid = values.len() / 2;
        Some(match values.len() % 2 {
            1 => values[mid],
            _ => (values[mid - 1] + values[mid]) / 2.0,
        })
    }
}

/// A criterion group whose benchmarks record their samples in a [`Recorder`].
struct Group<'a> {
    inner: BenchmarkGroup<'a, WallTime>,
    name: &'static str,
    recorder: Recorder,
}

impl<'a> Group<'a> {
    fn new(criterion: &'a mut Criterion, name: &'static str, recorder: &Recorder) -> Self {
        Self {
            inner: criterion.benchmark_group(name),
            name,
            recorder: recorder.clone(),
        }
    }

    /// Register `name`; `timed(iters)` returns the measured time of `iters`
    /// iterations (setup and teardown excluded).
    fn bench(&mut self, name: &str, mut timed: impl FnMut(u64) -> Duration) {
        let id = format!("{}/{name}", self.name);
        let recorder = &self.recorder;
        self.inner.bench_function(name, |b| {
            b.iter_custom(|iters| recorder.record(&id, iters, timed(iters)))
        });
    }
}

// ---- benchmarks ---------------------------------------------------------------

/// `Plugin::from_bytes` (compile or fetch, link, read `plugin.info`) three ways.
fn bench_component_load(criterion: &mut Criterion, recorder: &Recorder, bytes: &[u8]) {
    let cache = tempfile::tempdir().expect("creating a temp cache dir");
    // Fill the disk cache once.
    let warm = Plugin::from_bytes(
        &engine(true, Some(cache.path().to_path_buf())),
        bytes,
        LOAD_PLUGIN,
    )
    .expect("loading the plugin");
    assert_eq!(
        warm.cache_outcome(),
        CacheOutcome::Compiled,
        "the temp cache dir starts empty"
    );

    let mut group = Group::new(criterion, "component_load", recorder);
    group
        .inner
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10);

    // A fresh engine per load without a disk cache: full Cranelift compile.
    group.inner.measurement_time(Duration::from_secs(6));
    group.bench("cold_compile", |iters| {
        load_with_fresh_engines(iters, bytes, None, CacheOutcome::Compiled)
    });

    // A fresh engine per load over the warm cache dir: deserialize.
    group.inner.measurement_time(Duration::from_secs(3));
    let dir = cache.path().to_path_buf();
    group.bench("disk_cache", |iters| {
        load_with_fresh_engines(iters, bytes, Some(&dir), CacheOutcome::Disk)
    });

    // One engine that already holds the compiled component.
    let shared = engine(true, None);
    Plugin::from_bytes(&shared, bytes, LOAD_PLUGIN).expect("loading the plugin");
    group
        .inner
        .sampling_mode(SamplingMode::Auto)
        .sample_size(30);
    group.bench("memory_cache", |iters| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let start = Instant::now();
            let plugin =
                Plugin::from_bytes(&shared, black_box(bytes), LOAD_PLUGIN).expect("loading");
            total += start.elapsed();
            assert_eq!(plugin.cache_outcome(), CacheOutcome::Memory);
        }
        total
    });
    group.inner.finish();
}

/// Time `iters` loads, each into a new engine (created and dropped untimed).
fn load_with_fresh_engines(
    iters: u64,
    bytes: &[u8],
    cache_dir: Option<&Path>,
    expect: CacheOutcome,
) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let engine = engine(true, cache_dir.map(Path::to_path_buf));
        let start = Instant::now();
        let plugin =
            Plugin::from_bytes(&engine, black_box(bytes), LOAD_PLUGIN).expect("loading the plugin");
        total += start.elapsed();
        assert_eq!(plugin.cache_outcome(), expect);
    }
    total
}

/// `create_env` + drop of the instance: the per-episode sandbox cost.
fn bench_instance_creation(
    criterion: &mut Criterion,
    recorder: &Recorder,
    episode: &Episode,
    pooled: &PluginEngine,
    on_demand: &PluginEngine,
) {
    let mut group = Group::new(criterion, "create_env", recorder);
    for (name, engine) in [("pooling", pooled), ("on_demand", on_demand)] {
        let plugin = episode.load_checked(engine);
        group.bench(name, |iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let env = plugin
                    .create_env(black_box(&episode.config), &episode.extras)
                    .expect("create_env");
                drop(black_box(env));
            }
            start.elapsed()
        });
    }
    group.inner.finish();
}

/// `init` + `step` on a fresh instance (creation untimed), and a whole episode.
fn bench_env_latency(
    criterion: &mut Criterion,
    recorder: &Recorder,
    episodes: &[&Episode],
    engine: &PluginEngine,
) {
    let mut group = Group::new(criterion, "env", recorder);
    for episode in episodes {
        let plugin = episode.load_checked(engine);
        group.bench(&format!("{}/init_step", episode.name), |iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut env = plugin
                    .create_env(&episode.config, &episode.extras)
                    .expect("create_env");
                let start = Instant::now();
                env.init(black_box(&episode.prompt)).expect("init");
                let out = env.step(black_box(episode.action)).expect("step");
                total += start.elapsed();
                black_box(out);
                env.close().expect("close");
            }
            total
        });
        group.bench(&format!("{}/episode", episode.name), |iters| {
            let start = Instant::now();
            for _ in 0..iters {
                black_box(run_episode(&plugin, episode));
            }
            start.elapsed()
        });
    }
    group.inner.finish();
}

// ---- throughput -------------------------------------------------------------

/// Episodes/s of one plugin on one thread and on every core.
struct ThroughputRow {
    /// Plugin and allocator, e.g. `gsm8k (pooling)`.
    label: String,
    threads: usize,
    single: RunResult,
    all: RunResult,
}

/// One throughput run.
struct RunResult {
    episodes_per_second: f64,
    /// Fraction of the wall time the workers were on a CPU (Linux schedstat);
    /// well below 1 means other processes took the cores.
    cpu_share: Option<f64>,
}

fn measure_throughput(
    episode: &Episode,
    plugin: &Plugin,
    allocator: &str,
    run_for: Duration,
) -> ThroughputRow {
    let label = format!("{} ({allocator})", episode.name);
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    episodes_per_second(plugin, episode, 1, run_for / 5); // warm up
    let single = episodes_per_second(plugin, episode, 1, run_for);
    let all = episodes_per_second(plugin, episode, threads, run_for);
    println!(
        "throughput/{label:<28} 1 thread: {:>7.0} episodes/s   {threads} threads: {:>7.0} episodes/s",
        single.episodes_per_second, all.episodes_per_second
    );
    ThroughputRow {
        label,
        threads,
        single,
        all,
    }
}

/// `threads` threads each running whole episodes until `run_for` elapses.
fn episodes_per_second(
    plugin: &Plugin,
    episode: &Episode,
    threads: usize,
    run_for: Duration,
) -> RunResult {
    let start_line = Barrier::new(threads + 1);
    let (results, elapsed) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    start_line.wait();
                    let cpu_before = thread_cpu_time();
                    let deadline = Instant::now() + run_for;
                    let mut done = 0u64;
                    while Instant::now() < deadline {
                        black_box(run_episode(plugin, episode));
                        done += 1;
                    }
                    let cpu = cpu_before.zip(thread_cpu_time()).map(|(a, b)| b - a);
                    (done, cpu)
                })
            })
            .collect();
        start_line.wait();
        let start = Instant::now();
        let results: Vec<(u64, Option<Duration>)> = workers
            .into_iter()
            .map(|w| w.join().expect("worker panicked"))
            .collect();
        (results, start.elapsed())
    });
    let episodes: u64 = results.iter().map(|(done, _)| done).sum();
    let cpu: Option<Duration> = results.iter().map(|(_, cpu)| *cpu).sum();
    RunResult {
        episodes_per_second: episodes as f64 / elapsed.as_secs_f64(),
        cpu_share: cpu.map(|cpu| cpu.as_secs_f64() / (threads as f64 * elapsed.as_secs_f64())),
    }
}

/// Time the calling thread has spent on a CPU (Linux
/// `/proc/thread-self/schedstat`), if the OS reports it.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

// ---- summary ----------------------------------------------------------------

fn print_summary(
    recorder: &Recorder,
    plugins: &PluginFiles,
    load_size: usize,
    throughput: &[ThroughputRow],
    run_for: Duration,
) {
    let get = |id: &str| recorder.median(id);
    println!();
    println!(
        "{:=^84}",
        " skyrl-runtime summary (median time per iteration) "
    );
    println!("plugins: {}", plugins.dir.display());

    println!();
    println!(
        "component load: Plugin::from_bytes of {LOAD_PLUGIN}.wasm ({} KiB)",
        load_size / 1024
    );
    let cold = get("component_load/cold_compile");
    println!(
        "  {:<44} {:>10}   baseline",
        "cold compile (fresh engine, no disk cache)",
        fmt_time(cold)
    );
    for (label, id) in [
        (
            "disk cache (fresh engine, deserialize)",
            "component_load/disk_cache",
        ),
        (
            "in-memory cache (same engine)",
            "component_load/memory_cache",
        ),
    ] {
        let value = get(id);
        println!(
            "  {label:<44} {:>10}   {}",
            fmt_time(value),
            fmt_ratio(cold, value, "than cold")
        );
    }

    println!();
    println!("per-episode instance: create_env + drop (gsm8k)");
    let on_demand = get("create_env/on_demand");
    let pooling = get("create_env/pooling");
    println!(
        "  {:<44} {:>10}   baseline",
        "on-demand allocator",
        fmt_time(on_demand)
    );
    println!(
        "  {:<44} {:>10}   {}",
        "pooling allocator",
        fmt_time(pooling),
        fmt_ratio(on_demand, pooling, "than on-demand")
    );

    println!();
    println!("env latency (pooling engine)");
    for (label, id) in [
        ("gsm8k init+step (fresh instance)", "env/gsm8k/init_step"),
        ("gsm8k create+init+step+close", "env/gsm8k/episode"),
        (
            "string_transform init+step (fresh instance)",
            "env/string_transform/init_step",
        ),
        (
            "string_transform create+init+step+close",
            "env/string_transform/episode",
        ),
    ] {
        println!("  {label:<44} {:>10}", fmt_time(get(id)));
    }

    println!();
    println!(
        "throughput: whole episodes (create+init+step+close), {:.1} s per run",
        run_for.as_secs_f64()
    );
    println!(
        "  {:<28} {:>11} {:>5} {:>17} {:>5} {:>8} {:>7} {:>8}",
        "plugin (allocator)",
        "1 thread/s",
        "cpu",
        "N threads/s",
        "cpu",
        "scaling",
        "effic.",
        "per-cpu"
    );
    let share = |run: &RunResult| {
        run.cpu_share
            .map_or("n/a".to_string(), |s| format!("{:.0}%", 100.0 * s))
    };
    let mut contended = false;
    for row in throughput {
        let scaling = row.all.episodes_per_second / row.single.episodes_per_second;
        let per_cpu = row
            .single
            .cpu_share
            .zip(row.all.cpu_share)
            .map_or("n/a".to_string(), |(one, all)| {
                format!("{:.2}", scaling * one / (row.threads as f64 * all))
            });
        println!(
            "  {:<28} {:>11.0} {:>5} {:>17} {:>5} {:>7.2}x {:>6.0}% {:>8}",
            row.label,
            row.single.episodes_per_second,
            share(&row.single),
            format!("{:.0} (N={})", row.all.episodes_per_second, row.threads),
            share(&row.all),
            scaling,
            100.0 * scaling / row.threads as f64,
            per_cpu
        );
        contended |= [&row.single, &row.all]
            .iter()
            .any(|run| run.cpu_share.is_some_and(|s| s < 0.9));
    }
    println!("  cpu: share of the run's wall time each worker thread spent on a CPU");
    println!(
        "  per-cpu: episodes per CPU-second of a worker, N threads vs 1 thread; 1.00 means running \
         in parallel costs nothing per episode, below 1 means contention inside the process or \
         kernel (locks, page-table/TLB work) or shared physical cores"
    );
    if contended {
        println!(
            "  note: workers were on a CPU under 90% of the time: other processes competed for \
             the cores, so these numbers (and the scaling) are understated"
        );
    }
    if let Some(load) = load_average() {
        println!("  1-minute load average at the end: {load:.2}");
    }
    println!("{}", "=".repeat(84));
}

/// The 1-minute load average (Linux `/proc/loadavg`), if readable.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn fmt_time(seconds: Option<f64>) -> String {
    match seconds {
        None => "skipped".to_string(),
        Some(s) if s >= 1.0 => format!("{s:.2} s"),
        Some(s) if s >= 1e-3 => format!("{:.2} ms", s * 1e3),
        Some(s) => format!("{:.1} µs", s * 1e6),
    }
}

/// `base / value` as "N.NNx faster|slower <what>"; empty when either is missing.
fn fmt_ratio(base: Option<f64>, value: Option<f64>, what: &str) -> String {
    match (base, value) {
        (Some(base), Some(value)) if value > 0.0 => {
            let ratio = base / value;
            if ratio >= 1.0 {
                format!("{ratio:.2}x faster {what}")
            } else {
                format!("{:.2}x slower {what}", 1.0 / ratio)
            }
        }
        _ => String::new(),
    }
}

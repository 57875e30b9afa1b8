//! Registry round trips against a real loopback `docker-registry`: push,
//! cold pull (download + verify + commit to a fresh cache), pull by tag with
//! the layer cached (one manifest + config fetch), and a pinned digest pull
//! served entirely from the cache (no network).
//!
//! Run with `cargo bench -p skyrl-registry --bench registry`. Needs
//! `artifacts/plugins/gsm8k.wasm` (scripts/build-plugins) and docker-registry
//! (scripts/setup). A summary with the ratios follows criterion's report.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use skyrl_registry::local_registry::LocalRegistry;
use skyrl_registry::{ClientOptions, PluginRef, PluginStore, RegistryClient};

fn client(root: &std::path::Path) -> RegistryClient {
    RegistryClient::new(PluginStore::new(root), ClientOptions::default()).expect("client")
}

fn median(mut f: impl FnMut(), n: usize) -> Duration {
    let mut times: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[n / 2]
}

fn main() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/plugins/gsm8k.wasm");
    if !file.exists() {
        eprintln!(
            "error: {} is missing: run scripts/build-plugins",
            file.display()
        );
        std::process::exit(1);
    }
    let size = std::fs::metadata(&file).unwrap().len();
    let reg = LocalRegistry::start().expect("docker-registry (run scripts/setup)");
    let work = tempfile::tempdir().unwrap();
    let reference = PluginRef::parse(&format!("{}/bench/gsm8k:1.0.0", reg.address())).unwrap();
    let pusher = client(&work.path().join("push-cache"));
    let pushed = pusher.push(&file, &reference, BTreeMap::new()).unwrap();
    let pinned = reference.with_digest(Some("1.0.0"), &pushed.manifest_digest);

    let mut c = Criterion::default().configure_from_args().sample_size(20);
    let mut group = c.benchmark_group("registry");
    group.bench_function("push", |b| {
        b.iter(|| pusher.push(&file, &reference, BTreeMap::new()).unwrap())
    });
    let mut n = 0u64;
    group.bench_function("pull_cold", |b| {
        b.iter(|| {
            n += 1;
            let got = client(&work.path().join(format!("cold-{n}")))
                .pull(&pinned)
                .unwrap();
            assert!(!got.from_cache);
        })
    });
    let warm = client(&work.path().join("warm"));
    warm.pull(&pinned).unwrap();
    group.bench_function("pull_tag_layer_cached", |b| {
        b.iter(|| assert!(warm.pull(&reference).unwrap().from_cache))
    });
    group.bench_function("pull_pinned_offline", |b| {
        b.iter(|| assert!(warm.pull(&pinned).unwrap().from_cache))
    });
    group.finish();

    // Side-by-side summary (medians of 15 runs each, same process).
    let runs = if std::env::args().any(|a| a == "--bench") {
        15
    } else {
        1
    };
    let mut m = 0u64;
    let cold = median(
        || {
            m += 1;
            client(&work.path().join(format!("sum-{m}")))
                .pull(&pinned)
                .unwrap();
        },
        runs,
    );
    let tag = median(|| drop(warm.pull(&reference).unwrap()), runs);
    let offline = median(|| drop(warm.pull(&pinned).unwrap()), runs);
    println!(
        "\nregistry summary ({} KiB component, loopback docker-registry):",
        size / 1024
    );
    println!("  cold pull (download + verify)  {:>9.2?}", cold);
    println!(
        "  tag pull, layer cached         {:>9.2?}  ({:.1}x faster than cold)",
        tag,
        cold.as_secs_f64() / tag.as_secs_f64()
    );
    println!(
        "  pinned pull, offline cache     {:>9.2?}  ({:.1}x faster than cold)",
        offline,
        cold.as_secs_f64() / offline.as_secs_f64()
    );
}

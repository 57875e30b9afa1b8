//! Push/pull/lock against a real registry: Debian's `docker-registry` on loopback.
//! Needs `artifacts/plugins/*.wasm` (scripts/build-plugins) and docker-registry (scripts/setup).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use skyrl_registry::local_registry::LocalRegistry;
use skyrl_registry::{
    ClientOptions, PluginRef, PluginResolver, PluginStore, RegistryClient, RegistryError,
};

fn plugin(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../artifacts/plugins/{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins",
        path.display()
    );
    path
}

fn client(cache: &Path) -> RegistryClient {
    RegistryClient::new(
        PluginStore::new(cache),
        ClientOptions {
            connect_timeout: Duration::from_secs(3),
            read_timeout: Duration::from_secs(20),
            ..ClientOptions::default()
        },
    )
    .unwrap()
}

fn r(text: &str) -> PluginRef {
    PluginRef::parse(text).unwrap()
}

fn push(c: &RegistryClient, file: &Path, reference: &str) -> skyrl_registry::PushReport {
    let mut ann = BTreeMap::new();
    ann.insert(
        "org.opencontainers.image.version".to_string(),
        reference.rsplit(':').next().unwrap().to_string(),
    );
    c.push(file, &r(reference), ann).unwrap()
}

/// Files left in the store's temp dir (must be none after any failure).
fn leftovers(cache: &Path) -> usize {
    std::fs::read_dir(cache.join("tmp"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn push_then_pull_round_trips_the_cncf_wasm_layout() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let file = plugin("calculator");
    let reference = format!("oci://{}/skyrl/calculator:1.0.0", reg.address());
    let pushed = push(&client(cache.path()), &file, &reference);
    assert_eq!(
        pushed.layer_digest,
        skyrl_registry::sha256_digest(&std::fs::read(&file).unwrap())
    );

    // A fresh cache downloads it again and gets identical bytes.
    let fresh = tempfile::tempdir().unwrap();
    let pulled = client(fresh.path()).pull(&r(&reference)).unwrap();
    assert!(!pulled.from_cache);
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);
    assert_eq!(pulled.tag.as_deref(), Some("1.0.0"));
    assert_eq!(
        std::fs::read(&pulled.path).unwrap(),
        std::fs::read(&file).unwrap()
    );
    assert_eq!(
        pulled.annotations["org.opencontainers.image.version"],
        "1.0.0"
    );
    assert!(
        pulled
            .component_exports
            .iter()
            .any(|e| e.starts_with("skyrl:plugin/tool")),
        "{:?}",
        pulled.component_exports
    );

    // The stored manifest follows the CNCF Wasm OCI artifact layout.
    let raw = PluginStore::new(fresh.path())
        .manifest(&pulled.manifest_digest)
        .unwrap()
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");

    // Pulling again is a cache hit for the layer.
    assert!(
        client(fresh.path())
            .pull(&r(&reference))
            .unwrap()
            .from_cache
    );
}

#[test]
fn semver_requirements_pick_the_newest_compatible_tag() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let c = client(cache.path());
    let file = plugin("calculator");
    let repo = format!("{}/skyrl/calc", reg.address());
    for tag in ["1.0.0", "1.2.0", "1.10.0", "2.0.0-rc.1", "0.9.0"] {
        push(&c, &file, &format!("{repo}:{tag}"));
    }
    let tag_of = |req: &str| {
        c.pull(&r(&format!("oci://{repo}{req}")))
            .unwrap()
            .tag
            .unwrap()
    };
    assert_eq!(tag_of(":^1"), "1.10.0");
    assert_eq!(tag_of(":1.2"), "1.10.0");
    assert_eq!(tag_of(":~1.2"), "1.2.0");
    assert_eq!(tag_of(""), "1.10.0");
    assert_eq!(tag_of(":^2.0.0-rc.0"), "2.0.0-rc.1");
    let err = c.pull(&r(&format!("{repo}:^3"))).unwrap_err();
    assert!(
        matches!(err, RegistryError::NoMatchingVersion { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("1.10.0"),
        "lists what exists: {err}"
    );

    let tags = c.tag_infos(&r(&repo)).unwrap();
    let order: Vec<_> = tags.iter().map(|t| t.tag.as_str()).collect();
    assert_eq!(order, ["2.0.0-rc.1", "1.10.0", "1.2.0", "1.0.0", "0.9.0"]);
    assert_eq!(
        c.catalog(&reg.address()).unwrap(),
        vec!["skyrl/calc".to_string()]
    );
}

#[test]
fn digest_references_verify_and_work_offline_from_the_cache() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let c = client(cache.path());
    let repo = format!("{}/skyrl/pinned", reg.address());
    let pushed = push(&c, &plugin("calculator"), &format!("{repo}:1.0.0"));

    let fresh = tempfile::tempdir().unwrap();
    let pinned = format!("oci://{repo}@{}", pushed.manifest_digest);
    let pulled = client(fresh.path()).pull(&r(&pinned)).unwrap();
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);

    // An unknown digest is a clear not-found.
    let unknown = format!("{repo}@sha256:{}", "0".repeat(64));
    let err = client(fresh.path()).pull(&r(&unknown)).unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err}");

    // With the registry gone, the digest still resolves from the cache.
    drop(reg);
    let again = client(fresh.path()).pull(&r(&pinned)).unwrap();
    assert!(again.from_cache);
    assert_eq!(again.path, pulled.path);
}

#[test]
fn a_corrupt_blob_in_the_registry_is_refused_and_leaves_no_partial_file() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let repo = format!("{}/skyrl/corrupt", reg.address());
    let pushed = push(
        &client(cache.path()),
        &plugin("calculator"),
        &format!("{repo}:1.0.0"),
    );

    // Flip bytes of the stored layer on the registry's disk (same length).
    let data = reg.blob_data_path(&pushed.layer_digest);
    let mut bytes = std::fs::read(&data).unwrap();
    for b in bytes.iter_mut().skip(100).take(64) {
        *b ^= 0xff;
    }
    std::fs::write(&data, &bytes).unwrap();

    let fresh = tempfile::tempdir().unwrap();
    let err = client(fresh.path())
        .pull(&r(&format!("{repo}:1.0.0")))
        .unwrap_err();
    assert!(matches!(err, RegistryError::DigestMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&pushed.layer_digest), "{err}");
    let store = PluginStore::new(fresh.path());
    assert_eq!(store.blob(&pushed.layer_digest).unwrap(), None);
    assert_eq!(
        leftovers(fresh.path()),
        0,
        "no half-written download remains"
    );
}

#[test]
fn a_tampered_manifest_fails_its_pinned_digest() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let repo = format!("{}/skyrl/tamper", reg.address());
    let pushed = push(
        &client(cache.path()),
        &plugin("calculator"),
        &format!("{repo}:1.0.0"),
    );
    let data = reg.blob_data_path(&pushed.manifest_digest);
    let text = std::fs::read_to_string(&data).unwrap();
    // Same length, still valid JSON, different bytes.
    std::fs::write(&data, text.replacen("1.0.0", "6.6.6", 1)).unwrap();

    let fresh = tempfile::tempdir().unwrap();
    let pinned = format!("{repo}@{}", pushed.manifest_digest);
    let err = client(fresh.path()).pull(&r(&pinned)).unwrap_err();
    assert!(matches!(err, RegistryError::DigestMismatch { .. }), "{err}");
    assert_eq!(
        PluginStore::new(fresh.path())
            .manifest(&pushed.manifest_digest)
            .unwrap(),
        None
    );
}

#[test]
fn missing_tags_repos_and_a_down_registry_are_clear_errors() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let c = client(cache.path());
    let repo = format!("{}/skyrl/present", reg.address());
    push(&c, &plugin("calculator"), &format!("{repo}:1.0.0"));

    let err = c.pull(&r(&format!("{repo}:9.9.9"))).unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains(":9.9.9"), "{err}");
    let err = c
        .pull(&r(&format!("{}/skyrl/absent:1.0.0", reg.address())))
        .unwrap_err();
    assert!(matches!(err, RegistryError::NotFound { .. }), "{err}");

    let address = reg.address();
    drop(reg);
    let start = std::time::Instant::now();
    let err = c
        .pull(&r(&format!("{address}/skyrl/present:1.0.0")))
        .unwrap_err();
    assert!(matches!(err, RegistryError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(&address), "{err}");
    assert!(start.elapsed() < Duration::from_secs(15));
    assert_eq!(leftovers(cache.path()), 0);
}

#[test]
fn non_wasm_artifacts_and_non_components_are_refused() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let c = client(cache.path());

    // Pushing something that is not a component fails before any upload.
    let junk = cache.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").unwrap();
    let err = c
        .push(
            &junk,
            &r(&format!("{}/skyrl/junk:1.0.0", reg.address())),
            BTreeMap::new(),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("not a WebAssembly component"),
        "{err}"
    );

    // A container-image-style artifact (tar layer, image config) at a tag.
    let image =
        oci_client::Reference::with_tag(reg.address(), "skyrl/image".into(), "1.0.0".into());
    let layer = oci_client::client::ImageLayer::new(
        b"not wasm".to_vec(),
        oci_client::manifest::IMAGE_LAYER_MEDIA_TYPE.to_string(),
        None,
    );
    let config = oci_client::client::Config::new(
        b"{}".to_vec(),
        oci_client::manifest::IMAGE_CONFIG_MEDIA_TYPE.to_string(),
        None,
    );
    let raw = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(raw.push(
            &image,
            &[layer],
            config,
            &oci_client::secrets::RegistryAuth::Anonymous,
            None,
        ))
        .unwrap();
    let err = c
        .pull(&r(&format!("{}/skyrl/image:1.0.0", reg.address())))
        .unwrap_err();
    assert!(
        matches!(err, RegistryError::NotAWasmArtifact { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("application/vnd.wasm.config.v0+json"),
        "{err}"
    );
    assert_eq!(leftovers(cache.path()), 0);
}

#[test]
fn lock_files_pin_resolutions_until_the_entry_is_removed() {
    let reg = LocalRegistry::start().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let c = client(cache.path());
    let repo = format!("{}/skyrl/locked", reg.address());
    let v1 = push(&c, &plugin("calculator"), &format!("{repo}:1.0.0"));
    let lock_path = cache.path().join("skyrl.lock");
    let wanted = format!("oci://{repo}:^1");

    let mut resolver = PluginResolver::new(&c, Some(lock_path.clone()), false).unwrap();
    assert_eq!(
        resolver.resolve(&wanted).unwrap().manifest_digest,
        v1.manifest_digest
    );
    assert!(resolver.save().unwrap());
    let text = std::fs::read_to_string(&lock_path).unwrap();
    assert!(
        text.contains(&v1.manifest_digest) && text.contains(&v1.layer_digest),
        "{text}"
    );

    // A newer compatible version appears; the lock keeps the run on 1.0.0.
    let v11 = push(&c, &plugin("calculator"), &format!("{repo}:1.1.0"));
    let mut resolver = PluginResolver::new(&c, Some(lock_path.clone()), true).unwrap();
    assert_eq!(
        resolver.resolve(&wanted).unwrap().manifest_digest,
        v1.manifest_digest
    );
    assert!(!resolver.save().unwrap(), "nothing new to write");
    let err = resolver.resolve(&format!("{repo}:1.1.0")).unwrap_err();
    assert!(err.to_string().contains("not pinned"), "{err}");

    // Re-resolving after deleting the lock picks up 1.1.0.
    std::fs::remove_file(&lock_path).unwrap();
    let mut resolver = PluginResolver::new(&c, Some(lock_path.clone()), false).unwrap();
    assert_eq!(
        resolver.resolve(&wanted).unwrap().manifest_digest,
        v11.manifest_digest
    );
}

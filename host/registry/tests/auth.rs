//! Registry auth from the docker config against a real htpasswd-protected registry.
//! (Its own test binary: it sets DOCKER_CONFIG for the process.)

use std::collections::BTreeMap;
use std::path::PathBuf;

use skyrl_registry::local_registry::LocalRegistry;
use skyrl_registry::{ClientOptions, PluginRef, PluginStore, RegistryClient, RegistryError};

#[test]
fn credentials_come_from_the_docker_config() {
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    let reg = LocalRegistry::start_with_htpasswd(Some(&format!("trainer:{hash}"))).unwrap();
    let home = tempfile::tempdir().unwrap();
    let docker = home.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    // SAFETY: the only test in this binary; no other thread reads the environment.
    unsafe { std::env::set_var("DOCKER_CONFIG", &docker) };
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/plugins/calculator.wasm");
    let reference = PluginRef::parse(&format!("{}/skyrl/private:1.0.0", reg.address())).unwrap();
    let client = RegistryClient::new(
        PluginStore::new(home.path().join("cache")),
        ClientOptions::default(),
    )
    .unwrap();

    let err = client.push(&file, &reference, BTreeMap::new()).unwrap_err();
    assert!(matches!(err, RegistryError::Unauthorized { .. }), "{err}");
    assert!(err.to_string().contains("docker login"), "{err}");

    // `docker login` writes base64(user:password) under auths.<registry>.auth.
    let auth = base64_encode(b"trainer:s3cret");
    std::fs::write(
        docker.join("config.json"),
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.address()),
    )
    .unwrap();
    let pushed = client.push(&file, &reference, BTreeMap::new()).unwrap();
    let fresh = RegistryClient::new(
        PluginStore::new(home.path().join("cache2")),
        ClientOptions::default(),
    )
    .unwrap();
    assert_eq!(
        fresh.pull(&reference).unwrap().manifest_digest,
        pushed.manifest_digest
    );

    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{}"}}}}}}"#,
            reg.address(),
            base64_encode(b"trainer:wrong")
        ),
    )
    .unwrap();
    let err = RegistryClient::new(
        PluginStore::new(home.path().join("cache3")),
        ClientOptions::default(),
    )
    .unwrap()
    .pull(&reference)
    .unwrap_err();
    assert!(matches!(err, RegistryError::Unauthorized { .. }), "{err}");
}

fn base64_encode(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

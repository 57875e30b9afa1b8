//! A throwaway OCI registry on loopback: Debian's `docker-registry`
//! (CNCF distribution 2.8) with filesystem storage in a temp dir. Used by
//! the tests and handy for trying push/pull locally.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A running registry; killed on drop.
pub struct LocalRegistry {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl LocalRegistry {
    /// Starts an anonymous registry.
    pub fn start() -> anyhow::Result<Self> {
        Self::start_with_htpasswd(None)
    }

    /// Starts a registry; with `htpasswd` (a `user:bcrypt-hash` line) it
    /// demands basic auth.
    pub fn start_with_htpasswd(htpasswd: Option<&str>) -> anyhow::Result<Self> {
        let binary = registry_binary()?;
        let dir = tempfile::tempdir().context("creating registry dir")?;
        let port = free_port()?;
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: skyrl-test\n",
            dir.path().join("data").display()
        );
        if let Some(line) = htpasswd {
            let path = dir.path().join("htpasswd");
            std::fs::write(&path, format!("{line}\n")).context("writing htpasswd")?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: skyrl\n    path: {}\n",
                path.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).context("writing registry config")?;
        let log = std::fs::File::create(dir.path().join("registry.log"))?;
        let child = Command::new(&binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut registry = Self { child, dir, port };
        registry.wait_ready()?;
        Ok(registry)
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Where the registry stores a blob's bytes (to corrupt them in tests).
    pub fn blob_data_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The registry's own log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!("docker-registry exited with {status}: {}", self.log());
            }
            if probe(self.port).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        bail!(
            "docker-registry did not answer on {} within 30 s: {}",
            self.address(),
            self.log()
        )
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /v2/` answered with any HTTP status.
fn probe(port: u16) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(b"GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    if head.starts_with(b"HTTP/") {
        Ok(())
    } else {
        Err(std::io::Error::other("not HTTP"))
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn registry_binary() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("SKYRL_DOCKER_REGISTRY") {
        return Ok(PathBuf::from(p));
    }
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .iter()
        .map(|d| d.join("docker-registry"))
        .chain([Path::new("/usr/bin/docker-registry").to_path_buf()])
        .find(|p| p.is_file())
        .context("docker-registry is not installed (apt-get install docker-registry; scripts/setup does this)")
}

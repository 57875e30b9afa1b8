//! Disaggregated local placement: starts `skyrl serve` child processes on
//! loopback (free ports), waits for each to report its address, and stops
//! them when dropped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tracing::info;

/// The line `skyrl serve` prints on stdout once it accepts connections,
/// followed by `host:port` (the launcher parses it).
pub const LISTENING_PREFIX: &str = "skyrl serve listening on http://";

/// How to start one engine server.
#[derive(Debug, Clone)]
pub struct ServerLaunch {
    /// The `skyrl` executable (its `serve` subcommand is used).
    pub program: PathBuf,
    /// Hugging Face model directory to serve.
    pub model: PathBuf,
    /// `--max-num-seqs`.
    pub max_num_seqs: usize,
    /// Name reported by `/v1/models`.
    pub served_model_name: String,
    /// How long to wait for a server to listen.
    pub startup_timeout: Duration,
}

/// Engine server processes owned by the trainer (killed on drop).
pub struct LocalServers {
    children: Vec<Child>,
    urls: Vec<String>,
}

impl LocalServers {
    /// Starts `n` servers; fails (stopping any already started) if one exits
    /// or does not listen within the timeout.
    pub fn start(launch: &ServerLaunch, n: usize) -> Result<Self> {
        let mut servers = LocalServers {
            children: Vec::new(),
            urls: Vec::new(),
        };
        for k in 0..n {
            let (child, url) = start_one(launch)
                .with_context(|| format!("cannot start inference engine {k} of {n}"))?;
            info!(engine = k, %url, "started inference engine");
            servers.children.push(child);
            servers.urls.push(url);
        }
        Ok(servers)
    }

    /// The servers' base URLs.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
}

impl Drop for LocalServers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start_one(launch: &ServerLaunch) -> Result<(Child, String)> {
    check_program(&launch.program)?;
    let mut child = Command::new(&launch.program)
        .arg("serve")
        .arg("--model")
        .arg(&launch.model)
        .args(["--host", "127.0.0.1", "--port", "0"])
        .args(["--max-num-seqs", &launch.max_num_seqs.to_string()])
        .args(["--served-model-name", &launch.served_model_name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot run {}", launch.program.display()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(addr) = line.strip_prefix(LISTENING_PREFIX) {
                    let _ = tx.send(format!("http://{}", addr.trim()));
                    sent = true;
                }
            }
        }
    });
    match rx.recv_timeout(launch.startup_timeout) {
        Ok(url) => Ok((child, url)),
        Err(_) => {
            let status = child.try_wait().ok().flatten();
            let _ = child.kill();
            let _ = child.wait();
            match status {
                Some(s) => bail!("`skyrl serve` exited ({s}) before listening; see its log above"),
                None => bail!(
                    "`skyrl serve` did not listen within {:?}",
                    launch.startup_timeout
                ),
            }
        }
    }
}

fn check_program(p: &Path) -> Result<()> {
    if !p.is_file() {
        bail!(
            "cannot start local inference engines: {} does not exist \
             (disaggregated placement runs `skyrl serve` processes)",
            p.display()
        );
    }
    Ok(())
}

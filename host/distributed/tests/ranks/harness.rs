//! Spawning ranks (this test executable again) and reading their output.
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Names the scenario a re-run executable plays.
pub const WORKER_ENV: &str = "SKYRL_DIST_WORKER";

/// One multi-process scenario at a time: the CI machine has 2 cores.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().unwrap().port()
}

/// The torchrun the project setup installs (override: `SKYRL_TORCHRUN`).
pub fn torchrun() -> PathBuf {
    if let Some(p) = std::env::var_os("SKYRL_TORCHRUN") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/torchrun")
}

/// A running rank and its merged stdout/stderr lines.
pub struct Rank {
    pub rank: usize,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

/// Starts rank `rank` of `world` playing `scenario`, store on 127.0.0.1:`port`.
pub fn spawn_rank(scenario: &str, rank: usize, world: usize, port: u16) -> Rank {
    spawn_rank_with(scenario, rank, world, port, &[])
}

/// [`spawn_rank`] with extra environment variables.
pub fn spawn_rank_with(
    scenario: &str,
    rank: usize,
    world: usize,
    port: u16,
    extra: &[(&str, &str)],
) -> Rank {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .envs(extra.iter().copied())
        .args(["worker", "--exact", "--nocapture", "--test-threads=1"])
        .env(WORKER_ENV, scenario)
        .env("RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("OMP_NUM_THREADS", "1")
        .env_remove("LOCAL_RANK")
        .env_remove("LOCAL_WORLD_SIZE")
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rank");
    let (tx, lines) = channel();
    let pipes: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for pipe in pipes {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    Rank {
        rank,
        child,
        lines,
        seen: Vec::new(),
    }
}

impl Rank {
    /// Blocks until the rank prints `needle` (panics with its output otherwise).
    pub fn wait_for_line(&mut self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let _ = self.child.kill();
                    panic!(
                        "rank {} never printed {needle:?}:\n{}",
                        self.rank,
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill rank");
        let _ = self.child.wait();
    }

    /// Waits for the exit (killing the rank after `limit`); returns the exit
    /// code (None when killed) and everything it printed.
    pub fn wait(&mut self, limit: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The pipes close with the process; collect what is left.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(line);
        }
        let mut out = self.seen.join("\n");
        if status.is_none() {
            out.push_str(&format!(
                "\n[harness: rank {} killed after {limit:?}]",
                self.rank
            ));
        }
        (status.and_then(|s| s.code()), out)
    }
}

impl Drop for Rank {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

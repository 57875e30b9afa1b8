//! A throw-away Postgres server on loopback (Debian's `postgresql`, which
//! scripts/setup installs): `initdb` into a temporary folder, `postgres` on
//! a free port, trust authentication for one user. Postgres refuses to run
//! as root, so as root it runs as the `postgres` user the package creates.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running server; stopped on drop.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    running: bool,
    _dir: tempfile::TempDir,
}

/// The newest `/usr/lib/postgresql/N/bin`.
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .expect("Postgres's initdb not found under /usr/lib/postgresql: scripts/setup installs Debian's postgresql")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// `program args`, as the `postgres` user when we are root.
fn command(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

impl PgServer {
    /// initdb + start; waits until it accepts connections.
    pub fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("pg");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success(), "chown of the Postgres folder failed");
        }
        let out = command(&bin.join("initdb"))
            .args(["--auth=trust", "--username=skyrl", "--encoding=UTF8", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            bin,
            data,
            port,
            running: false,
            _dir: dir,
        };
        server.resume();
        server
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://skyrl@127.0.0.1:{}/postgres", self.port)
    }

    fn pg_ctl(&self, args: &[&str]) {
        let out = command(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the server (fast shutdown: open connections are cut).
    pub fn stop(&mut self) {
        if self.running {
            self.running = false;
            self.pg_ctl(&["-m", "fast", "-w", "stop"]);
        }
    }

    /// Starts it (again) on the same data and port; waits until it accepts
    /// connections.
    pub fn resume(&mut self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {}",
            self.port,
            self.data.display()
        );
        let log = self.data.join("server.log");
        self.pg_ctl(&[
            "-w",
            "-t",
            "60",
            "-o",
            &options,
            "-l",
            log.to_str().unwrap(),
            "start",
        ]);
        self.running = true;
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.running {
            self.running = false;
            let _ = command(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "stop"])
                .output();
        }
    }
}

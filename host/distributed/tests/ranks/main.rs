//! Multi-process tests: each test re-runs this test executable as the ranks
//! (`worker --exact`, scenario in `SKYRL_DIST_WORKER`), on loopback with Gloo.
mod harness;
mod workers;

use std::time::{Duration, Instant};

use harness::{free_port, serial, spawn_rank, spawn_rank_with, Rank};

/// The ranks' entry point; a no-op unless `SKYRL_DIST_WORKER` names a scenario.
#[test]
fn worker() {
    if let Ok(scenario) = std::env::var(harness::WORKER_ENV) {
        workers::run(&scenario);
    }
}

#[test]
fn collectives_two_ranks() {
    let _serial = serial();
    let port = free_port();
    let ranks: Vec<Rank> = (0..2)
        .map(|r| spawn_rank("collectives", r, 2, port))
        .collect();
    for mut rank in ranks {
        let (code, out) = rank.wait(Duration::from_secs(120));
        assert_eq!(code, Some(0), "rank {} failed:\n{out}", rank.rank);
        assert!(
            out.contains(&format!("collectives ok on rank {}", rank.rank)),
            "{out}"
        );
    }
}

/// Rank `victim` is SIGKILLed while the other waits in an all_reduce; returns
/// the survivor's exit code, output and the time from the kill to its exit.
fn kill_during_all_reduce(victim: usize) -> (Option<i32>, String, Duration) {
    let port = free_port();
    let victim_env = victim.to_string();
    let extra = [("SKYRL_DIST_VICTIM", victim_env.as_str())];
    let mut ranks: Vec<Rank> = (0..2)
        .map(|r| spawn_rank_with("killed", r, 2, port, &extra))
        .collect();
    for rank in &mut ranks {
        rank.wait_for_line("joined", Duration::from_secs(60));
    }
    // Let the survivor enter its all_reduce, then SIGKILL the victim.
    std::thread::sleep(Duration::from_millis(500));
    let killed_at = Instant::now();
    ranks[victim].kill();
    let (code, out) = ranks[1 - victim].wait(Duration::from_secs(60));
    let elapsed = killed_at.elapsed();
    eprintln!("survivor exited {elapsed:?} after rank {victim} was killed:\n{out}");
    assert!(elapsed < Duration::from_secs(60), "took {elapsed:?}");
    (code, out, elapsed)
}

#[test]
fn killed_rank_is_named() {
    let _serial = serial();
    let (code, out, _) = kill_during_all_reduce(1);
    assert_eq!(
        code,
        Some(3),
        "rank 0 should report the failure and exit 3:\n{out}"
    );
    assert!(
        out.contains("rank 1 of 2 stopped responding during all_reduce"),
        "{out}"
    );
}

#[test]
fn killed_store_host_is_named() {
    let _serial = serial();
    let (code, out, _) = kill_during_all_reduce(0);
    assert_eq!(
        code,
        Some(3),
        "rank 1 should report the failure and exit 3:\n{out}"
    );
    assert!(
        out.contains("the c10d store hosted by rank 0 at 127.0.0.1:"),
        "{out}"
    );
}

#[test]
fn missing_peer_times_out() {
    let _serial = serial();
    // Rank 0 hosts the store but rank 1 never comes; in another job rank 1
    // looks for a store nobody hosts. Both have a 3 s timeout.
    let mut host = spawn_rank("lonely", 0, 2, free_port());
    let mut client = spawn_rank("lonely", 1, 2, free_port());
    for rank in [&mut host, &mut client] {
        let (code, out) = rank.wait(Duration::from_secs(60));
        eprintln!("{out}");
        assert_eq!(
            code,
            Some(3),
            "rank {} should fail cleanly:\n{out}",
            rank.rank
        );
        const MARK: &str = "lonely error after ";
        let at = out.find(MARK).unwrap_or_else(|| panic!("{out}")) + MARK.len();
        let secs: f64 = out[at..].split('s').next().unwrap().parse().unwrap();
        assert!(
            (2.5..20.0).contains(&secs),
            "rank {} failed after {secs} s, expected about 3:\n{out}",
            rank.rank
        );
        assert!(out.contains("rendezvous at 127.0.0.1:"), "{out}");
        assert!(out.contains("Check that all 2 ranks were started"), "{out}");
    }
}

#[test]
fn collectives_under_torchrun() {
    let _serial = serial();
    let torchrun = harness::torchrun();
    assert!(
        torchrun.exists(),
        "torchrun not found at {} (run scripts/setup, or set SKYRL_TORCHRUN)",
        torchrun.display()
    );
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new(&torchrun)
        .args([
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "--no-python",
        ])
        .arg(&exe)
        .args(["worker", "--exact", "--nocapture", "--test-threads=1"])
        .env(harness::WORKER_ENV, "collectives")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("run torchrun");
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "torchrun failed ({}):\n{out}",
        output.status
    );
    for r in 0..2 {
        assert!(
            out.contains(&format!("collectives ok on rank {r}")),
            "{out}"
        );
    }
    // torchrun's agent hosts the store: the agent-store path ran.
    assert!(out.contains("agent_store=true"), "{out}");
}

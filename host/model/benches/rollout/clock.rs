//! Wall time plus the CPU time this process got while it ran, so a result
//! says how much of the two cores it actually had (other builds share them).

use std::time::Instant;

use tch::Device;

use crate::sync;

/// User + system CPU seconds of this process, all threads (Linux
/// `/proc/self/stat`, in USER_HZ = 100 ticks per second); 0 elsewhere.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces): state is the first,
    // utime the 12th and stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let ticks: f64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<f64>().ok())
        .sum();
    ticks / 100.0
}

/// A running measurement.
pub struct Stopwatch {
    wall: Instant,
    cpu: f64,
    device: Device,
}

/// Wall seconds and the CPU share: CPU seconds / (wall seconds x threads).
#[derive(Debug, Clone, Copy)]
pub struct Elapsed {
    pub seconds: f64,
    pub cpu_share: f64,
}

impl Stopwatch {
    /// Starts after the device finished queued work.
    pub fn start(device: Device) -> Self {
        sync(device);
        Stopwatch {
            wall: Instant::now(),
            cpu: process_cpu_seconds(),
            device,
        }
    }

    /// Stops after the device finished queued work.
    pub fn stop(self, threads: i32) -> Elapsed {
        sync(self.device);
        let seconds = self.wall.elapsed().as_secs_f64();
        let cpu = process_cpu_seconds() - self.cpu;
        Elapsed {
            seconds,
            cpu_share: cpu / (seconds * threads.max(1) as f64),
        }
    }
}

//! One tracker on its own thread: started there (so its start-up error reaches
//! the caller), then fed steps over a channel. A step that fails is retried with
//! exponential backoff and dropped with a warning after the last try, so a slow
//! or dead tracking server never stalls or stops training.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Result};

use super::RunStatus;
use crate::metrics::StepMetrics;

/// A tracker backend, driven from its delivery thread.
pub trait Sink {
    /// Records one step's metrics.
    fn log(&mut self, step: u64, metrics: &StepMetrics) -> Result<()>;
    /// Ends the run.
    fn finish(&mut self, status: RunStatus) -> Result<()>;
}

/// A started sink and the tracker's run id (for resuming), if it has one.
pub struct Started {
    pub sink: Box<dyn Sink>,
    pub run_id: Option<String>,
}

/// Retry policy for a step that fails to reach a tracker.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Tries per step, the first included.
    pub attempts: u32,
    /// Wait before the second try; doubled after each failure.
    pub first_delay: Duration,
    /// Longest wait between tries.
    pub max_delay: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 6,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl Retry {
    /// Runs `f` until it succeeds or the tries run out (the last error).
    fn run(&self, what: &str, mut f: impl FnMut() -> Result<()>) -> Result<()> {
        let mut delay = self.first_delay;
        let mut tries = 0;
        loop {
            tries += 1;
            match f() {
                Ok(()) => return Ok(()),
                Err(e) if tries >= self.attempts.max(1) => return Err(e),
                Err(e) => {
                    tracing::warn!("{what} failed (try {tries}), retrying in {delay:?}: {e:#}");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(self.max_delay);
                }
            }
        }
    }
}

enum Message {
    Log(u64, StepMetrics),
    Finish(RunStatus),
}

/// The caller's handle on one tracker thread.
pub struct Delivery {
    name: &'static str,
    run_id: Option<String>,
    tx: Option<Sender<Message>>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Delivery {
    /// Starts the tracker with `start` on a new thread and waits for it to be up.
    pub fn spawn(
        name: &'static str,
        retry: Retry,
        start: Box<dyn FnOnce() -> Result<Started> + Send>,
    ) -> Result<Self> {
        let (tx, rx) = channel::<Message>();
        let (ready_tx, ready_rx) = channel::<Result<Option<String>>>();
        let (done_tx, done) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("tracker-{name}"))
            .spawn(move || {
                let mut sink = match start() {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(s.run_id));
                        s.sink
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                serve(name, retry, sink.as_mut(), rx);
                let _ = done_tx.send(());
            })?;
        let run_id = ready_rx
            .recv()
            .map_err(|_| anyhow!("the {name} tracker thread died while starting"))??;
        Ok(Self {
            name,
            run_id,
            tx: Some(tx),
            done,
            thread: Some(thread),
        })
    }

    /// The tracker's run id, if it has one.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// Queues one step (returns at once).
    pub fn log(&self, step: u64, metrics: StepMetrics) {
        if let Some(tx) = &self.tx {
            if tx.send(Message::Log(step, metrics)).is_err() {
                tracing::warn!("tracker {} has stopped; step {step} not sent", self.name);
            }
        }
    }

    /// Sends the end of the run and waits up to `timeout` for the queue to drain.
    pub fn finish(&mut self, status: RunStatus, timeout: Duration) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        let _ = tx.send(Message::Finish(status));
        drop(tx);
        match self.done.recv_timeout(timeout) {
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => tracing::warn!(
                "tracker {} did not finish within {timeout:?}; leaving it behind",
                self.name
            ),
        }
    }
}

/// The thread's loop: every step in order, each with retries, then the finish.
fn serve(name: &str, retry: Retry, sink: &mut dyn Sink, rx: Receiver<Message>) {
    let mut status = RunStatus::Failed;
    for msg in rx {
        match msg {
            Message::Log(step, m) => {
                if let Err(e) = retry.run(&format!("tracker {name}: step {step}"), || {
                    sink.log(step, &m)
                }) {
                    tracing::error!(
                        "tracker {name}: step {step} dropped after {} tries (metrics.jsonl has it): {e:#}",
                        retry.attempts
                    );
                }
            }
            Message::Finish(s) => {
                status = s;
                break;
            }
        }
    }
    if let Err(e) = retry.run(&format!("tracker {name}: finish"), || sink.finish(status)) {
        tracing::error!("tracker {name}: cannot close the run: {e:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Fails the first `fail_first` calls, then records what it gets.
    struct Flaky {
        fail_first: u32,
        calls: u32,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl Sink for Flaky {
        fn log(&mut self, step: u64, m: &StepMetrics) -> Result<()> {
            self.calls += 1;
            if self.calls <= self.fail_first {
                anyhow::bail!("server down");
            }
            self.seen.lock().unwrap().push(format!("{step}:{}", m["x"]));
            Ok(())
        }
        fn finish(&mut self, status: RunStatus) -> Result<()> {
            self.seen.lock().unwrap().push(format!("end:{status:?}"));
            Ok(())
        }
    }

    fn quick(attempts: u32) -> Retry {
        Retry {
            attempts,
            first_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
        }
    }

    fn spawn_flaky(fail_first: u32, retry: Retry) -> (Delivery, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let d = Delivery::spawn(
            "flaky",
            retry,
            Box::new(move || {
                Ok(Started {
                    sink: Box::new(Flaky {
                        fail_first,
                        calls: 0,
                        seen: s,
                    }),
                    run_id: Some("r1".into()),
                })
            }),
        )
        .unwrap();
        (d, seen)
    }

    fn metrics(x: f64) -> StepMetrics {
        StepMetrics::from([("x".to_string(), x)])
    }

    #[test]
    fn failing_steps_are_retried_in_order() {
        let (mut d, seen) = spawn_flaky(3, quick(5));
        assert_eq!(d.run_id(), Some("r1"));
        for step in 1..=3 {
            d.log(step, metrics(step as f64 / 2.0));
        }
        d.finish(RunStatus::Finished, Duration::from_secs(10));
        assert_eq!(
            *seen.lock().unwrap(),
            ["1:0.5", "2:1", "3:1.5", "end:Finished"]
        );
    }

    #[test]
    fn a_step_that_never_gets_through_is_dropped_and_the_rest_go_on() {
        let (mut d, seen) = spawn_flaky(2, quick(2));
        d.log(1, metrics(1.0));
        d.log(2, metrics(2.0));
        d.finish(RunStatus::Failed, Duration::from_secs(10));
        assert_eq!(*seen.lock().unwrap(), ["2:2", "end:Failed"]);
    }

    #[test]
    fn a_start_failure_is_returned() {
        let r = Delivery::spawn(
            "down",
            quick(1),
            Box::new(|| anyhow::bail!("connection refused")),
        );
        let e = r.err().expect("start fails");
        assert!(format!("{e:#}").contains("connection refused"), "{e:#}");
    }
}

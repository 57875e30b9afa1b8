//! What the run is doing now, on rank 0's stderr. On a terminal: the step bar
//! (with its ETA) and under it one line for the phase in progress (generate,
//! train, weight sync, eval) that ends with the phase's time and rate. Not on a
//! terminal: one plain log line per finished phase. Hidden when not asked.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// A phase of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Rollouts: sampling, env steps and rewards (rewards are scored as each
    /// trajectory ends, inside this phase).
    Generate,
    /// Waiting for rollouts generated ahead (pipelined modes).
    WaitForRollouts,
    /// Log-probs, advantages and the policy update.
    Train,
    /// Weights to the inference engines.
    WeightSync,
    /// Evaluation.
    Eval,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Self::Generate => "generate",
            Self::WaitForRollouts => "wait for rollouts",
            Self::Train => "train",
            Self::WeightSync => "weight sync",
            Self::Eval => "eval",
        }
    }
}

enum Mode {
    Hidden,
    Terminal {
        _multi: MultiProgress,
        steps: ProgressBar,
        phase: ProgressBar,
    },
    Lines,
}

/// The run's progress display.
pub struct Progress {
    mode: Mode,
}

/// A phase under way (from [`Progress::begin`]).
pub struct PhaseRun {
    phase: Phase,
    step: u64,
    start: Instant,
}

impl Progress {
    /// Shows nothing.
    pub fn hidden() -> Self {
        Self { mode: Mode::Hidden }
    }

    /// Bars on a terminal, log lines otherwise; hidden unless `show`.
    pub fn new(show: bool, total_steps: u64, start_step: u64) -> Self {
        if !show {
            return Self::hidden();
        }
        if !std::io::stderr().is_terminal() {
            return Self { mode: Mode::Lines };
        }
        let multi = MultiProgress::new();
        let steps = multi.add(ProgressBar::new(total_steps));
        steps.set_style(
            ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:30} {pos}/{len} steps  eta {eta}  {msg}",
            )
            .expect("valid template"),
        );
        steps.set_position(start_step);
        steps.reset_eta();
        let phase = multi.add(ProgressBar::new_spinner());
        phase.set_style(ProgressStyle::with_template("  {spinner} {msg}").expect("valid template"));
        phase.enable_steady_tick(Duration::from_millis(200));
        Self {
            mode: Mode::Terminal {
                _multi: multi,
                steps,
                phase,
            },
        }
    }

    /// Starts `phase` of step `step` (the step being made, 1-based).
    pub fn begin(&self, phase: Phase, step: u64) -> PhaseRun {
        if let Mode::Terminal { phase: bar, .. } = &self.mode {
            bar.set_message(format!("step {step}: {}...", phase.name()));
        }
        PhaseRun {
            phase,
            step,
            start: Instant::now(),
        }
    }

    /// Ends a phase that handled `amount` `unit`s (its rate is shown).
    pub fn end(&self, run: PhaseRun, amount: f64, unit: &str) {
        let secs = run.start.elapsed().as_secs_f64();
        let rate = match (amount > 0.0, secs > 0.0) {
            (true, true) => format!(" ({:.1} {unit}/s)", amount / secs),
            _ => String::new(),
        };
        let amount = match amount.fract() == 0.0 {
            true => format!("{amount}"),
            false => format!("{amount:.2}"),
        };
        let line = format!(
            "step {}: {} {amount} {unit} in {secs:.2}s{rate}",
            run.step,
            run.phase.name()
        );
        match &self.mode {
            Mode::Hidden => {}
            Mode::Terminal { phase, .. } => phase.set_message(line),
            Mode::Lines => eprintln!("{line}"),
        }
    }

    /// Moves the step bar to `step` with `message` beside it.
    pub fn step_done(&self, step: u64, message: String) {
        match &self.mode {
            Mode::Terminal { steps, .. } => {
                steps.set_position(step);
                steps.set_message(message);
            }
            Mode::Lines => eprintln!("step {step}: {message}"),
            Mode::Hidden => {}
        }
    }

    /// Prints a line above the bars (or on stderr without them).
    pub fn println(&self, line: String) {
        match &self.mode {
            Mode::Terminal { steps, .. } => steps.println(line),
            _ => eprintln!("{line}"),
        }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        if let Mode::Terminal { steps, phase, .. } = &self.mode {
            phase.finish_and_clear();
            steps.finish_and_clear();
        }
    }
}

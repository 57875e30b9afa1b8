//! Tool-integrated math: the model may run Python (`<python>...</python>`)
//! in the sandbox and sees its output, then answers with `#### <number>`
//! (scored like GSM8K).
//!
//! - Each step: an answer ends the episode with gsm8k's strict score;
//!   otherwise the first `<python>` block runs (deadline `code_timeout_s`,
//!   default 5) and its output comes back as
//!   `<output>\n...\n</output>`; a step with neither gets a format hint.
//! - Done at `max_turns` (default 4), scored on the last response.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_sdk::code::run_python;
use skyrl_sdk::{gsm8k, parse_config, pystr, Environment, Extras, Message, Result, StepOutput};

/// `max_turns` when neither the generator nor the row sets one.
pub const DEFAULT_MAX_TURNS: u32 = 4;
/// Shown after a step with neither code nor an answer.
pub const FORMAT_HINT: &str =
    "Run code with <python>...</python>, or give the final answer as '#### ANSWER'.";
/// Characters of program output shown to the model.
pub const MAX_OUTPUT_CHARS: usize = 2000;

/// Env config (`environment.skyrl_gym.python_math`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PythonMathConfig {
    /// Deadline of one program run, seconds.
    pub code_timeout_s: f64,
}

impl Default for PythonMathConfig {
    fn default() -> Self {
        Self {
            code_timeout_s: 5.0,
        }
    }
}

/// One episode.
pub struct PythonMath {
    ground_truth: String,
    max_turns: u32,
    turns: u32,
    timeout: Duration,
    code_runs: u32,
    code_errors: u32,
}

/// The first `<python>` block's code: what
/// `re.search(r"<python>(.*?)</python>", action, re.DOTALL)` captures.
pub fn python_block(action: &str) -> Option<&str> {
    pystr::first_block(action, "<python>", "</python>")
}

/// Program output as the model sees it, cut to [`MAX_OUTPUT_CHARS`].
pub fn render_output(text: &str) -> String {
    let shown: String = text.chars().take(MAX_OUTPUT_CHARS).collect();
    let cut = if shown.len() < text.len() {
        "\n... (output truncated)"
    } else {
        ""
    };
    format!("<output>\n{}{cut}\n</output>", shown.trim_end())
}

impl PythonMath {
    fn run(&mut self, code: &str) -> String {
        self.code_runs += 1;
        match run_python(code, "", self.timeout) {
            Ok(run) => {
                if run.exit_code != 0 {
                    self.code_errors += 1;
                }
                render_output(&format!("{}{}", run.stdout, run.stderr))
            }
            Err(error) => {
                self.code_errors += 1;
                render_output(&format!("Error: {error}"))
            }
        }
    }
}

impl Environment for PythonMath {
    fn create(config: &Value, extras: &Extras) -> Result<Self> {
        let config: PythonMathConfig = parse_config(config)?;
        if !(config.code_timeout_s.is_finite() && config.code_timeout_s > 0.0) {
            return Err(skyrl_sdk::Error::config("code_timeout_s must be positive"));
        }
        Ok(Self {
            ground_truth: extras.ground_truth_str()?,
            max_turns: extras.max_turns()?.unwrap_or(DEFAULT_MAX_TURNS),
            turns: 0,
            timeout: Duration::from_secs_f64(config.code_timeout_s),
            code_runs: 0,
            code_errors: 0,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        self.turns += 1;
        let answered = gsm8k::extract_answer(action).is_some();
        if answered || self.turns >= self.max_turns {
            return Ok(StepOutput::done(gsm8k::compute_score(
                action,
                &self.ground_truth,
                0.0,
                1.0,
            )));
        }
        let observation = match python_block(action) {
            Some(code) => self.run(code),
            None => FORMAT_HINT.to_string(),
        };
        Ok(StepOutput::next(vec![Message::user(observation)], 0.0))
    }

    fn metrics(&self) -> Value {
        json!({"turns": self.turns, "code_runs": self.code_runs, "code_errors": self.code_errors})
    }
}

skyrl_sdk::export_env!(
    PythonMath,
    name = "python_math",
    version = "0.1.0",
    description = "Math with a sandboxed Python interpreter, '#### ANSWER' scored like GSM8K",
    uses_tools = ["python"]
);

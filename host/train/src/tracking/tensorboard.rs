//! The `tensorboard` tracker: scalars of every step, and the run's config as a
//! text summary, in event files under `trainer.log_path/tensorboard`.

use anyhow::Result;

use super::delivery::{Sink, Started};
use super::tfevents::EventWriter;
use super::{RunInfo, RunStatus};
use crate::metrics::StepMetrics;

/// Opens a new event file (the text summary of the config goes in first).
pub fn start(info: &RunInfo) -> Result<Started> {
    let dir = info.log_dir.join("tensorboard");
    let mut writer = EventWriter::create(&dir)?;
    let config = serde_json::to_string_pretty(&info.config)?;
    writer.text(0, "config", &format!("```json\n{config}\n```"))?;
    writer.flush()?;
    tracing::info!(file = %writer.path().display(), "tensorboard event file");
    Ok(Started {
        sink: Box::new(TensorboardSink { writer }),
        run_id: None,
    })
}

struct TensorboardSink {
    writer: EventWriter,
}

impl Sink for TensorboardSink {
    fn log(&mut self, step: u64, metrics: &StepMetrics) -> Result<()> {
        let values: Vec<(String, f32)> = metrics
            .iter()
            .map(|(k, v)| (k.clone(), *v as f32))
            .collect();
        self.writer.scalars(step, &values)?;
        self.writer.flush()
    }

    fn finish(&mut self, _status: RunStatus) -> Result<()> {
        self.writer.flush()
    }
}

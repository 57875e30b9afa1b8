//! TensorBoard event files: TFRecord framing (length, masked CRC32C of the
//! length, payload, masked CRC32C of the payload) around `tensorflow.Event`
//! protobufs, the messages declared here with `prost` (field numbers as in
//! tensorflow/core/util/event.proto and framework/summary.proto).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use prost::Message;

/// `tensorflow.Event`.
#[derive(Clone, PartialEq, prost::Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(string, optional, tag = "3")]
    file_version: Option<String>,
    #[prost(message, optional, tag = "5")]
    summary: Option<Summary>,
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, prost::Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value` (scalars and tensors only).
#[derive(Clone, PartialEq, prost::Message)]
struct SummaryValue {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(float, optional, tag = "2")]
    simple_value: Option<f32>,
    #[prost(message, optional, tag = "8")]
    tensor: Option<TensorProto>,
    #[prost(message, optional, tag = "9")]
    metadata: Option<SummaryMetadata>,
}

/// `tensorflow.SummaryMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    plugin_data: Option<PluginData>,
}

/// `tensorflow.SummaryMetadata.PluginData`.
#[derive(Clone, PartialEq, prost::Message)]
struct PluginData {
    #[prost(string, tag = "1")]
    plugin_name: String,
}

/// `tensorflow.TensorProto` (a string scalar is all the text plugin needs).
#[derive(Clone, PartialEq, prost::Message)]
struct TensorProto {
    #[prost(int32, tag = "1")]
    dtype: i32,
    #[prost(message, optional, tag = "2")]
    tensor_shape: Option<TensorShape>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    string_val: Vec<Vec<u8>>,
}

/// `tensorflow.TensorShapeProto` (no dims: a scalar).
#[derive(Clone, PartialEq, prost::Message)]
struct TensorShape {}

/// `tensorflow.DataType.DT_STRING`.
const DT_STRING: i32 = 7;

/// One scalar point.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarEvent {
    pub tag: String,
    pub step: u64,
    pub value: f32,
}

/// Appends events to one `events.out.tfevents.*` file.
pub struct EventWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventWriter {
    /// Creates a new event file in `dir` (a new file per run start, as
    /// TensorBoard's own writers do; TensorBoard reads them all in order).
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        let name = format!(
            "events.out.tfevents.{}.{host}.{}.{}",
            now.as_secs(),
            std::process::id(),
            now.subsec_nanos()
        );
        let path = dir.join(name);
        let file =
            File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = Self {
            path,
            out: BufWriter::new(file),
        };
        w.write_event(&Event {
            wall_time: wall_time(),
            step: 0,
            file_version: Some("brain.Event:2".into()),
            summary: None,
        })?;
        w.flush()?;
        Ok(w)
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the scalars of one step as one event (non-finite values too:
    /// TensorBoard shows NaN and inf).
    pub fn scalars(&mut self, step: u64, values: &[(String, f32)]) -> Result<()> {
        let value = values
            .iter()
            .map(|(tag, v)| SummaryValue {
                tag: tag.clone(),
                simple_value: Some(*v),
                ..Default::default()
            })
            .collect();
        self.write_event(&Event {
            wall_time: wall_time(),
            step: step as i64,
            file_version: None,
            summary: Some(Summary { value }),
        })
    }

    /// Writes `text` (markdown) under `tag` for TensorBoard's text plugin.
    pub fn text(&mut self, step: u64, tag: &str, text: &str) -> Result<()> {
        let value = SummaryValue {
            tag: tag.into(),
            simple_value: None,
            tensor: Some(TensorProto {
                dtype: DT_STRING,
                tensor_shape: Some(TensorShape {}),
                string_val: vec![text.as_bytes().to_vec()],
            }),
            metadata: Some(SummaryMetadata {
                plugin_data: Some(PluginData {
                    plugin_name: "text".into(),
                }),
            }),
        };
        self.write_event(&Event {
            wall_time: wall_time(),
            step: step as i64,
            file_version: None,
            summary: Some(Summary { value: vec![value] }),
        })
    }

    /// Flushes buffered events to the file.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().context("cannot write the event file")?;
        Ok(())
    }

    fn write_event(&mut self, event: &Event) -> Result<()> {
        let record = frame(&event.encode_to_vec());
        self.out
            .write_all(&record)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// TFRecord framing of one payload.
fn frame(payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(payload.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&masked_crc(payload).to_le_bytes());
    out
}

/// TFRecord's masked CRC32C.
fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // CRC-32C of "123456789" (RFC 3720).
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn frames_decode_back() {
        let payload = b"hello events";
        let rec = frame(payload);
        let len = u64::from_le_bytes(rec[..8].try_into().unwrap()) as usize;
        assert_eq!(len, payload.len());
        assert_eq!(
            u32::from_le_bytes(rec[8..12].try_into().unwrap()),
            masked_crc(&rec[..8])
        );
        assert_eq!(&rec[12..12 + len], payload);
        let tail = u32::from_le_bytes(rec[12 + len..].try_into().unwrap());
        assert_eq!(tail, masked_crc(payload));
        let e = Event::decode(
            Event {
                wall_time: 1.5,
                step: 7,
                file_version: None,
                summary: None,
            }
            .encode_to_vec()
            .as_slice(),
        )
        .unwrap();
        assert_eq!(e.step, 7);
    }
}

//! The protobuf messages of Tinker's public wire format (`tinker_public`, as
//! the `tinker` 0.38 client's `tinker_public_pb2` describes them): the
//! client sends `forward_backward` bodies as `ForwardBackwardRequest` and
//! accepts `ForwardBackwardOutput` and `SampleResponse` results only in this
//! form. Field numbers follow that descriptor; fields the server never reads
//! (provenance spans, images, top-k, alternative tokens) are left out, which
//! protobuf decoding skips.

use std::collections::HashMap;

use prost::Message;

use crate::error::ApiError;

/// `DType`: the element type of a tensor's bytes.
pub const DTYPE_FLOAT32: i32 = 1;
pub const DTYPE_INT64: i32 = 2;
pub const DTYPE_INT32: i32 = 3;

/// `StopReason`.
pub const STOP_REASON_STOP: i32 = 0;
pub const STOP_REASON_LENGTH: i32 = 1;

#[derive(Clone, PartialEq, Message)]
pub struct ForwardBackwardRequest {
    #[prost(string, tag = "1")]
    pub model_id: String,
    #[prost(int32, tag = "2")]
    pub seq_id: i32,
    #[prost(message, repeated, tag = "3")]
    pub data: Vec<Datum>,
    #[prost(string, tag = "4")]
    pub loss_fn: String,
    #[prost(map = "string, double", tag = "5")]
    pub loss_fn_config: HashMap<String, f64>,
    #[prost(bool, tag = "6")]
    pub forward_only: bool,
    #[prost(map = "string, message", tag = "7")]
    pub loss_fn_config_v2: HashMap<String, LossConfigValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct LossConfigValue {
    #[prost(oneof = "loss_config_value::Value", tags = "1, 2")]
    pub value: Option<loss_config_value::Value>,
}

pub mod loss_config_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(double, tag = "1")]
        Number(f64),
        #[prost(string, tag = "2")]
        Text(String),
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct Datum {
    #[prost(message, repeated, tag = "1")]
    pub model_input: Vec<Chunk>,
    #[prost(map = "string, message", tag = "2")]
    pub loss_fn_inputs: HashMap<String, TensorMsg>,
}

#[derive(Clone, PartialEq, Message)]
pub struct Chunk {
    #[prost(oneof = "chunk::Kind", tags = "1, 2, 3")]
    pub kind: Option<chunk::Kind>,
}

pub mod chunk {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Kind {
        #[prost(message, tag = "1")]
        EncodedText(super::EncodedTextChunk),
        /// Images and audio are decoded only far enough to refuse them.
        #[prost(bytes, tag = "2")]
        Image(Vec<u8>),
        #[prost(bytes, tag = "3")]
        Dmel(Vec<u8>),
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct EncodedTextChunk {
    /// Token ids as little-endian int32.
    #[prost(bytes = "vec", tag = "1")]
    pub tokens: Vec<u8>,
}

/// `Tensor`: dense bytes (or sparse CSR) of `dtype`, with a shape.
#[derive(Clone, PartialEq, Message)]
pub struct TensorMsg {
    #[prost(oneof = "tensor_msg::Encoding", tags = "1, 2")]
    pub encoding: Option<tensor_msg::Encoding>,
    #[prost(int32, tag = "3")]
    pub dtype: i32,
    #[prost(int64, repeated, tag = "4")]
    pub shape: Vec<i64>,
}

pub mod tensor_msg {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Encoding {
        #[prost(bytes, tag = "1")]
        Dense(Vec<u8>),
        #[prost(message, tag = "2")]
        SparseCsr(super::SparseCsr),
    }
}

#[derive(Clone, PartialEq, Message)]
pub struct SparseCsr {
    #[prost(bytes = "vec", tag = "1")]
    pub values: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub crow_indices: Vec<u8>,
    #[prost(bytes = "vec", tag = "3")]
    pub col_indices: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ForwardBackwardOutput {
    #[prost(string, tag = "1")]
    pub loss_fn_output_type: String,
    #[prost(message, repeated, tag = "2")]
    pub loss_fn_outputs: Vec<ArrayRecord>,
    #[prost(map = "string, double", tag = "3")]
    pub metrics: HashMap<String, f64>,
}

/// Per-datum fields of one output batch, each a [`BatchedTensor`].
#[derive(Clone, PartialEq, Message)]
pub struct ArrayRecord {
    #[prost(string, tag = "1")]
    pub type_tag: String,
    #[prost(map = "string, message", tag = "2")]
    pub fields: HashMap<String, BatchedTensor>,
    #[prost(int64, tag = "3")]
    pub num_datums: i64,
}

/// The arrays of every datum back to back; `offsets` (int64) are the byte
/// offsets of each datum's start, plus the end.
#[derive(Clone, PartialEq, Message)]
pub struct BatchedTensor {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    pub offsets: Vec<u8>,
    #[prost(int32, tag = "3")]
    pub dtype: i32,
    #[prost(int64, repeated, tag = "4")]
    pub trailing_shape: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SampleResponse {
    #[prost(message, repeated, tag = "1")]
    pub sequences: Vec<SampledSequence>,
    /// Float32 per prompt token (NaN where none was computed).
    #[prost(bytes = "vec", optional, tag = "2")]
    pub prompt_logprobs: Option<Vec<u8>>,
    #[prost(int32, tag = "4")]
    pub prompt_cache_hit_tokens: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct SampledSequence {
    #[prost(int32, tag = "1")]
    pub stop_reason: i32,
    /// Token ids as little-endian int32.
    #[prost(bytes = "vec", tag = "2")]
    pub tokens: Vec<u8>,
    /// Float32 per generated token.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub logprobs: Option<Vec<u8>>,
}

/// Little-endian bytes of `values`.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian int32 bytes of token ids.
pub fn i32_bytes(values: &[i64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| (v as i32).to_le_bytes())
        .collect()
}

/// Token ids of an `EncodedTextChunk` (int32 little-endian).
pub fn tokens_of(bytes: &[u8]) -> Result<Vec<i64>, ApiError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(ApiError::bad_request(
            "model_input: encoded_text tokens are not whole int32 values",
        ));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
        .collect())
}

/// The values of a dense or sparse tensor, flattened, as f64 (int64 and
/// int32 ids convert exactly below 2^53).
pub fn tensor_values(name: &str, t: &TensorMsg) -> Result<Vec<f64>, ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("loss_fn_inputs.{name}: {why}"));
    let decode = |bytes: &[u8]| -> Result<Vec<f64>, ApiError> {
        let (width, f): (usize, fn(&[u8]) -> f64) = match t.dtype {
            DTYPE_FLOAT32 => (4, |c| f32::from_le_bytes(c.try_into().unwrap()) as f64),
            DTYPE_INT64 => (8, |c| i64::from_le_bytes(c.try_into().unwrap()) as f64),
            DTYPE_INT32 => (4, |c| i32::from_le_bytes(c.try_into().unwrap()) as f64),
            other => {
                return Err(bad(&format!(
                    "dtype {other} is not float32, int64 or int32"
                )))
            }
        };
        if !bytes.len().is_multiple_of(width) {
            return Err(bad("its bytes are not whole elements"));
        }
        Ok(bytes.chunks_exact(width).map(f).collect())
    };
    match &t.encoding {
        Some(tensor_msg::Encoding::Dense(bytes)) => decode(bytes),
        Some(tensor_msg::Encoding::SparseCsr(_)) => Err(bad("sparse tensors are not supported")),
        None => Ok(Vec::new()),
    }
}

/// One `BatchedTensor` of float32 arrays, one per datum.
pub fn batched_f32(per_datum: &[Vec<f32>]) -> BatchedTensor {
    let mut data = Vec::new();
    let mut offsets = vec![0i64];
    for values in per_datum {
        data.extend(f32_bytes(values));
        offsets.push(data.len() as i64);
    }
    BatchedTensor {
        data,
        offsets: offsets.iter().flat_map(|o| o.to_le_bytes()).collect(),
        dtype: DTYPE_FLOAT32,
        trailing_shape: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_tensors_round_trip_through_bytes() {
        assert_eq!(
            tokens_of(&i32_bytes(&[1, 2, 70000])).unwrap(),
            vec![1, 2, 70000]
        );
        assert!(tokens_of(&[1, 2, 3]).is_err());
        let t = TensorMsg {
            encoding: Some(tensor_msg::Encoding::Dense(f32_bytes(&[0.5, -1.0]))),
            dtype: DTYPE_FLOAT32,
            shape: vec![2],
        };
        assert_eq!(tensor_values("w", &t).unwrap(), vec![0.5, -1.0]);
        let ids = TensorMsg {
            encoding: Some(tensor_msg::Encoding::Dense(
                [3i64, 9].iter().flat_map(|v| v.to_le_bytes()).collect(),
            )),
            dtype: DTYPE_INT64,
            shape: vec![2],
        };
        assert_eq!(
            tensor_values("target_tokens", &ids).unwrap(),
            vec![3.0, 9.0]
        );
    }

    #[test]
    fn batched_offsets_are_byte_offsets_per_datum() {
        let b = batched_f32(&[vec![1.0, 2.0], vec![], vec![3.0]]);
        let offsets: Vec<i64> = b
            .offsets
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(offsets, vec![0, 8, 8, 12]);
        assert_eq!(b.data.len(), 12);
    }
}

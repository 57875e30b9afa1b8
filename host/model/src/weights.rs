//! Reading and writing Hugging Face safetensors checkpoints (single file or sharded).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, View};
use serde_json::json;
use tch::{Device, Kind, Tensor};

use crate::error::ModelError;

/// Single-file checkpoint name.
pub const SINGLE_FILE: &str = "model.safetensors";
/// Sharded checkpoint index name.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// Default largest shard written by [`write_weights`] (HF uses 5 GB too).
pub const DEFAULT_MAX_SHARD_BYTES: usize = 5_000_000_000;

fn kind_of(dtype: Dtype) -> Result<Kind, ModelError> {
    Ok(match dtype {
        Dtype::BOOL => Kind::Bool,
        Dtype::U8 => Kind::Uint8,
        Dtype::I8 => Kind::Int8,
        Dtype::I16 => Kind::Int16,
        Dtype::I32 => Kind::Int,
        Dtype::I64 => Kind::Int64,
        Dtype::BF16 => Kind::BFloat16,
        Dtype::F16 => Kind::Half,
        Dtype::F32 => Kind::Float,
        Dtype::F64 => Kind::Double,
        other => {
            return Err(ModelError::Weights(format!(
                "unsupported safetensors dtype {other:?}"
            )))
        }
    })
}

fn dtype_of(kind: Kind) -> Result<Dtype, ModelError> {
    Ok(match kind {
        Kind::Bool => Dtype::BOOL,
        Kind::Uint8 => Dtype::U8,
        Kind::Int8 => Dtype::I8,
        Kind::Int16 => Dtype::I16,
        Kind::Int => Dtype::I32,
        Kind::Int64 => Dtype::I64,
        Kind::BFloat16 => Dtype::BF16,
        Kind::Half => Dtype::F16,
        Kind::Float => Dtype::F32,
        Kind::Double => Dtype::F64,
        other => {
            return Err(ModelError::Weights(format!(
                "cannot store tensor kind {other:?} in safetensors"
            )))
        }
    })
}

/// HF `torch_dtype` string of a tensor kind.
pub fn torch_dtype_name(kind: Kind) -> &'static str {
    match kind {
        Kind::BFloat16 => "bfloat16",
        Kind::Half => "float16",
        Kind::Double => "float64",
        _ => "float32",
    }
}

/// Tensor kind of an HF `torch_dtype` string.
pub fn kind_from_torch_dtype(name: &str) -> Result<Kind, ModelError> {
    match name {
        "float32" | "float" => Ok(Kind::Float),
        "bfloat16" => Ok(Kind::BFloat16),
        "float16" | "half" => Ok(Kind::Half),
        "float64" => Ok(Kind::Double),
        other => Err(ModelError::Config(format!(
            "unsupported torch_dtype `{other}`"
        ))),
    }
}

/// The files holding the checkpoint in `dir`: `model.safetensors`, or every shard
/// listed in `model.safetensors.index.json`.
fn checkpoint_files(dir: &Path) -> Result<Vec<PathBuf>, ModelError> {
    let single = dir.join(SINGLE_FILE);
    let index = dir.join(INDEX_FILE);
    if single.is_file() {
        Ok(vec![single])
    } else if index.is_file() {
        let text = std::fs::read_to_string(&index).map_err(|e| ModelError::io(&index, e))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ModelError::Weights(format!("{}: {e}", index.display())))?;
        let map = value
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| {
                ModelError::Weights(format!("{}: no `weight_map` object", index.display()))
            })?;
        let files: BTreeSet<&str> = map.values().filter_map(|v| v.as_str()).collect();
        Ok(files.into_iter().map(|f| dir.join(f)).collect())
    } else {
        Err(ModelError::Weights(format!(
            "{}: neither {SINGLE_FILE} nor {INDEX_FILE} found",
            dir.display()
        )))
    }
}

/// Calls `f(name, tensor)` for every tensor of one safetensors file. The tensors
/// share one private (copy-on-write) memory map of the file that torch owns and
/// unmaps when the last of them is dropped: nothing is read or copied here, pages
/// are read on first use, and writes to a tensor never reach the file. A tensor
/// whose bytes are not aligned for its dtype is copied instead.
fn visit_file(
    path: &Path,
    f: &mut dyn FnMut(&str, Tensor) -> Result<(), ModelError>,
) -> Result<(), ModelError> {
    let file = std::fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
    // SAFETY: the file is opened read-only and only read while the map is alive;
    // checkpoints are not expected to be modified concurrently.
    let mmap = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| ModelError::io(path, e))?;
    let st = SafeTensors::deserialize(&mmap)
        .map_err(|e| ModelError::Weights(format!("{}: {e}", path.display())))?;
    let name = path
        .to_str()
        .ok_or_else(|| ModelError::Weights(format!("{}: path is not UTF-8", path.display())))?;
    let bytes = Tensor::f_from_file(name, false, mmap.len() as i64, (Kind::Uint8, Device::Cpu))?;
    for (name, view) in st.tensors() {
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let kind = kind_of(view.dtype())?;
        let data = view.data();
        let offset = data.as_ptr() as usize - mmap.as_ptr() as usize;
        let tensor = if offset.is_multiple_of(kind.elt_size_in_bytes()) {
            bytes
                .f_narrow(0, offset as i64, data.len() as i64)?
                .f_view_dtype(kind)?
                .f_view(shape.as_slice())?
        } else {
            Tensor::f_from_data_size(data, &shape, kind)?
        };
        f(&name, tensor)?;
    }
    Ok(())
}

/// Appends every tensor of one safetensors file to `out` (see [`for_each_tensor`]).
pub(crate) fn read_file(path: &Path, out: &mut Vec<(String, Tensor)>) -> Result<(), ModelError> {
    visit_file(path, &mut |name, tensor| {
        out.push((name.to_string(), tensor));
        Ok(())
    })
}

/// Calls `f(name, tensor)` for every tensor of the checkpoint in `dir`
/// (`model.safetensors`, or the shards of `model.safetensors.index.json`). The
/// CPU tensors are views of a private memory map of each file, read lazily and
/// without a copy; writing to one changes only this process's pages.
pub fn for_each_tensor(
    dir: &Path,
    mut f: impl FnMut(&str, Tensor) -> Result<(), ModelError>,
) -> Result<(), ModelError> {
    for path in checkpoint_files(dir)? {
        visit_file(&path, &mut f)?;
    }
    Ok(())
}

/// Reads all tensors of the checkpoint in `dir` onto the CPU:
/// `model.safetensors`, or every shard listed in `model.safetensors.index.json`
/// (memory-mapped views, see [`for_each_tensor`]).
pub fn read_weights(dir: &Path) -> Result<Vec<(String, Tensor)>, ModelError> {
    let mut out = Vec::new();
    for_each_tensor(dir, |name, tensor| {
        out.push((name.to_string(), tensor));
        Ok(())
    })?;
    Ok(out)
}

struct CpuView {
    tensor: Tensor,
    dtype: Dtype,
    shape: Vec<usize>,
}

impl CpuView {
    fn new(tensor: &Tensor) -> Result<Self, ModelError> {
        let tensor = tensor.detach().to_device(Device::Cpu).contiguous();
        let dtype = dtype_of(tensor.kind())?;
        let shape = tensor.size().iter().map(|&d| d as usize).collect();
        Ok(CpuView {
            tensor,
            dtype,
            shape,
        })
    }
}

impl View for CpuView {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        let mut bytes = vec![0u8; self.data_len()];
        let numel = self.tensor.numel();
        self.tensor
            .f_copy_data_u8(&mut bytes, numel)
            .expect("copying a contiguous CPU tensor cannot fail");
        bytes.into()
    }
    fn data_len(&self) -> usize {
        self.tensor.numel() * self.tensor.kind().elt_size_in_bytes()
    }
}

pub(crate) fn write_file(path: &Path, tensors: &[(String, Tensor)]) -> Result<(), ModelError> {
    let views = tensors
        .iter()
        .map(|(name, t)| Ok((name.clone(), CpuView::new(t)?)))
        .collect::<Result<Vec<_>, ModelError>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    safetensors::tensor::serialize_to_file(views, Some(metadata), path)
        .map_err(|e| ModelError::Weights(format!("{}: {e}", path.display())))
}

/// Writes `tensors` into `dir` as `model.safetensors`, or as HF-style shards plus
/// `model.safetensors.index.json` when they exceed `max_shard_bytes`.
pub fn write_weights(
    dir: &Path,
    tensors: &[(String, Tensor)],
    max_shard_bytes: usize,
) -> Result<(), ModelError> {
    let bytes = |t: &Tensor| t.numel() * t.kind().elt_size_in_bytes();
    let total: usize = tensors.iter().map(|(_, t)| bytes(t)).sum();
    if total <= max_shard_bytes {
        return write_file(&dir.join(SINGLE_FILE), tensors);
    }
    let mut shards: Vec<Vec<(String, Tensor)>> = vec![Vec::new()];
    let mut current = 0usize;
    for (name, t) in tensors {
        if current > 0 && current + bytes(t) > max_shard_bytes {
            shards.push(Vec::new());
            current = 0;
        }
        current += bytes(t);
        shards
            .last_mut()
            .expect("shards is never empty")
            .push((name.clone(), t.shallow_clone()));
    }
    let n = shards.len();
    let mut weight_map = BTreeMap::new();
    for (i, shard) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-{:05}.safetensors", i + 1, n);
        write_file(&dir.join(&file), shard)?;
        for (name, _) in shard {
            weight_map.insert(name.clone(), file.clone());
        }
    }
    let index = json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
    let path = dir.join(INDEX_FILE);
    std::fs::write(&path, serde_json::to_string_pretty(&index).expect("json"))
        .map_err(|e| ModelError::io(&path, e))
}

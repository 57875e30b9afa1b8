//! NCCL weight broadcast between the trainer (rank 0) and inference servers,
//! on raw `cudarc` NCCL calls over libtorch tensors' device memory.
//!
//! Built with the `cuda` feature, NCCL is loaded at run time
//! (`dynamic-loading`): a machine without CUDA or libnccl gets a clear error
//! from [`check_available`], never a panic. Without the feature every call
//! reports that the build lacks it.

use std::fmt;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// Bytes of an NCCL unique id.
pub const UNIQUE_ID_BYTES: usize = 128;

/// Why an NCCL operation cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("nccl weight sync: {0}")]
pub struct NcclError(pub String);

fn err(msg: impl Into<String>) -> NcclError {
    NcclError(msg.into())
}

/// `/init_weights_update_group` body: join the weight-update group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitGroupRequest {
    /// Hex of the 128-byte NCCL unique id made by rank 0.
    pub unique_id: String,
    /// This server's rank (the trainer is 0).
    pub rank: i32,
    pub world_size: i32,
    #[serde(default = "default_group")]
    pub group_name: String,
}

/// `/update_weights_from_distributed` body: receive these tensors, in order,
/// by broadcast from rank 0.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateWeightsRequest {
    pub names: Vec<String>,
    /// `float32`, `float16` or `bfloat16`.
    pub dtypes: Vec<String>,
    pub shapes: Vec<Vec<i64>>,
    #[serde(default = "default_group")]
    pub group_name: String,
}

fn default_group() -> String {
    "skyrl".into()
}

/// NCCL dtype name of a tensor kind.
pub fn dtype_name(kind: Kind) -> Result<&'static str, NcclError> {
    match kind {
        Kind::Float => Ok("float32"),
        Kind::Half => Ok("float16"),
        Kind::BFloat16 => Ok("bfloat16"),
        other => Err(err(format!("cannot broadcast {other:?} tensors"))),
    }
}

/// Tensor kind of an NCCL dtype name.
pub fn kind_of(name: &str) -> Result<Kind, NcclError> {
    match name {
        "float32" => Ok(Kind::Float),
        "float16" => Ok(Kind::Half),
        "bfloat16" => Ok(Kind::BFloat16),
        other => Err(err(format!("unknown dtype `{other}`"))),
    }
}

/// The CUDA index of `device`, where `what` (e.g. "the engine") lives;
/// an error naming `what` and `hint` when it is not a CUDA device.
pub fn cuda_index(device: tch::Device, what: &str, hint: &str) -> Result<usize, NcclError> {
    match device {
        tch::Device::Cuda(i) => Ok(i),
        other => Err(err(format!(
            "{what} is on {other:?}; NCCL needs CUDA{hint}"
        ))),
    }
}

/// Hex text of a unique id.
pub fn encode_unique_id(id: &[u8; UNIQUE_ID_BYTES]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// A unique id from its hex text.
pub fn decode_unique_id(hex: &str) -> Result<[u8; UNIQUE_ID_BYTES], NcclError> {
    if hex.len() != UNIQUE_ID_BYTES * 2 || !hex.is_ascii() {
        return Err(err(format!(
            "unique_id must be {} hex digits",
            UNIQUE_ID_BYTES * 2
        )));
    }
    let mut out = [0u8; UNIQUE_ID_BYTES];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| err("unique_id is not hex"))?;
    }
    Ok(out)
}

/// A member of an NCCL communicator.
pub struct NcclGroup {
    #[cfg(feature = "cuda")]
    comm: imp::Comm,
    pub rank: i32,
    pub world_size: i32,
    /// CUDA device index of this member's tensors.
    pub device: usize,
}

impl fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NcclGroup")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("device", &self.device)
            .finish()
    }
}

#[cfg(not(feature = "cuda"))]
const NO_FEATURE: &str =
    "this skyrl was built without the `cuda` feature; rebuild with `--features cuda` \
     or use weight_sync_backend=checkpoint";

/// Ok when NCCL can run here: built with `cuda`, a CUDA device visible to
/// libtorch, and libnccl loadable.
pub fn check_available() -> Result<(), NcclError> {
    #[cfg(not(feature = "cuda"))]
    {
        Err(err(NO_FEATURE))
    }
    #[cfg(feature = "cuda")]
    {
        imp::check_available()
    }
}

/// A fresh unique id (rank 0 makes it and sends it to the others).
pub fn new_unique_id() -> Result<[u8; UNIQUE_ID_BYTES], NcclError> {
    check_available()?;
    #[cfg(not(feature = "cuda"))]
    {
        Err(err(NO_FEATURE))
    }
    #[cfg(feature = "cuda")]
    {
        imp::new_unique_id()
    }
}

impl NcclGroup {
    /// Joins the communicator (blocks until all `world_size` ranks have joined).
    pub fn join(
        unique_id: &[u8; UNIQUE_ID_BYTES],
        rank: i32,
        world_size: i32,
        device: usize,
    ) -> Result<Self, NcclError> {
        if rank < 0 || rank >= world_size {
            return Err(err(format!(
                "rank {rank} is outside the group of {world_size}"
            )));
        }
        check_available()?;
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (unique_id, device);
            Err(err(NO_FEATURE))
        }
        #[cfg(feature = "cuda")]
        {
            let comm = imp::Comm::join(unique_id, rank, world_size, device)?;
            Ok(Self {
                comm,
                rank,
                world_size,
                device,
            })
        }
    }

    /// Broadcasts `tensor` from `root` into every member's `tensor` (same
    /// shape and kind everywhere, contiguous, on this member's CUDA device);
    /// waits until the copy is complete.
    pub fn broadcast(&self, tensor: &mut Tensor, root: i32) -> Result<(), NcclError> {
        if !tensor.is_contiguous() {
            return Err(err("broadcast needs a contiguous tensor"));
        }
        if tensor.device() != tch::Device::Cuda(self.device) {
            return Err(err(format!(
                "broadcast needs a tensor on cuda:{}, got {:?}",
                self.device,
                tensor.device()
            )));
        }
        if tensor.kind() != Kind::Uint8 {
            dtype_name(tensor.kind())?;
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = root;
            Err(err(NO_FEATURE))
        }
        #[cfg(feature = "cuda")]
        {
            self.comm.broadcast(tensor, root, self.device)
        }
    }

    /// vLLM's `PyNcclCommunicator` warm-up, which every member of a group made
    /// by its rendezvous must join right after joining: a sum all-reduce of
    /// one float32 zero.
    pub fn warm_up(&self) -> Result<(), NcclError> {
        #[cfg(not(feature = "cuda"))]
        {
            Err(err(NO_FEATURE))
        }
        #[cfg(feature = "cuda")]
        {
            let mut t = Tensor::zeros([1], (Kind::Float, tch::Device::Cuda(self.device)));
            self.comm.all_reduce_sum(&mut t, self.device)
        }
    }
}

#[cfg(feature = "cuda")]
mod imp {
    use cudarc::nccl::{result, sys};
    use tch::{Kind, Tensor};

    use super::{err, NcclError, UNIQUE_ID_BYTES};

    pub fn check_available() -> Result<(), NcclError> {
        if !tch::Cuda::is_available() {
            return Err(err(
                "no CUDA device is visible to libtorch (CPU-only torch or no GPU); \
                 use weight_sync_backend=checkpoint",
            ));
        }
        // SAFETY: only tries to dlopen the library by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err(err(
                "libnccl cannot be loaded; put libnccl.so on LD_LIBRARY_PATH \
                 (the nvidia-nccl wheel ships libnccl.so.2: link libnccl.so to it)",
            ));
        }
        Ok(())
    }

    pub fn new_unique_id() -> Result<[u8; UNIQUE_ID_BYTES], NcclError> {
        let id = result::get_uniqueid().map_err(|e| err(format!("ncclGetUniqueId: {e:?}")))?;
        Ok(id.internal.map(|c| c as u8))
    }

    /// An owned NCCL communicator handle.
    pub struct Comm(sys::ncclComm_t);

    // SAFETY: an NCCL communicator may be used from any thread as long as calls
    // on it are not concurrent; `NcclGroup` is only used behind `&mut`/a mutex
    // or from one thread at a time.
    unsafe impl Send for Comm {}

    impl Comm {
        pub fn join(
            id: &[u8; UNIQUE_ID_BYTES],
            rank: i32,
            world: i32,
            device: usize,
        ) -> Result<Self, NcclError> {
            // Make libtorch's CUDA context current on `device` before NCCL binds to it.
            let _ = Tensor::zeros([1], (Kind::Float, tch::Device::Cuda(device)));
            let unique = sys::ncclUniqueId {
                internal: id.map(|b| b as std::ffi::c_char),
            };
            let mut comm = std::mem::MaybeUninit::<sys::ncclComm_t>::uninit();
            // SAFETY: `comm` is a valid out pointer; the id is 128 bytes.
            unsafe { result::comm_init_rank(comm.as_mut_ptr(), world, unique, rank) }
                .map_err(|e| err(format!("ncclCommInitRank(rank {rank} of {world}): {e:?}")))?;
            // SAFETY: initialised by the successful call above.
            Ok(Comm(unsafe { comm.assume_init() }))
        }

        pub fn broadcast(
            &self,
            tensor: &mut Tensor,
            root: i32,
            device: usize,
        ) -> Result<(), NcclError> {
            let dtype = match tensor.kind() {
                Kind::Float => sys::ncclDataType_t::ncclFloat32,
                Kind::Half => sys::ncclDataType_t::ncclFloat16,
                Kind::BFloat16 => sys::ncclDataType_t::ncclBfloat16,
                Kind::Uint8 => sys::ncclDataType_t::ncclUint8,
                other => return Err(err(format!("cannot broadcast {other:?}"))),
            };
            let count = tensor.numel();
            let ptr = tensor.data_ptr();
            // SAFETY: `ptr` is `count` contiguous elements of `dtype` on this
            // member's device (checked by the caller); the legacy default
            // stream (null) orders the copy with libtorch's own work, and we
            // synchronise before returning.
            unsafe {
                result::broadcast(ptr, ptr, count, dtype, root, self.0, std::ptr::null_mut())
            }
            .map_err(|e| err(format!("ncclBroadcast: {e:?}")))?;
            tch::Cuda::synchronize(device as i64);
            Ok(())
        }

        /// In-place sum all-reduce of a contiguous float32 tensor on `device`.
        pub fn all_reduce_sum(&self, tensor: &mut Tensor, device: usize) -> Result<(), NcclError> {
            if tensor.kind() != Kind::Float {
                return Err(err("all_reduce_sum takes float32 tensors"));
            }
            let count = tensor.numel();
            let ptr = tensor.data_ptr();
            // SAFETY: as in `broadcast`: `count` contiguous float32 elements on
            // this member's device, synchronised before returning.
            unsafe {
                result::all_reduce(
                    ptr,
                    ptr,
                    count,
                    sys::ncclDataType_t::ncclFloat32,
                    sys::ncclRedOp_t::ncclSum,
                    self.0,
                    std::ptr::null_mut(),
                )
            }
            .map_err(|e| err(format!("ncclAllReduce: {e:?}")))?;
            tch::Cuda::synchronize(device as i64);
            Ok(())
        }
    }

    impl Drop for Comm {
        fn drop(&mut self) {
            // SAFETY: the handle came from ncclCommInitRank and is destroyed once.
            let _ = unsafe { result::comm_destroy(self.0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_round_trip_through_hex() {
        let mut id = [0u8; UNIQUE_ID_BYTES];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        assert_eq!(decode_unique_id(&encode_unique_id(&id)).unwrap(), id);
        assert!(decode_unique_id("abc").is_err());
        assert!(decode_unique_id(&"zz".repeat(UNIQUE_ID_BYTES)).is_err());
    }

    #[test]
    fn dtypes_map_both_ways() {
        for k in [Kind::Float, Kind::Half, Kind::BFloat16] {
            assert_eq!(kind_of(dtype_name(k).unwrap()).unwrap(), k);
        }
        assert!(dtype_name(Kind::Int64).is_err());
    }

    #[test]
    fn nccl_is_available_or_says_why() {
        if tch::Cuda::is_available() && cfg!(feature = "cuda") {
            if let Err(e) = check_available() {
                assert!(e.to_string().contains("libnccl"), "{e}");
            }
            return;
        }
        let e = check_available().unwrap_err().to_string();
        assert!(
            e.contains("no CUDA device") || e.contains("without the `cuda` feature"),
            "{e}"
        );
        let e = NcclGroup::join(&[0; UNIQUE_ID_BYTES], 1, 2, 0).unwrap_err();
        assert!(e.to_string().starts_with("nccl weight sync:"));
        assert!(new_unique_id().is_err());
    }
}

//! The shim's C functions and the error-message convention around them.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use tch::Tensor;

use crate::{Result, TorchOpsError};

extern "C" {
    pub(crate) fn skyrl_torch_ops_free(ptr: *mut c_void);
    pub(crate) fn skyrl_fused_adamw(
        params: *const *mut c_void,
        grads: *const *const c_void,
        exp_avgs: *const *mut c_void,
        exp_avg_sqs: *const *mut c_void,
        n: usize,
        step: f64,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        err: *mut *mut c_char,
    ) -> c_int;
    pub(crate) fn skyrl_foreach_norm(
        tensors: *const *const c_void,
        n: usize,
        out: *mut *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    pub(crate) fn skyrl_foreach_mul_scalar(
        tensors: *const *mut c_void,
        n: usize,
        scalar: f64,
        err: *mut *mut c_char,
    ) -> c_int;
    pub(crate) fn skyrl_chunked_logprobs(
        hidden: *const c_void,
        weight: *const c_void,
        targets: *const c_void,
        temperature: f64,
        chunk: i64,
        with_entropy: c_int,
        keep: c_int,
        logprobs: *mut *mut c_void,
        entropy: *mut *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    pub(crate) fn skyrl_decode_attention(
        q: *const c_void,
        k: *const c_void,
        v: *const c_void,
        mask: *const c_void,
        scale: f64,
        out: *mut *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
}

/// Calls `f` with an error out-pointer and turns a failure code into its message.
pub(crate) fn call(f: impl FnOnce(*mut *mut c_char) -> c_int) -> Result<()> {
    let mut err: *mut c_char = ptr::null_mut();
    if f(&mut err) == 0 {
        return Ok(());
    }
    let message = if err.is_null() {
        "torch-ops shim failed without a message".to_string()
    } else {
        // SAFETY: the shim wrote a malloc'd NUL-terminated string; freed once here.
        unsafe {
            let m = CStr::from_ptr(err).to_string_lossy().into_owned();
            skyrl_torch_ops_free(err.cast());
            m
        }
    };
    Err(TorchOpsError(message))
}

/// The `at::Tensor*` of each tensor, for a `const at::Tensor*` list.
pub(crate) fn ptrs(tensors: &[Tensor]) -> Vec<*const c_void> {
    tensors.iter().map(|t| t.as_ptr().cast()).collect()
}

/// The `at::Tensor*` of each tensor, for a list the shim updates in place.
/// The shim changes the tensors' data, never the handles tch owns.
pub(crate) fn mut_ptrs(tensors: &[Tensor]) -> Vec<*mut c_void> {
    tensors.iter().map(|t| t.as_ptr() as *mut c_void).collect()
}

/// Takes over a tensor the shim allocated with `new at::Tensor`.
///
/// # Safety
/// `p` must come from the shim's `give` and not be owned elsewhere.
pub(crate) unsafe fn take(p: *mut c_void) -> Tensor {
    Tensor::from_ptr(p.cast())
}

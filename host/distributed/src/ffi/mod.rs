//! Raw bindings to `shim/c10d_shim.h` and the owning handles over them.
//!
//! `store.rs` and `pg.rs` hold the handle types. Everything here is
//! crate-private: the handles turn the shim's error codes into
//! [`ShimError`]s, which the public modules map to [`crate::DistError`].
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::time::Duration;

mod pg;
mod store;

pub(crate) use pg::{op_code, PgHandle};
pub(crate) use store::StoreHandle;

#[repr(C)]
pub(crate) struct RawStore {
    _private: [u8; 0],
}

#[repr(C)]
pub(crate) struct RawPg {
    _private: [u8; 0],
}

const ERR_NETWORK: c_int = 2;
const ERR_STORE: c_int = 3;

extern "C" {
    fn skyrl_tensor_release_grad(tensor: *mut c_void);
    fn skyrl_c10d_free(ptr: *mut c_void);
    fn skyrl_c10d_has_nccl() -> c_int;
    fn skyrl_store_tcp(
        host: *const c_char,
        port: u16,
        world_size: c_int,
        is_server: c_int,
        timeout_ms: i64,
        out: *mut *mut RawStore,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_prefix(
        inner: *mut RawStore,
        prefix: *const c_char,
        out: *mut *mut RawStore,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_clone(
        store: *mut RawStore,
        out: *mut *mut RawStore,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_set_timeout(
        store: *mut RawStore,
        timeout_ms: i64,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_port(store: *mut RawStore, port: *mut u16, err: *mut *mut c_char) -> c_int;
    fn skyrl_store_set(
        store: *mut RawStore,
        key: *const c_char,
        data: *const u8,
        len: usize,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_get(
        store: *mut RawStore,
        key: *const c_char,
        data: *mut *mut u8,
        len: *mut usize,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_add(
        store: *mut RawStore,
        key: *const c_char,
        delta: i64,
        out: *mut i64,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_check(
        store: *mut RawStore,
        keys: *const *const c_char,
        n: usize,
        out: *mut c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_store_free(store: *mut RawStore);
    fn skyrl_pg_gloo(
        store: *mut RawStore,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
        ifnames: *const c_char,
        hostname: *const c_char,
        out: *mut *mut RawPg,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_pg_nccl(
        store: *mut RawStore,
        rank: c_int,
        size: c_int,
        timeout_ms: i64,
        out: *mut *mut RawPg,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_pg_allreduce(
        pg: *mut RawPg,
        t: *mut c_void,
        op: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_pg_reduce_scatter(
        pg: *mut RawPg,
        out: *mut c_void,
        input: *const c_void,
        op: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_pg_allgather(
        pg: *mut RawPg,
        out: *mut c_void,
        input: *const c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_pg_broadcast(
        pg: *mut RawPg,
        t: *mut c_void,
        root: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    fn skyrl_pg_barrier(pg: *mut RawPg, err: *mut *mut c_char) -> c_int;
    fn skyrl_pg_free(pg: *mut RawPg, abort: c_int);
}

/// What kind of C++ exception the shim caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShimErrorKind {
    /// `c10::DistNetworkError`: a socket to a peer or the store broke.
    Network,
    /// `c10::DistStoreError`: typically a store timeout.
    Store,
    /// Anything else (Gloo I/O errors, shape checks, ...).
    Other,
}

/// A C++ exception turned into a value.
#[derive(Debug, Clone)]
pub(crate) struct ShimError {
    pub kind: ShimErrorKind,
    pub message: String,
}

/// Whether the shim was compiled with ProcessGroupNCCL.
pub(crate) fn has_nccl() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { skyrl_c10d_has_nccl() != 0 }
}

/// Calls `f` with an error out-pointer and converts a failure code.
fn call(f: impl FnOnce(*mut *mut c_char) -> c_int) -> Result<(), ShimError> {
    let mut err: *mut c_char = ptr::null_mut();
    let code = f(&mut err);
    if code == 0 {
        return Ok(());
    }
    let message = if err.is_null() {
        format!("c10d shim error {code} (no message)")
    } else {
        // SAFETY: the shim wrote a malloc'd NUL-terminated string; we free it once.
        unsafe {
            let m = CStr::from_ptr(err).to_string_lossy().into_owned();
            skyrl_c10d_free(err.cast());
            m
        }
    };
    let kind = match code {
        ERR_NETWORK => ShimErrorKind::Network,
        ERR_STORE => ShimErrorKind::Store,
        _ => ShimErrorKind::Other,
    };
    Err(ShimError { kind, message })
}

fn cstring(s: &str) -> Result<CString, ShimError> {
    CString::new(s).map_err(|_| ShimError {
        kind: ShimErrorKind::Other,
        message: format!("string {s:?} contains a NUL byte"),
    })
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Drops `t`'s accumulated gradient (PyTorch's `param.grad = None`).
pub(crate) fn release_grad(t: &tch::Tensor) {
    // SAFETY: `as_ptr` is the `at::Tensor*` tch owns for `t`; the shim
    // only resets its grad handle, which autograd recreates on the next backward.
    unsafe { skyrl_tensor_release_grad(t.as_ptr() as *mut c_void) }
}

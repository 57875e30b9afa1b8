//! [`PgHandle`]: an owned c10d backend and its blocking collectives.
use std::ffi::c_int;
use std::ptr;
use std::time::Duration;

use tch::Tensor;

use super::*;

/// Which shim reduce op code to pass.
pub(crate) fn op_code(op: crate::ReduceOp) -> c_int {
    match op {
        crate::ReduceOp::Sum => 0,
        crate::ReduceOp::Max => 1,
        crate::ReduceOp::Min => 2,
        crate::ReduceOp::Avg => 3,
    }
}

/// An owned c10d backend (ProcessGroupGloo or ProcessGroupNCCL).
pub(crate) struct PgHandle {
    raw: *mut RawPg,
    /// Set after a failed collective: drop then aborts instead of shutting down.
    pub failed: bool,
}

// SAFETY: the backend object is heap-allocated and not tied to the creating
// thread; `ProcessGroup` only uses it behind a `Mutex`.
unsafe impl Send for PgHandle {}

impl PgHandle {
    /// `ProcessGroupGloo(store, rank, size, Options{timeout, devices})`.
    pub fn gloo(
        store: &StoreHandle,
        rank: usize,
        size: usize,
        timeout: Duration,
        ifnames: Option<&str>,
        hostname: Option<&str>,
    ) -> Result<Self, ShimError> {
        let ifnames = ifnames.map(cstring).transpose()?;
        let hostname = hostname.map(cstring).transpose()?;
        let mut out = ptr::null_mut();
        // SAFETY: store is live, C strings outlive the call.
        call(|err| unsafe {
            skyrl_pg_gloo(
                store.raw(),
                rank as c_int,
                size as c_int,
                millis(timeout),
                ifnames.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                hostname.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
                &mut out,
                err,
            )
        })?;
        Ok(Self {
            raw: out,
            failed: false,
        })
    }

    /// `ProcessGroupNCCL(store, rank, size, Options{timeout})`.
    pub fn nccl(
        store: &StoreHandle,
        rank: usize,
        size: usize,
        timeout: Duration,
    ) -> Result<Self, ShimError> {
        let mut out = ptr::null_mut();
        // SAFETY: store is live.
        call(|err| unsafe {
            skyrl_pg_nccl(
                store.raw(),
                rank as c_int,
                size as c_int,
                millis(timeout),
                &mut out,
                err,
            )
        })?;
        Ok(Self {
            raw: out,
            failed: false,
        })
    }

    /// Records a failure so that drop aborts.
    fn track(&mut self, r: Result<(), ShimError>) -> Result<(), ShimError> {
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    pub fn allreduce(&mut self, t: &mut Tensor, op: c_int) -> Result<(), ShimError> {
        // SAFETY: tch's C_tensor* is an at::Tensor*; the tensor outlives the call.
        let r = call(|err| unsafe { skyrl_pg_allreduce(self.raw, t.as_mut_ptr().cast(), op, err) });
        self.track(r)
    }

    pub fn reduce_scatter(
        &mut self,
        out: &mut Tensor,
        input: &Tensor,
        op: c_int,
    ) -> Result<(), ShimError> {
        // SAFETY: as above; the input is only read.
        let r = call(|err| unsafe {
            skyrl_pg_reduce_scatter(
                self.raw,
                out.as_mut_ptr().cast(),
                input.as_ptr().cast(),
                op,
                err,
            )
        });
        self.track(r)
    }

    pub fn allgather(&mut self, out: &mut Tensor, input: &Tensor) -> Result<(), ShimError> {
        // SAFETY: as above.
        let r = call(|err| unsafe {
            skyrl_pg_allgather(
                self.raw,
                out.as_mut_ptr().cast(),
                input.as_ptr().cast(),
                err,
            )
        });
        self.track(r)
    }

    pub fn broadcast(&mut self, t: &mut Tensor, root: usize) -> Result<(), ShimError> {
        // SAFETY: as above.
        let r = call(|err| unsafe {
            skyrl_pg_broadcast(self.raw, t.as_mut_ptr().cast(), root as c_int, err)
        });
        self.track(r)
    }

    pub fn barrier(&mut self) -> Result<(), ShimError> {
        // SAFETY: self.raw is live.
        let r = call(|err| unsafe { skyrl_pg_barrier(self.raw, err) });
        self.track(r)
    }
}

impl Drop for PgHandle {
    fn drop(&mut self) {
        // SAFETY: we own the handle; the shim swallows exceptions.
        unsafe { skyrl_pg_free(self.raw, self.failed as c_int) }
    }
}

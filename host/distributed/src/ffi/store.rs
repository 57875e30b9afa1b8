//! [`StoreHandle`]: an owned c10d store (TCPStore or PrefixStore).
use std::ffi::c_int;
use std::ptr;
use std::time::Duration;

use super::*;

/// An owned `c10::intrusive_ptr<c10d::Store>` (TCPStore or PrefixStore).
pub(crate) struct StoreHandle(*mut RawStore);

// SAFETY: c10d's TCPStore serialises its operations with an internal mutex
// (`activeOpLock_`) and PrefixStore only forwards to it, so the handle may be
// used and dropped from any thread.
unsafe impl Send for StoreHandle {}
unsafe impl Sync for StoreHandle {}

impl StoreHandle {
    /// Connects to (or, with `is_server`, hosts) a TCPStore.
    pub fn tcp(
        host: &str,
        port: u16,
        world_size: usize,
        is_server: bool,
        timeout: Duration,
    ) -> Result<Self, ShimError> {
        let host = cstring(host)?;
        let mut out = ptr::null_mut();
        let ws = c_int::try_from(world_size).unwrap_or(c_int::MAX);
        // SAFETY: valid C string, out-pointers live for the call.
        call(|err| unsafe {
            skyrl_store_tcp(
                host.as_ptr(),
                port,
                ws,
                is_server as c_int,
                millis(timeout),
                &mut out,
                err,
            )
        })?;
        Ok(Self(out))
    }

    /// `PrefixStore(prefix, self)`.
    pub fn prefixed(&self, prefix: &str) -> Result<Self, ShimError> {
        let prefix = cstring(prefix)?;
        let mut out = ptr::null_mut();
        // SAFETY: self.0 is a live handle; the new one holds its own reference.
        call(|err| unsafe { skyrl_store_prefix(self.0, prefix.as_ptr(), &mut out, err) })?;
        Ok(Self(out))
    }

    /// A new connection to the same server, same prefixes.
    pub fn clone_connection(&self) -> Result<Self, ShimError> {
        let mut out = ptr::null_mut();
        // SAFETY: self.0 is a live handle.
        call(|err| unsafe { skyrl_store_clone(self.0, &mut out, err) })?;
        Ok(Self(out))
    }

    /// Timeout of blocking operations (`get`, connects) on this connection.
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), ShimError> {
        // SAFETY: self.0 is a live handle.
        call(|err| unsafe { skyrl_store_set_timeout(self.0, millis(timeout), err) })
    }

    /// The TCP port of the underlying TCPStore.
    pub fn port(&self) -> Result<u16, ShimError> {
        let mut port = 0u16;
        // SAFETY: self.0 is a live handle.
        call(|err| unsafe { skyrl_store_port(self.0, &mut port, err) })?;
        Ok(port)
    }

    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), ShimError> {
        let key = cstring(key)?;
        // SAFETY: the slice outlives the call; the shim copies it.
        call(|err| unsafe {
            skyrl_store_set(self.0, key.as_ptr(), value.as_ptr(), value.len(), err)
        })
    }

    pub fn get(&self, key: &str) -> Result<Vec<u8>, ShimError> {
        let key = cstring(key)?;
        let mut data: *mut u8 = ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: out-pointers live for the call.
        call(|err| unsafe { skyrl_store_get(self.0, key.as_ptr(), &mut data, &mut len, err) })?;
        // SAFETY: on success the shim returns a malloc'd buffer of `len` bytes.
        let value = unsafe {
            let v = std::slice::from_raw_parts(data, len).to_vec();
            skyrl_c10d_free(data.cast());
            v
        };
        Ok(value)
    }

    pub fn add(&self, key: &str, delta: i64) -> Result<i64, ShimError> {
        let key = cstring(key)?;
        let mut out = 0i64;
        // SAFETY: out-pointer lives for the call.
        call(|err| unsafe { skyrl_store_add(self.0, key.as_ptr(), delta, &mut out, err) })?;
        Ok(out)
    }

    pub fn check(&self, keys: &[&str]) -> Result<bool, ShimError> {
        let owned = keys
            .iter()
            .map(|k| cstring(k))
            .collect::<Result<Vec<_>, _>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|k| k.as_ptr()).collect();
        let mut out: c_int = 0;
        // SAFETY: `ptrs` points into `owned`, both alive for the call.
        call(|err| unsafe { skyrl_store_check(self.0, ptrs.as_ptr(), ptrs.len(), &mut out, err) })?;
        Ok(out != 0)
    }

    pub(super) fn raw(&self) -> *mut RawStore {
        self.0
    }
}

impl Drop for StoreHandle {
    fn drop(&mut self) {
        // SAFETY: we own the handle; the shim swallows destructor exceptions.
        unsafe { skyrl_store_free(self.0) }
    }
}

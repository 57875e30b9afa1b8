//! A SQLite VFS for absolute paths that are taken as they are: SQLite's
//! default (unix) VFS with `xFullPathname` replaced.
//!
//! The unix VFS resolves symlinks by `lstat`-ing every component of a path
//! before opening it. Inside the sandbox each of those is a WASI call that
//! the host answers with `openat2` + `statx` + `close` beneath the granted
//! directory: about 30 system calls per database open, a sixth of a
//! sandboxed episode. The host already resolves every path beneath its grant
//! (symlinks cannot leave it), and the databases are opened `immutable`, so
//! the canonical name SQLite wants (for locks and journals) is never used.
//! Relative paths still go through the unix VFS's own resolution.

use std::ffi::{c_char, c_int, CStr};
use std::sync::OnceLock;

use rusqlite::ffi;

/// The name to pass as `vfs=` in a URI (or to `open_with_flags_and_vfs`).
pub const NAME: &CStr = c"skyrl-direct";

type FullPathname =
    unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *const c_char, c_int, *mut c_char) -> c_int;

/// The default VFS's `xFullPathname` (for relative paths) once this VFS is
/// registered; `None` when it could not be.
static REGISTERED: OnceLock<Option<FullPathname>> = OnceLock::new();

/// Registers the VFS (once per process, so once per sandboxed instance)
/// and returns its name, or `None` when SQLite has no default VFS to build
/// on (then the default is used).
pub fn name() -> Option<&'static CStr> {
    REGISTERED.get_or_init(register).map(|_| NAME)
}

fn register() -> Option<FullPathname> {
    // SAFETY: `sqlite3_vfs_find` returns SQLite's static default VFS or null;
    // copying it keeps every method and its `pAppData`. The copy is leaked,
    // so it outlives every connection, as SQLite requires.
    unsafe {
        if ffi::sqlite3_initialize() != ffi::SQLITE_OK {
            return None;
        }
        let base = ffi::sqlite3_vfs_find(std::ptr::null());
        if base.is_null() {
            return None;
        }
        let base_full_pathname = (*base).xFullPathname?;
        let mut vfs = *base;
        vfs.pNext = std::ptr::null_mut();
        vfs.zName = NAME.as_ptr();
        vfs.xFullPathname = Some(full_pathname);
        let vfs = Box::leak(Box::new(vfs));
        (ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK).then_some(base_full_pathname)
    }
}

/// An absolute path is its own full name; anything else is resolved by the
/// unix VFS as before.
unsafe extern "C" fn full_pathname(
    vfs: *mut ffi::sqlite3_vfs,
    path: *const c_char,
    out_len: c_int,
    out: *mut c_char,
) -> c_int {
    // SAFETY: SQLite passes a NUL-terminated path and an output buffer of
    // `out_len` bytes.
    unsafe {
        let bytes = CStr::from_ptr(path).to_bytes_with_nul();
        if bytes.first() == Some(&b'/') {
            if bytes.len() > out_len as usize {
                return ffi::SQLITE_CANTOPEN;
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast(), out, bytes.len());
            return ffi::SQLITE_OK;
        }
        // Only reached once registered, which needed the default's method.
        match REGISTERED.get().copied().flatten() {
            Some(base) => base(vfs, path, out_len, out),
            None => ffi::SQLITE_CANTOPEN,
        }
    }
}

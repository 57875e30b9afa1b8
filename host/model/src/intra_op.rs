//! Intra-op threads per engine forward: forwards too small to gain from
//! several CPU threads run on one.
//!
//! Waking OpenMP's worker threads costs more than a small product saves. On
//! the 2-vCPU VM with `OMP_WAIT_POLICY=PASSIVE` (one run, libtorch 2.13's
//! MKL): a `[64, 64] x [64, 192]` product takes 22 µs on one thread and
//! 234 µs on two; two threads first win at about 2^24 multiply-adds per
//! product (`[256, 256] x [256, 768]`: 1.25 ms vs 0.92 ms), and a
//! `[1024, 64] x [64, 192]` one still loses (0.34 vs 0.40 ms). Decode steps of
//! small models, or of few sequences, are made of such products.
//!
//! The switch is local to the calling thread: OpenMP's thread-count ICV
//! (`omp_set_num_threads`) and MKL's `MKL_Set_Num_Threads_Local`, both looked
//! up at run time (absent, e.g. in a libtorch without OpenMP or MKL, nothing
//! changes). libtorch's process-wide default (`at::set_num_threads`) is not
//! touched, so a trainer on another thread keeps its threads. Results do not
//! depend on the thread count (the greedy engine tests compare against the
//! static engine, which always uses every thread).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::marker::PhantomData;
use std::sync::OnceLock;

use tch::Device;

use crate::config::ModelConfig;
use crate::model::CausalLm;

/// Below this many multiply-adds in a forward's largest projection, the
/// forward runs on one intra-op thread (see the module docs for the figures).
pub const SINGLE_THREAD_MAX_WORK: i64 = 1 << 24;

type SetThreads = unsafe extern "C" fn(c_int);
type SetThreadsLocal = unsafe extern "C" fn(c_int) -> c_int;
type GetThreads = unsafe extern "C" fn() -> c_int;

/// The thread-local thread-count setters found in the process.
struct Switch {
    omp_set_num_threads: SetThreads,
    omp_get_max_threads: GetThreads,
    mkl_set_num_threads_local: Option<SetThreadsLocal>,
}

extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// `dlsym(RTLD_DEFAULT, name)` (glibc's RTLD_DEFAULT is the null handle).
fn lookup(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with the default handle and a NUL-terminated name only
    // reads the loaded objects' symbol tables.
    unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) }
}

fn switch() -> Option<&'static Switch> {
    static SWITCH: OnceLock<Option<Switch>> = OnceLock::new();
    SWITCH
        .get_or_init(|| {
            let set = lookup(c"omp_set_num_threads");
            let get = lookup(c"omp_get_max_threads");
            if set.is_null() || get.is_null() {
                return None;
            }
            // mkl.h maps the C name to this one; `mkl_set_num_threads_local` itself
            // is the Fortran entry point (it takes a pointer).
            let mkl = lookup(c"MKL_Set_Num_Threads_Local");
            // SAFETY: these are the C functions of those names in libgomp and
            // MKL (linked into libtorch_cpu), with these signatures.
            unsafe {
                Some(Switch {
                    omp_set_num_threads: std::mem::transmute::<*mut c_void, SetThreads>(set),
                    omp_get_max_threads: std::mem::transmute::<*mut c_void, GetThreads>(get),
                    mkl_set_num_threads_local: (!mkl.is_null())
                        .then(|| std::mem::transmute::<*mut c_void, SetThreadsLocal>(mkl)),
                })
            }
        })
        .as_ref()
}

/// Multiply-adds of the largest projection when `rows` token positions go
/// through `config`'s model and `head_rows` of them through its LM head
/// (prefill runs the head on last positions only).
pub fn projection_work(config: &ModelConfig, rows: i64, head_rows: i64) -> i64 {
    let body = config
        .intermediate_size
        .max(config.num_attention_heads * config.head_dim());
    let body_work = rows.saturating_mul(config.hidden_size).saturating_mul(body);
    let head_work = head_rows
        .saturating_mul(config.hidden_size)
        .saturating_mul(config.vocab_size);
    body_work.max(head_work)
}

/// Runs `forward` of `rows` positions (`head_rows` of them through the LM
/// head) on one intra-op thread when its largest projection is below
/// [`SINGLE_THREAD_MAX_WORK`], on the thread's usual count otherwise.
pub fn run_sized<T>(model: &CausalLm, rows: i64, head_rows: i64, forward: impl FnOnce() -> T) -> T {
    let work = projection_work(model.config(), rows, head_rows);
    let _threads = SingleThread::for_work(work, model.device());
    forward()
}

/// While alive, the creating thread runs torch ops on one thread; dropping it
/// restores the thread's previous counts.
#[must_use = "the single-thread setting lasts as long as the guard"]
pub struct SingleThread {
    switch: &'static Switch,
    omp_threads: c_int,
    mkl_threads: Option<c_int>,
    /// The counts belong to the creating thread: the guard must stay there.
    _not_send: PhantomData<*const ()>,
}

impl SingleThread {
    /// One thread for a forward whose largest projection does `work`
    /// multiply-adds on `device`, when that is below
    /// [`SINGLE_THREAD_MAX_WORK`]; `None` (nothing changes) on GPUs, for
    /// larger work, when the thread already runs one, or without OpenMP.
    pub fn for_work(work: i64, device: Device) -> Option<SingleThread> {
        if device != Device::Cpu || work >= SINGLE_THREAD_MAX_WORK {
            return None;
        }
        let switch = switch()?;
        // libtorch sets a thread's counts from its global default at the
        // thread's first parallel op; do that first, so it cannot undo ours.
        let _ = tch::get_num_threads();
        // SAFETY: plain calls of the OpenMP / MKL C API on this thread.
        unsafe {
            let omp_threads = (switch.omp_get_max_threads)();
            if omp_threads <= 1 {
                return None;
            }
            (switch.omp_set_num_threads)(1);
            let mkl_threads = switch.mkl_set_num_threads_local.map(|f| f(1));
            Some(SingleThread {
                switch,
                omp_threads,
                mkl_threads,
                _not_send: PhantomData,
            })
        }
    }
}

impl Drop for SingleThread {
    fn drop(&mut self) {
        // SAFETY: as in `for_work`, on the same thread (the guard is !Send).
        unsafe {
            (self.switch.omp_set_num_threads)(self.omp_threads);
            if let (Some(f), Some(n)) = (self.switch.mkl_set_num_threads_local, self.mkl_threads) {
                f(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_work_runs_on_one_thread_and_restores() {
        // A fresh thread, so the setting of other tests' threads is not read.
        std::thread::spawn(|| {
            tch::set_num_threads(2);
            assert_eq!(tch::get_num_threads(), 2);
            {
                let guard = SingleThread::for_work(1000, Device::Cpu);
                assert!(guard.is_some(), "libgomp is loaded with libtorch");
                assert_eq!(tch::get_num_threads(), 1);
                // Another thread keeps its own count meanwhile.
                let other = std::thread::spawn(|| {
                    tch::set_num_threads(2);
                    tch::get_num_threads()
                })
                .join()
                .unwrap();
                assert_eq!(other, 2);
            }
            assert_eq!(tch::get_num_threads(), 2);
            assert!(SingleThread::for_work(SINGLE_THREAD_MAX_WORK, Device::Cpu).is_none());
            assert!(SingleThread::for_work(1000, Device::Cuda(0)).is_none());
            assert_eq!(tch::get_num_threads(), 2);
        })
        .join()
        .unwrap();
    }
}

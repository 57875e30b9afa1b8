//! PyTorch's c10d (the engine under DDP/FSDP) reached from Rust through a
//! small C++ shim: TCPStore rendezvous from the standard launcher variables,
//! Gloo (CPU) and NCCL (GPU) process groups, collectives on `tch::Tensor`s,
//! and dead-rank detection. It knows nothing about models, plugins or
//! training.
//!
//! ```no_run
//! use std::time::Duration;
//! use skyrl_distributed::{Backend, LaunchEnv, ProcessGroup, ReduceOp};
//!
//! # fn main() -> Result<(), skyrl_distributed::DistError> {
//! let env = LaunchEnv::from_env()?.unwrap_or_else(LaunchEnv::single);
//! let pg = ProcessGroup::init(&env, Backend::Gloo, Duration::from_secs(60))?;
//! let mut grad = tch::Tensor::ones([4], (tch::Kind::Float, tch::Device::Cpu));
//! pg.all_reduce(&mut grad, ReduceOp::Avg)?;
//! # Ok(()) }
//! ```
//!
//! Modules: [`launch`] reads torchrun/SLURM variables; [`group`] creates the
//! store and backend; the collectives, the byte messages and the store
//! operations are methods of [`ProcessGroup`]; [`watchdog`] names dead ranks
//! when a collective fails. The C++ side is `shim/c10d_shim.cpp`.

mod collectives;
mod control;
mod error;
mod ffi;
pub mod group;
pub mod launch;
pub mod memory;
pub mod watchdog;

pub use error::DistError;
pub use group::{Backend, ProcessGroup, ReduceOp};
pub use launch::{LaunchEnv, Launcher};

/// Result with [`DistError`].
pub type Result<T> = std::result::Result<T, DistError>;

//! The NCCL weight-update group: the trainer is rank 0, every inference
//! server joins as rank `1 + i`. [`group`] holds the membership both sides
//! share (the server joins through `/init_weights_update_group`); [`sender`]
//! is the trainer's side of a sync.

pub mod group;
pub mod sender;

pub use group::*;
pub use sender::NcclSender;

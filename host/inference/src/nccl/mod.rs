//! The NCCL weight-update group: the trainer is rank 0, every inference
//! server joins as rank `1 + i`. [`group`] holds the membership both sides
//! share (the server joins through `/init_weights_update_group`); the
//! trainer's side of a sync is `weight_sync::nccl`.

pub mod group;

pub use group::*;

//! The NCCL weight-update group: the trainer is rank 0, every inference
//! server joins as rank `1 + i`. [`group`] holds the membership both sides
//! share (the server joins through `/init_weights_update_group`, with the
//! unique id in the request, or vLLM's `/init_weight_transfer_engine`, with a
//! [`stateless`] rendezvous over a torch [`store`]); the trainer's side of a
//! sync is `weight_sync::nccl`.

pub mod group;
pub mod stateless;
pub mod store;

pub use group::*;

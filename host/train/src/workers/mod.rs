//! The roles of an RL step as workers, each owning its model and what goes
//! with it (skyrl's `workers/`): [`PolicyWorker`] (the trained model, its
//! optimizer and checkpoint part) and [`RefWorker`] (the frozen reference).
//! The trainer loop only sequences calls into them; how a role is
//! distributed lives inside it.

pub mod critic;
pub mod forward;
pub mod memory;
pub mod policy;
pub mod reference;

pub use crate::config::Strategy;
pub use critic::{CriticReport, CriticSettings, CriticSpec, CriticWorker};
pub use memory::MemoryPlan;
pub use policy::{
    MemoryReport, OptimizerState, PolicySettings, PolicyWorker, PpoBatch, PpoReport, PpoSettings,
    SftStepReport,
};
pub use reference::RefWorker;

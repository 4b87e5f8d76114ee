//! Completion: how the application learns that requests have finished.
//!
//! - [`Fence`]: a counter raised once every request enqueued before a signal
//!   has finished.
//! - [`StatusArray`]: per-entry Ok or the first failure, in enqueue order.
//! - [`ErrorRecord`]: the number of failures and the first one.
//! - `Tracker` (internal): the per-queue bookkeeping that turns request completions
//!   (which arrive in any order) into those in-order guarantees.

mod error_record;
mod fence;
pub(crate) mod gpu_poll;
mod request_error;
mod status;
mod tracker;

pub use error_record::{ErrorRecord, RequestFailure};
pub use fence::{Fence, FenceReached};
pub use request_error::{BufferProblem, GpuDecodeFailure, RequestError, SourceKind, SourceProblem};
pub use status::{StatusArray, StatusEntry};
pub(crate) use tracker::{Fired, Marker, Outcome, Tracker};

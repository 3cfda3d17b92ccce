//! The outlet's integration suite: paging invariants (OUT-4, OUT-7), archiving and paging
//! through resources (OUT-3, OUT-5, OUT-6, CM-7), and snapshots of what the model reads.

mod archive;
mod bytes_decide;
mod common;
mod paging;
mod snapshots;

//! shale-client: the client side of a replicated Shale cluster (`crates/shale-server`).
//!
//! - [`pb`]: the gRPC protocol (`proto/shale.proto`), messages, clients and the services'
//!   traits, which the server implements;
//! - [`codec`]: the decoder every service and client uses, which counts a message's
//!   fields before decoding it;
//! - [`wire`]: metadata entries, size limits, connections;
//! - [`Client`]: follows the leader, retries on a lost leader, and sends writes in a
//!   session so that each applies exactly once.
//!
//! It links no storage engine: a program that only talks to a cluster needs nothing else.
//! docs/replication.md ("Transport and API", "Exactly-once writes") is the design.

#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![allow(
    clippy::result_large_err,
    reason = "calls answer tonic's Status, whose size is not ours to choose"
)]

pub mod client;
pub mod codec;
pub mod error;
pub mod pb;
pub mod wire;

pub use client::{CasOutcome, Client, MOVE_CATCH_UP};
pub use error::ClientError;

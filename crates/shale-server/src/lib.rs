//! shale-server: Shale replicated by Raft. One Raft group ([openraft], pinned in
//! Cargo.toml) whose log store and state machine are Shale databases, served over gRPC
//! (tonic) to replicas and clients. docs/replication.md is the design; docs/format.md
//! ("Replication") every byte layout.
//!
//! The parts, each in its own module:
//! - [`format`](mod@format): every record, key and frame, encode and decode side by side;
//! - [`log_store`] and [`state_machine`]: openraft's storage traits on Shale;
//! - [`snapshot`]: snapshot files, written and read frame by frame;
//! - [`network`]: the Raft RPCs to peers; [`service`]: the gRPC services a node serves,
//!   with the `proposer` that puts concurrent client writes into one log entry, and
//!   `status`, the statuses a client's call ends with;
//!   [`access`]: client tokens and roles, and the replicas' credential;
//! - [`limits`]: connections, client calls in flight and their time, bounded at the door;
//! - [`health`]: the gRPC health service's statuses; [`metrics`]: Prometheus metrics over
//!   HTTP; [`logging`]: the log a person reads;
//! - [`server`]: one node (stores, Raft, services); [`restore`]: a new cluster from a
//!   backup.
//!
//! The protocol, its codec and the Rust client are `shale-client`'s; [`pb`] and [`codec`]
//! are its modules, re-exported.
//!
//! The server uses the engine's public API, and `shale::inspect::codec` for the encodings its
//! frames share with the engine's files (STYLE.md: features sit on top).

// Bytes from disk and from the network never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![allow(
    clippy::result_large_err,
    reason = "gRPC handlers answer tonic's Status and the Raft network openraft's RPCError; their sizes are not ours to choose"
)]

pub mod access;
pub mod command;
mod convert;
pub mod error;
pub mod format;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod group;
mod growth;
pub mod health;
mod ids;
pub mod limits;
pub mod log_store;
pub mod logging;
pub mod metrics;
pub mod network;
mod proposer;
pub mod restore;
pub mod retention;
pub mod server;
pub mod service;
pub mod shard;
pub mod snapshot;
pub mod state_machine;
mod status;
pub mod time_spent;
pub mod tls;
mod types;

pub use command::{Command, Op, Response};
pub use error::{Error, Result};
pub use ids::{GroupId, NodeId, DEFAULT_GROUP};
pub use server::{Server, ServerConfig};
pub use shale_client::{codec, pb};
pub use types::{Entry, Raft, TypeConfig};

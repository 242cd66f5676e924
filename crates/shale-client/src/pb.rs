//! The generated protobuf and gRPC code (`proto/shale.proto`): messages, clients, and the
//! services' traits. Log entries and snapshot frames travel as the bytes the server keeps
//! on disk (docs/format.md, "Replication").

#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::indexing_slicing
)]
#![allow(missing_docs)]

tonic::include_proto!("shale.v1");

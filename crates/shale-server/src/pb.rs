//! The generated protobuf and gRPC code (`proto/shale.proto`), and the conversions between
//! its messages and openraft's types. Log entries travel as log entry records
//! ([`crate::format::encode_entry`]): one encoder for the disk and the wire.

#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::indexing_slicing
)]
#![allow(missing_docs)]

tonic::include_proto!("shale.v1");

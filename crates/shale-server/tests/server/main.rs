//! The server's integration tests, one module per subject, in one test binary. One
//! module's tests: `cargo test -p shale-server --test server <module>::`. Two other
//! binaries stand apart: `node_flood` measures a process's memory and a client's latency
//! with nothing else running, and `vote_power_loss` is small enough for
//! `scripts/chaos.sh` to build for its negative controls alone.

mod cluster_backup;
mod cluster_embed_once;
mod cluster_exactly_once;
mod cluster_failover;
mod cluster_groups;
mod cluster_identity;
mod cluster_move;
mod cluster_read_consistency;
mod cluster_rolling_restart;
mod cluster_routing;
mod cluster_search;
mod cluster_shard_search;
mod cluster_snapshot_catch_up;
mod cluster_split;
mod cluster_tls;
mod common;
#[cfg(feature = "fuzzing")]
mod fuzz_smoke;
mod node_observability;
mod raft_rpc_checks;
mod shard_refusals;
mod storage_suite;

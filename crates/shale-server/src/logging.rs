//! The server's log: one plain line per event on stderr, at INFO for this crate and WARN
//! for its dependencies unless `SHALE_LOG` says otherwise (`tracing_subscriber`'s target
//! syntax, e.g. `SHALE_LOG=debug` or `SHALE_LOG=warn,shale_server=debug,openraft=info`).
//! Colour codes only when stderr is a terminal, so that a log written to a file reads as
//! text.
//!
//! openraft logs each failed RPC to a peer, at WARN and ERROR, on every retry: ten lines a
//! second for a peer that is down or still starting. Those events are dropped here, and
//! [`crate::network::Reachability`] logs each change of a peer's reachability once
//! instead. They are recognized by their call sites in openraft (pinned exactly in
//! Cargo.toml), listed in [`OPENRAFT_NOISE`] with one more that is routine in an election;
//! `tests/server/node_observability.rs` checks that a node whose peers are down or starting logs
//! no warning.

use std::io::IsTerminal;
use std::str::FromStr;

use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// What is logged when `SHALE_LOG` is not set.
pub const DEFAULT_DIRECTIVES: &str = "warn,shale_server=info";

/// The call sites in openraft 0.9.25 that report one failed RPC to a peer, or a routine
/// event of an election, at WARN or ERROR: (module, file ending, line).
pub const OPENRAFT_NOISE: [(&str, &str, u32); 9] = [
    // "error replication to target=N": every failed replication RPC (a storage error is
    // logged again at ERROR, and kept).
    ("openraft::replication", "src/replication/mod.rs", 258),
    // "RPCError": the same failure again, at ERROR.
    ("openraft::replication", "src/replication/mod.rs", 284),
    // "backoff mode: drain events": replication to an unreachable peer pauses.
    ("openraft::replication", "src/replication/mod.rs", 596),
    // "update progress error": the leader notes a failed append or heartbeat...
    (
        "openraft::engine::handler::replication_handler",
        "src/engine/handler/replication_handler/mod.rs",
        287,
    ),
    // ... and "heartbeat error" for a heartbeat.
    (
        "openraft::engine::handler::replication_handler",
        "src/engine/handler/replication_handler/mod.rs",
        294,
    ),
    // "timeout while confirming leadership for read request".
    ("openraft::core::raft_core", "src/core/raft_core.rs", 383),
    // A vote request that timed out.
    ("openraft::core::raft_core", "src/core/raft_core.rs", 1099),
    // A vote request that failed.
    ("openraft::core::raft_core", "src/core/raft_core.rs", 1112),
    // "A message will be ignored because vote changed": a reply that arrives after this
    // node's vote moved on, as replies to a lost election do.
    ("openraft::core::raft_core", "src/core/raft_core.rs", 1553),
];

/// True for an event from one of [`OPENRAFT_NOISE`].
pub fn is_openraft_noise(meta: &Metadata<'_>) -> bool {
    let (Some(file), Some(line)) = (meta.file(), meta.line()) else {
        return false;
    };
    OPENRAFT_NOISE
        .iter()
        .any(|&(module, ending, l)| l == line && meta.target() == module && file.ends_with(ending))
}

/// The directives' targets, less [`OPENRAFT_NOISE`]. Every decision is made once per call
/// site (`callsite_enabled`) and the filter passes on the directives' most verbose level,
/// so that the many `debug` and `trace` spans in openraft's hot paths stay disabled at
/// their call sites instead of being checked each time they run.
struct LogFilter {
    targets: Targets,
}

impl<S> Filter<S> for LogFilter {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        !is_openraft_noise(meta) && Filter::<S>::enabled(&self.targets, meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if is_openraft_noise(meta) {
            Interest::never()
        } else {
            Filter::<S>::callsite_enabled(&self.targets, meta)
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Filter::<S>::max_level_hint(&self.targets)
    }
}

/// Log to stderr as the module doc says, filtered by `directives` (the default if `None`).
///
/// # Errors
/// `directives` that do not parse, or a global subscriber set already.
pub fn init(directives: Option<&str>) -> Result<(), String> {
    let targets = Targets::from_str(directives.unwrap_or(DEFAULT_DIRECTIVES))
        .map_err(|e| format!("log directives {directives:?}: {e}"))?;
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .with_filter(LogFilter { targets });
    tracing_subscriber::registry()
        .with(lines)
        .try_init()
        .map_err(|e| format!("logging: {e}"))
}

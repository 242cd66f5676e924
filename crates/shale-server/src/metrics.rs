//! Metrics in the OpenMetrics text format (which Prometheus scrapes), served at `GET /metrics` on
//! [`crate::ServerConfig::metrics_listen`] (plain HTTP/1.1; docs/replication.md,
//! "Metrics", lists every series).
//!
//! Two sources: [`RequestLayer`] counts and times every gRPC request as it passes (a tower
//! layer around all the node's services), and [`NodeCollector`] reads the node's state
//! when scraped: each group's Raft metrics (labelled `group`), each peer's [`Link`], and
//! the counters of the Shale databases (the groups' state machines, summed, and the log
//! store).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use openraft::ServerState;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::group::{Group, Groups};
use crate::limits::Refusals;
use crate::network::{Link, Reachability, APPENDS_CUT};
use crate::state_machine::EmbeddingCounts;

/// Every gRPC method a node serves, by request path; any other path counts as `other`.
pub const METHODS: [&str; 25] = [
    "/shale.v1.Raft/AppendEntries",
    "/shale.v1.Raft/Vote",
    "/shale.v1.Raft/InstallSnapshot",
    "/shale.v1.Raft/TimeoutNow",
    "/shale.v1.Raft/ShardCorpus",
    "/shale.v1.Raft/SearchShard",
    "/shale.v1.Kv/Get",
    "/shale.v1.Kv/Put",
    "/shale.v1.Kv/Delete",
    "/shale.v1.Kv/Batch",
    "/shale.v1.Kv/CompareAndSet",
    "/shale.v1.Kv/Scan",
    "/shale.v1.Kv/DefineIndex",
    "/shale.v1.Kv/Search",
    "/shale.v1.Kv/Status",
    "/shale.v1.Kv/AddLearner",
    "/shale.v1.Kv/ChangeVoters",
    "/shale.v1.Kv/SetAddress",
    "/shale.v1.Kv/TransferLeader",
    "/shale.v1.Kv/OpenSession",
    "/shale.v1.Kv/Backup",
    "/shale.v1.Kv/ShardMap",
    "/shale.v1.Kv/Split",
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
];

type RequestLabels = [(&'static str, &'static str); 2];
type MethodLabel = [(&'static str, &'static str); 1];

/// The node's metrics: the request series it records, and its registry for the rest.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<MethodLabel, Histogram, fn() -> Histogram>,
}

fn latency_histogram() -> Histogram {
    // 50 µs to about 26 s, doubling.
    Histogram::new(exponential_buckets(50e-6, 2.0, 20))
}

impl Metrics {
    /// Request series, and `node`'s state read at each scrape.
    pub fn new(node: NodeCollector) -> Metrics {
        let mut registry = Registry::with_prefix("shale");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<MethodLabel, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "grpc_requests",
            "gRPC requests answered, by method and status code",
            requests.clone(),
        );
        registry.register(
            "grpc_request_duration_seconds",
            "Time from a gRPC request's arrival to its response's headers, by method",
            latency.clone(),
        );
        registry.register_collector(Box::new(node));
        Metrics {
            registry,
            requests,
            latency,
        }
    }

    fn record(&self, method: &'static str, code: &'static str, seconds: f64) {
        self.requests
            .get_or_create(&[("method", method), ("code", code)])
            .inc();
        self.latency
            .get_or_create(&[("method", method)])
            .observe(seconds);
    }

    /// Everything, in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String fails only if a collector fails, and ours do not.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!("encoding metrics: {e}");
        }
        out
    }
}

/// The name of a gRPC status code, as the `code` label.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The tower layer that records each request in [`Metrics`].
#[derive(Clone, Debug)]
pub struct RequestLayer(pub Arc<Metrics>);

impl<S> tower::Layer<S> for RequestLayer {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Recorded<S> {
        Recorded {
            inner,
            metrics: Arc::clone(&self.0),
        }
    }
}

/// A service whose requests are recorded.
#[derive(Clone, Debug)]
pub struct Recorded<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for Recorded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<RB>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let path = req.uri().path();
        let method = METHODS
            .iter()
            .find(|&&m| m == path)
            .copied()
            .unwrap_or("other");
        let metrics = Arc::clone(&self.metrics);
        let start = Instant::now();
        let response = self.inner.call(req);
        Box::pin(async move {
            let response = response.await;
            // A handler's error is sent as a response of headers only, its status among
            // them; a response with a body carries its status in trailers and counts as
            // OK (every method answers one message, sent only on success).
            let code = match &response {
                Ok(r) => r
                    .headers()
                    .get("grpc-status")
                    .map_or(tonic::Code::Ok, |v| tonic::Code::from_bytes(v.as_bytes())),
                Err(_) => tonic::Code::Internal,
            };
            metrics.record(method, code_name(code), start.elapsed().as_secs_f64());
            response
        })
    }
}

/// The node's state, read at each scrape.
pub struct NodeCollector {
    pub groups: Groups,
    pub reachability: Arc<Reachability>,
    pub refusals: Arc<Refusals>,
}

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCollector").finish_non_exhaustive()
    }
}

/// The gauges of engine counters that are levels, not running totals.
const ENGINE_GAUGES: [&str; 5] = [
    "block_cache_usage_bytes",
    "block_cache_capacity_bytes",
    "pinned_table_metadata_bytes",
    "open_tables",
    "rate_limit_bytes_per_sec",
];

fn gauge<L: prometheus_client::encoding::EncodeLabelSet>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: &[(L, i64)],
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(*value).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

fn index(id: Option<u64>) -> i64 {
    id.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX))
}

fn level(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

fn counter<N: prometheus_client::encoding::EncodeCounterValue + Copy>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error>
where
    ConstCounter<N>: EncodeMetric,
{
    ConstCounter::new(value).encode(encoder.encode_descriptor(
        name,
        help,
        None,
        MetricType::Counter,
    )?)
}

/// A series' labels: each a name and a value.
type Labels = Vec<(&'static str, String)>;

/// One gauge of the node's state: its name, its help, and its series.
struct Gauge {
    name: &'static str,
    help: &'static str,
    series: Vec<(Labels, i64)>,
}

impl Gauge {
    /// A gauge of one series without labels.
    fn one(name: &'static str, help: &'static str, value: i64) -> Gauge {
        Gauge {
            name,
            help,
            series: vec![(Vec::new(), value)],
        }
    }

    /// The gauge with `group` first among each series' labels.
    fn of_group(mut self, group: u64) -> Gauge {
        for (labels, _) in &mut self.series {
            labels.insert(0, ("group", group.to_string()));
        }
        self
    }

    /// Add the gauge's series to the gauge of its name in `gauges`, or add it.
    fn merge_into(self, gauges: &mut Vec<Gauge>) {
        match gauges.iter_mut().find(|g| g.name == self.name) {
            Some(g) => g.series.extend(self.series),
            None => gauges.push(self),
        }
    }

    /// A gauge of one series a peer, labelled `peer`.
    fn by_peer(
        name: &'static str,
        help: &'static str,
        peers: impl Iterator<Item = (u64, i64)>,
    ) -> Gauge {
        Gauge {
            name,
            help,
            series: peers
                .map(|(id, v)| (vec![("peer", id.to_string())], v))
                .collect(),
        }
    }
}

/// The gauges of Raft's metrics, in the order they are served.
fn raft_gauges(m: &openraft::RaftMetrics<crate::NodeId, openraft::BasicNode>) -> Vec<Gauge> {
    let states = [
        (ServerState::Leader, "leader"),
        (ServerState::Follower, "follower"),
        (ServerState::Candidate, "candidate"),
        (ServerState::Learner, "learner"),
        (ServerState::Shutdown, "shutdown"),
    ];
    let membership = m.membership_config.membership();
    let mut gauges = vec![
        Gauge::one("raft_term", "The current Raft term", level(m.current_term)),
        Gauge::one(
            "raft_leader",
            "The leader this node knows of (-1: none)",
            m.current_leader
                .map_or(-1, |l| i64::try_from(l).unwrap_or(-1)),
        ),
        Gauge {
            name: "raft_state",
            help: "1 for this node's Raft role",
            series: states
                .iter()
                .map(|(s, name)| (vec![("state", name.to_string())], i64::from(m.state == *s)))
                .collect(),
        },
        Gauge::one(
            "raft_running",
            "1 while Raft runs (0 after a fatal error)",
            i64::from(m.running_state.is_ok()),
        ),
        Gauge::one(
            "raft_last_log_index",
            "The last log index (-1: empty log)",
            index(m.last_log_index),
        ),
        Gauge::one(
            "raft_applied_index",
            "The last index applied to the state machine",
            index(m.last_applied.map(|l| l.index)),
        ),
        Gauge::one(
            "raft_snapshot_index",
            "The last index in the current snapshot",
            index(m.snapshot.map(|l| l.index)),
        ),
        Gauge::one(
            "raft_purged_index",
            "The last index purged from the log",
            index(m.purged.map(|l| l.index)),
        ),
        Gauge::one(
            "raft_voters",
            "Voters in the membership this node holds",
            level(membership.voter_ids().count()),
        ),
        Gauge::one(
            "raft_learners",
            "Learners in the membership this node holds",
            level(membership.learner_ids().count()),
        ),
    ];
    gauges.extend(leader_gauges(m));
    gauges
}

/// The gauges only a leader has: the time since a quorum acknowledged it, and how far
/// each peer's log is behind.
fn leader_gauges(m: &openraft::RaftMetrics<crate::NodeId, openraft::BasicNode>) -> Vec<Gauge> {
    let mut gauges = Vec::new();
    if let Some(ms) = m.millis_since_quorum_ack {
        gauges.push(Gauge::one(
            "raft_millis_since_quorum_ack",
            "On the leader: milliseconds since a quorum last acknowledged it",
            level(ms),
        ));
    }
    if let (Some(replication), Some(last)) = (&m.replication, m.last_log_index) {
        let lag = replication
            .iter()
            .filter(|(&id, _)| id != m.id)
            .map(|(id, matched)| {
                let matched = matched.map_or(0, |l| l.index + 1);
                (*id, level(last.saturating_add(1).saturating_sub(matched)))
            });
        gauges.push(Gauge::by_peer(
            "raft_replication_lag_entries",
            "On the leader: entries each peer's log lacks",
            lag,
        ));
    }
    gauges
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let groups = self.groups();
        let mut gauges = Vec::new();
        for g in &groups {
            let m = g.raft.metrics().borrow().clone();
            for gauge in raft_gauges(&m) {
                gauge.of_group(g.id).merge_into(&mut gauges);
            }
        }
        gauges.push(Gauge::by_peer(
            "peer_reachable",
            "1 if this node's last RPC to the peer was answered",
            (self.reachability.links().into_iter())
                .map(|(id, link)| (id, i64::from(link == Link::Reachable))),
        ));
        gauges.push(Gauge {
            name: "sessions_open",
            help: "Client sessions open (the most recently used are kept)",
            series: (groups.iter())
                .map(|g| {
                    (
                        vec![("group", g.id.to_string())],
                        level(g.sm.sessions_open()),
                    )
                })
                .collect(),
        });
        for g in gauges {
            gauge(&mut encoder, g.name, g.help, &g.series)?;
        }
        for (name, help, count) in self.refusal_counts() {
            counter(&mut encoder, name, help, count)?;
        }
        encode_time_spent(&mut encoder, &groups)?;
        for (name, help, count) in embedding_counts(&groups) {
            counter(&mut encoder, name, help, count)?;
        }
        encode_engines(&mut encoder, &groups)
    }
}

impl NodeCollector {
    /// The node's groups, by id.
    fn groups(&self) -> Vec<Group> {
        (self.groups.ids().into_iter())
            .filter_map(|id| self.groups.get(id))
            .collect()
    }

    /// The counters of work cut or refused at the door: name, help, count.
    fn refusal_counts(&self) -> [(&'static str, &'static str, u64); 5] {
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        [
            (
                "raft_appends_cut",
                "AppendEntries requests cut to fit the size bounds",
                load(&APPENDS_CUT),
            ),
            (
                "connections_refused",
                "Connections closed as accepted: the node held its most",
                load(&self.refusals.connections),
            ),
            (
                "client_calls_refused",
                "Client calls answered RESOURCE_EXHAUSTED: the node served its most",
                load(&self.refusals.calls),
            ),
            (
                "client_calls_timed_out",
                "Client calls cut off at the node's longest call time",
                load(&self.refusals.calls_timed_out),
            ),
            (
                "accept_errors",
                "Accept errors of the process's own (out of file descriptors or memory)",
                load(&self.refusals.accept_errors),
            ),
        ]
    }
}

/// `<name>` and `<name>_seconds` for each kind of work whose time is counted, over the
/// node's groups.
fn encode_time_spent(
    encoder: &mut DescriptorEncoder<'_>,
    groups: &[Group],
) -> Result<(), std::fmt::Error> {
    let spent = [
        (
            "raft_purge_waits",
            "Log purges that waited, in Raft's loop, for a durable snapshot",
            groups
                .iter()
                .map(|g| g.log.purge_waits())
                .collect::<Vec<_>>(),
        ),
        (
            "snapshot_writes",
            "Received snapshots written into a new state machine generation",
            groups.iter().map(|g| g.sm.snapshot_writes()).collect(),
        ),
    ];
    for (name, help, spent) in spent {
        let count: u64 = spent.iter().map(|s| s.count()).sum();
        let seconds: f64 = spent.iter().map(|s| s.total().as_secs_f64()).sum();
        counter(encoder, name, help, count)?;
        let name = format!("{name}_seconds");
        let help = format!("{help}: seconds in all");
        counter(encoder, &name, &help, seconds)?;
    }
    Ok(())
}

/// The counters of texts embedded over the node's groups, by where their vectors came
/// from: name, help, count.
fn embedding_counts(groups: &[Group]) -> [(&'static str, &'static str, u64); 3] {
    let embedded =
        groups
            .iter()
            .map(|g| g.sm.embeddings())
            .fold(EmbeddingCounts::default(), |a, b| EmbeddingCounts {
                from_log: a.from_log + b.from_log,
                by_model: a.by_model + b.by_model,
                proposed: a.proposed + b.proposed,
            });
    [
        (
            "embeddings_from_log",
            "Texts this node's indexes took the leader's vector for from the log",
            embedded.from_log,
        ),
        (
            "embeddings_by_model",
            "Texts this node's indexes ran the model for",
            embedded.by_model,
        ),
        (
            "embeddings_proposed",
            "Texts this node embedded as the leader, for the log",
            embedded.proposed,
        ),
    ]
}

/// `shale_engine_<counter>{store="state"|"log"}` for every engine counter, the state
/// machines' summed over the node's groups.
fn encode_engines(
    encoder: &mut DescriptorEncoder<'_>,
    groups: &[Group],
) -> Result<(), std::fmt::Error> {
    let Some(first) = groups.first() else {
        return Ok(());
    };
    let mut state = first.sm.db().stats().counters();
    for g in groups.iter().skip(1) {
        for ((_, sum), (_, v)) in state.iter_mut().zip(g.sm.db().stats().counters()) {
            *sum = sum.saturating_add(v);
        }
    }
    let log = first.log.stats().counters();
    for ((name, s), (_, l)) in state.into_iter().zip(log) {
        let labels = |store| [("store", store)];
        let series = format!("engine_{name}");
        if ENGINE_GAUGES.contains(&name) {
            let v = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
            gauge(
                encoder,
                &series,
                "An engine gauge (see StatsSnapshot)",
                &[(labels("state"), v(s)), (labels("log"), v(l))],
            )?;
        } else {
            let mut metric = encoder.encode_descriptor(
                &series,
                "An engine counter (see StatsSnapshot)",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(s).encode(metric.encode_family(&labels("state"))?)?;
            ConstCounter::new(l).encode(metric.encode_family(&labels("log"))?)?;
        }
    }
    Ok(())
}

/// Serve `GET /metrics` on `listener` until `stop` resolves.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = Arc::clone(&metrics);
            async move {
                (
                    [(
                        http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    metrics.render(),
                )
            }
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
}

/// The address a metrics listener was bound to, for [`crate::Server::metrics_addr`].
pub(crate) fn local_addr(listener: &TcpListener) -> crate::Result<SocketAddr> {
    listener
        .local_addr()
        .map_err(|e| crate::Error::Transport(format!("metrics address: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`METHODS`] names every method of `proto/shale.proto`, and the health service's.
    #[test]
    fn every_method_has_its_own_label() {
        let proto = include_str!("../../shale-client/proto/shale.proto");
        let mut service = "";
        let mut expected = vec![
            "/grpc.health.v1.Health/Check".to_string(),
            "/grpc.health.v1.Health/Watch".to_string(),
        ];
        for line in proto.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("service ") {
                service = rest.split_whitespace().next().unwrap_or_default();
            } else if let Some(rest) = line.strip_prefix("rpc ") {
                let method = rest.split('(').next().unwrap_or_default().trim();
                expected.push(format!("/shale.v1.{service}/{method}"));
            }
        }
        let mut listed: Vec<String> = METHODS.iter().map(ToString::to_string).collect();
        expected.sort();
        listed.sort();
        assert_eq!(listed, expected);
    }

    #[test]
    fn codes_are_named_as_grpc_names_them() {
        assert_eq!(code_name(tonic::Code::Ok), "OK");
        assert_eq!(code_name(tonic::Code::from_i32(8)), "RESOURCE_EXHAUSTED");
        assert_eq!(code_name(tonic::Code::from_i32(16)), "UNAUTHENTICATED");
    }
}

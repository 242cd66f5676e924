//! Power loss in an in-process cluster whose replicas live on Shale's power-loss file
//! system (`MemFs`): a replica that granted a vote, lost power and came back must never
//! grant a lower one; a replica that lost the unsynced tail of its applies must apply
//! those entries again from its log; and a whole cluster that loses power at once, while
//! it builds snapshots, must come back with every write it acknowledged (the second and
//! third tests, at the end).
//!
//! openraft 0.9 names a leader by (term, node id), so two candidates of one term are
//! ordered, and a voter grants only votes at least as high as the one it holds. Election
//! safety then reads: a leader elected after another carries a higher leader id (any two
//! quorums share a voter, and that voter holds the first leader's vote or a higher one).
//!
//! The vote scenario, on a network that delivers only the RPCs the test opens:
//! 1. node 3 is initialized and campaigns for term 1; only node 2 hears it, grants its
//!    vote, and node 3 leads with leader id (1, 3) (its appends reach nobody);
//! 2. node 2 loses power: every byte it had not synced is gone, and it restarts;
//! 3. node 1 is initialized with the same membership and campaigns with (1, 1); only
//!    node 2 hears it, and must refuse: it voted for (1, 3).
//!
//! The checker watches every node's metrics from start to end and records each leader as
//! it is elected, in order; a leader id that is not above every earlier one breaks
//! election safety. Its negative control runs the same scenario with log stores that
//! write the vote without fsync: node 2 forgets its vote, and the checker must find node
//! 1 elected as a lower leader after node 3.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openraft::error::{
    Fatal, NetworkError, RPCError, RaftError, RemoteError, ReplicationClosed, StreamingError,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, Config, LeaderId, ServerState, Snapshot, Vote};
use shale::fs::{MemFs, PowerLoss};
use shale::{Options, WriteOptions};
use shale_server::log_store::LogStore;
use shale_server::state_machine::StateMachineStore;
use shale_server::{Command, NodeId, Op, Raft, TypeConfig};

/// The two RPCs a link can carry (a snapshot never travels in this test).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Rpc {
    Vote,
    Append,
}

/// The leaders' ids (term, node), in the order their metrics said they were elected.
type Leaders = Arc<Mutex<Vec<LeaderId<NodeId>>>>;

/// Routes RPCs between the nodes of this process, only along the links the test opened.
#[derive(Default)]
struct Router {
    nodes: Mutex<HashMap<NodeId, Raft>>,
    open: Mutex<HashSet<(NodeId, NodeId, Rpc)>>,
    /// Vote requests answered, by (from, to): whether the vote was granted.
    votes: Mutex<Vec<(NodeId, NodeId, bool)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Router {
    fn open(&self, from: NodeId, to: NodeId, rpc: Rpc) {
        lock(&self.open).insert((from, to, rpc));
    }

    /// The node `to`, if the link from `from` carries `rpc` and `to` is running.
    fn reach(&self, from: NodeId, to: NodeId, rpc: Rpc) -> Result<Raft, Unreachable> {
        if !lock(&self.open).contains(&(from, to, rpc)) {
            return Err(Unreachable::new(&std::io::Error::other(format!(
                "{rpc:?} from {from} to {to}: link closed"
            ))));
        }
        lock(&self.nodes)
            .get(&to)
            .cloned()
            .ok_or_else(|| Unreachable::new(&std::io::Error::other(format!("node {to} is down"))))
    }

    fn answered(&self, from: NodeId, to: NodeId) -> Option<bool> {
        lock(&self.votes)
            .iter()
            .rev()
            .find(|(f, t, _)| (*f, *t) == (from, to))
            .map(|(_, _, granted)| *granted)
    }
}

struct Net {
    from: NodeId,
    router: Arc<Router>,
}

struct Link {
    from: NodeId,
    to: NodeId,
    router: Arc<Router>,
}

impl RaftNetworkFactory<TypeConfig> for Net {
    type Network = Link;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Link {
        Link {
            from: self.from,
            to: target,
            router: self.router.clone(),
        }
    }
}

fn remote<E: std::error::Error>(
    to: NodeId,
    e: RaftError<NodeId, E>,
) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    RPCError::RemoteError(RemoteError::new(to, e))
}

impl RaftNetwork<TypeConfig> for Link {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let node = self.router.reach(self.from, self.to, Rpc::Append)?;
        node.append_entries(rpc)
            .await
            .map_err(|e| remote(self.to, e))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let node = self.router.reach(self.from, self.to, Rpc::Vote)?;
        let resp = node.vote(rpc).await.map_err(|e| remote(self.to, e))?;
        lock(&self.router.votes).push((self.from, self.to, resp.vote_granted));
        Ok(resp)
    }

    async fn full_snapshot(
        &mut self,
        _vote: Vote<NodeId>,
        _snapshot: Snapshot<TypeConfig>,
        _cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        Err(StreamingError::Network(NetworkError::new(
            &std::io::Error::other("no snapshot travels in this test"),
        )))
    }
}

/// One replica: its log store on its own `MemFs` (the machine that can lose power), its
/// state machine's database on the same `MemFs` or on disk (`StateOn`).
struct Node {
    raft: Raft,
    log: LogStore,
    sm: StateMachineStore,
}

const LOG_DIR: &str = "/raft-log";

fn config() -> Arc<Config> {
    let config = Config {
        cluster_name: "vote-power-loss".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        // Elections happen only where the test starts them.
        enable_elect: false,
        ..Default::default()
    };
    Arc::new(config.validate().expect("config"))
}

/// Where a replica's state machine keeps its database.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StateOn {
    /// The real disk: the vote test commits nothing, so the state stays empty.
    Disk,
    /// The replica's `MemFs`, so that a power loss drops its unsynced applies (the
    /// generation file `SM_CURRENT` with them, which is synced when written).
    MemFs,
}

/// Node `id` on the machine `mem`, its log store writing votes with `votes`.
async fn start(
    id: NodeId,
    mem: &MemFs,
    dir: &Path,
    router: &Arc<Router>,
    leaders: &Leaders,
    state_on: StateOn,
    votes: WriteOptions,
) -> Node {
    let opts = Options {
        fs: Arc::new(mem.clone()),
        ..Options::default()
    };
    let log = LogStore::open(Path::new(LOG_DIR), opts.clone())
        .expect("open the log store")
        .saving_votes_with(votes);
    let state_dir = dir.join(format!("state-{id}"));
    std::fs::create_dir_all(&state_dir).expect("mkdir");
    let state_opts = match state_on {
        StateOn::Disk => Options::default(),
        StateOn::MemFs => opts,
    };
    let sm = StateMachineStore::open(&state_dir, state_opts).expect("open the state");
    let net = Net {
        from: id,
        router: router.clone(),
    };
    let raft = Raft::new(id, config(), net, log.clone(), sm.clone())
        .await
        .expect("start raft");
    lock(&router.nodes).insert(id, raft.clone());
    watch_leaders(&raft, leaders.clone());
    Node { raft, log, sm }
}

/// Record each leadership this node's metrics show, once, until it shuts down.
fn watch_leaders(raft: &Raft, leaders: Leaders) {
    let mut metrics = raft.metrics();
    tokio::spawn(async move {
        let mut last = None;
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state == ServerState::Leader && last != Some(m.vote.leader_id) {
                    last = Some(m.vote.leader_id);
                    lock(&leaders).push(m.vote.leader_id);
                }
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
}

async fn stop(node: Node) {
    node.raft.shutdown().await.expect("shut down raft");
    node.log.close().expect("close the log store");
    node.sm.close().expect("close the state");
}

fn members() -> BTreeMap<NodeId, BasicNode> {
    (1..=3)
        .map(|id| (id, BasicNode::new(format!("node-{id}"))))
        .collect()
}

/// Three replicas, each on a `MemFs` of its own, elected nothing yet; no link is open.
struct Cluster {
    dir: tempfile::TempDir,
    router: Arc<Router>,
    leaders: Leaders,
    machines: Vec<MemFs>,
    /// How the log stores write the vote; a restarted node's too.
    votes: WriteOptions,
}

impl Cluster {
    /// With synced votes, as a server writes them.
    async fn start(state_on: StateOn) -> (Cluster, [Node; 3]) {
        Cluster::start_with(state_on, WriteOptions::sync()).await
    }

    async fn start_with(state_on: StateOn, votes: WriteOptions) -> (Cluster, [Node; 3]) {
        let c = Cluster {
            dir: tempfile::tempdir().expect("tempdir"),
            router: Arc::new(Router::default()),
            leaders: Arc::default(),
            machines: (0..3).map(|_| MemFs::new()).collect(),
            votes,
        };
        let mut nodes = Vec::new();
        for (id, mem) in (1..=3).zip(&c.machines) {
            let (dir, router, leaders) = (c.dir.path(), &c.router, &c.leaders);
            nodes.push(start(id, mem, dir, router, leaders, state_on, votes).await);
        }
        let n3 = nodes.pop().expect("node 3");
        let n2 = nodes.pop().expect("node 2");
        let n1 = nodes.pop().expect("node 1");
        (c, [n1, n2, n3])
    }

    /// Opens every link and makes `n1` (node 1) the leader of all three.
    async fn link_all_and_lead(&self, n1: &Node) {
        for from in 1..=3 {
            for to in (1..=3).filter(|&to| to != from) {
                self.router.open(from, to, Rpc::Vote);
                self.router.open(from, to, Rpc::Append);
            }
        }
        n1.raft.initialize(members()).await.expect("initialize");
        n1.raft
            .wait(Some(Duration::from_secs(5)))
            .state(ServerState::Leader, "node 1 leads")
            .await
            .expect("node 1 becomes leader");
    }
}

/// The `k`-th write of the power-loss tests: `key-k` set to `value-k`.
fn put(k: u64) -> Arc<Command> {
    Arc::new(Command::Write(vec![Op {
        key: format!("key-{k:03}").into_bytes(),
        value: Some(format!("value-{k}").into_bytes()),
    }]))
}

/// Waits until `from`'s vote request to `to` has been answered; whether it was granted.
async fn answer(router: &Router, from: NodeId, to: NodeId) -> bool {
    for _ in 0..500 {
        if let Some(granted) = router.answered(from, to) {
            return granted;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("node {to} never answered node {from}'s vote request");
}

/// Waits until the leaders' watchers have recorded `leader`.
async fn recorded(leaders: &Leaders, leader: LeaderId<NodeId>) {
    for _ in 0..500 {
        if lock(leaders).contains(&leader) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("leader {leader} led, and its watcher never recorded it");
}

/// What the vote scenario (module documentation) ended with.
struct VoteScenario {
    /// The leaders, in the order they were elected.
    elected: Vec<LeaderId<NodeId>>,
    /// Node 3's leadership in step 1.
    first: LeaderId<NodeId>,
    /// Node 2's vote, read back after its power loss.
    vote: Option<Vote<NodeId>>,
}

impl VoteScenario {
    /// The first leader elected after a higher one, and that one: election safety broken.
    fn lower_after_higher(&self) -> Option<(LeaderId<NodeId>, LeaderId<NodeId>)> {
        self.elected.iter().enumerate().find_map(|(i, later)| {
            self.elected
                .iter()
                .take(i)
                .find(|earlier| later <= *earlier)
                .map(|earlier| (*later, *earlier))
        })
    }
}

/// The vote scenario, its log stores writing votes with `votes`.
async fn vote_scenario(votes: WriteOptions) -> VoteScenario {
    let (c, [n1, n2, n3]) = Cluster::start_with(StateOn::Disk, votes).await;
    let (dir, router, leaders, machines) = (c.dir.path(), &c.router, &c.leaders, &c.machines);

    // 1. Node 3 leads with node 2's vote.
    router.open(3, 2, Rpc::Vote);
    n3.raft
        .initialize(members())
        .await
        .expect("initialize node 3");
    assert!(
        answer(router, 3, 2).await,
        "node 2 refused node 3's vote request"
    );
    n3.raft
        .wait(Some(Duration::from_secs(5)))
        .state(ServerState::Leader, "node 3 leads")
        .await
        .expect("node 3 becomes leader");
    let first = n3.raft.metrics().borrow().vote.leader_id;

    // 2. Node 2 loses power and comes back.
    let after = machines[1].power_loss(PowerLoss::default());
    lock(&router.nodes).remove(&2);
    stop(n2).await;
    let n2 = start(2, &after, dir, router, leaders, StateOn::Disk, c.votes).await;
    let vote = n2
        .log
        .clone()
        .read_vote()
        .await
        .expect("read node 2's vote");

    // 3. Node 1 campaigns with a lower leader id; only node 2 hears it.
    router.open(1, 2, Rpc::Vote);
    n1.raft
        .initialize(members())
        .await
        .expect("initialize node 1");
    if answer(router, 1, 2).await {
        // Granted: give node 1 the moment it needs to take the leadership, and the
        // watcher of its metrics (a task of its own) the moment it needs to record it.
        let led = n1
            .raft
            .wait(Some(Duration::from_secs(5)))
            .state(ServerState::Leader, "node 1 leads")
            .await;
        if let Ok(m) = led {
            recorded(leaders, m.vote.leader_id).await;
        }
    }

    let elected = lock(leaders).clone();
    for node in [n1, n2, n3] {
        stop(node).await;
    }
    VoteScenario {
        elected,
        first,
        vote,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_never_votes_lower_after_a_power_loss() {
    let s = vote_scenario(WriteOptions::sync()).await;
    if let Some((later, earlier)) = s.lower_after_higher() {
        panic!(
            "leader {later} was elected after leader {earlier}: a replica voted for a lower \
             leader after a higher one (node 2's vote read {:?} after its power loss)",
            s.vote
        );
    }
    assert_eq!(s.elected, vec![s.first], "node 3 alone was to lead");
    assert_eq!(s.first, LeaderId::new(1, 3));
    assert_eq!(
        s.vote.map(|v| v.leader_id),
        Some(s.first),
        "node 2's vote after the power loss"
    );
}

/// The negative control: with votes written without fsync, node 2 forgets its vote for
/// node 3, grants node 1's, and the checker must see node 1 elected after node 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_an_unsynced_vote_elects_a_lower_leader() {
    let s = vote_scenario(WriteOptions::default()).await;
    assert_eq!(
        s.lower_after_higher(),
        Some((LeaderId::new(1, 1), LeaderId::new(1, 3))),
        "with the vote unsynced, the checker did not see node 1 elected after node 3 \
         (leaders {:?}, node 2's vote read {:?} after its power loss): it cannot tell a \
         synced vote from an unsynced one",
        s.elected,
        s.vote
    );
}

/// Waits until `node` has applied at least `index`.
async fn applied(node: &Node, index: u64, what: &str) {
    node.raft
        .wait(Some(Duration::from_secs(10)))
        .applied_index_at_least(Some(index), what)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Applies are not synced (the log is): a follower that loses power loses the tail of
/// its applies, and must apply those entries again from its log, ending with the
/// leader's data. Three replicas, every link open, node 1 leads; each has its log and
/// its state machine's database on its own `MemFs`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_applies_again_what_a_power_loss_took() {
    const KEYS: u64 = 50;
    let (c, [n1, n2, n3]) = Cluster::start(StateOn::MemFs).await;
    let (dir, router, leaders, machines) = (c.dir.path(), &c.router, &c.leaders, &c.machines);
    c.link_all_and_lead(&n1).await;

    let mut last = 0;
    for k in 0..KEYS {
        last = n1
            .raft
            .client_write(put(k))
            .await
            .expect("write")
            .log_id
            .index;
    }
    applied(&n2, last, "node 2 applies every write").await;
    let before = n2.sm.applied().0.map(|id| id.index);

    // Node 2 loses power: its log was synced, its applies were not.
    let after = machines[1].power_loss(PowerLoss::default());
    lock(&router.nodes).remove(&2);
    stop(n2).await;
    let n2 = start(2, &after, dir, router, leaders, StateOn::MemFs, c.votes).await;
    let reopened = n2.sm.applied().0.map(|id| id.index);
    assert!(
        reopened < before,
        "the power loss took none of node 2's applies ({reopened:?}, {before:?} before): \
         the test shows nothing"
    );

    // One more write; node 2 must end with every key, as the leader does.
    let last = n1
        .raft
        .client_write(put(KEYS))
        .await
        .expect("write")
        .log_id
        .index;
    applied(&n2, last, "node 2 applies again after its power loss").await;
    let db = n2.sm.db();
    for k in 0..=KEYS {
        let key = format!("key-{k:03}");
        assert_eq!(
            db.get(key.as_bytes()).expect("read node 2"),
            Some(format!("value-{k}").into_bytes()),
            "node 2 lost {key} (applied {reopened:?} after the power loss)"
        );
    }

    for node in [n1, n2, n3] {
        stop(node).await;
    }
}

/// Every node's applied index (`None` for none applied).
fn applied_indexes(nodes: &[&Node]) -> Vec<Option<u64>> {
    nodes
        .iter()
        .map(|n| n.sm.applied().0.map(|id| id.index))
        .collect()
}

/// The whole cluster loses power at once, while snapshots are built: every write it
/// acknowledged must come back on every replica. Each machine keeps only what it synced:
/// the log's entries and votes, the flushed part of the state machine, and the snapshot
/// files (on the real disk here, so they always survive). A snapshot that covered applies
/// still only in the WAL would outlive them, and openraft 0.9 refuses to start a replica
/// whose snapshot is ahead of its applied index; so the snapshots pin before they flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_loses_power_keeps_every_acknowledged_write() {
    const KEYS: u64 = 300;
    const SNAPSHOTS_UNTIL: u64 = 200;
    let (c, [n1, n2, n3]) = Cluster::start(StateOn::MemFs).await;
    let (dir, router, leaders, machines) = (c.dir.path(), &c.router, &c.leaders, &c.machines);
    c.link_all_and_lead(&n1).await;

    // Every replica builds snapshots, one after another, while the first writes apply.
    let building = Arc::new(AtomicBool::new(true));
    let snapshots = {
        let rafts = [n1.raft.clone(), n2.raft.clone(), n3.raft.clone()];
        let building = building.clone();
        tokio::spawn(async move {
            let mut triggered = 0u32;
            while building.load(Ordering::Relaxed) {
                for raft in &rafts {
                    raft.trigger().snapshot().await.expect("trigger a snapshot");
                    triggered += 1;
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            triggered
        })
    };
    for k in 0..KEYS {
        if k == SNAPSHOTS_UNTIL {
            building.store(false, Ordering::Relaxed);
        }
        n1.raft.client_write(put(k)).await.expect("write");
    }
    let triggered = snapshots.await.expect("the snapshot task");
    let before = applied_indexes(&[&n1, &n2, &n3]);

    // The power goes everywhere at once; the machines come back with what they synced.
    let after: Vec<MemFs> = machines
        .iter()
        .map(|m| m.power_loss(PowerLoss::default()))
        .collect();
    lock(&router.nodes).clear();
    for node in [n1, n2, n3] {
        stop(node).await;
    }
    let n1 = start(1, &after[0], dir, router, leaders, StateOn::MemFs, c.votes).await;
    let n2 = start(2, &after[1], dir, router, leaders, StateOn::MemFs, c.votes).await;
    let n3 = start(3, &after[2], dir, router, leaders, StateOn::MemFs, c.votes).await;
    let reopened = applied_indexes(&[&n1, &n2, &n3]);
    assert!(
        reopened.iter().zip(&before).any(|(r, b)| r < b),
        "the power loss took no replica's applies ({reopened:?}, {before:?} before, \
         {triggered} snapshots triggered): the test shows nothing"
    );

    n1.raft.trigger().elect().await.expect("node 1 campaigns");
    n1.raft
        .wait(Some(Duration::from_secs(5)))
        .state(ServerState::Leader, "node 1 leads again")
        .await
        .expect("node 1 leads after the power loss");
    let last = n1
        .raft
        .client_write(put(KEYS))
        .await
        .expect("a write after the power loss")
        .log_id
        .index;
    for (id, node) in [(1, &n1), (2, &n2), (3, &n3)] {
        applied(
            node,
            last,
            &format!("node {id} applies after the power loss"),
        )
        .await;
        let db = node.sm.db();
        for k in 0..=KEYS {
            let key = format!("key-{k:03}");
            assert_eq!(
                db.get(key.as_bytes()).expect("read a replica"),
                Some(format!("value-{k}").into_bytes()),
                "node {id} lost the acknowledged {key} (applied {reopened:?} after the \
                 power loss, {before:?} before)"
            );
        }
    }

    for node in [n1, n2, n3] {
        stop(node).await;
    }
}

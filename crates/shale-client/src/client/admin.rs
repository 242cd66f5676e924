//! The client's requests that run the cluster rather than its data: membership changes,
//! a leadership transfer, an online backup, one node's status, and the shard map. All but
//! the map are group 1's.

use super::retry::Kind;
use super::routes::{Routes, Shard, DEFAULT_GROUP};
use super::Client;
use crate::error::ClientError;
use crate::pb;
use crate::pb::kv_client::KvClient;
use crate::wire::{with_token, GROUP_HEADER};

/// The longest [`Client::move_replica`] waits for its learner to catch up; a larger
/// shard's move is made again until it completes.
pub const MOVE_CATCH_UP: std::time::Duration = std::time::Duration::from_secs(600);

impl Client {
    /// Add node `node_id`, reachable at `addr`, as a learner; returns once it has caught up
    /// (within the client's deadline). Then [`Client::add_voters`] makes it a voter.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn add_learner(
        &self,
        node_id: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        self.add_learner_in(DEFAULT_GROUP, node_id, addr).await
    }

    /// [`Client::add_learner`] in group `group`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn add_learner_in(
        &self,
        group: u64,
        node_id: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        let req = || pb::AddLearnerRequest {
            node_id,
            addr: addr.to_string(),
        };
        self.call_in(group, Kind::Write, req, |mut c, r| async move {
            c.add_learner(r).await
        })
        .await
    }

    /// Move group `group`'s replica on node `from` to node `to` (reached at `addr`): `to`
    /// joins as a learner and catches up (by snapshot if the log has moved on), the
    /// leadership leaves `from` if it is there, then one membership change, through a
    /// joint configuration, replaces `from` by `to` among the voters. Returns the
    /// membership after the change. The replica on `from` stops taking part in the group;
    /// its files stay on `from`'s disk.
    ///
    /// The learner's catch-up is awaited for up to [`MOVE_CATCH_UP`], across the node's
    /// limit on one call's time. A move that fails part way can be made again: a learner
    /// added again is caught up again, and a replica that is no voter any more is
    /// refused.
    ///
    /// # Errors
    /// See [`ClientError`]; `Refused` if `from` is not a voter or `to` is one already.
    pub async fn move_replica(
        &self,
        group: u64,
        from: u64,
        to: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        let joined = self.join_as_learner(group, to, addr).await?;
        if !joined.voters.contains(&from) {
            return Err(ClientError::Refused(format!(
                "node {from} is not a voter of group {group}"
            )));
        }
        if joined.voters.contains(&to) {
            return Err(ClientError::Refused(format!(
                "node {to} is a voter of group {group} already"
            )));
        }
        if self.leader_of(group).await? == Some(from) {
            let next = joined.voters.iter().copied().find(|&v| v != from);
            if let Some(next) = next {
                self.transfer_leader_in(group, next).await?;
            }
        }
        self.change_voters_in(group, &[to], &[from]).await
    }

    /// [`Client::add_learner_in`], made again while a try ends for want of time (the
    /// node's limit on a call's time, or the client's deadline) with the learner still
    /// catching up, for at most [`MOVE_CATCH_UP`]: adding a learner again is a no-op
    /// that waits for its catch-up once more.
    async fn join_as_learner(
        &self,
        group: u64,
        to: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        let started = std::time::Instant::now();
        loop {
            match self.add_learner_in(group, to, addr).await {
                Err(ClientError::Ambiguous(_) | ClientError::Timeout { .. })
                    if started.elapsed() < MOVE_CATCH_UP => {}
                answer => return answer,
            }
        }
    }

    /// The leader of `group` as the first node that answers knows it.
    async fn leader_of(&self, group: u64) -> Result<Option<u64>, ClientError> {
        let mut last = None;
        for addr in self.endpoints.clone() {
            match self.status_in(&addr, group).await {
                Ok(status) => return Ok(status.leader_id),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::Config("no endpoint".into())))
    }

    /// Reach member `node_id` at `addr` from now on (it moved to another host or port):
    /// a membership change through the log. Refused if another member is at `addr`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn set_address(
        &self,
        node_id: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        let req = || pb::SetAddressRequest {
            node_id,
            addr: addr.to_string(),
        };
        self.call(Kind::Write, req, |mut c, r| async move {
            c.set_address(r).await
        })
        .await
    }

    /// Hand the leadership to voter `node_id`; returns the term it leads in. The leader
    /// takes no request for the half second or so this takes (they are retried).
    ///
    /// # Errors
    /// See [`ClientError`]; `Refused` for a node that is not a voter.
    pub async fn transfer_leader(&self, node_id: u64) -> Result<u64, ClientError> {
        self.transfer_leader_in(DEFAULT_GROUP, node_id).await
    }

    /// Hand group `group`'s leadership to its voter `node_id`, as
    /// [`Client::transfer_leader`] does for group 1.
    ///
    /// # Errors
    /// See [`ClientError`]; `Refused` for a node that is not a voter; `Server` for a group
    /// the node reached holds no replica of.
    pub async fn transfer_leader_in(&self, group: u64, node_id: u64) -> Result<u64, ClientError> {
        let req = || pb::TransferLeaderRequest { node_id };
        let resp = self
            .call_in(group, Kind::Write, req, |mut c, r| async move {
                c.transfer_leader(r).await
            })
            .await?;
        Ok(resp.term)
    }

    /// Make learners voters.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn add_voters(&self, ids: &[u64]) -> Result<pb::MembershipResponse, ClientError> {
        self.change_voters(ids, &[]).await
    }

    /// Remove voters from the cluster.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn remove_voters(&self, ids: &[u64]) -> Result<pb::MembershipResponse, ClientError> {
        self.change_voters(&[], ids).await
    }

    /// Change group `group`'s voters: make the learners `add` voters and remove the
    /// voters `remove`; both at once is one change through a joint configuration.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn change_voters_in(
        &self,
        group: u64,
        add: &[u64],
        remove: &[u64],
    ) -> Result<pb::MembershipResponse, ClientError> {
        let req = || pb::ChangeVotersRequest {
            add: add.to_vec(),
            remove: remove.to_vec(),
        };
        self.call_in(group, Kind::Write, req, |mut c, r| async move {
            c.change_voters(r).await
        })
        .await
    }

    async fn change_voters(
        &self,
        add: &[u64],
        remove: &[u64],
    ) -> Result<pb::MembershipResponse, ClientError> {
        self.change_voters_in(DEFAULT_GROUP, add, remove).await
    }

    /// Write an online backup of the cluster to `path`: a snapshot file holding at least
    /// every write acknowledged before the call (`shale-server --restore` starts a new
    /// cluster from it). Written to `path` with `.tmp` appended, synced, then renamed;
    /// returns its size in bytes. The frames are checked by the restore, not here.
    ///
    /// # Errors
    /// See [`ClientError`]; `Config` for a file that cannot be written; `Server` for a
    /// stream that breaks off.
    pub async fn backup(&self, path: &std::path::Path) -> Result<u64, ClientError> {
        use std::io::Write;
        let req = || pb::BackupRequest {};
        let mut stream = self
            .call(Kind::Read, req, |mut c, r| async move { c.backup(r).await })
            .await?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let io = |e: std::io::Error| ClientError::Config(format!("{}: {e}", tmp.display()));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        let mut bytes = 0u64;
        loop {
            let frame = match stream.message().await {
                Ok(Some(f)) => f.frame,
                Ok(None) => break,
                Err(s) => {
                    let _ = std::fs::remove_file(&tmp);
                    let why = format!("the backup broke off: {:?}: {}", s.code(), s.message());
                    return Err(ClientError::Server(why));
                }
            };
            file.write_all(&frame).map_err(io)?;
            bytes += frame.len() as u64;
        }
        let file = file.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path)
            .map_err(|e| ClientError::Config(format!("{}: {e}", path.display())))?;
        Ok(bytes)
    }

    /// One node's view of the cluster (not linearizable; no retry, no redirect).
    ///
    /// # Errors
    /// `Server` for any failure.
    pub async fn status_of(&self, addr: &str) -> Result<pb::StatusResponse, ClientError> {
        self.status_in(addr, DEFAULT_GROUP).await
    }

    /// The view the node at `addr` has of group `group`, as [`Client::status_of`] for
    /// group 1.
    ///
    /// # Errors
    /// `Server` for any failure, with the address and the server's status (a node that
    /// holds no replica of the group included).
    pub async fn status_in(
        &self,
        addr: &str,
        group: u64,
    ) -> Result<pb::StatusResponse, ClientError> {
        let mut c = KvClient::new(self.channel(addr)?);
        let mut req = with_token(pb::StatusRequest {}, self.token.as_deref());
        req.metadata_mut().insert(GROUP_HEADER, group.into());
        c.status(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ClientError::Server(format!("{addr}: {:?}: {}", s.code(), s.message())))
    }

    /// Split group `group`'s shard at `at`: the group keeps the keys below `at`, and a new
    /// group `child` (an id no group of the cluster has) serves those from `at` on, on the
    /// same replicas. Returns the two shards once the split is applied at the group's
    /// leader and the child started there.
    ///
    /// # Errors
    /// See [`ClientError`]; `Server` (`INVALID_ARGUMENT`) if `at` is not inside the shard
    /// past its start, or `child` is in use.
    pub async fn split(
        &self,
        group: u64,
        at: &[u8],
        child: u64,
    ) -> Result<pb::SplitResponse, ClientError> {
        let req = || pb::SplitRequest {
            at: at.to_vec(),
            child,
        };
        let split = self
            .call_in(group, Kind::Write, req, |mut c, r| async move {
                c.split(r).await
            })
            .await?;
        // A node that has not started the child yet answers a map with a gap, which is
        // refused: the client then fetches the map again when a request is redirected.
        let _ = self.shards().await;
        Ok(split)
    }

    /// The shards of the key space, in key order, as the first node the client reaches
    /// knows them (not linearizable); the client routes by this map from now on.
    ///
    /// # Errors
    /// See [`ClientError`]; `Server` for a map that leaves a key without a shard.
    pub async fn shards(&self) -> Result<Vec<Shard>, ClientError> {
        let map = self
            .call(
                Kind::Read,
                || pb::ShardMapRequest {},
                |mut c, r| async move { c.shard_map(r).await },
            )
            .await?;
        let routes = Routes::from_map(map)?;
        let shards = routes.shards().to_vec();
        self.take_routes(routes);
        Ok(shards)
    }
}

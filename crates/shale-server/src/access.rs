//! Who may do what: client tokens with their roles, and the replicas' own credential.
//!
//! Three credentials, never interchangeable (docs/replication.md, "Access"):
//! - a **read-write** client token admits every client call;
//! - a **read-only** client token admits the calls that change nothing (get, scan, search,
//!   status); the others answer `PERMISSION_DENIED`;
//! - a **replica** proves itself on Raft RPCs by a certificate from the cluster's authority
//!   when TLS is on, by the peer token otherwise. No client token is accepted there, and the
//!   peer token is no client credential.
//!
//! A node with no client token configured admits every client call (a node without TLS
//! listens on loopback only unless told otherwise).
//!
//! The check runs in an interceptor, which cannot see which method is called: it leaves the
//! caller's [`Access`] in the request's extensions, and a write can only be proposed with a
//! [`WriteGrant`], which only [`WriteGrant::of`] makes, from that extension.

use std::sync::Arc;

use tonic::{Request, Status};

use crate::network::{GROUP_HEADER, TOKEN_HEADER};
use crate::{GroupId, DEFAULT_GROUP};

/// What a client's credential lets it do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// The client tokens a node accepts.
#[derive(Clone, Debug, Default)]
pub struct ClientTokens {
    pub read_write: Option<Arc<str>>,
    pub read_only: Option<Arc<str>>,
}

impl ClientTokens {
    /// The access `presented` (the request's bearer token, if any) gives.
    fn access(&self, presented: Option<&str>) -> Result<Access, Status> {
        if self.read_write.is_none() && self.read_only.is_none() {
            return Ok(Access::ReadWrite);
        }
        let is = |want: &Option<Arc<str>>| match (want.as_deref(), presented) {
            (Some(want), Some(got)) => constant_time_eq(got.as_bytes(), want.as_bytes()),
            _ => false,
        };
        if is(&self.read_write) {
            Ok(Access::ReadWrite)
        } else if is(&self.read_only) {
            Ok(Access::ReadOnly)
        } else {
            Err(Status::unauthenticated("a valid token is required"))
        }
    }
}

/// The bearer token a request carries, if any.
fn bearer<T>(req: &Request<T>) -> Option<&str> {
    req.metadata()
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// The check on client calls, for `with_interceptor`: the caller's [`Access`] goes into the
/// request's extensions, or the call is refused with `UNAUTHENTICATED`.
pub fn client_check(
    tokens: ClientTokens,
) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |mut req: Request<()>| {
        let access = tokens.access(bearer(&req))?;
        req.extensions_mut().insert(access);
        Ok(req)
    }
}

/// The check on Raft RPCs, for `with_interceptor`: with TLS, a client certificate from the
/// cluster's authority; without, the peer token (if one is configured).
pub fn replica_check(
    peer_token: Option<Arc<str>>,
    tls: bool,
) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone {
    move |req: Request<()>| {
        let admitted = if tls {
            crate::tls::from_replica(&req)
        } else {
            match (peer_token.as_deref(), bearer(&req)) {
                (None, _) => true,
                (Some(want), Some(got)) => constant_time_eq(got.as_bytes(), want.as_bytes()),
                (Some(_), None) => false,
            }
        };
        if admitted {
            Ok(req)
        } else if tls {
            Err(Status::permission_denied(
                "Raft RPCs need a replica's certificate",
            ))
        } else {
            Err(Status::permission_denied("Raft RPCs need the peer token"))
        }
    }
}

/// Proof that a call's credential may write. Every proposal takes one, so a write handler
/// that skipped the check would not compile.
#[derive(Debug)]
pub struct WriteGrant(());

impl WriteGrant {
    /// The grant for `req`, if its credential may write.
    ///
    /// # Errors
    /// `PERMISSION_DENIED` for a read-only token; `INTERNAL` if no client check ran (a
    /// service mounted without [`client_check`] refuses every write).
    pub fn of<T>(req: &Request<T>) -> Result<WriteGrant, Status> {
        match req.extensions().get::<Access>() {
            Some(Access::ReadWrite) => Ok(WriteGrant(())),
            Some(Access::ReadOnly) => Err(Status::permission_denied(
                "this token may only read; writes need a read-write token",
            )),
            None => Err(Status::internal("no access check ran on this call")),
        }
    }
}

/// The group a request names in [`GROUP_HEADER`]; [`DEFAULT_GROUP`] if it names none.
///
/// # Errors
/// `INVALID_ARGUMENT` for a value that is not a group id.
pub fn named_group<T>(req: &Request<T>) -> Result<GroupId, Status> {
    match req.metadata().get(GROUP_HEADER) {
        None => Ok(DEFAULT_GROUP),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.parse::<GroupId>().ok())
            .ok_or_else(|| Status::invalid_argument(format!("{GROUP_HEADER}: not a group id"))),
    }
}

/// Equal bytes, compared in time that depends on the length only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::with_token;

    fn tokens() -> ClientTokens {
        ClientTokens {
            read_write: Some("rw-token".into()),
            read_only: Some("ro-token".into()),
        }
    }

    fn access_of(tokens: &ClientTokens, token: Option<&str>) -> Result<Access, tonic::Code> {
        client_check(tokens.clone())(with_token((), token))
            .map(|req| *req.extensions().get::<Access>().expect("access set"))
            .map_err(|s| s.code())
    }

    #[test]
    fn each_token_gives_its_role_and_no_other() {
        let t = tokens();
        assert_eq!(access_of(&t, Some("rw-token")), Ok(Access::ReadWrite));
        assert_eq!(access_of(&t, Some("ro-token")), Ok(Access::ReadOnly));
        for bad in [None, Some("rw-toke"), Some("ro-token2"), Some("")] {
            assert_eq!(access_of(&t, bad), Err(tonic::Code::Unauthenticated));
        }
        let open = ClientTokens::default();
        assert_eq!(access_of(&open, None), Ok(Access::ReadWrite));
    }

    #[test]
    fn only_a_read_write_call_gets_a_grant() {
        let t = tokens();
        let rw = client_check(t.clone())(with_token((), Some("rw-token"))).expect("admitted");
        assert!(WriteGrant::of(&rw).is_ok());
        let ro = client_check(t)(with_token((), Some("ro-token"))).expect("admitted");
        let denied = WriteGrant::of(&ro).expect_err("read-only");
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        let unchecked = Request::new(());
        assert_eq!(
            WriteGrant::of(&unchecked).expect_err("no check").code(),
            tonic::Code::Internal
        );
    }

    #[test]
    fn raft_rpcs_take_the_peer_token_and_no_client_token() {
        let check = replica_check(Some("peer-token".into()), false);
        assert!(check(with_token((), Some("peer-token"))).is_ok());
        for bad in [None, Some("rw-token"), Some("ro-token")] {
            let err = check(with_token((), bad)).expect_err("refused");
            assert_eq!(err.code(), tonic::Code::PermissionDenied);
        }
        // The peer token is no client credential.
        assert_eq!(
            access_of(&tokens(), Some("peer-token")),
            Err(tonic::Code::Unauthenticated)
        );
    }
}

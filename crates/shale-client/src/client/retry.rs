//! How a failed attempt of a call goes on: the server's answer, the kind of call, and
//! whether the request can have been applied, make a redirect, a retry or a failure.

use tonic::{Code, Status};

use crate::error::ClientError;
use crate::wire::{LEADER_HEADER, RETRY_HEADER, SESSION_HEADER, SHARD_HEADER};

/// How a failed attempt ends the call or not.
pub(super) enum Next {
    /// Retry at once at this address (the leader).
    Redirect(String),
    /// Retry after a pause, at the next endpoint.
    Retry,
    /// The group does not serve the request's keys (nothing was applied or read): route
    /// it again from a fresh shard map.
    Moved(String),
    /// Give up with this error.
    Fail(ClientError),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Read,
    /// A write that may apply twice if retried.
    Write,
    /// A write in a session: applied once however often it is sent.
    SessionWrite,
}

/// True if the request cannot have reached a server: the connection was refused.
fn never_sent(status: &Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        source = e.source();
    }
    // tonic may flatten the cause into the message.
    let msg = status.message();
    msg.contains("Connection refused") || msg.contains("tcp connect error")
}

pub(super) fn classify(status: &Status, kind: Kind) -> Next {
    let meta = status.metadata();
    let safe = kind != Kind::Write || meta.get(RETRY_HEADER).is_some() || never_sent(status);
    let message = status.message().to_string();
    if meta.get(SESSION_HEADER).is_some() {
        return Next::Fail(ClientError::SessionExpired(message));
    }
    if meta.get(SHARD_HEADER).is_some() {
        return Next::Moved(message);
    }
    match status.code() {
        Code::FailedPrecondition => match meta.get(LEADER_HEADER).and_then(|v| v.to_str().ok()) {
            Some(addr) if safe => Next::Redirect(addr.to_string()),
            Some(_) => Next::Fail(ClientError::Ambiguous(message)),
            None => Next::Fail(ClientError::Server(message)),
        },
        Code::InvalidArgument | Code::OutOfRange => Next::Fail(ClientError::Refused(message)),
        Code::NotFound => Next::Fail(ClientError::NotFound(message)),
        // The node served its most calls at once: nothing was read, retry after a pause.
        Code::ResourceExhausted if meta.get(RETRY_HEADER).is_some() => Next::Retry,
        // A request over a size or count bound.
        Code::ResourceExhausted => Next::Fail(ClientError::Refused(message)),
        Code::Unauthenticated => Next::Fail(ClientError::Unauthenticated(message)),
        Code::PermissionDenied => Next::Fail(ClientError::PermissionDenied(message)),
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Cancelled
        | Code::Unknown
        | Code::Aborted => {
            if safe {
                Next::Retry
            } else {
                Next::Fail(ClientError::Ambiguous(message))
            }
        }
        _ => Next::Fail(ClientError::Server(format!(
            "{:?}: {message}",
            status.code()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn marked(mut status: Status, header: &'static str, value: &'static str) -> Status {
        status
            .metadata_mut()
            .insert(header, MetadataValue::from_static(value));
        status
    }

    #[test]
    fn only_a_write_without_a_session_is_left_ambiguous() {
        let lost = || Status::unavailable("the node stopped mid-request");
        assert!(matches!(
            classify(&lost(), Kind::Write),
            Next::Fail(ClientError::Ambiguous(_))
        ));
        assert!(matches!(classify(&lost(), Kind::SessionWrite), Next::Retry));
        assert!(matches!(classify(&lost(), Kind::Read), Next::Retry));
        let safe = marked(lost(), RETRY_HEADER, "safe");
        assert!(matches!(classify(&safe, Kind::Write), Next::Retry));
        // A redirect after proposing: followed only by a call that may apply twice safely.
        let moved = marked(
            Status::failed_precondition("not the leader"),
            LEADER_HEADER,
            "127.0.0.1:7002",
        );
        assert!(matches!(
            classify(&moved, Kind::Write),
            Next::Fail(ClientError::Ambiguous(_))
        ));
        assert!(matches!(
            classify(&moved, Kind::SessionWrite),
            Next::Redirect(addr) if addr == "127.0.0.1:7002"
        ));
    }

    #[test]
    fn a_request_to_the_wrong_group_is_routed_again_whatever_its_kind() {
        let moved = || {
            let status = Status::failed_precondition("a key is outside this group's shard");
            marked(marked(status, RETRY_HEADER, "safe"), SHARD_HEADER, "moved")
        };
        for kind in [Kind::Read, Kind::Write, Kind::SessionWrite] {
            assert!(matches!(classify(&moved(), kind), Next::Moved(_)));
        }
    }

    #[test]
    fn an_expired_session_is_told_apart() {
        let expired = marked(
            Status::failed_precondition("session 9 is closed"),
            SESSION_HEADER,
            "expired",
        );
        assert!(matches!(
            classify(&expired, Kind::SessionWrite),
            Next::Fail(ClientError::SessionExpired(_))
        ));
    }
}

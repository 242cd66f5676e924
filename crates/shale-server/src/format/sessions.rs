//! The state machine's records of client sessions (docs/format.md, "Client sessions"):
//! under `0xFF 's'`, one record per session and one per answer the session may still be
//! asked for again. Ids and write numbers in keys are big-endian, so that a session's
//! answers follow its record in key order.

use shale::inspect::codec::{self, Decoder};

use super::fields::{decoded, finish, get_opt_bytes, put_opt_bytes, start, RECORD_VERSION};
use super::keys::{RESERVED_PREFIX, SM_SESSION_PREFIX};
use crate::command::Response;
use crate::error::{Error, Result};

/// A state machine key under [`SM_SESSION_PREFIX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKey {
    /// `0xFF 's' session:u64be`: the session's record.
    Session(u64),
    /// `0xFF 's' session:u64be seq:u64be`: the answer to its write `seq`.
    Answer { session: u64, seq: u64 },
}

impl SessionKey {
    /// The key's bytes.
    pub fn encode(self) -> Vec<u8> {
        let mut key = Vec::with_capacity(18);
        key.extend_from_slice(SM_SESSION_PREFIX);
        match self {
            SessionKey::Session(session) => key.extend_from_slice(&session.to_be_bytes()),
            SessionKey::Answer { session, seq } => {
                key.extend_from_slice(&session.to_be_bytes());
                key.extend_from_slice(&seq.to_be_bytes());
            }
        }
        key
    }

    /// Inverse of [`SessionKey::encode`].
    ///
    /// # Errors
    /// `Corruption` for a key of another shape.
    pub fn decode(key: &[u8]) -> Result<SessionKey> {
        let bad = || Error::corruption("session key", format!("{key:02x?}"));
        let rest = key.strip_prefix(SM_SESSION_PREFIX).ok_or_else(bad)?;
        let u64_at = |at: usize| -> Option<u64> {
            let bytes = rest.get(at..at.checked_add(8)?)?;
            Some(u64::from_be_bytes(bytes.try_into().ok()?))
        };
        match rest.len() {
            8 => u64_at(0).map(SessionKey::Session).ok_or_else(bad),
            16 => match (u64_at(0), u64_at(8)) {
                (Some(session), Some(seq)) => Ok(SessionKey::Answer { session, seq }),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionRecord {
    /// Answers to writes numbered below this are forgotten: such a write is never applied.
    pub lowest_kept: u64,
    /// The log index of the session's last write (of its opening, before any): the session
    /// least recently used is the first closed when there are too many.
    pub last_used: u64,
}

/// `session := version:u8 lowest_kept:u64 last_used:u64`
pub fn encode_session(s: &SessionRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    codec::put_u8(&mut out, RECORD_VERSION);
    codec::put_u64(&mut out, s.lowest_kept);
    codec::put_u64(&mut out, s.last_used);
    out
}

/// Inverse of [`encode_session`].
///
/// # Errors
/// `Corruption` for bytes that are not a session record.
pub fn decode_session(bytes: &[u8]) -> Result<SessionRecord> {
    let mut d = Decoder::new(bytes);
    let record = (|| {
        start(&mut d, "session")?;
        let lowest_kept = d.u64("session lowest kept")?;
        let last_used = d.u64("session last used")?;
        finish(
            &d,
            "session",
            SessionRecord {
                lowest_kept,
                last_used,
            },
        )
    })();
    decoded("session", record)
}

const ANSWER_WRITTEN: u8 = 1;
const ANSWER_CAS: u8 = 2;
const ANSWER_REFUSED: u8 = 3;

/// What a write in a session answered, kept for its retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerRecord {
    /// The log index it was applied at.
    pub index: u64,
    /// [`Response::Written`], [`Response::CompareAndSet`] or [`Response::Refused`]: what
    /// a write or a compare-and-set answers.
    pub response: Response,
}

/// `answer := version:u8 index:u64 kind:u8 body`, the body by kind: `1` (written) empty,
/// `2` (compare-and-set) `swapped:u8 current:opt_bytes`, `3` (refused) `reason:varbytes`.
///
/// # Errors
/// `InvalidArgument` for a response that no write in a session answers.
pub fn encode_answer(a: &AnswerRecord) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    codec::put_u8(&mut out, RECORD_VERSION);
    codec::put_u64(&mut out, a.index);
    match &a.response {
        Response::Written => codec::put_u8(&mut out, ANSWER_WRITTEN),
        Response::CompareAndSet { swapped, current } => {
            codec::put_u8(&mut out, ANSWER_CAS);
            codec::put_u8(&mut out, u8::from(*swapped));
            put_opt_bytes(&mut out, current.as_deref());
        }
        Response::Refused(reason) => {
            codec::put_u8(&mut out, ANSWER_REFUSED);
            codec::put_length_prefixed(&mut out, reason.as_bytes());
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "{other:?} is not the answer of a write in a session"
            )))
        }
    }
    Ok(out)
}

/// Inverse of [`encode_answer`].
///
/// # Errors
/// `Corruption` for bytes that are not an answer record.
pub fn decode_answer(bytes: &[u8]) -> Result<AnswerRecord> {
    let mut d = Decoder::new(bytes);
    let record = (|| {
        start(&mut d, "answer")?;
        let index = d.u64("answer index")?;
        let response = match d.u8("answer kind")? {
            ANSWER_WRITTEN => Response::Written,
            ANSWER_CAS => {
                let swapped = match d.u8("answer swapped")? {
                    0 => false,
                    1 => true,
                    other => {
                        return Err(codec::DecodeError::new(
                            d.position(),
                            format!("answer swapped byte {other}"),
                        ))
                    }
                };
                let current = get_opt_bytes(&mut d, "answer current value")?;
                Response::CompareAndSet { swapped, current }
            }
            ANSWER_REFUSED => {
                let reason = d.length_prefixed("answer reason")?;
                Response::Refused(String::from_utf8_lossy(reason).into_owned())
            }
            other => {
                return Err(codec::DecodeError::new(
                    d.position(),
                    format!("answer kind {other}"),
                ))
            }
        };
        finish(&d, "answer", AnswerRecord { index, response })
    })();
    decoded("answer", record)
}

/// Check a session pair of a received snapshot: a key of either shape holding the record
/// its shape says.
///
/// # Errors
/// `Corruption` for anything else.
pub fn check_session_pair(key: &[u8], value: &[u8]) -> Result<()> {
    debug_assert_eq!(key.first(), Some(&RESERVED_PREFIX));
    match SessionKey::decode(key)? {
        SessionKey::Session(_) => decode_session(value).map(drop),
        SessionKey::Answer { .. } => decode_answer(value).map(drop),
    }
}

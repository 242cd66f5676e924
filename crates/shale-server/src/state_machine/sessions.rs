//! Client sessions: a write a client sends in its session applies once, however often it
//! is retried (docs/replication.md, "Exactly-once writes"; the Raft dissertation, §6.3).
//!
//! A session is opened through the log ([`Command::OpenSession`]) and named by the log
//! index of its opening. Each write in it carries a number; the state machine keeps the
//! answer of every number the client may still ask for again (at or above the lowest it
//! says it still awaits), in the database beside the data, so a retry of a write that
//! applied gets the first answer and changes nothing. A number below that bound is never
//! applied: the client gave up on it or had its answer.
//!
//! Bounds, the same on every replica because they are taken at apply time: at most
//! [`MAX_SESSIONS`] sessions (opening one more closes the least recently used) and
//! [`MAX_ANSWERS_PER_SESSION`] answers each (one more forgets the oldest). A write in a
//! closed session, or whose answer was forgotten, is answered
//! [`Response::SessionExpired`] and changes nothing.
//!
//! [`Command::OpenSession`]: crate::command::Command::OpenSession
//! [`Response::SessionExpired`]: crate::command::Response::SessionExpired

use std::collections::{BTreeSet, HashMap};

use shale::{Db, ReadOptions, WriteBatch};

use crate::command::SessionSeq;
use crate::error::Result;
use crate::format::{self, AnswerRecord, SessionKey, SessionRecord, SM_SESSION_PREFIX};

/// The most sessions open at once; opening one more closes the least recently used.
pub const MAX_SESSIONS: usize = 10_000;

/// The most answers a session keeps: far more than the writes one client has in flight
/// (a node serves at most 256 calls at once, `Limits::max_client_calls`).
pub const MAX_ANSWERS_PER_SESSION: usize = 1024;

/// One open session, as applied.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    record: SessionRecord,
    /// The numbers whose answers the database holds.
    answered: BTreeSet<u64>,
}

/// The open sessions of the current generation, loaded from its database.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sessions {
    open: HashMap<u64, Session>,
    /// `(last_used, session)`: the least recently used first.
    by_use: BTreeSet<(u64, u64)>,
}

/// What a write in a session is, when it comes to be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not applied before: apply it, then [`Sessions::answer`].
    New,
    /// Applied before: [`Sessions::earlier`] has its answer.
    Answered,
    /// Its session is not open, or its answer was forgotten: change nothing.
    Expired,
}

/// Answers written by the apply call in progress, which its database does not see yet.
pub type Unflushed = HashMap<(u64, u64), AnswerRecord>;

impl Sessions {
    /// The sessions recorded in `db`.
    ///
    /// # Errors
    /// `Engine`; `Corruption` for a bad session key or record, or an answer without its
    /// session.
    pub fn load(db: &Db, ro: &ReadOptions<'_>) -> Result<Sessions> {
        let mut sessions = Sessions::default();
        let end = shale::prefix_successor(SM_SESSION_PREFIX).unwrap_or_default();
        for pair in db.range_opt(SM_SESSION_PREFIX.to_vec()..end, ro)? {
            let (key, value) = pair?;
            match SessionKey::decode(&key)? {
                SessionKey::Session(id) => {
                    let record = format::decode_session(&value)?;
                    sessions.by_use.insert((record.last_used, id));
                    let answered = BTreeSet::new();
                    sessions.open.insert(id, Session { record, answered });
                }
                SessionKey::Answer { session, seq } => {
                    // Keys sort a session's record before its answers.
                    let Some(s) = sessions.open.get_mut(&session) else {
                        return Err(crate::error::Error::corruption(
                            "session answer",
                            format!("session {session} has an answer but no record"),
                        ));
                    };
                    s.answered.insert(seq);
                }
            }
        }
        Ok(sessions)
    }

    /// Sessions open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Open session `id` (the log index of its opening), closing the least recently used
    /// one if [`MAX_SESSIONS`] are open.
    pub fn open(&mut self, id: u64, batch: &mut WriteBatch) {
        if self.open.len() >= MAX_SESSIONS {
            if let Some(&(_, oldest)) = self.by_use.first() {
                self.close(oldest, batch);
            }
        }
        let record = SessionRecord {
            lowest_kept: 1,
            last_used: id,
        };
        batch.put(
            SessionKey::Session(id).encode(),
            format::encode_session(&record),
        );
        self.by_use.insert((id, id));
        let answered = BTreeSet::new();
        self.open.insert(id, Session { record, answered });
    }

    fn close(&mut self, id: u64, batch: &mut WriteBatch) {
        let Some(s) = self.open.remove(&id) else {
            return;
        };
        self.by_use.remove(&(s.record.last_used, id));
        for seq in s.answered {
            batch.delete(SessionKey::Answer { session: id, seq }.encode());
        }
        batch.delete(SessionKey::Session(id).encode());
    }

    /// Whether the write at `at`, applied at log index `index`, is new, and the session's
    /// bookkeeping for it: the answers below the lowest awaited forgotten, the session
    /// marked as used.
    pub fn admit(&mut self, at: SessionSeq, index: u64, batch: &mut WriteBatch) -> Verdict {
        let Some(s) = self.open.get_mut(&at.session) else {
            return Verdict::Expired;
        };
        let verdict = if at.seq < s.record.lowest_kept {
            Verdict::Expired
        } else if s.answered.contains(&at.seq) {
            Verdict::Answered
        } else {
            Verdict::New
        };
        if at.lowest_awaited > s.record.lowest_kept {
            s.record.lowest_kept = at.lowest_awaited;
            let kept = s.answered.split_off(&at.lowest_awaited);
            for seq in std::mem::replace(&mut s.answered, kept) {
                batch.delete(
                    SessionKey::Answer {
                        session: at.session,
                        seq,
                    }
                    .encode(),
                );
            }
        }
        self.by_use.remove(&(s.record.last_used, at.session));
        s.record.last_used = index;
        self.by_use.insert((index, at.session));
        batch.put(
            SessionKey::Session(at.session).encode(),
            format::encode_session(&s.record),
        );
        verdict
    }

    /// Keep the answer of the new write at `at` for its retries, forgetting the session's
    /// oldest answer if it holds [`MAX_ANSWERS_PER_SESSION`].
    ///
    /// # Errors
    /// `InvalidArgument` for a response no write answers (a bug).
    pub fn answer(
        &mut self,
        at: SessionSeq,
        answer: AnswerRecord,
        batch: &mut WriteBatch,
        unflushed: &mut Unflushed,
    ) -> Result<()> {
        let Some(s) = self.open.get_mut(&at.session) else {
            return Ok(());
        };
        let key = |seq| {
            SessionKey::Answer {
                session: at.session,
                seq,
            }
            .encode()
        };
        batch.put(key(at.seq), format::encode_answer(&answer)?);
        unflushed.insert((at.session, at.seq), answer);
        s.answered.insert(at.seq);
        if s.answered.len() > MAX_ANSWERS_PER_SESSION {
            if let Some(oldest) = s.answered.pop_first() {
                batch.delete(key(oldest));
                s.record.lowest_kept = oldest.saturating_add(1);
                batch.put(
                    SessionKey::Session(at.session).encode(),
                    format::encode_session(&s.record),
                );
            }
        }
        Ok(())
    }

    /// The answer kept for the write at `at` ([`Verdict::Answered`]).
    ///
    /// # Errors
    /// `Engine`; `Corruption` for an answer the session lists but the database lacks.
    pub fn earlier(db: &Db, at: SessionSeq, unflushed: &Unflushed) -> Result<AnswerRecord> {
        if let Some(a) = unflushed.get(&(at.session, at.seq)) {
            return Ok(a.clone());
        }
        let key = SessionKey::Answer {
            session: at.session,
            seq: at.seq,
        }
        .encode();
        match db.get(&key)? {
            Some(bytes) => format::decode_answer(&bytes),
            None => Err(crate::error::Error::corruption(
                "session answer",
                format!("write {} of session {} has no answer", at.seq, at.session),
            )),
        }
    }
}

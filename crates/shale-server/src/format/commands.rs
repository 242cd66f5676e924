//! The commands a log entry carries (docs/format.md 13.2, `command` and `op`): their
//! encoding and decoding, bounded by the bytes at hand.

use shale::inspect::codec::{self, Decoder};

use super::fields::{get_opt_bytes, put_opt_bytes};
use super::indexes::{get_index_spec, put_index_spec};
use crate::command::{CarriedVector, Command, Op, SessionSeq, MAX_INDEX_DIM};

const COMMAND_WRITE: u8 = 1;
const COMMAND_CAS: u8 = 2;
const COMMAND_BATCH: u8 = 3;
const COMMAND_DEFINE_INDEX: u8 = 4;
const COMMAND_DEFINE_INDEX_KEYWORDS: u8 = 5;
const COMMAND_IN_SESSION: u8 = 6;
const COMMAND_OPEN_SESSION: u8 = 7;
const COMMAND_EMBEDDED: u8 = 8;
const COMMAND_SPLIT: u8 = 9;
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

pub(super) fn put_command(out: &mut Vec<u8>, cmd: &Command) {
    match cmd {
        Command::Write(ops) => {
            codec::put_u8(out, COMMAND_WRITE);
            codec::put_varint(out, ops.len() as u64);
            for op in ops {
                match &op.value {
                    Some(v) => {
                        codec::put_u8(out, OP_PUT);
                        codec::put_length_prefixed(out, &op.key);
                        codec::put_length_prefixed(out, v);
                    }
                    None => {
                        codec::put_u8(out, OP_DELETE);
                        codec::put_length_prefixed(out, &op.key);
                    }
                }
            }
        }
        Command::CompareAndSet {
            key,
            expected,
            new_value,
        } => {
            codec::put_u8(out, COMMAND_CAS);
            codec::put_length_prefixed(out, key);
            put_opt_bytes(out, expected.as_deref());
            put_opt_bytes(out, new_value.as_deref());
        }
        Command::DefineIndex(spec) => {
            let kind = match spec.keywords {
                Some(_) => COMMAND_DEFINE_INDEX_KEYWORDS,
                None => COMMAND_DEFINE_INDEX,
            };
            codec::put_u8(out, kind);
            put_index_spec(out, spec);
        }
        Command::Batch(cmds) => {
            codec::put_u8(out, COMMAND_BATCH);
            codec::put_varint(out, cmds.len() as u64);
            for cmd in cmds {
                put_command(out, cmd);
            }
        }
        Command::InSession { at, cmd } => {
            codec::put_u8(out, COMMAND_IN_SESSION);
            codec::put_u64(out, at.session);
            codec::put_u64(out, at.seq);
            codec::put_u64(out, at.lowest_awaited);
            put_command(out, cmd);
        }
        Command::OpenSession => codec::put_u8(out, COMMAND_OPEN_SESSION),
        Command::Embedded { cmd, vectors } => {
            codec::put_u8(out, COMMAND_EMBEDDED);
            put_carried(out, vectors);
            put_command(out, cmd);
        }
        Command::Split { at, child, version } => {
            codec::put_u8(out, COMMAND_SPLIT);
            codec::put_length_prefixed(out, at);
            codec::put_u64(out, *child);
            codec::put_u64(out, *version);
        }
    }
}

/// The vectors of a [`Command::Embedded`], before its command.
fn put_carried(out: &mut Vec<u8>, vectors: &[CarriedVector]) {
    codec::put_varint(out, vectors.len() as u64);
    for v in vectors {
        codec::put_varint(out, u64::from(v.put));
        codec::put_varint(out, v.vector.len() as u64);
        for x in &v.vector {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

/// The vectors of a [`Command::Embedded`], up to its command.
fn get_carried(d: &mut Decoder<'_>) -> Result<Vec<CarriedVector>, codec::DecodeError> {
    let n = d.varint("vector count")?;
    let mut vectors = Vec::with_capacity(capacity_for(n, d, 6));
    for _ in 0..n {
        let put = d.varint_u32("vector's put")?;
        let dim = d.varint_usize("vector's dimension")?;
        if dim > MAX_INDEX_DIM as usize {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("a vector of {dim} components"),
            ));
        }
        let components = d.bytes(4 * dim, "vector")?;
        vectors.push(CarriedVector {
            put,
            vector: codec::get_f32s(components),
        });
    }
    Ok(vectors)
}

pub(super) fn get_command(d: &mut Decoder<'_>) -> Result<Command, codec::DecodeError> {
    match d.u8("command kind")? {
        COMMAND_BATCH => get_batch(d),
        COMMAND_WRITE => get_ops(d).map(Command::Write),
        COMMAND_DEFINE_INDEX => Ok(Command::DefineIndex(get_index_spec(d, false)?)),
        COMMAND_DEFINE_INDEX_KEYWORDS => Ok(Command::DefineIndex(get_index_spec(d, true)?)),
        COMMAND_IN_SESSION => get_in_session(d),
        COMMAND_OPEN_SESSION => Ok(Command::OpenSession),
        COMMAND_EMBEDDED => get_embedded(d),
        COMMAND_SPLIT => Ok(Command::Split {
            at: d.length_prefixed("split key")?.to_vec(),
            child: d.u64("child group")?,
            version: d.u64("shard version")?,
        }),
        COMMAND_CAS => Ok(Command::CompareAndSet {
            key: d.length_prefixed("key")?.to_vec(),
            expected: get_opt_bytes(d, "expected value")?,
            new_value: get_opt_bytes(d, "new value")?,
        }),
        other => Err(codec::DecodeError::new(
            d.position(),
            format!("command kind {other}"),
        )),
    }
}

/// A batch's commands, after its kind byte.
fn get_batch(d: &mut Decoder<'_>) -> Result<Command, codec::DecodeError> {
    let n = d.varint("command count")?;
    let mut cmds = Vec::with_capacity(capacity_for(n, d, 2));
    for _ in 0..n {
        // Flat by construction: a batch inside a batch is not a command.
        if d.remaining().first() == Some(&COMMAND_BATCH) {
            return Err(codec::DecodeError::new(d.position(), "a batch in a batch"));
        }
        cmds.push(get_command(d)?);
    }
    Ok(Command::Batch(cmds))
}

/// A write's operations, after its kind byte.
fn get_ops(d: &mut Decoder<'_>) -> Result<Vec<Op>, codec::DecodeError> {
    let n = d.varint("op count")?;
    let mut ops = Vec::with_capacity(capacity_for(n, d, 2));
    for _ in 0..n {
        let op = match d.u8("op kind")? {
            OP_PUT => Op {
                key: d.length_prefixed("key")?.to_vec(),
                value: Some(d.length_prefixed("value")?.to_vec()),
            },
            OP_DELETE => Op {
                key: d.length_prefixed("key")?.to_vec(),
                value: None,
            },
            other => {
                return Err(codec::DecodeError::new(
                    d.position(),
                    format!("op kind {other}"),
                ))
            }
        };
        ops.push(op);
    }
    Ok(ops)
}

/// A write in a session, after its kind byte: its place, then the write.
fn get_in_session(d: &mut Decoder<'_>) -> Result<Command, codec::DecodeError> {
    let at = SessionSeq {
        session: d.u64("session")?,
        seq: d.u64("session write")?,
        lowest_awaited: d.u64("session lowest awaited")?,
    };
    // One level deep by construction: a session holds a write or a compare-and-set.
    if !matches!(d.remaining().first(), Some(&(COMMAND_WRITE | COMMAND_CAS))) {
        return Err(codec::DecodeError::new(
            d.position(),
            "a session's command is not a write",
        ));
    }
    Ok(Command::InSession {
        at,
        cmd: Box::new(get_command(d)?),
    })
}

/// Carried vectors and the command they are for, after the kind byte.
fn get_embedded(d: &mut Decoder<'_>) -> Result<Command, codec::DecodeError> {
    let vectors = get_carried(d)?;
    // One level deep by construction: the leader carries vectors for a write, a
    // compare-and-set, a batch or a session's write.
    if !matches!(
        d.remaining().first(),
        Some(&(COMMAND_WRITE | COMMAND_CAS | COMMAND_BATCH | COMMAND_IN_SESSION))
    ) {
        return Err(codec::DecodeError::new(
            d.position(),
            "vectors carried for a command that puts nothing",
        ));
    }
    Ok(Command::Embedded {
        cmd: Box::new(get_command(d)?),
        vectors,
    })
}

/// Room for `n` records of at least `min_len` bytes each, as many as the bytes left can
/// hold: a count read from the input never sizes an allocation past the input.
fn capacity_for(n: u64, d: &Decoder<'_>, min_len: usize) -> usize {
    usize::try_from(n)
        .unwrap_or(usize::MAX)
        .min(d.remaining().len() / min_len)
}

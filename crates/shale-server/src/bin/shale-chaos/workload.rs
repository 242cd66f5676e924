//! What the chaos test's clients do, and the history they record for the porcupine
//! checker in `chaos/check.go`, one JSON object a line.
//!
//! Keys `k0`, `k1`, ... come in groups of two (`k0 k1`, `k2 k3`, ...): a batch writes, and
//! a scan reads, the keys of one group at once, so the checker can still check each group
//! on its own. Every record names its group.
//!
//! | op | what the client does | recorded |
//! | --- | --- | --- |
//! | `get` | one key, from a node picked at random | the value read |
//! | `put`, `delete` | one key | the value written |
//! | `cas` | one key, expecting the value this client last read | whether it swapped |
//! | `batch` | puts and deletes of a group's keys, atomically | the writes |
//! | `scan` | the group's key range, from a node picked at random | each key's value |
//!
//! A write whose outcome is unknown (the call failed in a way that leaves it open) is
//! recorded with `"unknown": true`; a read that failed is not recorded.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shale_client::{Client, ClientError};
use shale_rng::XorShift64Star as Rng;

/// The history file, shared by the clients; times are nanoseconds since its start.
pub struct History {
    out: Mutex<BufWriter<File>>,
    start: Instant,
}

impl History {
    pub fn new(file: File) -> History {
        History {
            out: Mutex::new(BufWriter::new(file)),
            start: Instant::now(),
        }
    }

    fn now(&self) -> i64 {
        i64::try_from(self.start.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }

    fn record(&self, line: String) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{line}");
    }

    /// Write out what is buffered.
    pub fn flush(&self) -> std::io::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.flush()
    }
}

fn json_str(s: &str) -> String {
    // Keys and values here are ASCII letters, digits and dashes: no escaping needed, but
    // anything else is refused rather than written wrong.
    assert!(
        s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
        "{s:?}"
    );
    format!("\"{s}\"")
}

fn opt(v: Option<&str>) -> String {
    v.map_or_else(|| "null".to_string(), json_str)
}

/// `[{"key":..,"value":..}, ...]`
fn pairs(kvs: &[(String, Option<String>)]) -> String {
    let items: Vec<String> = kvs
        .iter()
        .map(|(k, v)| {
            format!(
                "{{\"key\":{},\"value\":{}}}",
                json_str(k),
                opt(v.as_deref())
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The keys of group `group` among `keys` keys.
fn group_keys(group: u32, keys: u32) -> Vec<String> {
    (group * 2..(group * 2 + 2).min(keys))
        .map(|i| format!("k{i}"))
        .collect()
}

/// An operation's outcome: recorded (its fields after `op`, without call and return
/// times), or not recorded (a read that failed).
enum Outcome {
    Record(String),
    Skip,
}

/// Whether a failed write may have applied; a refusal is a bug of the test.
fn unknown(what: &str, e: ClientError) -> bool {
    if let ClientError::Refused(why) = e {
        panic!("a {what} was refused: {why}");
    }
    true
}

struct Worker {
    id: u32,
    keys: u32,
    writer: Client,
    readers: Vec<Client>,
    rng: Rng,
    /// The last value this client read of each key: what its compare-and-sets expect.
    last_seen: HashMap<String, Option<String>>,
}

impl Worker {
    fn reader(&mut self) -> &Client {
        let i = self.rng.below(self.readers.len() as u64) as usize;
        self.readers.get(i).unwrap_or(&self.writer)
    }

    /// Operation number `n`: one picked at random (reads and writes in the shares of the
    /// table above), on a key or group picked at random.
    async fn one(&mut self, n: u64) -> Outcome {
        let key_index = self.rng.below(u64::from(self.keys)) as u32;
        let op = Op {
            group: key_index / 2,
            key: format!("k{key_index}"),
            value: format!("c{}-{n}", self.id),
        };
        match self.rng.below(20) {
            0..=7 => self.get(&op).await,
            8..=11 => self.put(&op).await,
            12 => self.delete(&op).await,
            13..=15 => self.compare_and_set(&op).await,
            16..=17 => self.batch(&op).await,
            _ => self.scan(&op).await,
        }
    }

    async fn get(&mut self, op: &Op) -> Outcome {
        let Ok(v) = self.reader().get(op.key.as_bytes()).await else {
            return Outcome::Skip;
        };
        let v = v.map(text);
        self.last_seen.insert(op.key.clone(), v.clone());
        let (k, v) = (json_str(&op.key), opt(v.as_deref()));
        Outcome::Record(format!("{},\"key\":{k},\"value\":{v}", op.head("get")))
    }

    async fn put(&mut self, op: &Op) -> Outcome {
        let failed = self
            .writer
            .put(op.key.as_bytes(), op.value.as_bytes())
            .await;
        let unknown = failed.err().is_some_and(|e| unknown("put", e));
        let (k, v) = (json_str(&op.key), json_str(&op.value));
        Outcome::Record(format!(
            "{},\"key\":{k},\"value\":{v},\"unknown\":{unknown}",
            op.head("put")
        ))
    }

    async fn delete(&mut self, op: &Op) -> Outcome {
        let failed = self.writer.delete(op.key.as_bytes()).await;
        let unknown = failed.err().is_some_and(|e| unknown("delete", e));
        let k = json_str(&op.key);
        Outcome::Record(format!(
            "{},\"key\":{k},\"unknown\":{unknown}",
            op.head("delete")
        ))
    }

    /// A compare-and-set expecting the value this client last read of the key.
    async fn compare_and_set(&mut self, op: &Op) -> Outcome {
        let expected = self.last_seen.get(&op.key).cloned().flatten();
        let (swapped, unknown) = match self
            .writer
            .compare_and_set(
                op.key.as_bytes(),
                expected.as_deref().map(str::as_bytes),
                Some(op.value.as_bytes()),
            )
            .await
        {
            Ok(o) => (o.swapped, false),
            Err(e) => (false, unknown("compare-and-set", e)),
        };
        Outcome::Record(format!(
            "{},\"key\":{},\"expected\":{},\"new\":{},\"swapped\":{swapped},\"unknown\":{unknown}",
            op.head("cas"),
            json_str(&op.key),
            opt(expected.as_deref()),
            json_str(&op.value),
        ))
    }

    /// Puts and deletes of the group's keys (a delete one time in four), atomically.
    async fn batch(&mut self, op: &Op) -> Outcome {
        let writes: Vec<(String, Option<String>)> = group_keys(op.group, self.keys)
            .into_iter()
            .map(|k| {
                let v = (self.rng.below(4) != 0).then(|| format!("{}-{k}", op.value));
                (k, v)
            })
            .collect();
        let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = writes
            .iter()
            .map(|(k, v)| (k.clone().into_bytes(), v.clone().map(String::into_bytes)))
            .collect();
        let unknown = self
            .writer
            .batch(&ops)
            .await
            .err()
            .is_some_and(|e| unknown("batch", e));
        Outcome::Record(format!(
            "{},\"writes\":{},\"unknown\":{unknown}",
            op.head("batch"),
            pairs(&writes)
        ))
    }

    /// The group's key range, each of its keys recorded with the value found or none.
    async fn scan(&mut self, op: &Op) -> Outcome {
        let keys = group_keys(op.group, self.keys);
        let (Some(first), end) = (keys.first(), format!("k{}", op.group * 2 + 2)) else {
            return Outcome::Skip;
        };
        let first = first.clone();
        let Ok((found, _)) = self
            .reader()
            .scan(first.as_bytes(), Some(end.as_bytes()), 0)
            .await
        else {
            return Outcome::Skip;
        };
        let found: HashMap<String, String> =
            found.into_iter().map(|(k, v)| (text(k), text(v))).collect();
        let reads: Vec<(String, Option<String>)> = keys
            .into_iter()
            .map(|k| {
                let v = found.get(&k).cloned();
                (k, v)
            })
            .collect();
        Outcome::Record(format!("{},\"reads\":{}", op.head("scan"), pairs(&reads)))
    }
}

/// What one operation works on: a key, its group, and the value a write would write.
struct Op {
    group: u32,
    key: String,
    value: String,
}

impl Op {
    /// The record's first fields: the operation's name and its group.
    fn head(&self, name: &str) -> String {
        format!("\"op\":\"{name}\",\"group\":{}", self.group)
    }
}

/// One client: operations one after another until `end` on `keys` keys, each recorded in
/// `history`; its random choices seeded from the run's `seed` and its `id`.
pub async fn client_loop(
    id: u32,
    seed: u64,
    keys: u32,
    endpoints: Vec<String>,
    history: Arc<History>,
    end: Instant,
) {
    let deadline = Duration::from_millis(1500);
    let Ok(writer) = Client::new(endpoints.clone(), None) else {
        return;
    };
    let readers: Vec<Client> = endpoints
        .iter()
        .filter_map(|e| Client::new(vec![e.clone()], None).ok())
        .map(|c| c.with_deadline(deadline))
        .collect();
    let seed = seed.wrapping_mul(1_000_003).wrapping_add(u64::from(id));
    let mut worker = Worker {
        id,
        keys,
        writer: writer.with_deadline(deadline),
        readers,
        rng: Rng::new(seed | 1),
        last_seen: HashMap::new(),
    };
    let mut n = 0u64;
    while Instant::now() < end {
        n += 1;
        let call = history.now();
        if let Outcome::Record(fields) = worker.one(n).await {
            let ret = history.now();
            history.record(format!(
                "{{\"client\":{id},{fields},\"call\":{call},\"return\":{ret}}}"
            ));
        }
    }
}

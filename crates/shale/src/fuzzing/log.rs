//! The WAL reader (and the write batches in its records) and the manifest.

use super::*;

/// The log reader shared by the WAL and the manifest (`wal/`), and the WAL payload
/// ([`BatchReader`]). Mode even: arbitrary bytes as a log; every record is decoded as a
/// write batch, and a batch that decodes re-encodes to the same bytes. Mode odd: records
/// written by [`LogWriter`] read back exactly; cut at any point (a torn tail) the log reads
/// back, without an error, every record that ended before the cut; padded with zeros it
/// reads back whole; with a byte flipped it reads back a prefix or reports `Corruption`.
/// With mode bit 2 the log is written as a WAL following another, and reads back its
/// predecessor.
pub fn wal_reader(data: &[u8]) {
    let (mode, rest) = mode(data);
    if mode & 1 == 0 {
        let _ = read_log(rest);
        return;
    }
    let mut input = Input::new(rest);
    let records = log_records_from(&mut input);
    let (log, ends) = write_log(&records, mode & 2 != 0);
    check_damaged_logs(log, &records, &ends, &mut input);
}

/// Up to 32 records parsed from `input`: short ones its bytes, long ones (spanning blocks)
/// a pattern.
fn log_records_from(input: &mut Input<'_>) -> Vec<Vec<u8>> {
    let mut records: Vec<Vec<u8>> = Vec::new();
    while !input.is_empty() && records.len() < 32 {
        let shape = input.u8();
        let record = if shape & 0x80 != 0 {
            // A long record spanning blocks, its bytes a pattern (cheap to make).
            let len = usize::from(input.u16()) % (3 * crate::wal::format::BLOCK_SIZE);
            let seed = input.u8();
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect()
        } else {
            input.bytes(usize::from(shape)).to_vec()
        };
        records.push(record);
    }
    records
}

/// Write `records` with [`LogWriter`] (`following`: as a WAL that follows another, so it
/// begins with a predecessor fragment) and check that they read back exactly. Returns the
/// log and where each record ended.
fn write_log(records: &[Vec<u8>], following: bool) -> (Vec<u8>, Vec<u64>) {
    let fs = mem_fs();
    let path = fuzz_path("000001.log");
    let file = fs.create_log(&path).expect("MemFs create_log");
    let mut previous = LogWriter::new(
        fs.create_log(&fuzz_path("000000.log"))
            .expect("MemFs create_log"),
    );
    previous
        .add_record(&[b"earlier"])
        .expect("LogWriter::add_record");
    let predecessor = (following && !records.is_empty()).then(|| crate::wal::Predecessor {
        wal: 0,
        length: previous.len(),
    });
    let mut writer = if predecessor.is_some() {
        LogWriter::following(file, &previous, 0)
    } else {
        LogWriter::new(file)
    };
    let mut ends = Vec::new();
    for r in records {
        writer.add_record(&[r]).expect("LogWriter::add_record");
        ends.push(writer.len());
    }
    writer.sync().expect("LogWriter::sync");
    drop(writer);
    let log = fs.read_all(&path).expect("MemFs read_all");
    let got = read_log(&log).expect("a written log must read back");
    assert_eq!(got, records, "log round trip");
    assert_eq!(
        LogReader::new(&log, &path).predecessor(),
        predecessor,
        "the predecessor fragment"
    );
    (log, ends)
}

/// The log of `records` (each ending at its entry of `ends`) cut, padded and with a byte
/// flipped, where `input` chooses, reads back as the contract says.
fn check_damaged_logs(log: Vec<u8>, records: &[Vec<u8>], ends: &[u64], input: &mut Input<'_>) {
    // A torn tail: every record that ended before the cut, and no error.
    let cut = usize::try_from(input.u32()).unwrap_or(0) % (log.len() + 1);
    let got = read_log(log.get(..cut).unwrap_or_default())
        .expect("a log cut short is a torn tail, not corruption");
    let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
    assert!(got.len() >= whole, "a cut at {cut} lost a whole record");
    assert_eq!(
        got,
        records.get(..got.len()).unwrap_or_default(),
        "torn log prefix"
    );

    // Zeros after the end (preallocation) are the end.
    let mut padded = log.clone();
    padded.resize(log.len() + usize::from(input.u16()), 0);
    assert_eq!(
        read_log(&padded).as_deref(),
        Some(records),
        "zero-padded log"
    );

    // A flipped byte: a prefix, or Corruption.
    if !log.is_empty() {
        let mut bad = log;
        let at = usize::try_from(input.u32()).unwrap_or(0) % bad.len();
        if let Some(b) = bad.get_mut(at) {
            *b ^= input.u8() | 1;
        }
        if let Some(got) = read_log(&bad) {
            assert_eq!(
                got,
                records.get(..got.len()).unwrap_or_default(),
                "flipped log"
            );
        }
    }
}

/// Every record of the log `data`, or `None` if the reader reported corruption. Each
/// record also goes through the write-batch decoder.
pub(super) fn read_log(data: &[u8]) -> Option<Vec<Vec<u8>>> {
    let path = fuzz_path("000001.log");
    let mut reader = LogReader::new(data, &path);
    let mut out = Vec::new();
    // Every record takes a 7-byte header.
    for _ in 0..data.len() / 7 + 2 {
        match expect_corruption(reader.next_record(), "LogReader::next_record")? {
            Some((_, record)) => {
                check_batch(record);
                out.push(record.to_vec());
            }
            None => return Some(out),
        }
    }
    panic!("the log reader returned more records than the log has headers");
}

/// A write batch that decodes re-encodes to the same bytes.
pub(super) fn check_batch(bytes: &[u8]) {
    let Ok(reader) = BatchReader::new(bytes) else {
        return;
    };
    let mut n = 0u32;
    for entry in reader.entries() {
        entry.expect("BatchReader::new validated every entry");
        n += 1;
    }
    assert_eq!(n, reader.count, "batch entry count");
    let mut again = batch::encode_header(reader.first_seq, reader.count).to_vec();
    again.extend_from_slice(reader.body());
    assert_eq!(again, bytes, "batch round trip");
}

// ---------------------------------------------------------------------------------------
// manifest

/// Version edits and the manifest (`version/edit.rs`, `manifest.rs`). Mode 0 mod 4: an edit
/// decoded from arbitrary bytes round-trips through its encoder. Mode 1: the rest split into
/// length-prefixed records, written as a well-framed manifest log, loaded by
/// [`RecoveredManifest::load`]. Mode 2: the rest as the raw manifest file. Mode 3: `CURRENT`
/// itself is the input. Loading returns a consistent state or `Corruption`.
pub fn manifest(data: &[u8]) {
    let (mode, rest) = mode(data);
    match mode % 4 {
        0 => {
            if let Ok(edit) = VersionEdit::decode(rest) {
                let mut buf = Vec::new();
                edit.encode(&mut buf);
                assert_eq!(
                    VersionEdit::decode(&buf).ok(),
                    Some(edit),
                    "edit round trip"
                );
            }
        }
        1 => {
            let mut input = Input::new(rest);
            let mut records = Vec::new();
            while !input.is_empty() && records.len() < 64 {
                let len = usize::from(input.u8());
                records.push(input.bytes(len).to_vec());
            }
            load_manifest(&manifest_log(&records), None);
        }
        2 => load_manifest(rest, None),
        _ => load_manifest(&manifest_log(&[]), Some(rest)),
    }
}

/// A manifest log holding `records`.
pub(super) fn manifest_log(records: &[Vec<u8>]) -> Vec<u8> {
    let fs = mem_fs();
    let path = fuzz_path("log");
    let mut writer = LogWriter::new(fs.create(&path).expect("MemFs create"));
    for r in records {
        writer.add_record(&[r]).expect("LogWriter::add_record");
    }
    writer.sync().expect("LogWriter::sync");
    drop(writer);
    fs.read_all(&path).expect("MemFs read_all")
}

/// Load a database directory holding MANIFEST-000001 = `log` and CURRENT = `current` (or
/// a CURRENT naming the manifest), and check the state it recovers.
pub(super) fn load_manifest(log: &[u8], current: Option<&[u8]>) {
    let fs = MemFs::new();
    let dir = Path::new("db");
    fs.create_dir_all(dir).expect("MemFs create_dir_all");
    let mut f = fs
        .create(&dir.join(manifest_name(FileId(1))))
        .expect("MemFs create");
    f.append(log).expect("MemFs append");
    f.sync().expect("MemFs sync");
    drop(f);
    match current {
        None => set_current(&fs, dir, FileId(1)).expect("set_current"),
        Some(bytes) => {
            let mut f = fs.create(&dir.join("CURRENT")).expect("MemFs create");
            f.append(bytes).expect("MemFs append");
            f.sync().expect("MemFs sync");
        }
    }
    let loaded = match RecoveredManifest::load(&fs, dir) {
        Ok(state) => state,
        Err(e) if e.is_corruption() => return,
        // CURRENT naming another manifest number that does not exist is reported as
        // corruption; a read of a missing file is the only other outcome allowed.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("RecoveredManifest::load: expected Ok or Corruption, got {e:?}"),
    };
    assert!(
        loaded.valid_bytes <= log.len() as u64,
        "valid_bytes past the end"
    );
    for (id, (level, meta)) in &loaded.files {
        assert_eq!(*id, meta.id, "file map key");
        assert!(level.index() < crate::version::NUM_LEVELS, "level in range");
        assert!(
            *id < loaded.next_file_number,
            "file id below next_file_number"
        );
        assert!(meta.smallest <= meta.largest, "file bounds in order");
    }
    let edit = loaded.snapshot_edit();
    let mut buf = Vec::new();
    edit.encode(&mut buf);
    assert_eq!(
        VersionEdit::decode(&buf).ok(),
        Some(edit),
        "snapshot edit round trip"
    );
}

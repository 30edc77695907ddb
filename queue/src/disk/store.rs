//! The queue's files: appending requests and acks, reading a request back,
//! deleting a segment once every request in it is settled, and recovering
//! all of it at start. Blocking I/O; callers run it off the async threads.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::record::{self, KIND_DONE};
use crate::Progress;

const VERSION: &str = "profcol-queue 1\n";

/// Where a request is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub seq: u64,
    pub segment: u64,
    pub offset: u64,
    /// The whole record's length.
    pub len: u64,
}

impl Location {
    pub fn payload_len(&self) -> u64 {
        self.len - record::REQUEST_HEADER as u64
    }
}

/// What a queue directory held at start.
pub(super) struct Recovered {
    /// Requests not yet settled, in the order they were queued, with the
    /// progress of the part-sent ones.
    pub entries: Vec<(Location, Progress)>,
    /// Damaged records and files found.
    pub corrupt: u64,
}

pub(super) struct Store {
    dir: PathBuf,
    fsync: bool,
    segment_bytes: u64,
    next_seq: u64,
    /// The segment appended to, and its length.
    active: (u64, File, u64),
    /// Requests not yet settled, per segment (the active one included).
    live: BTreeMap<u64, usize>,
    acks: HashMap<u64, File>,
    /// Held (locked) for the queue's life.
    _lock: File,
}

fn seg_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.seg"))
}

fn acks_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.acks"))
}

/// The id of a `NNNN.seg` / `NNNN.acks` file name.
fn file_id(name: &str, ext: &str) -> Option<u64> {
    name.strip_suffix(ext)?.parse().ok()
}

impl Store {
    pub(super) fn open(
        dir: &Path,
        fsync: bool,
        segment_bytes: u64,
        owner: &str,
    ) -> anyhow::Result<(Self, Recovered)> {
        let mut corrupt = 0;
        fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        if !version_ok(dir)? {
            // Kept aside, not deleted: someone may want to look at it.
            let aside = dir.with_extension(format!(
                "unreadable-{}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            ));
            fs::rename(dir, &aside).map_err(|e| {
                anyhow::anyhow!("cannot move the unreadable {} aside: {e}", dir.display())
            })?;
            fs::create_dir_all(dir)?;
            tracing::error!(exporter = owner, directory = %dir.display(), moved_to = %aside.display(), "sending queue: the directory holds no queue of this version; it was moved aside and a new queue started");
            corrupt += 1;
        }
        fs::write(dir.join("VERSION"), VERSION)?;
        let lock = File::create(dir.join("LOCK"))?;
        lock.try_lock().map_err(|_| {
            anyhow::anyhow!(
                "{} is in use by another process (two exporters or two collectors cannot share one queue)",
                dir.display()
            )
        })?;

        let mut segs = Vec::new();
        let mut ack_files = Vec::new();
        for e in fs::read_dir(dir)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if let Some(id) = file_id(&name, ".seg") {
                segs.push(id);
            } else if let Some(id) = file_id(&name, ".acks") {
                ack_files.push(id);
            }
        }
        segs.sort_unstable();
        // Acks of a segment that is gone are of no use.
        for id in ack_files {
            if segs.binary_search(&id).is_err() {
                let _ = fs::remove_file(acks_path(dir, id));
            }
        }

        let mut entries = Vec::new();
        let mut live = BTreeMap::new();
        let mut next_seq = 0;
        for &id in &segs {
            let data = fs::read(seg_path(dir, id))?;
            let scan = record::scan_requests(&data);
            drop(data);
            let acks = match fs::read(acks_path(dir, id)) {
                Ok(a) => record::read_acks(&a),
                Err(e) if e.kind() == io::ErrorKind::NotFound => record::Acks::default(),
                Err(e) => return Err(e.into()),
            };
            if scan.damaged > 0 || acks.damaged {
                tracing::error!(exporter = owner, segment = %seg_path(dir, id).display(), damaged_stretches = scan.damaged, damaged_acks = acks.damaged, "sending queue: damaged records skipped");
            }
            corrupt += scan.damaged + u64::from(acks.damaged);
            let mut pending = 0;
            for r in &scan.records {
                next_seq = next_seq.max(r.seq + 1);
                if acks.done.contains(&r.seq) {
                    continue;
                }
                pending += 1;
                let at = Location {
                    seq: r.seq,
                    segment: id,
                    offset: r.offset,
                    len: r.len,
                };
                entries.push((at, acks.progress.get(&r.seq).cloned().unwrap_or_default()));
            }
            next_seq = next_seq.max(id + 1);
            if pending == 0 {
                remove_segment(dir, id);
                continue;
            }
            live.insert(id, pending);
            if acks.damaged {
                // Appending after a torn ack would hide the new ones.
                rewrite_acks(dir, id, &acks)?;
            }
        }
        entries.sort_by_key(|(at, _)| at.seq);

        // Appends always go to a new segment, never after what a crash
        // may have torn.
        let active = create_segment(dir, next_seq, fsync)?;
        live.insert(next_seq, 0);
        let store = Self {
            dir: dir.to_owned(),
            fsync,
            segment_bytes,
            next_seq,
            active: (next_seq, active, 0),
            live,
            acks: HashMap::new(),
            _lock: lock,
        };
        Ok((store, Recovered { entries, corrupt }))
    }

    /// Appends one request (metadata, then the batch's protobuf).
    pub(super) fn append(&mut self, meta: &[u8], batch: &[u8]) -> io::Result<Location> {
        if self.active.2 >= self.segment_bytes {
            self.roll()?;
        }
        let seq = self.next_seq;
        let payload_len = u32::try_from(meta.len() + batch.len())
            .ok()
            .filter(|&l| l <= record::MAX_RECORD)
            .ok_or_else(|| io::Error::other("the request is too large to store"))?;
        let header =
            record::request_header(seq, payload_len, record::request_crc(seq, &[meta, batch]));
        let (segment, file, len) = &mut self.active;
        let offset = *len;
        let written = file
            .write_all(&header)
            .and_then(|()| file.write_all(meta))
            .and_then(|()| file.write_all(batch))
            .and_then(|()| if self.fsync { file.sync_data() } else { Ok(()) });
        if let Err(e) = written {
            // No torn record left behind (disk full): the next append
            // starts where this one did.
            let _ = file.set_len(offset);
            let _ = file.seek(SeekFrom::Start(offset));
            return Err(e);
        }
        let at = Location {
            seq,
            segment: *segment,
            offset,
            len: (header.len() + meta.len() + batch.len()) as u64,
        };
        *len += at.len;
        self.next_seq += 1;
        *self.live.entry(at.segment).or_default() += 1;
        Ok(at)
    }

    /// Records that a request is settled (`KIND_DONE`) or part-sent; a
    /// segment whose every request is settled is deleted.
    pub(super) fn ack(&mut self, at: Location, kind: u8, payload: &[u8]) -> io::Result<()> {
        let Some(live) = self.live.get(&at.segment).copied() else {
            return Ok(()); // Settled twice; the segment is gone.
        };
        let file = match self.acks.entry(at.segment) {
            std::collections::hash_map::Entry::Occupied(f) => f.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(acks_path(&self.dir, at.segment))?,
            ),
        };
        file.write_all(&record::ack_record(kind, at.seq, payload))?;
        if self.fsync {
            file.sync_data()?;
        }
        if kind != KIND_DONE {
            return Ok(());
        }
        let live = live.saturating_sub(1);
        self.live.insert(at.segment, live);
        if live == 0 {
            if at.segment == self.active.0 {
                self.empty_active()?;
            } else {
                self.live.remove(&at.segment);
                self.acks.remove(&at.segment);
                remove_segment(&self.dir, at.segment);
            }
        }
        Ok(())
    }

    /// The whole record at `at`, as it is on disk now.
    pub(super) fn read(&self, at: Location) -> io::Result<Vec<u8>> {
        let file = File::open(seg_path(&self.dir, at.segment))?;
        let mut buf = vec![0u8; at.len as usize];
        file.read_exact_at(&mut buf, at.offset)?;
        Ok(buf)
    }

    /// Everything in the active segment is settled: it starts again empty
    /// (cheaper than a new file per drained queue). The records go before
    /// their acks, so a crash in between cannot bring settled ones back.
    fn empty_active(&mut self) -> io::Result<()> {
        let (id, file, len) = &mut self.active;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        if self.fsync {
            file.sync_data()?;
        }
        *len = 0;
        self.acks.remove(id);
        match fs::remove_file(acks_path(&self.dir, *id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Starts a new active segment; the old one is deleted if settled.
    fn roll(&mut self) -> io::Result<()> {
        let id = self.next_seq;
        let file = create_segment(&self.dir, id, self.fsync)?;
        let (old, _, _) = std::mem::replace(&mut self.active, (id, file, 0));
        self.live.insert(id, 0);
        if self.live.get(&old) == Some(&0) {
            self.live.remove(&old);
            self.acks.remove(&old);
            remove_segment(&self.dir, old);
        }
        Ok(())
    }
}

/// Whether `dir` is empty or a queue of this version.
fn version_ok(dir: &Path) -> anyhow::Result<bool> {
    match fs::read_to_string(dir.join("VERSION")) {
        Ok(v) => Ok(v == VERSION),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(fs::read_dir(dir)?.next().is_none()),
        Err(_) => Ok(false),
    }
}

fn create_segment(dir: &Path, id: u64, fsync: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(seg_path(dir, id))?;
    if fsync {
        // The new name must survive a power loss too.
        File::open(dir)?.sync_all()?;
    }
    Ok(file)
}

fn remove_segment(dir: &Path, id: u64) {
    let _ = fs::remove_file(seg_path(dir, id));
    let _ = fs::remove_file(acks_path(dir, id));
}

/// Writes a segment's acks again without the torn tail.
fn rewrite_acks(dir: &Path, id: u64, acks: &record::Acks) -> io::Result<()> {
    let mut out = Vec::new();
    for &seq in &acks.done {
        out.extend(record::ack_record(KIND_DONE, seq, &[]));
    }
    for (&seq, p) in &acks.progress {
        let json = serde_json::to_vec(p).map_err(io::Error::other)?;
        out.extend(record::ack_record(record::KIND_PROGRESS, seq, &json));
    }
    let tmp = dir.join(format!("{id:020}.acks.tmp"));
    fs::write(&tmp, out)?;
    fs::rename(tmp, acks_path(dir, id))
}

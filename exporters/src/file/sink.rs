//! One output file: plain (truncated at open unless `append`), with the
//! records buffered until the flush interval, or rotated (written through,
//! as the Collector writes to timberjack unbuffered).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::config::Rotation;
use super::rotate::Rotator;

/// At most this many bytes wait in memory per open file (the Collector's
/// `bufio.Writer` holds 4 KiB; larger, fewer writes).
pub(super) const BUFFER_BYTES: usize = 64 * 1024;

pub(super) struct Sink {
    path: PathBuf,
    out: Out,
}

enum Out {
    Plain {
        file: File,
        /// Records not yet written; never more than [`BUFFER_BYTES`]. Kept
        /// when a write fails, so that nothing accepted is dropped.
        buf: Vec<u8>,
    },
    Rotating(Rotator),
}

impl Sink {
    /// Opens `path` (creating its parent directories): truncated unless
    /// `append`, or behind a [`Rotator`], which opens it on the first
    /// write.
    pub(super) fn open(path: &Path, append: bool, rotation: Option<&Rotation>) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let out = match rotation {
            Some(r) => {
                let rotator = Rotator::new(path.to_owned(), r);
                rotator.migrate_legacy_backups()?;
                Out::Rotating(rotator)
            }
            None => {
                let file = OpenOptions::new().create(true).append(true).open(path)?;
                if !append {
                    file.set_len(0)?;
                }
                Out::Plain {
                    file,
                    buf: Vec::new(),
                }
            }
        };
        Ok(Self {
            path: path.to_owned(),
            out,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Takes `record` whole, or fails without having taken any of it.
    pub(super) fn write(&mut self, record: &[u8]) -> io::Result<()> {
        match &mut self.out {
            Out::Rotating(r) => r.write(record),
            Out::Plain { file, buf } => {
                if buf.len() + record.len() > BUFFER_BYTES {
                    write_through(file, buf)?;
                    buf.clear();
                }
                if record.len() >= BUFFER_BYTES {
                    write_through(file, record)
                } else {
                    if buf.capacity() == 0 {
                        buf.reserve_exact(BUFFER_BYTES);
                    }
                    buf.extend_from_slice(record);
                    Ok(())
                }
            }
        }
    }

    /// Writes what waits in memory.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Out::Rotating(_) => Ok(()),
            Out::Plain { file, buf } => {
                if !buf.is_empty() {
                    write_through(file, buf)?;
                    buf.clear();
                }
                Ok(())
            }
        }
    }

    /// Bytes waiting in memory.
    pub(super) fn buffered(&self) -> usize {
        match &self.out {
            Out::Plain { buf, .. } => buf.len(),
            Out::Rotating(_) => 0,
        }
    }

    /// Flushes and closes the file.
    pub(super) fn close(mut self) -> io::Result<()> {
        let flushed = self.flush();
        if let Out::Rotating(r) = &mut self.out {
            r.close();
        }
        flushed
    }
}

/// Appends `bytes` whole or not at all: a failed write is cut off again,
/// so the next one does not follow torn bytes.
fn write_through(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    let before = file.metadata()?.len();
    if let Err(e) = file.write_all(bytes) {
        let _ = file.set_len(before);
        return Err(e);
    }
    Ok(())
}

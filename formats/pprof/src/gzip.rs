//! The gzip stream pprof files are written through.
//!
//! Small files are compressed on the calling thread in one go. A file that
//! outgrows [`PARALLEL_FROM`] is compressed pigz-style by `gzp` on the
//! other cores while the encoder goes on producing it: deflate at level 1
//! costs more than the encoding itself, so on one core it alone would put
//! the export over twice the cost of the OTLP encode (see the pprof bench).
//! The output is one ordinary gzip member either way.
//!
//! The serial path drives zlib-rs (flate2's `zlib-rs` backend) directly: it
//! writes the gzip header, CRC-32 and trailer itself, computing the CRC on
//! the bytes it has just copied into its window, where
//! `flate2::write::GzEncoder` makes a separate CRC pass over the input and
//! hands the output on in 32 KiB pieces, one `write` (a system call on a
//! `File`) each.

use std::io::{self, Write};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread::Scope;

use flate2::{Compress, Compression, FlushCompress, Status};
use gzp::deflate::Gzip;
use gzp::par::compress::{ParCompress, ParCompressBuilder};
use gzp::ZWriter;

/// Compressed output is handed to the writer in pieces of this size.
const OUT_CHUNK: usize = 128 * 1024;

/// deflate's largest window, as gzip and `GzEncoder` use.
const WINDOW_BITS: u8 = 15;

/// Uncompressed size from which a file is compressed on several threads:
/// below it, starting threads costs more than they save.
const PARALLEL_FROM: usize = 64 * 1024;

/// Input of one parallel deflate block. Blocks are compressed without the
/// previous block as dictionary (gzp offers that only over C zlib), which
/// costs about 2.5% in size at 64 KiB and 1.2% at 128 KiB; 64 KiB blocks
/// keep the last one short, so a 10k-sample file gains the most (pprof
/// bench).
const BLOCK: usize = 64 * 1024;

/// Compression threads of one file, besides the encoding thread.
const MAX_THREADS: usize = 4;

fn compression_threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, NonZeroUsize::get)
            .min(MAX_THREADS)
    })
}

/// Compression threads running in the whole process. Files written at
/// once (an exporter's consumers, several exporters) share one core's
/// worth per core: a file that finds none free is compressed on its own
/// thread, so ten consumers on a 2-core sidecar start at most 2 extra
/// threads, not 20.
static THREADS_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Some of the process's compression threads, given back on drop.
struct Threads(usize);

impl Threads {
    /// Up to [`compression_threads`] of those free; `None` when fewer than
    /// two are (one thread besides the encoder gains little).
    fn take() -> Option<Self> {
        let limit = compression_threads();
        let mut used = THREADS_IN_USE.load(Ordering::Relaxed);
        loop {
            let n = limit.saturating_sub(used);
            if n < 2 {
                return None;
            }
            match THREADS_IN_USE.compare_exchange_weak(
                used,
                used + n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(Self(n)),
                Err(now) => used = now,
            }
        }
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        THREADS_IN_USE.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// Compresses to `out` at `level` (0-9): serially until the input passes
/// `parallel_from` bytes (`None`: never), then on threads of `scope`.
/// [`GzipWriter::finish`] must be called, also after an error, so no
/// thread is left running.
pub(super) struct GzipWriter<'s, 'e, W: Write + Send + 's> {
    level: u32,
    scope: &'s Scope<'s, 'e>,
    parallel_from: Option<usize>,
    state: State<'s, W>,
}

enum State<'s, W: Write + Send + 's> {
    /// The start of the file, not compressed yet.
    Buffering {
        out: W,
        buf: Vec<u8>,
    },
    Serial(SerialGzip<W>),
    /// Its threads are given back once the stream is finished (gzp joins
    /// them there) or dropped.
    Parallel(Box<ParCompress<'s, Gzip, W>>, Threads),
    Finished,
}

impl<'s, 'e, W: Write + Send + 's> GzipWriter<'s, 'e, W> {
    pub(crate) fn new(out: W, level: u32, scope: &'s Scope<'s, 'e>) -> Self {
        let parallel_from = (compression_threads() > 1).then_some(PARALLEL_FROM);
        Self::with_threshold(out, level, scope, parallel_from)
    }

    fn with_threshold(
        out: W,
        level: u32,
        scope: &'s Scope<'s, 'e>,
        parallel_from: Option<usize>,
    ) -> Self {
        let level = level.min(9);
        let state = match parallel_from {
            Some(_) => State::Buffering {
                out,
                buf: Vec::new(),
            },
            None => State::Serial(SerialGzip::new(out, level)),
        };
        Self {
            level,
            scope,
            parallel_from,
            state,
        }
    }

    /// Ends the gzip stream and returns the writer, everything handed on.
    pub(crate) fn finish(&mut self) -> io::Result<W> {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Buffering { out, buf } => {
                let mut gz = SerialGzip::new(out, self.level);
                gz.run(&buf, FlushCompress::None)?;
                gz.finish()
            }
            State::Serial(gz) => gz.finish(),
            State::Parallel(mut gz, _threads) => gz.finish().map_err(gzp_error),
            State::Finished => Err(finished()),
        }
    }

    /// Goes on on threads if the process has some free, else serially.
    fn go_parallel(&mut self, out: W, buf: &[u8]) -> io::Result<()> {
        let Some(threads) = Threads::take() else {
            let mut gz = SerialGzip::new(out, self.level);
            gz.run(buf, FlushCompress::None)?;
            self.state = State::Serial(gz);
            return Ok(());
        };
        let builder = ParCompressBuilder::<Gzip>::new()
            .buffer_size(BLOCK)
            .map_err(gzp_error)?
            .num_threads(threads.0)
            .map_err(gzp_error)?
            .compression_level(Compression::new(self.level));
        let mut gz = Box::new(builder.from_borrowed_writer(out, self.scope));
        gz.write_all(buf)?;
        self.state = State::Parallel(gz, threads);
        Ok(())
    }
}

fn finished() -> io::Error {
    io::Error::other("gzip stream already finished or failed")
}

fn gzp_error(e: gzp::GzpError) -> io::Error {
    match e {
        gzp::GzpError::Io(e) => e,
        other => io::Error::other(other),
    }
}

impl<'s, 'e, W: Write + Send + 's> Write for GzipWriter<'s, 'e, W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match &mut self.state {
            State::Buffering { buf, .. } => {
                buf.extend_from_slice(data);
                if buf.len() >= self.parallel_from.unwrap_or(usize::MAX) {
                    let State::Buffering { out, buf } =
                        std::mem::replace(&mut self.state, State::Finished)
                    else {
                        unreachable!()
                    };
                    self.go_parallel(out, &buf)?;
                }
            }
            State::Serial(gz) => gz.run(data, FlushCompress::None)?,
            State::Parallel(gz, _) => {
                if let Err(e) = gz.write_all(data) {
                    // gzp has stopped its threads; it must not be finished.
                    self.state = State::Finished;
                    return Err(e);
                }
            }
            State::Finished => return Err(finished()),
        }
        Ok(data.len())
    }

    /// Output stays buffered until [`GzipWriter::finish`]: a pprof file
    /// is only readable whole.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One thread's streaming gzip.
struct SerialGzip<W: Write> {
    out: W,
    deflate: Compress,
    buf: Vec<u8>,
}

impl<W: Write> SerialGzip<W> {
    fn new(out: W, level: u32) -> Self {
        Self {
            out,
            deflate: Compress::new_gzip(Compression::new(level), WINDOW_BITS),
            buf: Vec::with_capacity(OUT_CHUNK),
        }
    }

    /// Feeds all of `input` to deflate (and with `Finish`, ends the
    /// stream), handing full output pieces to `out`.
    fn run(&mut self, mut input: &[u8], flush: FlushCompress) -> io::Result<()> {
        loop {
            if self.buf.len() == self.buf.capacity() {
                self.out.write_all(&self.buf)?;
                self.buf.clear();
            }
            let before = self.deflate.total_in();
            let status = self
                .deflate
                .compress_vec(input, &mut self.buf, flush)
                .map_err(io::Error::other)?;
            input = &input[(self.deflate.total_in() - before) as usize..];
            let done = match flush {
                FlushCompress::Finish => status == Status::StreamEnd,
                // Room left in the output: deflate took all it could.
                _ => input.is_empty() && self.buf.len() < self.buf.capacity(),
            };
            if done {
                return Ok(());
            }
        }
    }

    fn finish(mut self) -> io::Result<W> {
        self.run(&[], FlushCompress::Finish)?;
        self.out.write_all(&self.buf)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    /// Serial, serial after buffering, parallel from the first byte and
    /// parallel after buffering.
    const MODES: [Option<usize>; 4] = [None, Some(PARALLEL_FROM), Some(0), Some(100)];

    fn gzip(data: &[u8], level: u32, parallel_from: Option<usize>) -> Vec<u8> {
        std::thread::scope(|scope| {
            let mut w = GzipWriter::with_threshold(Vec::new(), level, scope, parallel_from);
            // Uneven pieces, as the pprof writer hands them over.
            for piece in data.chunks(BLOCK + 7) {
                w.write_all(piece).unwrap();
            }
            w.finish().unwrap()
        })
    }

    #[test]
    fn round_trips_at_every_level_size_and_mode() {
        // Compressible and incompressible parts, larger than the window,
        // an output piece and several parallel blocks.
        let mut data = Vec::new();
        let mut x = 1u64;
        for i in 0..400_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            data.push(if i % 3 == 0 {
                (x >> 56) as u8
            } else {
                (i % 251) as u8
            });
        }
        for mode in MODES {
            for level in [0, 1, 6, 9, 12] {
                for len in [0, 1, 1000, BLOCK, BLOCK + 1, 3 * BLOCK, data.len()] {
                    let gz = gzip(&data[..len], level, mode);
                    assert_eq!(&gz[..3], &[0x1f, 0x8b, 8], "gzip magic, deflate");
                    let what = format!("{mode:?}, level {level}, {len} bytes");
                    assert_eq!(gunzip(&gz), &data[..len], "{what}");
                }
            }
        }
    }

    /// Files written at once never run more compression threads in all
    /// than the process allows, and each still round-trips.
    #[test]
    fn concurrent_files_share_the_compression_threads() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        let most = std::thread::scope(|s| {
            let watch = s.spawn(|| {
                let mut most = 0;
                while !done.load(Ordering::Relaxed) {
                    most = most.max(THREADS_IN_USE.load(Ordering::Relaxed));
                    std::thread::yield_now();
                }
                most
            });
            let files: Vec<_> = (0..8)
                .map(|_| s.spawn(|| gzip(&data, 1, Some(0))))
                .collect();
            for f in files {
                assert_eq!(gunzip(&f.join().unwrap()), data);
            }
            done.store(true, Ordering::Relaxed);
            watch.join().unwrap()
        });
        assert!(most <= compression_threads(), "{most} threads at once");
    }

    #[test]
    fn write_errors_are_reported() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::StorageFull, "disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        for mode in MODES {
            let err = std::thread::scope(|scope| {
                let mut w = GzipWriter::with_threshold(Full, 1, scope, mode);
                let written = (0..100).try_for_each(|_| w.write_all(&[7; BLOCK]));
                let finished = w.finish().map(drop);
                written.and(finished).unwrap_err()
            });
            assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{mode:?}");
        }
    }
}

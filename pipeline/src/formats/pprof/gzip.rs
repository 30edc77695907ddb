//! The gzip stream pprof files are written through.
//!
//! zlib-rs (flate2's `zlib-rs` backend) writes the gzip header, CRC-32 and
//! trailer itself, computing the CRC on the bytes it has just copied into
//! its window; `flate2::write::GzEncoder` instead makes a separate CRC pass
//! over the input and hands the output on in 32 KiB pieces, one `write` each
//! (a system call per piece on a `File`). Here the output goes on in
//! [`OUT_CHUNK`] pieces, and nothing else is copied.

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};

/// Compressed output is handed to the writer in pieces of this size.
const OUT_CHUNK: usize = 128 * 1024;

/// deflate's largest window, as gzip and `GzEncoder` use.
const WINDOW_BITS: u8 = 15;

pub(super) struct GzipWriter<W: Write> {
    out: W,
    deflate: Compress,
    buf: Vec<u8>,
}

impl<W: Write> GzipWriter<W> {
    /// `level`: 0 (stored) to 9.
    pub fn new(out: W, level: u32) -> Self {
        Self {
            out,
            deflate: Compress::new_gzip(Compression::new(level.min(9)), WINDOW_BITS),
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

    /// Ends the gzip stream and returns the writer, everything handed on.
    pub fn finish(mut self) -> io::Result<W> {
        self.run(&[], FlushCompress::Finish)?;
        self.out.write_all(&self.buf)?;
        Ok(self.out)
    }
}

impl<W: Write> Write for GzipWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.run(data, FlushCompress::None)?;
        Ok(data.len())
    }

    /// Output stays buffered until [`GzipWriter::finish`]: a pprof file
    /// is only readable whole.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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

    #[test]
    fn round_trips_at_every_level_and_size() {
        // Compressible and incompressible parts, larger than the window
        // and than an output piece.
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
        for level in [0, 1, 6, 9, 12] {
            for len in [0, 1, 1000, 70_000, data.len()] {
                let mut w = GzipWriter::new(Vec::new(), level);
                // Uneven pieces, as the pprof writer hands them over.
                for piece in data[..len].chunks(65_536 + 7) {
                    w.write_all(piece).unwrap();
                }
                let gz = w.finish().unwrap();
                assert_eq!(&gz[..3], &[0x1f, 0x8b, 8], "gzip magic, deflate");
                assert_eq!(gunzip(&gz), &data[..len], "level {level}, {len} bytes");
            }
        }
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
        let mut w = GzipWriter::new(Full, 1);
        let err = w
            .write_all(&[7; 10])
            .and_then(|()| w.finish().map(drop))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    }
}

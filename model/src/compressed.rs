//! A request's bytes as its client compressed them, kept beside a batch
//! that nothing changes, so that an exporter sending with the same
//! compression forwards them instead of compressing the batch again
//! (deflating costs several times what inflating does).

use std::io::Read;

use bytes::Bytes;

/// A compression both the receivers read and the exporters write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Gzip,
    Zstd,
}

impl Encoding {
    /// The encoding a `Content-Encoding` or `grpc-encoding` header names
    /// when it names exactly one that can be forwarded.
    pub fn from_header(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "gzip" | "x-gzip" => Some(Self::Gzip),
            "zstd" => Some(Self::Zstd),
            _ => None,
        }
    }

    /// Its name in `Content-Encoding` and `grpc-encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }
}

/// The compressed bytes of a request and the length of what they inflate
/// to.
#[derive(Debug, Clone)]
pub struct Compressed {
    pub encoding: Encoding,
    pub bytes: Bytes,
    pub plain_len: usize,
}

impl Compressed {
    /// The bytes inflated again (they were once, when received: this only
    /// fails if they changed since).
    pub fn inflate(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.plain_len);
        match self.encoding {
            Encoding::Gzip => {
                if !gunzip_into(&self.bytes, &mut out) {
                    flate2::read::MultiGzDecoder::new(&self.bytes[..]).read_to_end(&mut out)?;
                }
            }
            Encoding::Zstd => {
                zstd::stream::read::Decoder::with_buffer(&self.bytes[..])?.read_to_end(&mut out)?;
            }
        }
        if out.len() != self.plain_len {
            return Err(std::io::Error::other(format!(
                "inflated to {} bytes, {} expected",
                out.len(),
                self.plain_len
            )));
        }
        Ok(out)
    }
}

/// The plain size a gzip stream's trailer gives (`ISIZE`, modulo 2^32,
/// of its last member).
pub fn gzip_trailer_size(gz: &[u8]) -> Option<usize> {
    let t = gz.len().checked_sub(4).map(|i| &gz[i..])?;
    Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as usize)
}

/// Inflates every member of `gz` in one call each (libdeflate: about
/// 0.6x the CPU of zlib-rs streaming it) into the spare room of `out`;
/// false (with `out` as it was) unless all of it fits and checks out,
/// when the caller streams it instead.
#[allow(unsafe_code)]
pub fn gunzip_into(gz: &[u8], out: &mut Vec<u8>) -> bool {
    use libdeflate_sys::*;
    let start = out.len();
    // SAFETY: the decompressor is used by this call alone and freed at
    // its end; libdeflate reads at most `gz.len()` bytes from `gz` and
    // writes at most the spare capacity it is given after `out.len()`;
    // the length is set only to what it reports written.
    unsafe {
        let d = libdeflate_alloc_decompressor();
        if d.is_null() {
            return false;
        }
        let mut rest = gz;
        let mut ok = true;
        while ok && !rest.is_empty() {
            let (mut read, mut written) = (0usize, 0usize);
            let room = out.capacity() - out.len();
            let r = libdeflate_gzip_decompress_ex(
                d,
                rest.as_ptr().cast(),
                rest.len(),
                out.as_mut_ptr().add(out.len()).cast(),
                room,
                &mut read,
                &mut written,
            );
            ok = r == libdeflate_result_LIBDEFLATE_SUCCESS && read > 0 && written <= room;
            if ok {
                out.set_len(out.len() + written);
                rest = &rest[read..];
            }
        }
        libdeflate_free_decompressor(d);
        if !ok {
            out.truncate(start);
        }
        ok
    }
}

/// `data` gzip'd in one call at zlib's `level` (1 to 9), or `None` if
/// libdeflate could not (no memory). libdeflate at level 1 takes about
/// 0.8x the CPU of zlib-rs at level 1 on a 2.5 MB request, and writes 11%
/// less.
#[allow(unsafe_code)]
pub fn gzip(data: &[u8], level: i32) -> Option<Vec<u8>> {
    use libdeflate_sys::*;
    // SAFETY: the compressor is used by this call alone and freed at its
    // end; libdeflate reads `data.len()` bytes from `data` and writes at
    // most `bound` into `out`, whose capacity is `bound`; the length is
    // set only to what it reports written.
    unsafe {
        let c = libdeflate_alloc_compressor(level.clamp(1, 9));
        if c.is_null() {
            return None;
        }
        let bound = libdeflate_gzip_compress_bound(c, data.len());
        let mut out = Vec::<u8>::with_capacity(bound);
        let n = libdeflate_gzip_compress(
            c,
            data.as_ptr().cast(),
            data.len(),
            out.as_mut_ptr().cast(),
            bound,
        );
        libdeflate_free_compressor(c);
        if n == 0 {
            return None;
        }
        out.set_len(n);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use prost::Message;

    use super::*;
    use crate::memory::{Held, MemoryBudget};
    use crate::{synth, wire_check, ProfileBatch};

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_in_one_call_reads_back_with_a_gzip_reader() {
        use std::io::Read;
        let data = synth::request(2_000, 200).encode_to_vec();
        for (level, data) in [(1, &data[..]), (6, &data), (9, &data), (1, &[][..])] {
            let gz = super::gzip(data, level).unwrap();
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data, "level {level}");
            assert!(
                data.is_empty() || gz.len() < data.len() / 2,
                "level {level}"
            );
        }
    }

    #[test]
    fn a_gzip_stream_inflates_in_one_call_when_it_fits_whole() {
        let data = b"profile bytes ".repeat(5000);
        let gz = gzip(&data);
        assert_eq!(gzip_trailer_size(&gz), Some(data.len()));
        let mut out = Vec::with_capacity(data.len());
        assert!(gunzip_into(&gz, &mut out));
        assert_eq!(out, data);
        // Short by one byte: refused whole, nothing left behind.
        let mut short = Vec::with_capacity(data.len() - 1);
        assert!(!gunzip_into(&gz, &mut short));
        assert!(short.is_empty());
        // Two members, with room for both; corrupt data.
        let mut both = Vec::with_capacity(2 * data.len());
        assert!(gunzip_into(&[gz.clone(), gz.clone()].concat(), &mut both));
        assert_eq!(both, [&data[..], &data[..]].concat());
        let mut flipped = gz.clone();
        flipped[gz.len() / 2] ^= 0xff;
        assert!(!gunzip_into(&flipped, &mut Vec::with_capacity(data.len())));
        assert!(!gunzip_into(b"not gzip", &mut Vec::with_capacity(100)));
    }

    /// A checked batch of a synthetic request, kept with its gzip form,
    /// holding all it measured in `budget`.
    fn batch(budget: &std::sync::Arc<MemoryBudget>) -> (ProfileBatch, Bytes, Bytes) {
        let plain = Bytes::from(synth::request(2_000, 50).encode_to_vec());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&plain).unwrap();
        let gz = Bytes::from(gz.finish().unwrap());
        let clean = wire_check::check(&plain).expect("synthetic requests are clean");
        let full = plain.len() + clean.heap + gz.len();
        let mut b = ProfileBatch::checked(plain.clone(), clean).with_compressed(Some(Compressed {
            encoding: Encoding::Gzip,
            bytes: gz.clone(),
            plain_len: plain.len(),
        }));
        b.meta.memory = Some(Held::new(budget.force(full)));
        assert_eq!(b.held_bytes(), full);
        (b, plain, gz)
    }

    #[test]
    fn a_batch_forwarded_compressed_holds_only_its_compressed_bytes() {
        let budget = MemoryBudget::new(1 << 30);
        let (mut b, plain, gz) = batch(&budget);
        let full = budget.used();
        b.hold_bytes_only(Some(Encoding::Gzip));
        assert_eq!(budget.used(), gz.len());
        assert_eq!(b.encoded_len(), plain.len());
        assert_eq!(b.compressed().map(|c| &c.bytes), Some(&gz));
        // An exporter that wants the plain bytes after all: inflated
        // again, and reserved again.
        assert_eq!(b.encoded(), Some(&plain));
        assert_eq!(budget.used(), gz.len() + plain.len());
        b.data();
        assert_eq!(budget.used(), full, "decoding reserves what it takes");
        assert!(b.compressed().is_some(), "reading changes nothing");
        b.data_mut();
        assert!(b.compressed().is_none() && b.encoded().is_none());
    }

    #[test]
    fn exporters_that_compress_otherwise_keep_the_plain_bytes() {
        let budget = MemoryBudget::new(1 << 30);
        for other in [Some(Encoding::Zstd), None] {
            let (mut b, plain, _) = batch(&budget);
            b.hold_bytes_only(other);
            assert!(b.compressed().is_none(), "{other:?}");
            assert_eq!(b.encoded(), Some(&plain));
            assert_eq!(budget.used(), plain.len(), "{other:?}");
            drop(b);
        }
    }

    #[test]
    fn headers_name_one_forwardable_encoding() {
        assert_eq!(Encoding::from_header(" GZIP"), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_header("x-gzip"), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_header("zstd"), Some(Encoding::Zstd));
        for no in ["br", "deflate", "gzip, br", "identity", ""] {
            assert_eq!(Encoding::from_header(no), None, "{no}");
        }
    }
}

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
/// neither library could (no memory). Level 1 is ISA-L's (igzip): from
/// 32 KB up it takes 0.4–0.5x the CPU of libdeflate's level 1, below
/// about the same, and writes 1–3% more (2026-12-01: `synth` requests of
/// 135 KB to 2.4 MB, and the recorded clients' requests, 0.3 to 29 KB).
/// Other levels, and what igzip cannot take whole, are libdeflate's,
/// which at level 6 writes less than zlib in less time.
pub fn gzip(data: &[u8], level: i32) -> Option<Vec<u8>> {
    #[cfg(not(fuzzing))]
    if level <= 1 {
        if let Some(gz) = igzip_fast(data) {
            return Some(gz);
        }
    }
    libdeflate_gzip(data, level)
}

/// igzip's level 1, stateless: `data` and the output whole, in one call
/// with its smallest working buffer (the larger ones write no less and
/// cost more to set up for a small request). `None` if the output would
/// not fit the bound given (never for profiles; libdeflate takes it).
#[cfg(not(fuzzing))]
#[allow(unsafe_code)]
fn igzip_fast(data: &[u8]) -> Option<Vec<u8>> {
    use isal_sys::igzip_lib as isal;
    let len = u32::try_from(data.len())
        .ok()
        .filter(|&n| n < u32::MAX / 2)?;
    // A stored block takes 5 bytes per 64 KB; the header and trailer 18.
    let bound = data.len() + data.len() / 64 + 1024;
    let mut out = Vec::<u8>::with_capacity(bound);
    let mut work = Vec::<u8>::with_capacity(isal::ISAL_DEF_LVL1_SMALL as usize);
    // SAFETY: the stream is initialised by `isal_deflate_stateless_init`
    // before use and lives for this call only; igzip reads `len` bytes
    // from `data`, uses `work`'s capacity as its working buffer (which it
    // initialises itself) and writes at most `bound` bytes into `out`,
    // whose capacity is `bound`; the length is set only to what it
    // reports written, after it reports success.
    unsafe {
        let mut stream = std::mem::MaybeUninit::<isal::isal_zstream>::zeroed();
        isal::isal_deflate_stateless_init(stream.as_mut_ptr());
        let mut stream = stream.assume_init();
        stream.level = 1;
        stream.level_buf = work.as_mut_ptr();
        stream.level_buf_size = isal::ISAL_DEF_LVL1_SMALL;
        stream.gzip_flag = isal::IGZIP_GZIP as u16;
        stream.end_of_stream = 1;
        stream.flush = isal::NO_FLUSH as u16;
        stream.next_in = data.as_ptr().cast_mut();
        stream.avail_in = len;
        stream.next_out = out.as_mut_ptr();
        stream.avail_out = u32::try_from(bound).ok()?;
        if isal::isal_deflate_stateless(&mut stream) != isal::COMP_OK as i32 {
            return None;
        }
        out.set_len(stream.total_out as usize);
    }
    Some(out)
}

#[allow(unsafe_code)]
fn libdeflate_gzip(data: &[u8], level: i32) -> Option<Vec<u8>> {
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

    /// Level 1 is igzip's, whatever the input: none, a byte, a run igzip
    /// writes as one repeated match, bytes that do not compress (stored
    /// blocks over 64 KB), and a request.
    #[test]
    fn level_1_is_igzip_and_reads_back_for_any_input() {
        use std::io::Read;
        let mut noise = vec![0u8; 300_000];
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for b in &mut noise {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let request = synth::request(2_000, 200).encode_to_vec();
        let zeros = vec![0u8; 100_000];
        for data in [&[][..], b"p", &zeros, &noise, &request] {
            let gz = super::gzip(data, 1).unwrap();
            assert_eq!(Some(&gz), super::igzip_fast(data).as_ref());
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data, "{} bytes", data.len());
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

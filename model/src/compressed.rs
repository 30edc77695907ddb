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
                flate2::read::MultiGzDecoder::new(&self.bytes[..]).read_to_end(&mut out)?;
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use prost::Message;

    use super::*;
    use crate::memory::{Held, MemoryBudget};
    use crate::{synth, wire_check, ProfileBatch};

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

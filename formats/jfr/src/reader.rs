//! The primitive encodings of a JFR chunk: big-endian fixed-width values,
//! or, when the chunk's header says so, JFR's compressed integers (LEB128,
//! seven bits a byte, the ninth byte holding a full eight); and strings in
//! their six encodings. Every read is checked against the slice's end, so
//! a claimed length never allocates more than the bytes that are there.

use crate::Error;

/// How a string value is written (the byte before it).
pub mod encoding {
    pub const NULL: u8 = 0;
    pub const EMPTY: u8 = 1;
    pub const POOL: u8 = 2;
    pub const UTF8: u8 = 3;
    pub const CHARS: u8 = 4;
    pub const LATIN1: u8 = 5;
}

/// A string value as read: its text, or a reference into the chunk's
/// `java.lang.String` pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Str {
    Null,
    Text(String),
    Pool(i64),
}

/// A cursor over one chunk's bytes.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pub pos: usize,
    compressed: bool,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], compressed: bool) -> Self {
        Reader {
            buf,
            pos: 0,
            compressed,
        }
    }

    pub fn at(&self, pos: usize) -> Self {
        Reader {
            pos,
            ..self.clone()
        }
    }

    /// The same cursor, unable to read past `end`.
    pub fn until(&self, end: usize) -> Self {
        Reader {
            buf: &self.buf[..end.min(self.buf.len())],
            ..self.clone()
        }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(Error::new(format!(
                "at byte {}: {n} bytes claimed, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.bytes(1)?[0])
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub fn be_u16(&mut self) -> Result<u16, Error> {
        self.fixed::<2>().map(u16::from_be_bytes)
    }

    pub fn be_i32(&mut self) -> Result<i32, Error> {
        self.fixed::<4>().map(i32::from_be_bytes)
    }

    pub fn be_i64(&mut self) -> Result<i64, Error> {
        self.fixed::<8>().map(i64::from_be_bytes)
    }

    /// A compressed integer: up to eight 7-bit groups, low first, then a
    /// full byte.
    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..56).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Ok(v | u64::from(self.u8()?) << 56)
    }

    /// `short` and `char`.
    pub fn short(&mut self) -> Result<i64, Error> {
        if self.compressed {
            Ok(self.varint()? as u16 as i16 as i64)
        } else {
            self.be_u16().map(|v| v as i16 as i64)
        }
    }

    pub fn int(&mut self) -> Result<i32, Error> {
        if self.compressed {
            Ok(self.varint()? as i32)
        } else {
            self.be_i32()
        }
    }

    pub fn long(&mut self) -> Result<i64, Error> {
        if self.compressed {
            Ok(self.varint()? as i64)
        } else {
            self.be_i64()
        }
    }

    /// A count (array length, pool size, ...) that cannot exceed the bytes
    /// left, each counted item taking at least one.
    pub fn count(&mut self) -> Result<usize, Error> {
        let at = self.pos;
        let n = self.int()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(Error::new(format!(
                "at byte {at}: a count of {n} with {} bytes left",
                self.remaining()
            ))),
        }
    }

    /// A string value; `want` false skips it without building its text.
    pub fn string(&mut self, want: bool) -> Result<Str, Error> {
        let at = self.pos;
        match self.u8()? {
            encoding::NULL => Ok(Str::Null),
            encoding::EMPTY => Ok(Str::Text(String::new())),
            encoding::POOL => self.long().map(Str::Pool),
            encoding::UTF8 => {
                let n = self.count()?;
                let b = self.bytes(n)?;
                Ok(Str::Text(if want {
                    String::from_utf8_lossy(b).into_owned()
                } else {
                    String::new()
                }))
            }
            encoding::LATIN1 => {
                let n = self.count()?;
                let b = self.bytes(n)?;
                Ok(Str::Text(if want {
                    b.iter().map(|&c| c as char).collect()
                } else {
                    String::new()
                }))
            }
            encoding::CHARS => {
                let n = self.count()?;
                let mut s = String::new();
                for _ in 0..n {
                    let c = self.short()? as u16;
                    if want {
                        s.push(char::from_u32(u32::from(c)).unwrap_or('\u{fffd}'));
                    }
                }
                Ok(Str::Text(s))
            }
            e => Err(Error::new(format!(
                "at byte {at}: unknown string encoding {e}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_integers_take_nine_bytes_at_most() {
        let mut r = Reader::new(
            &[
                0x7f, 0x80, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
            true,
        );
        assert_eq!(r.long().unwrap(), 127);
        assert_eq!(r.long().unwrap(), 128);
        assert_eq!(r.long().unwrap(), -1);
        assert_eq!(r.remaining(), 0);
        assert!(r.long().is_err());
    }

    #[test]
    fn a_claimed_length_beyond_the_bytes_is_an_error() {
        // UTF-8 string claiming 2^31-1 bytes.
        let mut r = Reader::new(&[3, 0xff, 0xff, 0xff, 0xff, 0x07, b'a'], true);
        assert!(r.string(true).unwrap_err().to_string().contains("count"));
        let mut r = Reader::new(&[5, 2, b'h', 0xe9], true);
        assert_eq!(r.string(true).unwrap(), Str::Text("hé".into()));
    }
}

//! Reading protobuf's wire format from a slice. Every read returns `None`
//! on anything prost would not accept as it is (or that this reader leaves
//! to prost, such as groups): the codec then lets prost decode the whole
//! message, which names the fault, and the wire check takes the decoding
//! path.

/// Wire types.
pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LEN: u8 = 2;
pub(crate) const FIXED32: u8 = 5;

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// What is left to read.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// prost's `decode_varint`: at most ten bytes, the tenth at most 1.
    #[inline]
    pub(crate) fn varint(&mut self) -> Option<u64> {
        // Keys and most indices take one byte.
        match self.buf.split_first() {
            Some((&x, rest)) if x < 0x80 => {
                self.buf = rest;
                Some(x as u64)
            }
            _ => self.varint_long(),
        }
    }

    #[inline(never)]
    fn varint_long(&mut self) -> Option<u64> {
        let b = self.buf;
        let mut v = 0u64;
        for (i, &x) in b.iter().enumerate().take(10) {
            if i == 9 && x > 1 {
                return None;
            }
            v |= ((x & 0x7f) as u64) << (7 * i);
            if x < 0x80 {
                self.buf = &b[i + 1..];
                return Some(v);
            }
        }
        None
    }

    /// A field's number and wire type, as prost's `decode_key` checks them.
    #[inline]
    pub(crate) fn key(&mut self) -> Option<(u32, u8)> {
        let k = self.varint()?;
        if k > u32::MAX as u64 || k < 8 {
            return None;
        }
        Some(((k >> 3) as u32, (k & 7) as u8))
    }

    /// [`Reader::key`], or `Some(None)` at the end of the message.
    #[inline]
    pub(crate) fn next_key(&mut self) -> Option<Option<(u32, u8)>> {
        if self.is_empty() {
            return Some(None);
        }
        self.key().map(Some)
    }

    /// A length-delimited field's bytes.
    #[inline]
    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.varint()?;
        if n > self.buf.len() as u64 {
            return None;
        }
        let (head, tail) = self.buf.split_at(n as usize);
        self.buf = tail;
        Some(head)
    }

    pub(crate) fn fixed64(&mut self) -> Option<u64> {
        let (head, tail) = self.buf.split_first_chunk::<8>()?;
        self.buf = tail;
        Some(u64::from_le_bytes(*head))
    }

    /// Skips a field of an unknown number; groups are left to prost.
    pub(crate) fn skip(&mut self, wire: u8) -> Option<()> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed64().map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => {
                let (_, tail) = self.buf.split_first_chunk::<4>()?;
                self.buf = tail;
                Some(())
            }
            _ => None,
        }
    }

    /// A string field, UTF-8 as prost requires.
    pub(crate) fn string(&mut self) -> Option<String> {
        Some(std::str::from_utf8(self.bytes()?).ok()?.to_owned())
    }
}

/// How many fields of each number below `N` `msg` holds at its top
/// level: the capacities its repeated message fields will need. `None` if
/// the message does not read as fields.
pub(crate) fn count_fields<const N: usize>(msg: &[u8]) -> Option<[usize; N]> {
    let mut r = Reader::new(msg);
    let mut n = [0; N];
    while !r.is_empty() {
        let (f, wire) = r.key()?;
        if let Some(c) = n.get_mut(f as usize) {
            *c += 1;
        }
        r.skip(wire)?;
    }
    Some(n)
}

/// A repeated varint field, packed (`LEN`) or one value (`VARINT`),
/// appended to `out` through `cast` (prost's truncating `as`).
#[inline]
pub(crate) fn varints<T>(
    r: &mut Reader<'_>,
    wire: u8,
    out: &mut Vec<T>,
    cast: impl Fn(u64) -> T,
) -> Option<()> {
    match wire {
        VARINT => out.push(cast(r.varint()?)),
        LEN => {
            let b = r.bytes()?;
            // Each varint ends in one byte under 0x80: the exact count.
            out.reserve(b.iter().filter(|&&x| x < 0x80).count());
            let mut p = Reader::new(b);
            while !p.is_empty() {
                out.push(cast(p.varint()?));
            }
        }
        _ => return None,
    }
    Some(())
}

/// A repeated fixed64 field, packed or one value.
pub(crate) fn fixed64s(r: &mut Reader<'_>, wire: u8, out: &mut Vec<u64>) -> Option<()> {
    match wire {
        FIXED64 => out.push(r.fixed64()?),
        LEN => {
            let b = r.bytes()?;
            if b.len() % 8 != 0 {
                return None;
            }
            out.extend(
                b.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8"))),
            );
        }
        _ => return None,
    }
    Some(())
}

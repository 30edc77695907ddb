//! Pyroscope `/ingest` bodies that are neither pprof nor folded text, read
//! into folded text (`frame;frame COUNT` lines, root first) for the
//! receiver's folded converter: [`speedscope`] JSON and old clients'
//! binary [`tree`]s and tries. Pure, no I/O, and apart from the receiver so
//! that the fuzz targets take it without the receiver's dependencies.
//!
//! Expanding a body into stacks can grow it (a deep stack repeated), so
//! the text is charged to the caller's memory budget as it grows.

pub mod speedscope;
pub mod tree;

/// Why a body did not become folded text.
#[derive(Debug)]
pub enum Error<E> {
    /// The body is not what its format says; the message says why.
    Malformed(String),
    /// The caller's budget refused the text's growth.
    Budget(E),
}

/// Takes `bytes` more of the caller's memory, or refuses.
pub type Charge<'a, E> = &'a mut dyn FnMut(usize) -> Result<(), E>;

/// Folded text charged to a budget as it grows.
pub struct FoldedWriter<'a, E> {
    out: Vec<u8>,
    charged: usize,
    charge: Charge<'a, E>,
}

impl<'a, E> FoldedWriter<'a, E> {
    /// Charged per this many bytes of text.
    const STEP: usize = 64 << 10;

    pub fn new(charge: Charge<'a, E>) -> Self {
        Self {
            out: Vec::new(),
            charged: 0,
            charge,
        }
    }

    /// Appends `stack COUNT`; `stack` must hold no newline.
    pub fn line(&mut self, stack: &[u8], count: u64) -> Result<(), Error<E>> {
        self.out.extend_from_slice(stack);
        self.out.push(b' ');
        self.out.extend_from_slice(count.to_string().as_bytes());
        self.out.push(b'\n');
        if self.out.len() >= self.charged + Self::STEP {
            (self.charge)(self.out.len() - self.charged).map_err(Error::Budget)?;
            self.charged = self.out.len();
        }
        Ok(())
    }

    /// The text, all of it charged.
    pub fn finish(self) -> Result<Vec<u8>, Error<E>> {
        (self.charge)(self.out.len() - self.charged).map_err(Error::Budget)?;
        Ok(self.out)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    /// A budget of `limit` bytes that says how much it holds.
    pub(crate) fn budget(
        limit: usize,
    ) -> (
        std::rc::Rc<std::cell::Cell<usize>>,
        impl FnMut(usize) -> Result<(), String>,
    ) {
        let used = std::rc::Rc::new(std::cell::Cell::new(0));
        let held = used.clone();
        let charge = move |n: usize| {
            if held.get() + n > limit {
                return Err(format!("memory budget of {limit} bytes is full"));
            }
            held.set(held.get() + n);
            Ok(())
        };
        (used, charge)
    }
}

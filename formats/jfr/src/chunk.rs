//! One chunk: its header, its metadata, and the constant pools a profile
//! needs (stack traces, methods, classes, symbols, strings, thread
//! states), each entry decoded once into a compact table; the other pools
//! are skipped. Events are then walked by [`Chunk::events`].

use ahash::HashMap;

use crate::metadata::{Kind, Types};
use crate::reader::{Reader, Str};
use crate::Error;

pub(crate) const MAGIC: &[u8; 4] = b"FLR\0";
pub(crate) const HEADER_SIZE: usize = 68;
const EVENT_METADATA: i64 = 0;
const EVENT_POOL: i64 = 1;

#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub major: u16,
    pub minor: u16,
    pub size: usize,
    pub pool_offset: i64,
    pub metadata_offset: i64,
    pub start_nanos: i64,
    pub duration_nanos: i64,
    pub start_ticks: i64,
    pub ticks_per_second: i64,
    pub compressed: bool,
}

impl Header {
    /// The header at the start of `buf`, its claims checked against `buf`.
    pub fn read(buf: &[u8]) -> Result<Header, Error> {
        let mut r = Reader::new(buf, false);
        if r.bytes(4).ok() != Some(MAGIC.as_slice()) {
            return Err(Error::new("not a JFR chunk (no FLR magic)"));
        }
        let major = r.be_u16()?;
        let minor = r.be_u16()?;
        if major != 2 {
            return Err(Error::new(format!(
                "JFR version {major}.{minor} is not supported (JDK 11+ writes 2.x)"
            )));
        }
        let size = r.be_i64()?;
        let h = Header {
            major,
            minor,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            pool_offset: r.be_i64()?,
            metadata_offset: r.be_i64()?,
            start_nanos: r.be_i64()?,
            duration_nanos: r.be_i64()?,
            start_ticks: r.be_i64()?,
            ticks_per_second: r.be_i64()?,
            compressed: r.be_i32()? & 1 != 0,
        };
        if h.size < HEADER_SIZE || h.size > buf.len() {
            return Err(Error::new(format!(
                "the chunk claims {size} bytes, {} are there",
                buf.len()
            )));
        }
        let inside = |o: i64| usize::try_from(o).is_ok_and(|o| o >= HEADER_SIZE && o < h.size);
        if !inside(h.metadata_offset) {
            return Err(Error::new(format!(
                "the metadata offset {} is outside the chunk",
                h.metadata_offset
            )));
        }
        Ok(h)
    }
}

/// A frame of a stack trace: its method's pool index and line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    pub method: i64,
    pub line: i32,
}

/// Where the pooled values a profile needs live.
#[derive(Default)]
pub(crate) struct Pools {
    pub strings: HashMap<i64, String>,
    pub symbols: HashMap<i64, Str>,
    /// Class: its name's symbol.
    pub classes: HashMap<i64, i64>,
    /// Method: its class and its name's symbol.
    pub methods: HashMap<i64, (i64, i64)>,
    /// Stack trace: its frames in `frames`, leaf first.
    pub stacks: HashMap<i64, (u32, u32)>,
    pub frames: Vec<Frame>,
    pub thread_states: HashMap<i64, Str>,
}

impl Pools {
    /// A string value, looked up in the string pool when it refers to it.
    pub(crate) fn text<'s>(&'s self, s: &'s Str) -> &'s str {
        match s {
            Str::Text(t) => t,
            Str::Pool(i) => self.strings.get(i).map_or("", String::as_str),
            Str::Null => "",
        }
    }

    pub(crate) fn symbol(&self, i: i64) -> &str {
        self.symbols.get(&i).map_or("", |s| self.text(s))
    }
}

/// The pool classes a profile reads, by class index.
#[derive(Default, Clone, Copy)]
struct Wanted {
    string: Option<usize>,
    symbol: Option<usize>,
    class: Option<usize>,
    method: Option<usize>,
    stack: Option<usize>,
    frame: Option<usize>,
    thread_state: Option<usize>,
}

pub(crate) struct Chunk<'a> {
    pub header: Header,
    pub buf: &'a [u8],
    pub types: Types,
    pub pools: Pools,
}

impl<'a> Chunk<'a> {
    /// The chunk at the start of `buf` (which may hold more chunks after
    /// it), with its metadata and pools read.
    pub(crate) fn read(buf: &'a [u8]) -> Result<Chunk<'a>, Error> {
        let header = Header::read(buf)?;
        let buf = &buf[..header.size];
        let mut r = Reader::new(buf, header.compressed).at(header.metadata_offset as usize);
        let (end, ty) = event_head(&mut r, buf.len())?;
        if ty != EVENT_METADATA {
            return Err(Error::new(format!(
                "the metadata offset points at an event of type {ty}"
            )));
        }
        let types = Types::read(&mut r.until(end))?;
        let mut chunk = Chunk {
            header,
            buf,
            types,
            pools: Pools::default(),
        };
        chunk.read_pools()?;
        Ok(chunk)
    }

    fn reader(&self, pos: usize) -> Reader<'a> {
        Reader::new(self.buf, self.header.compressed).at(pos)
    }

    /// Every event of the chunk in order: `(type id, reader from its first
    /// field to its end)`. Constant pools and metadata are events too; a walk
    /// over all of them (rather than the pools' chain of offsets) cannot
    /// loop, and finds every pool of a chunk that was flushed many times.
    pub(crate) fn events(&self) -> Events<'a> {
        Events {
            r: self.reader(HEADER_SIZE),
            end: self.buf.len(),
        }
    }

    fn read_pools(&mut self) -> Result<(), Error> {
        let t = &self.types;
        let w = Wanted {
            string: t.by_name("java.lang.String"),
            symbol: t.by_name("jdk.types.Symbol"),
            class: t.by_name("java.lang.Class"),
            method: t.by_name("jdk.types.Method"),
            stack: t.by_name("jdk.types.StackTrace"),
            frame: t.by_name("jdk.types.StackFrame"),
            thread_state: t.by_name("jdk.types.ThreadState"),
        };
        let mut pools = std::mem::take(&mut self.pools);
        for e in self.events() {
            let (ty, mut r) = e?;
            if ty == EVENT_POOL {
                self.read_pool_event(&mut r, w, &mut pools)?;
            }
        }
        self.pools = pools;
        Ok(())
    }

    fn read_pool_event(&self, r: &mut Reader<'_>, w: Wanted, p: &mut Pools) -> Result<(), Error> {
        let _start = r.long()?;
        let _duration = r.long()?;
        let _delta = r.long()?;
        let _flush = r.u8()?;
        let n = r.count()?;
        let t = &self.types;
        for _ in 0..n {
            let id = r.long()?;
            let c = t.index(id).ok_or_else(|| {
                Error::new(format!("a constant pool of the undeclared class {id}"))
            })?;
            let count = r.count()?;
            let ci = c;
            let c = Some(c);
            for _ in 0..count {
                let key = r.long()?;
                if c == w.string {
                    let s = r.string(true)?;
                    if let Str::Text(s) = s {
                        p.strings.insert(key, s);
                    }
                } else if c == w.symbol {
                    let s = self.struct_str(r, ci, "string")?;
                    p.symbols.insert(key, s);
                } else if c == w.thread_state {
                    let s = self.struct_str(r, ci, "name")?;
                    p.thread_states.insert(key, s);
                } else if c == w.class {
                    let mut name = 0;
                    self.fields(r, ci, |f, r| match f.name.as_str() {
                        "name" => t
                            .int_field(r, f)
                            .map(|v| name = v.unwrap_or(0))
                            .map(|_| true),
                        _ => Ok(false),
                    })?;
                    p.classes.insert(key, name);
                } else if c == w.method {
                    let (mut class, mut name) = (0, 0);
                    self.fields(r, ci, |f, r| {
                        let v = match f.name.as_str() {
                            "type" => &mut class,
                            "name" => &mut name,
                            _ => return Ok(false),
                        };
                        *v = t.int_field(r, f)?.unwrap_or(0);
                        Ok(true)
                    })?;
                    p.methods.insert(key, (class, name));
                } else if c == w.stack {
                    let start = p.frames.len();
                    let frame = w.frame;
                    self.fields(r, ci, |f, r| {
                        if f.name != "frames" || !f.array || f.pool || Some(f.class) != frame {
                            return Ok(false);
                        }
                        let n = r.count()?;
                        for _ in 0..n {
                            let before = r.pos;
                            let mut fr = Frame { method: 0, line: 0 };
                            self.fields(r, f.class, |ff, r| {
                                match ff.name.as_str() {
                                    "method" => fr.method = t.int_field(r, ff)?.unwrap_or(0),
                                    "lineNumber" => {
                                        fr.line = t.int_field(r, ff)?.unwrap_or(0) as i32
                                    }
                                    _ => return Ok(false),
                                }
                                Ok(true)
                            })?;
                            if r.pos == before {
                                return Err(Error::new("a stack frame of no bytes"));
                            }
                            p.frames.push(fr);
                        }
                        Ok(true)
                    })?;
                    let (start, len) = (start as u32, (p.frames.len() - start) as u32);
                    p.stacks.insert(key, (start, len));
                } else if let Some(c) = c {
                    t.skip_value(r, c, 0)?;
                }
            }
        }
        Ok(())
    }

    /// The string field `name` of a struct of class `c`.
    fn struct_str(&self, r: &mut Reader<'_>, c: usize, name: &str) -> Result<Str, Error> {
        if self.types.classes[c].kind == Kind::String {
            return r.string(true);
        }
        let mut out = Str::Null;
        self.fields(r, c, |f, r| {
            if f.name != name {
                return Ok(false);
            }
            if let Some(s) = self.types.str_field(r, f)? {
                out = s;
            }
            Ok(true)
        })?;
        Ok(out)
    }

    /// Walks the fields of a struct of class `c`: `visit` reads the ones
    /// it wants (returning true), the others are skipped.
    pub(crate) fn fields(
        &self,
        r: &mut Reader<'_>,
        c: usize,
        mut visit: impl FnMut(&crate::metadata::Field, &mut Reader<'_>) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        let class = &self.types.classes[c];
        if class.kind != Kind::Struct {
            return self.types.skip_value(r, c, 0);
        }
        for f in &class.fields {
            if !visit(f, r)? {
                self.types.skip_field(r, f, 1)?;
            }
        }
        Ok(())
    }
}

/// An event's size and type; returns its end.
fn event_head(r: &mut Reader<'_>, limit: usize) -> Result<(usize, i64), Error> {
    let start = r.pos;
    let size = r.int()?;
    let end = usize::try_from(size)
        .ok()
        .and_then(|s| start.checked_add(s))
        .filter(|&e| e <= limit && e > start)
        .ok_or_else(|| Error::new(format!("at byte {start}: an event of {size} bytes")))?;
    let ty = r.long()?;
    if r.pos > end {
        return Err(Error::new(format!(
            "at byte {start}: an event shorter than its head"
        )));
    }
    Ok((end, ty))
}

pub(crate) struct Events<'a> {
    r: Reader<'a>,
    end: usize,
}

impl<'a> Iterator for Events<'a> {
    type Item = Result<(i64, Reader<'a>), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.r.pos >= self.end {
            return None;
        }
        match event_head(&mut self.r, self.end) {
            Ok((end, ty)) => {
                let at = self.r.until(end);
                self.r.pos = end;
                Some(Ok((ty, at)))
            }
            Err(e) => {
                self.r.pos = self.end;
                Some(Err(e))
            }
        }
    }
}

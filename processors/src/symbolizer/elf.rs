//! One ELF file read once into what symbolization needs: its identity
//! (GNU and Go build ids, `.gnu_debuglink`), its loadable segments (to
//! turn process addresses into the file's), its DWARF sections (owned,
//! decompressed) under an `addr2line` context, and its function symbols as
//! the fallback where DWARF has nothing. The file is read through a range
//! cache: only the headers, notes and the sections used are read.

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use addr2line::{Context, LookupResult};
use gimli::{EndianArcSlice, RunTimeEndian, SectionId};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ReadCache, SymbolKind};

type Reader = EndianArcSlice<RunTimeEndian>;

/// One frame of a resolved address, innermost (inlined) first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled; the mangled name is `system_name`.
    pub name: Arc<str>,
    pub system_name: Arc<str>,
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
}

/// Why a file is refused.
#[derive(Debug)]
pub enum ElfError {
    Io(std::io::Error),
    NotElf,
    NotRegularFile,
    TooLarge(u64),
    Malformed(String),
}

impl std::fmt::Display for ElfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::NotElf => f.write_str("not an ELF file"),
            Self::NotRegularFile => f.write_str("not a regular file"),
            Self::TooLarge(n) => write!(f, "{n} bytes, over max_file_size_mib"),
            Self::Malformed(e) => write!(f, "malformed ELF: {e}"),
        }
    }
}

/// The identity of an ELF file, read without its sections' contents.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub gnu_build_id: Option<Vec<u8>>,
    pub go_build_id: Option<String>,
    pub debuglink: Option<String>,
    /// `(p_offset, p_vaddr, p_filesz)` of each `PT_LOAD`.
    pub loads: Vec<(u64, u64, u64)>,
}

impl Identity {
    /// The file's address of `file_offset`, through the segment holding it.
    pub fn vaddr_of_offset(&self, file_offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|(off, _, size)| file_offset >= *off && file_offset - off < (*size).max(1))
            .map(|(off, vaddr, _)| vaddr + (file_offset - off))
    }

    /// Whether this file is the one a mapping's build id names.
    pub fn matches(&self, id: &BuildId) -> bool {
        match id {
            BuildId::Gnu(b) => self.gnu_build_id.as_deref() == Some(b.as_slice()),
            BuildId::Go(s) => self.go_build_id.as_deref() == Some(s.as_str()),
        }
    }
}

/// What a mapping names its file by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BuildId {
    Gnu(Vec<u8>),
    Go(String),
}

impl BuildId {
    pub fn hex(&self) -> Option<String> {
        match self {
            Self::Gnu(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
            Self::Go(_) => None,
        }
    }
}

/// A parsed debug file, queried by the file's (link-time) addresses.
pub struct DebugInfo {
    pub identity: Identity,
    /// `addr2line` parses units lazily through cells: one query at a time.
    dwarf: Option<std::sync::Mutex<Context<Reader>>>,
    /// Function symbols sorted by address: `(start, size, name)`.
    symbols: Vec<(u64, u64, Arc<str>)>,
    /// Bytes held: sections and symbols.
    pub bytes: usize,
}

fn open_regular(path: &Path, max_bytes: u64) -> Result<File, ElfError> {
    let mut f = File::open(path).map_err(ElfError::Io)?;
    let meta = f.metadata().map_err(ElfError::Io)?;
    if !meta.is_file() {
        return Err(ElfError::NotRegularFile);
    }
    if meta.len() > max_bytes {
        return Err(ElfError::TooLarge(meta.len()));
    }
    let mut magic = [0u8; 4];
    f.read_exact(&mut magic).map_err(|_| ElfError::NotElf)?;
    if magic != *b"\x7fELF" {
        return Err(ElfError::NotElf);
    }
    Ok(f)
}

fn malformed(e: impl std::fmt::Display) -> ElfError {
    ElfError::Malformed(e.to_string())
}

fn identity_of<'a, R: object::ReadRef<'a>>(obj: &object::File<'a, R>) -> Identity {
    let go_build_id = obj
        .section_by_name(".note.go.buildid")
        .and_then(|s| s.data().ok())
        .and_then(go_note);
    Identity {
        gnu_build_id: obj.build_id().ok().flatten().map(<[u8]>::to_vec),
        go_build_id,
        debuglink: obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned()),
        loads: obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, s.address(), size)
            })
            .collect(),
    }
}

/// The Go linker's note: name "Go", type 4, the build id string.
fn go_note(data: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<usize> {
        let b = data.get(i..i + 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
    };
    let (namesz, descsz, kind) = (word(0)?, word(4)?, word(8)?);
    if namesz != 4 || kind != 4 || data.get(12..15)? != b"Go\0" {
        return None;
    }
    let desc = data.get(16..16 + descsz)?;
    std::str::from_utf8(desc).ok().map(str::to_string)
}

/// Reads the identity of the ELF file at `path` (headers and notes only).
pub fn identify(path: &Path, max_bytes: u64) -> Result<Identity, ElfError> {
    let cache = ReadCache::new(open_regular(path, max_bytes)?);
    let obj = object::File::parse(&cache).map_err(malformed)?;
    if obj.format() != object::BinaryFormat::Elf {
        return Err(ElfError::NotElf);
    }
    Ok(identity_of(&obj))
}

impl DebugInfo {
    /// Parses `path` once: identity, DWARF sections, symbols. A section
    /// whose uncompressed size exceeds `max_bytes` refuses the file.
    pub fn load(path: &Path, max_bytes: u64) -> Result<Self, ElfError> {
        let cache = ReadCache::new(open_regular(path, max_bytes)?);
        let obj = object::File::parse(&cache).map_err(malformed)?;
        if obj.format() != object::BinaryFormat::Elf {
            return Err(ElfError::NotElf);
        }
        let identity = identity_of(&obj);
        let endian = if obj.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut bytes = 0usize;
        let mut any_dwarf = false;
        let mut load = |id: SectionId| -> Result<Reader, ElfError> {
            let data: Cow<'_, [u8]> = match obj.section_by_name(id.name()) {
                Some(s) => {
                    let c = s.compressed_data().map_err(malformed)?;
                    if c.uncompressed_size > max_bytes {
                        return Err(ElfError::TooLarge(c.uncompressed_size));
                    }
                    c.decompress().map_err(malformed)?
                }
                None => Cow::Borrowed(&[]),
            };
            if !data.is_empty() && id == SectionId::DebugInfo {
                any_dwarf = true;
            }
            bytes += data.len();
            Ok(EndianArcSlice::new(Arc::from(&*data), endian))
        };
        let dwarf = gimli::Dwarf::load(&mut load)?;
        let dwarf = if any_dwarf {
            Some(std::sync::Mutex::new(
                Context::from_dwarf(dwarf).map_err(malformed)?,
            ))
        } else {
            None
        };
        let mut symbols: Vec<(u64, u64, Arc<str>)> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), Arc::<str>::from(s.name().ok()?))))
            .filter(|(_, _, n)| !n.is_empty())
            .collect();
        symbols.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        symbols.dedup_by_key(|s| s.0);
        bytes += symbols
            .iter()
            .map(|s| s.2.len() + std::mem::size_of::<(u64, u64, Arc<str>)>() + 16)
            .sum::<usize>();
        Ok(Self {
            identity,
            dwarf,
            symbols,
            bytes,
        })
    }

    /// The frames at `addr` (a file address), innermost first; empty when
    /// neither DWARF nor the symbol table covers it.
    pub fn resolve(&self, addr: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        // addr2line probes [addr, addr + 1): the last address would
        // overflow it, and no code lives there.
        if let Some(ctx) = self.dwarf.as_ref().filter(|_| addr < u64::MAX) {
            let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
            // Split DWARF (.dwo) is not loaded: such units resolve from
            // the skeleton's line table, or fall back to the symbols.
            let frames = match ctx.find_frames(addr) {
                LookupResult::Output(r) => r,
                LookupResult::Load { continuation, .. } => {
                    addr2line::LookupContinuation::resume(continuation, None).skip_all_loads()
                }
            };
            if let Ok(mut frames) = frames {
                while let Ok(Some(f)) = frames.next() {
                    let (name, system_name) = match &f.function {
                        Some(func) => {
                            let raw = func.raw_name().map(|n| n.into_owned()).unwrap_or_default();
                            let demangled =
                                addr2line::demangle_auto(Cow::Borrowed(&raw), func.language)
                                    .into_owned();
                            (Arc::from(demangled), Arc::from(raw))
                        }
                        None => (Arc::from(""), Arc::from("")),
                    };
                    let (file, line, column) = match &f.location {
                        Some(l) => (
                            Arc::from(l.file.unwrap_or("")),
                            l.line.unwrap_or(0),
                            l.column.unwrap_or(0),
                        ),
                        None => (Arc::from(""), 0, 0),
                    };
                    out.push(Frame {
                        name,
                        system_name,
                        file,
                        line,
                        column,
                    });
                }
            }
        }
        // Outermost frame without a name (no DWARF function): the symbol.
        let unnamed = out.last().is_none_or(|f| f.name.is_empty());
        if unnamed {
            if let Some(sym) = self.symbol(addr) {
                let name: Arc<str> =
                    Arc::from(addr2line::demangle_auto(Cow::Borrowed(&*sym), None).as_ref());
                match out.last_mut() {
                    Some(f) => {
                        f.name = name;
                        f.system_name = sym;
                    }
                    None => out.push(Frame {
                        name,
                        system_name: sym,
                        file: Arc::from(""),
                        line: 0,
                        column: 0,
                    }),
                }
            }
        }
        out
    }

    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    pub fn has_symbols(&self) -> bool {
        !self.symbols.is_empty()
    }

    fn symbol(&self, addr: u64) -> Option<Arc<str>> {
        let i = self
            .symbols
            .partition_point(|s| s.0 <= addr)
            .checked_sub(1)?;
        let (start, size, name) = &self.symbols[i];
        // Size 0 (hand-written assembly): trust up to the next symbol.
        (size == &0 || addr - start < *size).then(|| name.clone())
    }
}

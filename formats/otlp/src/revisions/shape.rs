//! A walk over a request's wire bytes against one revision's descriptors,
//! without decoding: the fields the revision does not know, and whether a
//! field it knows arrives with another wire type (which prost refuses, but
//! only after decoding everything before it).
//!
//! Everything in the profiles package is walked except the inside of a
//! `Sample`: samples are most of the bytes, and every revision change in
//! them that matters is one of wire type, which decoding finds anyway.
//! `common` and `resource` messages are not walked either: they only ever
//! gained fields, so an unknown one there says nothing about the profiles
//! revision.

use std::sync::LazyLock;

use prost_reflect::{Cardinality, DescriptorPool, Kind, MessageDescriptor};

use super::Revision;

const PACKAGE: &str = "opentelemetry.proto.profiles.v1development";

/// What the walk found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Shape {
    /// Fields the revision does not know.
    pub unknown: usize,
    /// A known field with another wire type: the bytes are not of this
    /// revision.
    pub mismatch: bool,
}

/// The walk of `bytes` (a `ProfilesData` / `ExportProfilesServiceRequest`)
/// against `revision`. Bytes that do not parse end the walk where they
/// start; decoding reports them.
pub(super) fn of(revision: Revision, bytes: &[u8]) -> Shape {
    let schema = match revision {
        Revision::V1_7_0 => &*V1_7,
        Revision::V1_8_0 => &*V1_8,
        Revision::V1_9_0 => &*V1_9,
        Revision::V1_10_0 => &*V1_10,
    };
    let mut shape = Shape::default();
    let _ = walk(schema, 0, bytes, &mut shape);
    shape
}

static V1_7: LazyLock<Schema> = LazyLock::new(|| Schema::new(&pool(Revision::V1_7_0)));
static V1_8: LazyLock<Schema> = LazyLock::new(|| Schema::new(&pool(Revision::V1_8_0)));
static V1_9: LazyLock<Schema> = LazyLock::new(|| Schema::new(&pool(Revision::V1_9_0)));
static V1_10: LazyLock<Schema> = LazyLock::new(|| Schema::new(&pool(Revision::V1_10_0)));

/// The descriptor pool of `revision`: the files in `proto/revisions/`, or
/// for v1.10.0 those `opentelemetry-proto` ships.
pub(crate) fn pool(revision: Revision) -> DescriptorPool {
    let bytes: &[u8] = match revision {
        Revision::V1_7_0 => include_bytes!("../../proto/revisions/v1.7.0.binpb"),
        Revision::V1_8_0 => include_bytes!("../../proto/revisions/v1.8.0.binpb"),
        Revision::V1_9_0 => include_bytes!("../../proto/revisions/v1.9.0.binpb"),
        Revision::V1_10_0 => opentelemetry_proto::DESCRIPTORS,
    };
    DescriptorPool::decode(bytes).expect("the descriptor sets are valid")
}

/// The messages to walk, `ProfilesData` first.
struct Schema {
    messages: Vec<Message>,
}

/// Known fields by number.
struct Message {
    fields: Vec<Option<Field>>,
}

#[derive(Clone, Copy)]
struct Field {
    /// The wire type the field's type is written with.
    wire: u8,
    /// A repeated number: packed (length-delimited) is accepted too.
    packable: bool,
    /// The message to walk into.
    walk: Option<usize>,
}

impl Schema {
    fn new(pool: &DescriptorPool) -> Self {
        let root = pool
            .get_message_by_name(&format!("{PACKAGE}.ProfilesData"))
            .expect("the descriptors hold ProfilesData");
        let mut messages = vec![root];
        let mut next = 0;
        while next < messages.len() {
            let children: Vec<MessageDescriptor> = messages[next]
                .fields()
                .filter_map(|f| match f.kind() {
                    Kind::Message(c) if walks_into(&c) => Some(c),
                    _ => None,
                })
                .collect();
            for c in children {
                if !messages.contains(&c) {
                    messages.push(c);
                }
            }
            next += 1;
        }
        let index = |c: &MessageDescriptor| messages.iter().position(|m| m == c);
        let messages = messages
            .iter()
            .map(|m| {
                let max = m.fields().map(|f| f.number()).max().unwrap_or(0) as usize;
                let mut fields = vec![None; max + 1];
                for f in m.fields() {
                    let kind = f.kind();
                    let walk = match &kind {
                        Kind::Message(c) if walks_into(c) => index(c),
                        _ => None,
                    };
                    fields[f.number() as usize] = Some(Field {
                        wire: wire_type(&kind),
                        packable: f.cardinality() == Cardinality::Repeated && wire_type(&kind) != 2,
                        walk,
                    });
                }
                Message { fields }
            })
            .collect();
        Self { messages }
    }
}

fn walks_into(m: &MessageDescriptor) -> bool {
    m.package_name() == PACKAGE && m.name() != "Sample"
}

fn wire_type(kind: &Kind) -> u8 {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => 1,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => 5,
        Kind::String | Kind::Bytes | Kind::Message(_) => 2,
        _ => 0,
    }
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Skips the value of a field with wire type `wire` (a group to its end).
fn skip(buf: &mut &[u8], wire: u8, number: u64) -> Option<()> {
    match wire {
        0 => {
            varint(buf)?;
        }
        1 => *buf = buf.get(8..)?,
        2 => {
            let len = usize::try_from(varint(buf)?).ok()?;
            *buf = buf.get(len..)?;
        }
        5 => *buf = buf.get(4..)?,
        3 => loop {
            let key = varint(buf)?;
            let (n, w) = (key >> 3, (key & 7) as u8);
            if w == 4 {
                return (n == number).then_some(());
            }
            skip(buf, w, n)?;
        },
        _ => return None,
    }
    Some(())
}

/// `None` where the bytes stop parsing.
fn walk(schema: &Schema, msg: usize, mut buf: &[u8], shape: &mut Shape) -> Option<()> {
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let (number, wire) = (key >> 3, (key & 7) as u8);
        let field = usize::try_from(number)
            .ok()
            .and_then(|n| schema.messages[msg].fields.get(n).copied().flatten());
        let Some(f) = field else {
            shape.unknown += 1;
            skip(&mut buf, wire, number)?;
            continue;
        };
        if wire != f.wire && !(wire == 2 && f.packable) {
            shape.mismatch = true;
            return None;
        }
        match (wire, f.walk) {
            (2, Some(child)) => {
                let len = usize::try_from(varint(&mut buf)?).ok()?;
                let inner = buf.get(..len)?;
                buf = &buf[len..];
                walk(schema, child, inner, shape)?;
            }
            _ => skip(&mut buf, wire, number)?,
        }
    }
    Some(())
}

//! Pyroscope's binary `/ingest` bodies of old clients (`format=trie` or
//! `Content-Type: binary/octet-stream+trie`, `format=tree` or `+tree`),
//! which Pyroscope still takes, into folded text.
//!
//! Both are a tree in preorder, each node `varint(len) name varint(value)
//! varint(children)` (Go's `binary.Uvarint`). In a **trie** a node's name is
//! a piece of the key, which is the concatenation of the pieces from the
//! root (`a;b` may be split anywhere), and a node with a value holds that
//! key's count. In a **tree** each node is one frame and its value its self
//! count; the first node is the root, whose own name is not a frame.
//!
//! Read as Pyroscope reads them (`transporttrie.IterateRaw`,
//! `tree.DeserializeNoDict`), without building the tree: a stack of the
//! open nodes' child counts, no allocation by a claimed count. The folded
//! text is charged to the request's memory as it grows, so a deep or wide
//! tree is refused at the budget rather than expanded without bound.

use crate::{Charge, Error, FoldedWriter};

/// The two binary layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Trie,
    Tree,
}

fn malformed<E>(layout: Layout, what: impl std::fmt::Display) -> Error<E> {
    let name = match layout {
        Layout::Trie => "trie",
        Layout::Tree => "tree",
    };
    Error::Malformed(format!("invalid {name} body: {what}"))
}

/// The body as folded text, one `stack COUNT` line per node with a value.
pub fn to_folded<E>(
    body: &[u8],
    layout: Layout,
    charge: Charge<'_, E>,
) -> Result<Vec<u8>, Error<E>> {
    let bad = |what: &str| malformed(layout, what);
    let mut buf = body;
    let mut out = FoldedWriter::new(charge);
    // The key of the current node, and per open node: children left and
    // the key's length before it.
    let mut key: Vec<u8> = Vec::new();
    let mut open: Vec<(u64, usize)> = Vec::new();
    let mut root_done = false;
    while !buf.is_empty() {
        if layout == Layout::Tree && root_done {
            // Pyroscope reads the root's subtree and ignores what follows.
            break;
        }
        let varint =
            |b: &mut &[u8]| prost::encoding::decode_varint(b).map_err(|_| bad("truncated varint"));
        let len = usize::try_from(varint(&mut buf)?).unwrap_or(usize::MAX);
        let name = buf
            .get(..len)
            .ok_or_else(|| bad("a name runs past the end of the body"))?;
        buf = &buf[len..];
        let value = varint(&mut buf)?;
        let children = varint(&mut buf)?;
        let before = key.len();
        match layout {
            Layout::Trie => key.extend_from_slice(name),
            // The root names no frame; below it frames are joined by `;`.
            Layout::Tree if open.is_empty() && !root_done => {}
            Layout::Tree => {
                if !key.is_empty() {
                    key.push(b';');
                }
                key.extend_from_slice(name);
            }
        }
        if value > 0 && !key.is_empty() {
            if key.contains(&b'\n') {
                return Err(bad("a stack holds a newline"));
            }
            out.line(&key, value)?;
        }
        if children > 0 {
            open.push((children, before));
            continue;
        }
        // A leaf: close it and every parent whose last child it was.
        key.truncate(before);
        while let Some(top) = open.last_mut() {
            top.0 -= 1;
            if top.0 > 0 {
                break;
            }
            key.truncate(top.1);
            open.pop();
        }
        if open.is_empty() {
            root_done = true;
        }
    }
    if layout == Layout::Tree && !open.is_empty() {
        return Err(bad("the body ends inside the tree"));
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::budget;

    fn node(out: &mut Vec<u8>, name: &str, value: u64, children: u64) {
        prost::encoding::encode_varint(name.len() as u64, out);
        out.extend_from_slice(name.as_bytes());
        prost::encoding::encode_varint(value, out);
        prost::encoding::encode_varint(children, out);
    }

    fn folded(body: &[u8], layout: Layout) -> Result<String, Error<String>> {
        let (_, mut charge) = budget(1 << 30);
        to_folded(body, layout, &mut charge).map(|b| String::from_utf8(b).unwrap())
    }

    /// Pyroscope's own trie test (`transporttrie`): keys "foo", "bar",
    /// "baz" and "foo;bar" split where their prefixes part.
    #[test]
    fn a_trie_gives_each_key_its_value() {
        let mut b = Vec::new();
        node(&mut b, "", 0, 2);
        node(&mut b, "ba", 0, 2);
        node(&mut b, "r", 1, 0);
        node(&mut b, "z", 3, 0);
        node(&mut b, "foo", 2, 1);
        node(&mut b, ";bar", 5, 0);
        assert_eq!(
            folded(&b, Layout::Trie).unwrap(),
            "bar 1\nbaz 3\nfoo 2\nfoo;bar 5\n"
        );
    }

    #[test]
    fn a_tree_gives_each_frame_path_its_self_value() {
        let mut b = Vec::new();
        node(&mut b, "", 0, 2);
        node(&mut b, "main", 1, 2);
        node(&mut b, "work", 7, 0);
        node(&mut b, "idle", 2, 0);
        node(&mut b, "gc", 4, 0);
        // After the root's subtree: ignored, as Pyroscope ignores it.
        node(&mut b, "x", 9, 0);
        assert_eq!(
            folded(&b, Layout::Tree).unwrap(),
            "main 1\nmain;work 7\nmain;idle 2\ngc 4\n"
        );
    }

    #[test]
    fn bad_bodies_are_refused_without_allocating_by_a_claim() {
        let mut b = Vec::new();
        // A name claiming 2^62 bytes.
        prost::encoding::encode_varint(1 << 62, &mut b);
        assert!(folded(&b, Layout::Trie).is_err());
        // A node claiming 2^60 children, then nothing: a trie ends where the
        // body does, a tree must close.
        let mut b = Vec::new();
        node(&mut b, "", 0, 1 << 60);
        node(&mut b, "a", 1, 0);
        assert_eq!(folded(&b, Layout::Trie).unwrap(), "a 1\n");
        assert!(folded(&b, Layout::Tree).is_err());
        let mut b = Vec::new();
        node(&mut b, "", 0, 1);
        node(&mut b, "a\nb", 1, 0);
        assert!(folded(&b, Layout::Tree).is_err());
    }

    /// A chain 10,000 deep with a value at every node expands
    /// quadratically: the text is charged as it grows and refused at the
    /// budget.
    #[test]
    fn an_expanding_body_stops_at_the_memory_budget() {
        let mut b = Vec::new();
        node(&mut b, "", 0, 1);
        for i in 0..10_000u64 {
            node(&mut b, "frame-name-of-some-length", 1, u64::from(i < 9_999));
        }
        let (held, mut charge) = budget(8 << 20);
        let e = to_folded(&b, Layout::Tree, &mut charge).unwrap_err();
        assert!(held.get() <= 8 << 20);
        assert!(matches!(e, Error::Budget(_)), "{e:?}");
    }
}

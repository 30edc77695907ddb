//! The chunk's metadata event: the classes (event types, pool types,
//! primitives) and their fields, in the order values are written. Only
//! what reading values needs is kept: no annotations, no settings.

use ahash::HashMap;

use crate::reader::{Reader, Str};
use crate::Error;

/// How a value of a class is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    Byte,
    Short,
    Int,
    Long,
    Float,
    Double,
    String,
    /// Its fields, one after the other.
    Struct,
}

#[derive(Debug)]
pub struct Field {
    pub name: String,
    /// Index of the field's class in [`Types::classes`].
    pub class: usize,
    /// A long index into the pool of its class instead of the value.
    pub pool: bool,
    pub array: bool,
}

#[derive(Debug)]
pub struct Class {
    pub id: i64,
    pub name: String,
    pub kind: Kind,
    pub fields: Vec<Field>,
}

#[derive(Debug, Default)]
pub struct Types {
    pub classes: Vec<Class>,
    by_id: HashMap<i64, usize>,
}

/// Inline structs nest at most this deep (the JDK's go three deep); a
/// class that contains itself fails here instead of recursing forever.
pub const MAX_DEPTH: usize = 16;

impl Types {
    pub fn index(&self, id: i64) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    pub fn by_name(&self, name: &str) -> Option<usize> {
        self.classes.iter().position(|c| c.name == name)
    }

    /// Field `name` of class `c`.
    pub fn field(&self, c: usize, name: &str) -> Option<usize> {
        self.classes[c].fields.iter().position(|f| f.name == name)
    }

    /// The metadata event at `r` (its size and type already read).
    pub fn read(r: &mut Reader<'_>) -> Result<Types, Error> {
        let _start_time = r.long()?;
        let _duration = r.long()?;
        let _id = r.long()?;
        let n = r.count()?;
        let mut strings = Vec::new();
        for _ in 0..n {
            strings.push(match r.string(true)? {
                Str::Text(s) => s,
                Str::Null => String::new(),
                Str::Pool(_) => {
                    return Err(Error::new("a metadata string refers to a constant pool"))
                }
            });
        }
        let root = Element::read(r, &strings, 0)?;
        let mut raw = Vec::new();
        for m in root.children.iter().filter(|e| e.name == "metadata") {
            for c in m.children.iter().filter(|e| e.name == "class") {
                raw.push(c);
            }
        }
        let mut types = Types::default();
        for c in &raw {
            let id = c.id("id")?;
            let name = c.attr("name").unwrap_or_default().to_owned();
            let kind = match name.as_str() {
                "boolean" => Kind::Boolean,
                "byte" => Kind::Byte,
                "short" | "char" => Kind::Short,
                "int" => Kind::Int,
                "long" => Kind::Long,
                "float" => Kind::Float,
                "double" => Kind::Double,
                "java.lang.String" => Kind::String,
                _ => Kind::Struct,
            };
            if types.by_id.insert(id, types.classes.len()).is_some() {
                return Err(Error::new(format!("class id {id} is declared twice")));
            }
            types.classes.push(Class {
                id,
                name,
                kind,
                fields: Vec::new(),
            });
        }
        for (ci, c) in raw.iter().enumerate() {
            for f in c.children.iter().filter(|e| e.name == "field") {
                let ty = f.id("class")?;
                let class = types.index(ty).ok_or_else(|| {
                    Error::new(format!(
                        "field {} of {} has the undeclared class {ty}",
                        f.attr("name").unwrap_or("?"),
                        types.classes[ci].name
                    ))
                })?;
                let field = Field {
                    name: f.attr("name").unwrap_or_default().to_owned(),
                    class,
                    pool: f.attr("constantPool") == Some("true"),
                    array: f.attr("dimension").is_some_and(|d| d != "0"),
                };
                types.classes[ci].fields.push(field);
            }
        }
        Ok(types)
    }

    /// Skips one value of `field` (a pool index, an array, or the value).
    pub fn skip_field(&self, r: &mut Reader<'_>, f: &Field, depth: usize) -> Result<(), Error> {
        if f.pool {
            r.long()?;
            return Ok(());
        }
        if !f.array {
            return self.skip_value(r, f.class, depth);
        }
        let n = r.count()?;
        for i in 0..n {
            let before = r.pos;
            self.skip_value(r, f.class, depth)?;
            if i == 0 && r.pos == before {
                // Values of no bytes: the count means nothing, and looping
                // 2^31 times over nothing would only burn CPU.
                return Err(Error::new(format!(
                    "an array of {n} empty {} values",
                    self.classes[f.class].name
                )));
            }
        }
        Ok(())
    }

    /// Skips one value of class `c`.
    pub fn skip_value(&self, r: &mut Reader<'_>, c: usize, depth: usize) -> Result<(), Error> {
        match self.classes[c].kind {
            Kind::Boolean | Kind::Byte => r.u8().map(drop),
            Kind::Short => r.short().map(drop),
            Kind::Int => r.int().map(drop),
            Kind::Long => r.long().map(drop),
            Kind::Float => r.bytes(4).map(drop),
            Kind::Double => r.bytes(8).map(drop),
            Kind::String => r.string(false).map(drop),
            Kind::Struct => {
                if depth >= MAX_DEPTH {
                    return Err(Error::new(format!(
                        "{} nests deeper than {MAX_DEPTH} levels",
                        self.classes[c].name
                    )));
                }
                for f in &self.classes[c].fields {
                    self.skip_field(r, f, depth + 1)?;
                }
                Ok(())
            }
        }
    }

    /// Reads an integer field of any width (a pool index for pooled
    /// fields); `None` for other kinds, which are skipped.
    pub fn int_field(&self, r: &mut Reader<'_>, f: &Field) -> Result<Option<i64>, Error> {
        if f.pool && !f.array {
            return r.long().map(Some);
        }
        if f.array {
            self.skip_field(r, f, 0)?;
            return Ok(None);
        }
        Ok(Some(match self.classes[f.class].kind {
            Kind::Boolean | Kind::Byte => i64::from(r.u8()?),
            Kind::Short => r.short()?,
            Kind::Int => i64::from(r.int()?),
            Kind::Long => r.long()?,
            _ => {
                self.skip_value(r, f.class, 0)?;
                return Ok(None);
            }
        }))
    }

    /// Reads a string field (inline or a pool index into `java.lang.String`).
    pub fn str_field(&self, r: &mut Reader<'_>, f: &Field) -> Result<Option<Str>, Error> {
        if self.classes[f.class].kind != Kind::String || f.array {
            self.skip_field(r, f, 0)?;
            return Ok(None);
        }
        if f.pool {
            return r.long().map(|i| Some(Str::Pool(i)));
        }
        r.string(true).map(Some)
    }
}

/// One element of the metadata tree.
struct Element<'s> {
    name: &'s str,
    attrs: Vec<(&'s str, &'s str)>,
    children: Vec<Element<'s>>,
}

impl<'s> Element<'s> {
    fn read(r: &mut Reader<'_>, strings: &'s [String], depth: usize) -> Result<Self, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::new("the metadata tree nests too deep"));
        }
        let s = |i: i32| -> Result<&'s str, Error> {
            usize::try_from(i)
                .ok()
                .and_then(|i| strings.get(i))
                .map(String::as_str)
                .ok_or_else(|| Error::new(format!("metadata string index {i} out of range")))
        };
        let name = s(r.int()?)?;
        let n = r.count()?;
        let mut attrs = Vec::new();
        for _ in 0..n {
            attrs.push((s(r.int()?)?, s(r.int()?)?));
        }
        let n = r.count()?;
        let mut children = Vec::new();
        for _ in 0..n {
            children.push(Element::read(r, strings, depth + 1)?);
        }
        Ok(Element {
            name,
            attrs,
            children,
        })
    }

    fn attr(&self, k: &str) -> Option<&'s str> {
        self.attrs.iter().find(|(a, _)| *a == k).map(|(_, v)| *v)
    }

    fn id(&self, k: &str) -> Result<i64, Error> {
        let v = self.attr(k).unwrap_or_default();
        v.parse().map_err(|_| {
            Error::new(format!(
                "metadata {} has {k}={v:?}, not a number",
                self.name
            ))
        })
    }
}

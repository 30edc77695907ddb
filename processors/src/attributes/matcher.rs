//! `include`/`exclude` for profiles, as `filtermatcher.PropertiesMatcher`
//! and `filterspan` match: every property given must match.

use regex::Regex;

use profcol_model::proto::{any_value::Value as A, AnyValue};
use profcol_ottl::value::{any_as_string, map_get};
use profcol_ottl::Ctx;

/// `filterset.FilterSet`: `strict` is equality with one of the items,
/// `regexp` an expression that finds a match anywhere in the string (Go's
/// `MatchString`, unanchored).
pub enum FilterSet {
    Strict(Vec<String>),
    Regexp(Vec<Regex>),
}

impl FilterSet {
    pub fn new(items: &[&str], regexp: bool) -> Result<FilterSet, regex::Error> {
        Ok(if regexp {
            FilterSet::Regexp(
                items
                    .iter()
                    .map(|s| Regex::new(s))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            FilterSet::Strict(items.iter().map(|s| s.to_string()).collect())
        })
    }

    pub fn matches(&self, s: &str) -> bool {
        match self {
            FilterSet::Strict(v) => v.iter().any(|i| i == s),
            FilterSet::Regexp(v) => v.iter().any(|re| re.is_match(s)),
        }
    }
}

pub enum Want {
    Exists,
    Equal(AnyValue),
    Regexp(Regex),
}

pub struct AttrMatcher {
    pub key: String,
    pub want: Want,
}

impl AttrMatcher {
    fn matches(&self, v: Option<&AnyValue>) -> bool {
        let Some(v) = v else { return false };
        match &self.want {
            Want::Exists => true,
            // Same type and value (maps, slices and bytes by content).
            Want::Equal(w) => w == v,
            Want::Regexp(re) => string_of(v).is_some_and(|s| re.is_match(&s)),
        }
    }
}

/// `attributeStringValue`: strings, bools, ints and doubles (Go's
/// `FormatFloat(f, 'f', -1, 64)`); other types never match an expression.
fn string_of(v: &AnyValue) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    Some(match &v.value {
        Some(A::StringValue(s)) => Cow::Borrowed(s.as_str()),
        Some(A::BoolValue(b)) => Cow::Borrowed(if *b { "true" } else { "false" }),
        Some(A::IntValue(i)) => Cow::Owned(i.to_string()),
        Some(A::DoubleValue(d)) if d.is_infinite() => {
            Cow::Borrowed(if *d > 0.0 { "+Inf" } else { "-Inf" })
        }
        // Rust's shortest round-trip digits, never an exponent: 'f', -1.
        Some(A::DoubleValue(d)) => Cow::Owned(d.to_string()),
        _ => return None,
    })
}

/// One side (`include` or `exclude`), compiled.
pub struct Matcher {
    pub services: Option<FilterSet>,
    /// Each library must match the scope (name, and version when given).
    pub libraries: Vec<(FilterSet, Option<FilterSet>)>,
    /// Every one must match the profile's attributes.
    pub attributes: Vec<AttrMatcher>,
    /// Every one must match the resource's attributes.
    pub resources: Vec<AttrMatcher>,
}

impl Matcher {
    /// Whether the profile of `item` matches. A profile attribute the
    /// dictionary cannot give (an index out of range) counts as absent.
    pub fn matches(&self, item: &Ctx) -> bool {
        let resource = item.resource.as_ref().map_or(&[][..], |r| &r.attributes);
        if let Some(s) = &self.services {
            // `serviceNameForResource`.
            let name = match map_get(resource, "service.name") {
                Some(v) => any_as_string(v),
                None => "<nil-service-name>".to_string(),
            };
            if !s.matches(&name) {
                return false;
            }
        }
        let (name, version) = item
            .scope
            .as_deref()
            .and_then(Option::as_ref)
            .map_or(("", ""), |s| (s.name.as_str(), s.version.as_str()));
        for (n, v) in &self.libraries {
            if !n.matches(name) || v.as_ref().is_some_and(|v| !v.matches(version)) {
                return false;
            }
        }
        self.resources
            .iter()
            .all(|m| m.matches(map_get(resource, &m.key)))
            && self
                .attributes
                .iter()
                .all(|m| m.matches(item.profile_attr(&m.key).ok().flatten()))
    }
}

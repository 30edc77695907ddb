//! Statements over a small batch: two profiles sharing the dictionary
//! entry `shared="abc"`; A also has `own1=5` (unit `bytes`), B `own2="x-y-z"`.

use profcol_model::proto::{
    any_value::Value as A, AnyValue, InstrumentationScope, KeyValue, KeyValueAndUnit, Profile,
    ProfilesData, ProfilesDictionary, Resource, ResourceProfiles, ScopeProfiles, ValueType,
};

use super::*;

fn s(v: &str) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(A::StringValue(v.into())),
    })
}

fn i(v: i64) -> Option<AnyValue> {
    Some(AnyValue {
        value: Some(A::IntValue(v)),
    })
}

pub(crate) fn batch() -> ProfilesData {
    let strings: Vec<String> = ["", "shared", "own1", "own2", "bytes", "cpu", "nanoseconds"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let attrs = vec![
        KeyValueAndUnit::default(),
        KeyValueAndUnit {
            key_strindex: 1,
            value: s("abc"),
            unit_strindex: 0,
        },
        KeyValueAndUnit {
            key_strindex: 2,
            value: i(5),
            unit_strindex: 4,
        },
        KeyValueAndUnit {
            key_strindex: 3,
            value: s("x-y-z"),
            unit_strindex: 0,
        },
    ];
    let profile = |id: u8, idx: Vec<i32>| Profile {
        profile_id: vec![id; 16],
        period: 10 * id as i64,
        time_unix_nano: 1_700_000_000_000_000_000,
        duration_nano: 5000,
        sample_type: Some(ValueType {
            type_strindex: 5,
            unit_strindex: 6,
        }),
        attribute_indices: idx,
        ..Default::default()
    };
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: vec![
                    KeyValue {
                        key: "service.name".into(),
                        value: s("svc"),
                        ..Default::default()
                    },
                    KeyValue {
                        key: "host".into(),
                        value: s("h1"),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "sc".into(),
                    version: "1.0".into(),
                    ..Default::default()
                }),
                profiles: vec![profile(1, vec![1, 2]), profile(2, vec![1, 3])],
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
        dictionary: Some(ProfilesDictionary {
            string_table: strings,
            attribute_table: attrs,
            ..Default::default()
        }),
    }
}

fn flat() -> Options {
    Options {
        level: Level::Profile,
        prefixes: Prefixes::Required,
    }
}

fn run(data: &mut ProfilesData, stmts: &[&str]) -> Vec<String> {
    let level = infer(stmts, &[]).map_err(|(_, e)| e).unwrap();
    let compiled: Vec<Statement> = stmts
        .iter()
        .map(|s| {
            Statement::parse(s, Options { level, ..flat() }).unwrap_or_else(|e| panic!("{s}: {e}"))
        })
        .collect();
    let mut errors = Vec::new();
    for st in &compiled {
        for_each(data, level, &crate::Client::default(), |ctx| {
            if let Err(e) = st.run(ctx) {
                errors.push(e.0);
            }
            Ok::<_, ()>(())
        })
        .unwrap();
    }
    errors
}

/// Each profile's attributes, resolved, in order.
fn attrs(data: &ProfilesData) -> Vec<Vec<(String, String)>> {
    let d = data.dictionary.as_ref().unwrap();
    profcol_model::profiles(&data.resource_profiles)
        .map(|p| {
            p.attribute_indices
                .iter()
                .map(|&i| {
                    let a = &d.attribute_table[i as usize];
                    let v = a
                        .value
                        .as_ref()
                        .map(value::any_as_string)
                        .unwrap_or_default();
                    let v = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(A::DoubleValue(_)) => format!("{v}(f)"),
                        None => "(empty)".into(),
                        _ => v,
                    };
                    (d.string_table[a.key_strindex as usize].clone(), v)
                })
                .collect()
        })
        .collect()
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn setting_a_shared_attribute_leaves_the_other_profile_alone() {
    let mut d = batch();
    let n_before = d.dictionary.as_ref().unwrap().attribute_table.len();
    assert!(run(
        &mut d,
        &[r#"set(profile.attributes["shared"], "mutated") where profile.period == 10"#]
    )
    .is_empty());
    let a = attrs(&d);
    assert_eq!(a[0], kv(&[("shared", "mutated"), ("own1", "5")]));
    assert_eq!(a[1], kv(&[("shared", "abc"), ("own2", "x-y-z")]));
    // One entry appended, the old one kept for B.
    assert_eq!(
        d.dictionary.as_ref().unwrap().attribute_table.len(),
        n_before + 1
    );
}

#[test]
fn whole_map_edits_drop_units_and_swap_remove() {
    let mut d = batch();
    run(
        &mut d,
        &[r#"delete_key(profile.attributes, "shared") where profile.period == 10"#],
    );
    let a = attrs(&d);
    assert_eq!(a[0], kv(&[("own1", "5")]));
    let t = &d.dictionary.as_ref().unwrap().attribute_table;
    let own1 = d.resource_profiles[0].scope_profiles[0].profiles[0].attribute_indices[0];
    assert_eq!(
        t[own1 as usize].unit_strindex, 0,
        "re-interned without its unit"
    );
    assert_eq!(a[1], kv(&[("shared", "abc"), ("own2", "x-y-z")]));
}

#[test]
fn values_math_and_converters() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["t1"], 1 + 2.5)"#,
            r#"set(profile.attributes["t2"], Concat([resource.attributes["service.name"], profile.attributes["nope"], 1, 2.5, true], "|"))"#,
            r#"set(profile.attributes["t3"], String(1.0))"#,
            r#"set(profile.attributes["t4"], Int(-2.7))"#,
            r#"set(profile.attributes["t5"], Hex(1))"#,
            r#"set(profile.attributes["t6"], Len(profile.attributes))"#,
            r#"set(profile.attributes["t7"], ToUpperCase(profile.attributes["own2"]))"#,
            r#"set(profile.attributes["t8"], Split("a,,b", ",")[2])"#,
            r#"set(profile.attributes["t9"], SHA256("bob"))"#,
            r#"set(profile.attributes["n"], nil)"#,
        ],
    );
    // ToUpperCase on A's missing own2 fails: A only.
    assert_eq!(errs, vec!["expected string but got nil".to_string()]);
    let a = attrs(&d);
    let get = |p: usize, k: &str| a[p].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get(0, "t1").as_deref(), Some("3.5(f)"));
    assert_eq!(get(0, "t2").as_deref(), Some("svc|<nil>|1|2.5|true"));
    assert_eq!(get(0, "t3").as_deref(), Some("1"));
    assert_eq!(get(0, "t4").as_deref(), Some("-2"));
    assert_eq!(get(0, "t5").as_deref(), Some("0000000000000001"));
    assert_eq!(get(0, "t6").as_deref(), Some("7"));
    assert_eq!(get(0, "t7"), None);
    assert_eq!(get(1, "t7").as_deref(), Some("X-Y-Z"));
    assert_eq!(get(1, "t8").as_deref(), Some("b"));
    assert_eq!(
        get(1, "t9").as_deref(),
        Some("81b637d8fcd2c6da6359e6963113a1170de795e4b725b84d1e0b4cfd9ec58ce9")
    );
    assert_eq!(get(1, "n").as_deref(), Some("(empty)"));
}

/// Known answers of the converters added after the corpus was first
/// checked against the Collector (tests/it/ottl_differential.rs compares
/// them with it).
#[test]
fn string_hash_and_duration_converters() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["t1"], Trim("xxhixyx", "xy"))"#,
            r#"set(profile.attributes["t2"], TrimPrefix("some-name", "some"))"#,
            r#"set(profile.attributes["t3"], HasSuffix("file.gz", ".gz"))"#,
            r#"set(profile.attributes["t4"], SHA1("hello"))"#,
            r#"set(profile.attributes["t5"], MD5("hello"))"#,
            r#"set(profile.attributes["t6"], Base64Encode("hi?>", "base64-raw-url"))"#,
            r#"set(profile.attributes["t7"], Hours(Duration("90m")))"#,
            r#"set(profile.attributes["t8"], Milliseconds(Duration("-1500us")))"#,
            r#"set(profile.attributes["t9"], UnixSeconds(Unix(1700000000, 2000000000)))"#,
            r#"set(profile.attributes["t10"], Base64Encode("x", "base32"))"#,
            r#"merge_maps(profile.attributes, ExtractPatterns("a=1 b", "(?P<k>[a-z]+)=(?P<v>[0-9]+)"), "upsert")"#,
            r#"set(profile.attributes["t11"], Index(["a", 1, 2.5], 2.5))"#,
            r#"set(profile.attributes["t12"], IsEmpty(0))"#,
        ],
    );
    assert_eq!(
        errs,
        vec!["unsupported base64 variant: base32".to_string(); 2]
    );
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("t1").as_deref(), Some("hi"));
    assert_eq!(get("t2").as_deref(), Some("-name"));
    assert_eq!(get("t3").as_deref(), Some("true"));
    assert_eq!(
        get("t4").as_deref(),
        Some("aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")
    );
    assert_eq!(
        get("t5").as_deref(),
        Some("5d41402abc4b2a76b9719d911017c592")
    );
    assert_eq!(get("t6").as_deref(), Some("aGk_Pg"));
    assert_eq!(get("t7").as_deref(), Some("1.5(f)"));
    assert_eq!(get("t8").as_deref(), Some("-1"));
    assert_eq!(get("t9").as_deref(), Some("1700000002"));
    assert_eq!(get("k").as_deref(), Some("a"));
    assert_eq!(get("v").as_deref(), Some("1"));
    assert_eq!(get("t11").as_deref(), Some("2"));
    assert_eq!(get("t12").as_deref(), Some("true"));
}

/// The known answers of the Collector's own tests (pkg/ottl/ottlfuncs at
/// v0.161.0) for the hashes, `Log` and `IsValidLuhn`; the OTTL
/// differential test compares them with the Collector too.
#[test]
fn hash_log_and_luhn_converters() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["fnv"], FNV("hello world"))"#,
            r#"set(profile.attributes["fnv0"], FNV(""))"#,
            r#"set(profile.attributes["m32"], Murmur3Hash("Hello World"))"#,
            r#"set(profile.attributes["m32e"], Murmur3Hash(""))"#,
            r#"set(profile.attributes["m128"], Murmur3Hash128("Hello World"))"#,
            r#"set(profile.attributes["x3"], XXH3("hello world"))"#,
            r#"set(profile.attributes["x3e"], XXH3(""))"#,
            r#"set(profile.attributes["x128"], XXH128("hello world"))"#,
            r#"set(profile.attributes["x128e"], XXH128(""))"#,
            r#"set(profile.attributes["ln"], true) where Log("50") == Log(50.0)"#,
            r#"set(profile.attributes["ln2"], Log(2.7))"#,
            r#"set(profile.attributes["ln1"], Log(true))"#,
            r#"set(profile.attributes["luhn"], IsValidLuhn("1789 3729 974"))"#,
            r#"set(profile.attributes["luhn_int"], IsValidLuhn(17893729974))"#,
            r#"set(profile.attributes["luhn_bad"], IsValidLuhn("17893729975"))"#,
            r#"set(profile.attributes["luhn_empty"], IsValidLuhn(""))"#,
            r#"set(profile.attributes["luhn0"], IsValidLuhn("0"))"#,
            r#"set(profile.attributes["e1"], Log(-30.3))"#,
            r#"set(profile.attributes["e2"], IsValidLuhn("test"))"#,
            r#"set(profile.attributes["n"], 10)"#,
            r#"set(profile.attributes["e3"], XXH3(profile.attributes["n"]))"#,
        ],
    );
    let per_profile = [
        "invalid input: expected number greater than zero but got -30.3",
        "strconv.Atoi: parsing \"t\": invalid syntax",
        "expected string but got int",
    ];
    assert_eq!(errs.len(), 2 * per_profile.len(), "{errs:?}");
    for want in per_profile {
        assert!(errs.iter().any(|e| e.contains(want)), "{want}: {errs:?}");
    }
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("fnv").as_deref(), Some("8618312879776256743"));
    assert_eq!(get("fnv0").as_deref(), Some("-3750763034362895579"));
    assert_eq!(get("m32").as_deref(), Some("ce837619"));
    assert_eq!(get("m32e").as_deref(), Some("00000000"));
    assert_eq!(
        get("m128").as_deref(),
        Some("dbc2a0c1ab26631a27b4c09fcf1fe683")
    );
    assert_eq!(get("x3").as_deref(), Some("d447b1ea40e6988b"));
    assert_eq!(get("x3e").as_deref(), Some("2d06800538d394c2"));
    assert_eq!(
        get("x128").as_deref(),
        Some("df8d09e93f874900a99b8775cc15b6c7")
    );
    assert_eq!(
        get("x128e").as_deref(),
        Some("99aa06d3014798d86001c324468d497f")
    );
    assert_eq!(get("ln").as_deref(), Some("true"));
    assert_eq!(get("ln1").as_deref(), Some("0(f)"));
    assert_eq!(get("ln2").as_deref(), Some("0.9932517730102834(f)"));
    assert_eq!(get("luhn").as_deref(), Some("true"));
    assert_eq!(get("luhn_int").as_deref(), Some("true"));
    assert_eq!(get("luhn_bad").as_deref(), Some("false"));
    assert_eq!(get("luhn_empty").as_deref(), Some("false"));
    assert_eq!(get("luhn0").as_deref(), Some("true"));
    // The Collector's converters profcol lacks are named as such, not as
    // undefined (a typo).
    for (stmt, name) in [
        (
            r#"set(profile.attributes["t"], UserAgent("curl/8.5.0"))"#,
            "UserAgent",
        ),
        (
            r#"set(profile.attributes["n"], MapKeys(profile.attributes))"#,
            "MapKeys",
        ),
    ] {
        let e = Statement::parse(
            stmt,
            Options {
                level: Level::Profile,
                ..flat()
            },
        )
        .unwrap_err();
        assert!(
            e.msg == format!("converter {name} is not supported by profcol yet"),
            "{e:?}"
        );
    }
}

/// `Bool`, `ParseInt` and `Coalesce` as the Collector's (Go's
/// `strconv.ParseBool` and `strconv.ParseInt`, their errors included).
#[test]
fn bool_parse_int_and_coalesce_converters() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["b1"], Bool("T"))"#,
            r#"set(profile.attributes["b2"], Bool(0.0))"#,
            r#"set(profile.attributes["b3"], Bool(-2))"#,
            r#"set(profile.attributes["b4"], Bool(profile.attributes["nope"]))"#,
            r#"set(profile.attributes["p1"], ParseInt("-0x1F", 0))"#,
            r#"set(profile.attributes["p2"], ParseInt("1_000", 0))"#,
            r#"set(profile.attributes["p3"], ParseInt("0755", 0))"#,
            r#"set(profile.attributes["p4"], ParseInt("zz", 36))"#,
            r#"set(profile.attributes["p5"], ParseInt("-9223372036854775808", 10))"#,
            r#"set(profile.attributes["c1"], Coalesce([profile.attributes["nope"], "x", 1]))"#,
            r#"set(profile.attributes["c2"], Coalesce([profile.attributes["nope"]]))"#,
            r#"set(profile.attributes["yes"], "yes")"#,
            r#"set(profile.attributes["e1"], Bool(profile.attributes["yes"]))"#,
            r#"set(profile.attributes["e2"], ParseInt("9223372036854775808", 10))"#,
            r#"set(profile.attributes["e3"], ParseInt("12", 1))"#,
            r#"set(profile.attributes["e4"], ParseInt("1__0", 0))"#,
            r#"set(profile.attributes["e5"], ParseInt("", 10))"#,
            r#"set(profile.attributes["e6"], ParseInt("12", -1))"#,
            r#"set(profile.attributes["e7"], ParseInt("12a", 10))"#,
        ],
    );
    let per_profile = [
        r#"strconv.ParseBool: parsing "yes": invalid syntax"#,
        r#"strconv.ParseInt: parsing "9223372036854775808": value out of range"#,
        r#"strconv.ParseInt: parsing "12": invalid base 1"#,
        r#"strconv.ParseInt: parsing "1__0": invalid syntax"#,
        "invalid target value for ParseInt function, target cannot be empty",
        "invalid base value: -1 for ParseInt function, base cannot be negative",
        r#"strconv.ParseInt: parsing "12a": invalid syntax"#,
    ];
    assert_eq!(errs.len(), 2 * per_profile.len(), "{errs:?}");
    for want in per_profile {
        assert!(errs.iter().any(|e| e.contains(want)), "{want}: {errs:?}");
    }
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("b1").as_deref(), Some("true"));
    assert_eq!(get("b2").as_deref(), Some("false"));
    assert_eq!(get("b3").as_deref(), Some("true"));
    assert_eq!(get("b4").as_deref(), Some("(empty)"), "nil");
    assert_eq!(get("p1").as_deref(), Some("-31"));
    assert_eq!(get("p2").as_deref(), Some("1000"));
    assert_eq!(get("p3").as_deref(), Some("493"));
    assert_eq!(get("p4").as_deref(), Some("1295"));
    assert_eq!(get("p5").as_deref(), Some("-9223372036854775808"));
    assert_eq!(get("c1").as_deref(), Some("x"));
    assert_eq!(get("c2").as_deref(), Some("(empty)"));
    let e = Statement::parse(
        r#"set(profile.attributes["c"], Coalesce([]))"#,
        Options {
            level: Level::Profile,
            ..flat()
        },
    )
    .unwrap_err();
    assert_eq!(e.msg, "Coalesce requires at least one argument");
}

/// `IsInCIDR` as the Collector's (`net.ParseCIDR`, `IPNet.Contains`).
#[test]
fn is_in_cidr() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["ip"], "192.168.1.7")"#,
            r#"set(profile.attributes["net"], "192.168.0.0/16")"#,
            r#"set(profile.attributes["a"], IsInCIDR(profile.attributes["ip"], ["10.0.0.0/8", "192.168.1.0/24"]))"#,
            r#"set(profile.attributes["b"], IsInCIDR("192.169.0.1", ["192.168.0.0/16"]))"#,
            r#"set(profile.attributes["c"], IsInCIDR("::ffff:10.1.2.3", ["10.0.0.0/8"]))"#,
            r#"set(profile.attributes["d"], IsInCIDR("10.1.2.3", ["::ffff:10.0.0.0/104"]))"#,
            r#"set(profile.attributes["e"], IsInCIDR("2001:db8::1", ["2001:db8::/32", "0.0.0.0/0"]))"#,
            r#"set(profile.attributes["f"], IsInCIDR("not an ip", ["0.0.0.0/0"]))"#,
            r#"set(profile.attributes["g"], IsInCIDR(profile.attributes["ip"], [profile.attributes["net"]]))"#,
            r#"set(profile.attributes["bad"], "192.0.2/24")"#,
            r#"set(profile.attributes["h"], IsInCIDR("1.2.3.4", [profile.attributes["bad"]]))"#,
        ],
    );
    assert_eq!(
        errs,
        vec!["invalid CIDR address: 192.0.2/24".to_string(); 2]
    );
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    for (k, want) in [
        ("a", "true"),
        ("b", "false"),
        ("c", "true"),
        ("d", "true"),
        ("e", "true"),
        ("f", "false"),
        ("g", "true"),
    ] {
        assert_eq!(get(k).as_deref(), Some(want), "{k}");
    }
    for bad in ["10.0.0.0/33", "10.0.0.0", "010.0.0.0/8", "fe80::1%eth0/64"] {
        let stmt = format!(r#"set(profile.attributes["x"], IsInCIDR("1.2.3.4", ["{bad}"]))"#);
        let e = Statement::parse(
            &stmt,
            Options {
                level: Level::Profile,
                ..flat()
            },
        )
        .unwrap_err();
        assert_eq!(e.msg, format!("invalid CIDR address: {bad}"));
    }
}

/// `stringify_all` renders each value as `pcommon.Value.AsString`;
/// `clear` sets the zero value of the target's type.
#[test]
fn stringify_all_and_clear_editors() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["i"], 7)"#,
            r#"set(profile.attributes["d"], 2.5)"#,
            r#"set(profile.attributes["l"], [1, "a"])"#,
            r#"set(profile.attributes["c"], "kept")"#,
            r#"set(profile.attributes["z"], 3)"#,
            r#"stringify_all(profile.attributes)"#,
            r#"clear(profile.attributes["c"])"#,
            r#"set(profile.attributes["n"], 9)"#,
            r#"clear(profile.attributes["n"])"#,
            r#"clear(profile.attributes["nope"])"#,
        ],
    );
    assert!(errs.is_empty(), "{errs:?}");
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("i").as_deref(), Some("7"));
    assert_eq!(get("d").as_deref(), Some("2.5"));
    assert_eq!(get("l").as_deref(), Some(r#"[1,"a"]"#));
    assert_eq!(get("c").as_deref(), Some(""));
    assert_eq!(get("n").as_deref(), Some("0"));
    assert_eq!(get("nope").as_deref(), Some("(empty)"));
    run(&mut d, &["clear(profile.attributes)"]);
    assert!(attrs(&d)[0].is_empty());
}

#[test]
fn replace_and_map_editors() {
    let mut d = batch();
    run(
        &mut d,
        &[
            r#"set(profile.attributes["k"], "secret=abc other")"#,
            r#"replace_pattern(profile.attributes["k"], "secret=([a-z]+)", "secret=$1-$$-***")"#,
            r#"replace_all_matches(profile.attributes, "*-y-*", "REDACTED")"#,
            r#"replace_all_patterns(profile.attributes, "key", "^own(\\d)$", "mine$1")"#,
            r#"limit(profile.attributes, 2, ["k"])"#,
        ],
    );
    let a = attrs(&d);
    assert_eq!(
        a[0],
        kv(&[("shared", "abc"), ("k", "secret=abc-$-*** other")])
    );
    assert_eq!(
        a[1],
        kv(&[("shared", "abc"), ("k", "secret=abc-$-*** other")])
    );
}

#[test]
fn scalar_fields_and_string_table() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.sample_type.type, "alloc") where profile.period == 20"#,
            r#"set(profile.sample_type.unit, "bytes")"#,
            r#"set(profile.attributes["pid"], profile.profile_id.string)"#,
            r#"set(profile.duration_unix_nano, -1)"#,
            r#"set(profile.original_payload_format, "json")"#,
            r#"set(scope.name, Concat([scope.name, scope.version], "@"))"#,
        ],
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    let dict = d.dictionary.as_ref().unwrap();
    let ps = &d.resource_profiles[0].scope_profiles[0].profiles;
    let st = |p: &Profile| {
        let v = p.sample_type.as_ref().unwrap();
        (
            dict.string_table[v.type_strindex as usize].as_str(),
            dict.string_table[v.unit_strindex as usize].as_str(),
        )
    };
    assert_eq!(st(&ps[0]), ("cpu", "bytes"));
    assert_eq!(st(&ps[1]), ("alloc", "bytes"));
    // "bytes" was already in the table: reused.
    assert_eq!(ps[0].sample_type.unwrap().unit_strindex, 4);
    assert_eq!(ps[0].original_payload_format, "json");
    assert_eq!(
        attrs(&d)[0].last().unwrap().1,
        "01010101010101010101010101010101"
    );
    assert_eq!(
        d.resource_profiles[0].scope_profiles[0]
            .scope
            .as_ref()
            .unwrap()
            .name,
        "sc@1.0@1.0"
    );
}

#[test]
fn config_errors_name_the_column() {
    let p = flat();
    for (s, col) in [
        (r#"set(profile.foo, 1)"#, 5),
        (r#"set(profile.attributes["a"], Int("abc"))"#, 34),
        (r#"set(profile.attributes["a"], IsMatch("x", "["))"#, 43),
        (r#"limit(profile.attributes, -1, [])"#, 27),
        (r#"keep_keys(profile.attributes, "a")"#, 31),
        (r#"set(profile.attribute_indices[0], 1)"#, 5),
        (r#"set(attributes["a"], "b")"#, 5),
        (r#"set(profile.attributes["a"], Nope())"#, 30),
    ] {
        let e = Statement::parse(s, p).expect_err(s);
        assert_eq!(e.col, col, "{s}: {e}");
    }
}

#[test]
fn inference_as_the_collector() {
    assert_eq!(
        infer(&["keep_keys(resource.attributes, [\"a\"])"], &[]).unwrap(),
        Level::Resource
    );
    assert_eq!(
        infer(&["set(resource.attributes[\"a\"], profile.period)"], &[]).unwrap(),
        Level::Profile
    );
    assert!(infer(&["set(instrumentation_scope.name, \"x\")"], &[]).is_err());
    assert!(infer(&["set(attributes[\"a\"], \"b\")"], &[]).is_err());
    let e = infer(
        &[r#"replace_pattern(profile.attributes["k"], "u=(\\w+)", "$1", SHA256, "sha:%s")"#],
        &[],
    )
    .unwrap_err();
    assert!(e.1.msg.contains("enum symbol \"SHA256\""), "{}", e.1);
    // With an explicit context the same statement compiles.
    Statement::parse(
        r#"replace_pattern(attributes["k"], "u=(\\w+)", "$1", SHA256, "sha:%s")"#,
        Options {
            level: Level::Profile,
            prefixes: Prefixes::Default,
        },
    )
    .unwrap();
}

#[test]
fn conditions_borrow_and_short_circuit() {
    let mut d = batch();
    let c = Condition::parse(
        r#"profile.attributes["own2"] == "x-y-z" or ToUpperCase(profile.attributes["nope"]) == "X""#,
        flat(),
    )
    .unwrap();
    let mut out = Vec::new();
    for_each(&mut d, Level::Profile, &crate::Client::default(), |ctx| {
        out.push(c.eval(ctx).map_err(|e| e.0));
        Ok::<_, ()>(())
    })
    .unwrap();
    assert!(out[0].is_err());
    assert_eq!(out[1], Ok(true));
}

/// `compare.go`: a list literal against an attribute's slice is
/// `reflect.DeepEqual` with the slice's raw form (found by the
/// differential test against the Collector).
#[test]
fn a_list_literal_equals_an_attribute_slice_with_the_same_values() {
    let mut d = batch();
    assert!(run(
        &mut d,
        &[
            r#"set(profile.attributes["l"], ["a", 1, nil, [true]])"#,
            r#"set(profile.attributes["eq"], "y") where profile.attributes["l"] == ["a", 1, nil, [true]]"#,
            r#"set(profile.attributes["rev"], "y") where ["a", 1, nil, [true]] == profile.attributes["l"]"#,
            r#"set(profile.attributes["float"], "y") where profile.attributes["l"] != ["a", 1.0, nil, [true]]"#,
            r#"set(profile.attributes["short"], "y") where profile.attributes["l"] == ["a", 1, nil]"#,
            r#"set(profile.attributes["lt"], "y") where profile.attributes["l"] <= ["a", 1, nil, [true]]"#,
        ]
    )
    .is_empty());
    let keys: Vec<String> = attrs(&d)[0]
        .iter()
        .filter(|(_, v)| v == "y")
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(keys, ["eq", "rev", "float"]);
}

/// `func_limit.go` counts each priority key present as often as it is
/// listed: `["k", "k"]` with a limit of 2 leaves room for no other key
/// (found by the differential test against the Collector).
#[test]
fn limit_counts_a_priority_key_listed_twice_twice() {
    let mut d = batch();
    assert!(run(
        &mut d,
        &[
            r#"set(profile.attributes["k"], "v")"#,
            r#"limit(profile.attributes, 2, ["k", "k"])"#,
        ]
    )
    .is_empty());
    assert_eq!(attrs(&d)[0], kv(&[("k", "v")]));
}

/// Math on literals is not a literal: the Collector loads
/// `Substring(7 * 2.5, 0, 1)` and `1 / 0` and fails them per item
/// (found by the differential test against the Collector).
#[test]
fn math_on_literals_fails_when_it_runs_not_when_it_loads() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["sub"], Substring(7 * 2.5, 0, 1))"#,
            r#"set(profile.attributes["div"], 1 / 0)"#,
            r#"set(profile.attributes["ok"], 7 / 2)"#,
        ],
    );
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(
        errs[0].contains("expected string but got float64"),
        "{errs:?}"
    );
    assert!(errs[2].contains("attempted to divide by 0"), "{errs:?}");
    assert_eq!(
        attrs(&d)[0].last().unwrap(),
        &("ok".to_string(), "3".to_string())
    );
}

#[test]
fn value_expressions_parse_and_evaluate_alone() {
    use crate::value::Val;
    use crate::{Level, Options, Prefixes, ValueExpr};
    let opts = Options {
        level: Level::Profile,
        prefixes: Prefixes::Required,
    };
    for (text, want) in [
        ("1", Val::Int(1)),
        ("2.5", Val::Double(2.5)),
        ("3 * 4", Val::Int(12)),
    ] {
        let e = ValueExpr::parse(text, opts).unwrap();
        let mut data = profcol_model::proto::ProfilesData::default();
        data.resource_profiles.push(Default::default());
        data.resource_profiles[0]
            .scope_profiles
            .push(Default::default());
        data.resource_profiles[0].scope_profiles[0]
            .profiles
            .push(Default::default());
        let mut got = None;
        crate::for_each(
            &mut data,
            Level::Profile,
            &crate::Client::default(),
            |ctx| {
                got = Some(format!("{:?}", e.eval(ctx)?));
                Ok::<_, crate::EvalError>(())
            },
        )
        .unwrap();
        assert_eq!(got.unwrap(), format!("{want:?}"), "{text}");
    }
    assert!(ValueExpr::parse("1 +", opts).is_err());
    assert!(ValueExpr::parse("1 2", opts).is_err());
}

#[test]
fn parse_csv_maps_headers_to_fields() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["c1"], ParseCSV("val1,\"v,2\"", "a,b"))"#,
            r#"set(profile.attributes["c2"], ParseCSV("x|y\nz", "p q", "|", " "))"#,
            r#"set(profile.attributes["c3"], ParseCSV("1,2,3", "a,b"))"#,
            r#"set(profile.attributes["c4"], ParseCSV("1", ""))"#,
            r#"set(profile.attributes["c5"], ParseCSV(profile.period, "a"))"#,
        ],
    );
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("c1").as_deref(), Some(r#"{"a":"val1","b":"v,2"}"#));
    assert_eq!(get("c2").as_deref(), Some(r#"{"p":"x","q":"y\nz"}"#));
    assert_eq!(get("c3"), None);
    // Each statement fails on both profiles, in order.
    let want = [
        "map csv headers: wrong number of fields: expected 2, found 3",
        "headers must not be an empty string",
        "error getting value for target in ParseCSV: expected string but got int64",
    ];
    let firsts: Vec<&str> = errs.iter().step_by(2).map(String::as_str).collect();
    assert_eq!(firsts, want);
    for (s, e) in [
        (
            r#"set(profile.attributes["t"], ParseCSV("a", "b", "ab"))"#,
            "delimiter must be a single character",
        ),
        (
            r#"set(profile.attributes["t"], ParseCSV("a", "b", ",", ""))"#,
            "header_delimiter must be a single character",
        ),
        (
            r#"set(profile.attributes["t"], ParseCSV("a", "b", ",", ",", "loose"))"#,
            "unknown mode: loose",
        ),
    ] {
        let err = Statement::parse(s, flat()).unwrap_err().to_string();
        assert!(err.contains(e), "{s}: {err}");
    }
}

/// `otelcol.client.*` over a batch's client: headers by any case, each a
/// list; the address or nil; no auth attributes; none of them settable.
#[test]
fn otelcol_client_paths_read_the_batchs_client() {
    use crate::{Client, Statement, ValueExpr};
    let opts = Options {
        level: Level::Resource,
        prefixes: Prefixes::Required,
    };
    let meta = profcol_model::BatchMeta {
        client_addr: Some("10.1.2.3:4567".parse().unwrap()),
        metadata: vec![
            ("x-tenant".into(), "a".into()),
            ("x-multi".into(), "1".into()),
            ("x-multi".into(), "2".into()),
        ],
        ..Default::default()
    };
    let eval = |client: &Client, text: &str| {
        let e = ValueExpr::parse(text, opts).unwrap_or_else(|e| panic!("{text}: {e}"));
        let mut data = ProfilesData::default();
        data.resource_profiles.push(Default::default());
        let mut got = String::new();
        for_each(&mut data, Level::Resource, client, |ctx| {
            got = format!("{:?}", e.eval(ctx).map_err(|e| e.0));
            Ok::<_, ()>(())
        })
        .unwrap();
        got
    };
    let client = Client::of(&meta);
    assert_eq!(
        eval(&client, "otelcol.client.addr"),
        r#"Ok(Str("10.1.2.3:4567"))"#
    );
    assert_eq!(eval(&Client::default(), "otelcol.client.addr"), "Ok(Nil)");
    assert_eq!(
        eval(&client, r#"otelcol.client.metadata["X-TENANT"][0]"#),
        r#"Ok(Str("a"))"#
    );
    assert_eq!(
        eval(&client, r#"otelcol.client.metadata["x-multi"][1]"#),
        r#"Ok(Str("2"))"#
    );
    assert_eq!(
        eval(&client, r#"Len(otelcol.client.metadata["x-multi"])"#),
        "Ok(Int(2))"
    );
    assert_eq!(
        eval(&client, r#"otelcol.client.metadata["nope"]"#),
        "Ok(Nil)"
    );
    assert_eq!(eval(&client, "Len(otelcol.client.metadata)"), "Ok(Int(2))");
    assert_eq!(
        eval(&client, r#"otelcol.client.auth.attributes["sub"]"#),
        "Ok(Nil)"
    );
    for (path, text) in [
        ("otelcol.client.addr", r#"set(otelcol.client.addr, "x")"#),
        (
            "otelcol.client.metadata",
            r#"set(otelcol.client.metadata["k"], "x")"#,
        ),
    ] {
        let s = Statement::parse(text, opts).unwrap();
        let mut data = ProfilesData::default();
        data.resource_profiles.push(Default::default());
        let mut err = None;
        for_each(&mut data, Level::Resource, &client, |ctx| {
            err = s.run(ctx).err().map(|e| e.0);
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(
            err.unwrap(),
            format!("{path:?} is read-only and cannot be modified")
        );
    }
    let e = Statement::parse(
        r#"set(resource.attributes["t"], otelcol.grpc.metadata["k"])"#,
        opts,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("otelcol.grpc.* paths are not supported"), "{e}");
}

/// `Decode` and `ParseSeverity` give what the Collector's README and tests
/// say (the OTTL differential test compares them with the Collector too);
/// their errors skip the statement.
#[test]
fn decode_and_parse_severity() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["d1"], Decode("aGVsbG8gd29ybGQ=", "base64"))"#,
            r#"set(profile.attributes["d2"], Decode("aGk_Pz5-", "base64-raw-url"))"#,
            r#"set(profile.attributes["d3"], Decode("aGVsbG8g\nd29ybGQ=", "base64"))"#,
            r#"set(profile.attributes["d4"], Decode("aGVsbG8gd29ybGQ", "base64"))"#,
            r#"set(profile.attributes["c1"], Decode(0xe9e8, "ISO-8859-1"))"#,
            r#"set(profile.attributes["c2"], Decode(0x80, "windows-1252"))"#,
            r#"set(profile.attributes["c3"], Decode(0x68006900, "UTF-16"))"#,
            r#"set(profile.attributes["c4"], Decode(0x82a0, "Shift_JIS"))"#,
            r#"set(profile.attributes["s1"], ParseSeverity(404, {"info":[{"range":"2xx"}], "error":[{"range":"4xx"}]}))"#,
            r#"set(profile.attributes["s2"], ParseSeverity("inf", {"info":[{"equals": ["inf"]}, {"range":{"min":200, "max":299}}]}))"#,
            r#"set(profile.attributes["s3"], ParseSeverity("x", {"info":[{"equals": ["inf"]}]}))"#,
            r#"set(profile.attributes["s4"], ParseSeverity(1, {"info":[{"range":{"min":1}}]}))"#,
        ],
    );
    let mut errs = errs;
    errs.dedup();
    assert_eq!(
        errs,
        [
            "could not decode: Invalid padding",
            "could not map log level: no matching log level found for value 'x'",
            "invalid severity mapping criteria: range must have a max value",
        ]
    );
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("d1").as_deref(), Some("hello world"));
    assert_eq!(get("d2").as_deref(), Some("hi??>~"));
    assert_eq!(get("d3").as_deref(), Some("hello world"));
    assert_eq!(get("d4"), None);
    assert_eq!(get("c1").as_deref(), Some("éè"));
    assert_eq!(get("c2").as_deref(), Some("€"));
    assert_eq!(get("c3").as_deref(), Some("hi"));
    assert_eq!(get("c4").as_deref(), Some("あ"));
    assert_eq!(get("s1").as_deref(), Some("error"));
    assert_eq!(get("s2").as_deref(), Some("info"));
    assert_eq!(get("s3"), None);
    assert_eq!(get("s4"), None);
    let refused = |s: &str| Statement::parse(s, flat()).unwrap_err().to_string();
    assert!(
        refused(r#"set(profile.attributes["x"], Decode("YQ==", "no-such"))"#)
            .contains("unsupported encoding 'no-such'")
    );
}

/// `Time` reads as the Collector (its README's examples; the OTTL
/// differential test compares 70 statements with the Collector itself):
/// lax numbers, zones by offset, by abbreviation and by location, and a
/// named zone no location has is an error.
#[test]
fn time_converter() {
    let mut d = batch();
    let errs = run(
        &mut d,
        &[
            r#"set(profile.attributes["t1"], UnixSeconds(Time("2023-05-26 12:34:56", "%Y-%m-%d %H:%M:%S", "America/New_York")))"#,
            r#"set(profile.attributes["t2"], UnixSeconds(Time("2023-5-6 3:4:5", "%Y-%m-%d %H:%M:%S")))"#,
            r#"set(profile.attributes["t3"], UnixSeconds(Time("2023-05-26 12:34:56 EST", "%Y-%m-%d %H:%M:%S %Z")))"#,
            r#"set(profile.attributes["t4"], UnixSeconds(Time("2012-11-01T22:08:41+05:30", "%Y-%m-%dT%H:%M:%S%z")))"#,
            r#"set(profile.attributes["t5"], UnixNano(Time("Thu Feb  1 09:08:07.25 2024", "%c")))"#,
            r#"set(profile.attributes["t6"], UnixSeconds(Time("2023-05-26 12:34:56 PST", "%Y-%m-%d %H:%M:%S %Z")))"#,
        ],
    );
    let mut errs = errs;
    errs.dedup();
    assert_eq!(
        errs,
        ["failed to load location PST: unknown time zone PST"],
        "{errs:?}"
    );
    let a = attrs(&d);
    let get = |k: &str| a[0].iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    assert_eq!(get("t1").as_deref(), Some("1685118896"));
    assert_eq!(get("t2").as_deref(), Some("1683342245"));
    assert_eq!(get("t3").as_deref(), Some("1685122496"));
    assert_eq!(get("t4").as_deref(), Some("1351787921"));
    assert_eq!(get("t5").as_deref(), Some("1706778487250000000"));
    assert_eq!(get("t6"), None);
    let refused = |s: &str| Statement::parse(s, flat()).unwrap_err().to_string();
    assert!(
        refused(r#"set(profile.attributes["x"], Time("1", "%Y", "Mars/Olympus"))"#)
            .contains("failed to load location Mars/Olympus")
    );
    assert!(
        refused(r#"set(profile.attributes["x"], Time("1", "%d %B", "UTC", "de"))"#)
            .contains("unsupported locale 'de'")
    );
}

//! OTTL as `transform` and `filter` read it from a config: any text as a
//! statement and as a condition at every context, no panic while parsing
//! or compiling; what compiles runs over a real request without panicking,
//! and leaves a request that validates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::validate;
use profcol_ottl::{for_each, Client, Condition, Level, Options, Prefixes, Statement};

static REQUEST: &[u8] = include_bytes!("../../tests/fixtures/otlp/two-resources-request.bin");

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let _ = profcol_ottl::infer(&[text], &[]);
    // What the otelcol.client paths read.
    let client = Client::of(&profcol_model::BatchMeta {
        client_addr: Some(([10, 0, 0, 1], 4317).into()),
        metadata: vec![
            ("x-tenant".into(), "a".into()),
            ("x-tenant".into(), "b".into()),
        ],
        ..Default::default()
    });
    for level in [Level::Resource, Level::Scope, Level::Profile] {
        for prefixes in [Prefixes::Required, Prefixes::Default] {
            let opts = Options { level, prefixes };
            let mut data = ProfilesData::decode(REQUEST).expect("the fixture decodes");
            if let Ok(s) = Statement::parse(text, opts) {
                let _ = for_each(&mut data, level, &client, |ctx| s.run(ctx));
                assert!(
                    validate(&data).is_ok(),
                    "{text:?} left an invalid request"
                );
            }
            if let Ok(c) = Condition::parse(text, opts) {
                let _ = for_each(&mut data, level, &client, |ctx| c.eval(ctx).map(|_| ()));
            }
        }
    }
});

//! The Pyroscope receiver's trie, tree and speedscope bodies: any bytes, no
//! panic, the expansion into folded stacks stays within the memory it was
//! given (no allocation by a claimed count), and what is produced is
//! folded text the folded parser takes.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::memory::MemoryBudget;
use profcol_receivers::pyroscope::convert::Work;
use profcol_receivers::pyroscope::folded::{self, Shape, Text};
use profcol_receivers::pyroscope::{speedscope, tree};

const BUDGET: usize = 16 << 20;

fn work() -> Work {
    Work {
        memory: MemoryBudget::new(BUDGET).try_admit(0).unwrap(),
        limit: BUDGET,
    }
}

fn parses(text: &[u8]) {
    let shape = Shape {
        sample_type: ("samples".into(), "count".into()),
        period_type: None,
        period: 0,
        time_unix_nano: 0,
        duration_nano: 0,
    };
    let mut dict = DictionaryBuilder::default();
    folded::parse(text, Text::Folded, &shape, &mut dict, &[]).expect("folded text parses");
}

fuzz_target!(|body: &[u8]| {
    for layout in [tree::Layout::Trie, tree::Layout::Tree] {
        let mut w = work();
        if let Ok(text) = tree::to_folded(body, layout, &mut w) {
            assert!(w.memory.bytes() <= BUDGET);
            parses(&text);
        }
    }
    let mut w = work();
    if let Ok(parts) = speedscope::to_folded(body, &mut w) {
        assert!(w.memory.bytes() <= BUDGET);
        for p in parts {
            parses(&p.folded);
        }
    }
});

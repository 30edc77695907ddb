//! The Pyroscope receiver's trie, tree and speedscope bodies: any bytes, no
//! panic, the expansion into folded stacks stays within the budget it was
//! given (no allocation by a claimed count), and what comes out is folded
//! text: `stack COUNT` lines, a positive count, no empty stack.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_pyroscope::{speedscope, tree};

const BUDGET: usize = 16 << 20;

fn folded_text(text: &[u8]) {
    // Keys join pieces of the body, which need not be UTF-8 on their own.
    let text = String::from_utf8_lossy(text);
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("a count after the stack");
        assert!(!stack.is_empty());
        assert!(count.parse::<u64>().expect("an integer count") > 0);
    }
}

fuzz_target!(|body: &[u8]| {
    let mut held = 0usize;
    let mut charge = |n: usize| {
        held += n;
        if held > BUDGET {
            Err(())
        } else {
            Ok(())
        }
    };
    for layout in [tree::Layout::Trie, tree::Layout::Tree] {
        if let Ok(text) = tree::to_folded(body, layout, &mut charge) {
            folded_text(&text);
        }
    }
    if let Ok(parts) = speedscope::to_folded(body, &mut charge) {
        for p in parts {
            folded_text(&p.folded);
        }
    }
});

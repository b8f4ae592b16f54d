//! Any bytes as a JSON-RPC body through the decoder the server runs
//! (`parse_calls`: the fast single pass, falling back to the careful one),
//! then each call's validation. Nothing may panic, and the fast pass must
//! agree with the careful path alone on every input: the same calls, or
//! errors of the same code for the same id.
#![no_main]

use heddle_core::call::{Calls, Item, parse_calls, parse_calls_carefully};
use libfuzzer_sys::fuzz_target;

fn same(fast: &Item, careful: &Item, data: &[u8]) {
    match (fast, careful) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "fast and careful decode differ on {data:?}"),
        (Err((ia, ea)), Err((ib, eb))) => {
            assert_eq!(ia, ib, "error ids differ on {data:?}");
            assert_eq!(ea.code, eb.code, "error codes differ on {data:?}");
        }
        _ => panic!("one path accepted what the other refused: {data:?}\n{fast:?}\n{careful:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let fast = parse_calls(data, 64);
    let careful = parse_calls_carefully(data, 64);
    match (&fast, &careful) {
        (Ok(Calls::Single(a)), Ok(Calls::Single(b))) => same(a, b, data),
        (Ok(Calls::Batch(a)), Ok(Calls::Batch(b))) => {
            assert_eq!(a.len(), b.len());
            a.iter().zip(b).for_each(|(a, b)| same(a, b, data));
        }
        (Err(a), Err(b)) => assert_eq!(a.code, b.code),
        _ => panic!("the paths disagree on the shape of {data:?}"),
    }
    let items = match fast {
        Ok(Calls::Single(item)) => vec![item],
        Ok(Calls::Batch(items)) => items,
        Err(_) => return,
    };
    for item in items.into_iter().flatten() {
        let _ = item.call.validate();
    }
});

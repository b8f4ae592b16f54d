//! `heddle_core::json` must write exactly serde_json's bytes for any value:
//! any input that parses as JSON, any string (the lossy UTF-8 of the input),
//! and any A2A task or message the input decodes to.
#![no_main]

use libfuzzer_sys::fuzz_target;

fn same<T: serde::Serialize + ?Sized>(value: &T) {
    let ours = heddle_core::json::to_vec_with_capacity(value, 0);
    let theirs = serde_json::to_vec(value);
    match (ours, theirs) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (a, b) => assert_eq!(a.is_ok(), b.is_ok()),
    }
}

fuzz_target!(|data: &[u8]| {
    same(String::from_utf8_lossy(data).as_ref());
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        same(&value);
    }
    if let Ok(task) = serde_json::from_slice::<heddle_core::v1::Task>(data) {
        same(&task);
    }
    if let Ok(message) = serde_json::from_slice::<heddle_core::v1::Message>(data) {
        same(&message);
    }
});

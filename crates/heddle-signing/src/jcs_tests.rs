use serde_json::{Value, json};

use super::*;

fn jcs(text: &str) -> String {
    let v: Value = serde_json::from_str(text).expect("test JSON");
    canonicalize(&v).expect("canonical")
}

fn double(bits: u64) -> String {
    let mut out = String::new();
    write_double(f64::from_bits(bits), &mut out).expect("finite");
    out
}

/// RFC 8785 §3.2.2: the input with whitespace, mixed number forms and escapes.
#[test]
fn rfc8785_main_example() {
    let input = r#"{
        "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
        "literals": [null, true, false]
    }"#;
    assert_eq!(
        jcs(input),
        "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\
         \"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"
    );
}

/// RFC 8785 §3.2.3: members sorted by UTF-16 code units, so the emoji
/// (a surrogate pair, 0xD83D…) sorts before U+FB33, unlike code-point order.
#[test]
fn rfc8785_sorting_uses_utf16_code_units() {
    let input = r#"{
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\ud83d\ude00": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis"
    }"#;
    let out = jcs(input);
    let v: serde_json::Map<String, Value> = serde_json::from_str(&out).expect("JSON");
    let values: Vec<&str> = out
        .split("\":\"")
        .skip(1)
        .map(|s| s.split('"').next().expect("value"))
        .collect();
    assert_eq!(v.len(), 7);
    assert_eq!(
        values,
        [
            "Carriage Return",
            "One",
            "Control",
            "Latin Small Letter O With Diaeresis",
            "Euro Sign",
            "Emoji: Grinning Face",
            "Hebrew Letter Dalet With Dagesh"
        ]
    );
    // Non-ASCII names and the control name are written as themselves / escaped.
    assert!(out.starts_with("{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\""));
}

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
#[test]
fn rfc8785_appendix_b_numbers() {
    let vectors: [(u64, &str); 24] = [
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"), // -0
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
        (0x43143ff3c1cb0959, "1424953923781206.2"),
    ];
    for (bits, want) in vectors {
        assert_eq!(double(bits), want, "bits {bits:016x}");
    }
}

#[test]
fn nan_and_infinity_have_no_canonical_form() {
    let mut out = String::new();
    assert!(write_double(f64::NAN, &mut out).is_err());
    assert!(write_double(f64::INFINITY, &mut out).is_err());
}

#[test]
fn exponent_thresholds_and_negative_zero_as_parsed() {
    assert_eq!(
        jcs("[1e21, 1e20, 1e-7, 1e-6, -0, -0.0, 100, 1.5e300]"),
        "[1e+21,100000000000000000000,1e-7,0.000001,0,0,100,1.5e+300]"
    );
    // Integers arrive as i64/u64 and are written as the same double.
    assert_eq!(
        jcs("[-42, 18446744073709551615]"),
        "[-42,18446744073709552000]"
    );
}

#[test]
fn strings_escape_controls_only() {
    let v = json!({"s": "\u{1}\u{1f}\u{7f}é\u{2028}<>&'"});
    assert_eq!(
        canonicalize(&v).expect("canonical"),
        "{\"s\":\"\\u0001\\u001f\u{7f}é\u{2028}<>&'\"}"
    );
}

#[test]
fn nested_objects_are_sorted_and_compact() {
    assert_eq!(
        jcs(r#"{ "b": {"z": [ 1 , {"y":2,"x":1} ], "a": {}}, "a": [] }"#),
        r#"{"a":[],"b":{"a":{},"z":[1,{"x":1,"y":2}]}}"#
    );
}

proptest::proptest! {
    /// Any finite double prints as text that reads back as the same double,
    /// and canonicalizing canonical text changes nothing.
    #[test]
    fn numbers_round_trip_and_canonical_form_is_a_fixed_point(bits in proptest::num::u64::ANY) {
        let f = f64::from_bits(bits);
        proptest::prop_assume!(f.is_finite());
        let mut out = String::new();
        write_double(f, &mut out).expect("finite");
        let back: f64 = out.parse().expect("a number");
        proptest::prop_assert!(back == f, "{} printed as {}", f, out);
        let doc = format!("{{\"b\":[{out}],\"a\":\"x\"}}");
        let once = jcs(&doc);
        proptest::prop_assert_eq!(jcs(&once), once.clone());
    }
}

//! RFC 8785 JSON Canonicalization Scheme (JCS): object members sorted by
//! their names' UTF-16 code units, numbers in ECMAScript `Number.toString`
//! form, strings escaped as `JSON.stringify` does, no whitespace.

use std::fmt::Write as _;

use serde_json::{Number, Value};

use crate::SigningError;

/// Deepest nesting accepted (serde_json's own parser stops at 128).
const MAX_DEPTH: usize = 128;

/// The canonical form of `value`.
pub fn canonicalize(value: &Value) -> Result<String, SigningError> {
    let mut out = String::new();
    write_value(value, &mut out, 0)?;
    Ok(out)
}

fn write_value(value: &Value, out: &mut String, depth: usize) -> Result<(), SigningError> {
    if depth > MAX_DEPTH {
        return Err(SigningError::Canonicalize(format!(
            "nesting deeper than {MAX_DEPTH}"
        )));
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out, depth + 1)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_value(v, out, depth + 1)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Strings as ECMAScript `JSON.stringify` writes them (RFC 8785 §3.2.2.2):
/// the two-character escapes where one exists, `\u00xx` (lower-case hex) for
/// the other controls, every other character as itself.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Numbers are IEEE 754 doubles (RFC 8785 §3.2.2.3): integers beyond 2^53
/// are read as the nearest double, as a JavaScript parser would.
fn write_number(n: &Number, out: &mut String) -> Result<(), SigningError> {
    let f = if let Some(i) = n.as_i64() {
        i as f64
    } else if let Some(u) = n.as_u64() {
        u as f64
    } else {
        n.as_f64()
            .ok_or_else(|| SigningError::Canonicalize(format!("number {n} is not a double")))?
    };
    write_double(f, out)
}

/// ECMAScript `Number.prototype.toString` for a finite double (ECMA-262
/// §7.1.12.1): the shortest digits that round-trip, positioned by the
/// decimal exponent, exponential form outside 1e-6 ≤ |x| < 1e21.
pub(crate) fn write_double(f: f64, out: &mut String) -> Result<(), SigningError> {
    if !f.is_finite() {
        return Err(SigningError::Canonicalize(format!("{f} has no JSON form")));
    }
    if f == 0.0 {
        // Both zeros, as ECMAScript prints -0.
        out.push('0');
        return Ok(());
    }
    if f < 0.0 {
        out.push('-');
    }
    // Rust's `{:e}` prints the shortest round-tripping digits ("d.ddde±x"),
    // but breaks a tie between two equally near candidates upwards, where
    // ECMAScript takes the even one; printing that many digits again with a
    // precision rounds the exact value half-to-even, which settles it.
    let shortest = format!("{:e}", f.abs());
    let k = shortest
        .split_once('e')
        .map_or(1, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let sci = format!("{:.*e}", k.saturating_sub(1), f.abs());
    let (mantissa, exp) = sci
        .split_once('e')
        .ok_or_else(|| SigningError::Canonicalize(format!("unexpected float form {sci}")))?;
    let exp: i32 = exp
        .parse()
        .map_err(|_| SigningError::Canonicalize(format!("unexpected float form {sci}")))?;
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // k digits, and the value is 0.digits × 10^n.
    let k = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    let n = exp + 1;
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let e = n - 1;
        let _ = write!(out, "e{}{}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    Ok(())
}

#[cfg(test)]
#[path = "jcs_tests.rs"]
mod tests;

//! Heddle's own `google.protobuf` well-known types.
//!
//! `Struct` and `Value` hold `serde_json` values, so agent code reads and
//! writes `data` parts and `metadata` as ordinary JSON, while the protobuf
//! encoding stays byte-compatible with the standard `struct.proto`. Numbers
//! that are whole and within ±2^53 decode from protobuf as JSON integers, so
//! `42` stays `42` after a round trip through gRPC.

use std::fmt;

use prost::{
    DecodeError, Message,
    bytes::{Buf, BufMut},
    encoding::{self, DecodeContext, WireType},
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Number};

/// `google.protobuf.Value`: any JSON value.
#[derive(Clone, PartialEq, Default, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Value(pub serde_json::Value);

/// `google.protobuf.Struct`: a JSON object.
#[derive(Clone, PartialEq, Default, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Struct(pub Map<String, serde_json::Value>);

/// `google.protobuf.Empty`: serialized as `{}`.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Empty {}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        Self(v)
    }
}

impl From<Map<String, serde_json::Value>> for Struct {
    fn from(m: Map<String, serde_json::Value>) -> Self {
        Self(m)
    }
}

impl Struct {
    /// The object as a `serde_json::Value`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::Value::Object(self.0.clone())
    }
}

impl TryFrom<serde_json::Value> for Struct {
    type Error = serde_json::Value;
    /// Succeeds for objects; any other value is handed back.
    fn try_from(v: serde_json::Value) -> Result<Self, Self::Error> {
        match v {
            serde_json::Value::Object(m) => Ok(Self(m)),
            other => Err(other),
        }
    }
}

impl Serialize for Empty {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        s.serialize_map(Some(0))?.end()
    }
}

impl<'de> Deserialize<'de> for Empty {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `{}` is the form; `null` and unknown members are tolerated.
        let _ = serde::de::IgnoredAny::deserialize(d)?;
        Ok(Empty {})
    }
}

// ---- protobuf encoding of Value / Struct / ListValue -------------------------

const VALUE_NULL: u32 = 1;
const VALUE_NUMBER: u32 = 2;
const VALUE_STRING: u32 = 3;
const VALUE_BOOL: u32 = 4;
const VALUE_STRUCT: u32 = 5;
const VALUE_LIST: u32 = 6;

fn struct_body_len(m: &Map<String, serde_json::Value>) -> usize {
    m.iter()
        .map(|(k, v)| {
            let entry = entry_len(k, v);
            encoding::key_len(1) + encoding::encoded_len_varint(entry as u64) + entry
        })
        .sum()
}

fn entry_len(k: &str, v: &serde_json::Value) -> usize {
    let key = if k.is_empty() {
        0
    } else {
        encoding::string::encoded_len(1, &k.to_owned())
    };
    let val = value_body_len(v);
    key + encoding::key_len(2) + encoding::encoded_len_varint(val as u64) + val
}

fn list_body_len(items: &[serde_json::Value]) -> usize {
    items
        .iter()
        .map(|v| {
            let len = value_body_len(v);
            encoding::key_len(1) + encoding::encoded_len_varint(len as u64) + len
        })
        .sum()
}

fn value_body_len(v: &serde_json::Value) -> usize {
    use serde_json::Value as J;
    match v {
        J::Null => encoding::key_len(VALUE_NULL) + 1,
        J::Bool(_) => encoding::key_len(VALUE_BOOL) + 1,
        J::Number(_) => encoding::key_len(VALUE_NUMBER) + 8,
        J::String(s) => {
            encoding::key_len(VALUE_STRING) + encoding::encoded_len_varint(s.len() as u64) + s.len()
        }
        J::Object(m) => {
            let len = struct_body_len(m);
            encoding::key_len(VALUE_STRUCT) + encoding::encoded_len_varint(len as u64) + len
        }
        J::Array(a) => {
            let len = list_body_len(a);
            encoding::key_len(VALUE_LIST) + encoding::encoded_len_varint(len as u64) + len
        }
    }
}

fn encode_struct_body(m: &Map<String, serde_json::Value>, buf: &mut impl BufMut) {
    for (k, v) in m {
        encoding::encode_key(1, WireType::LengthDelimited, buf);
        encoding::encode_varint(entry_len(k, v) as u64, buf);
        if !k.is_empty() {
            encoding::encode_key(1, WireType::LengthDelimited, buf);
            encoding::encode_varint(k.len() as u64, buf);
            buf.put_slice(k.as_bytes());
        }
        encoding::encode_key(2, WireType::LengthDelimited, buf);
        encoding::encode_varint(value_body_len(v) as u64, buf);
        encode_value_body(v, buf);
    }
}

fn encode_value_body(v: &serde_json::Value, buf: &mut impl BufMut) {
    use serde_json::Value as J;
    match v {
        J::Null => {
            encoding::encode_key(VALUE_NULL, WireType::Varint, buf);
            buf.put_u8(0);
        }
        J::Bool(b) => {
            encoding::encode_key(VALUE_BOOL, WireType::Varint, buf);
            buf.put_u8(u8::from(*b));
        }
        J::Number(n) => {
            encoding::encode_key(VALUE_NUMBER, WireType::SixtyFourBit, buf);
            buf.put_f64_le(n.as_f64().unwrap_or(0.0));
        }
        J::String(s) => {
            encoding::encode_key(VALUE_STRING, WireType::LengthDelimited, buf);
            encoding::encode_varint(s.len() as u64, buf);
            buf.put_slice(s.as_bytes());
        }
        J::Object(m) => {
            encoding::encode_key(VALUE_STRUCT, WireType::LengthDelimited, buf);
            encoding::encode_varint(struct_body_len(m) as u64, buf);
            encode_struct_body(m, buf);
        }
        J::Array(a) => {
            encoding::encode_key(VALUE_LIST, WireType::LengthDelimited, buf);
            encoding::encode_varint(list_body_len(a) as u64, buf);
            for item in a {
                encoding::encode_key(1, WireType::LengthDelimited, buf);
                encoding::encode_varint(value_body_len(item) as u64, buf);
                encode_value_body(item, buf);
            }
        }
    }
}

/// A JSON number from a protobuf double: whole numbers within ±2^53 become
/// integers; NaN and infinities (which JSON cannot hold) become `null`.
fn number_from_f64(f: f64) -> serde_json::Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.fract() == 0.0 && f.abs() < EXACT {
        serde_json::Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// Decode-side helper: one `Struct.fields` entry.
#[derive(Clone, PartialEq, prost::Message)]
struct StructEntry {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Value>,
}

/// Decode-side helper: `google.protobuf.ListValue`.
#[derive(Clone, PartialEq, prost::Message)]
struct ListValue {
    #[prost(message, repeated, tag = "1")]
    values: Vec<Value>,
}

impl Message for Value {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        encode_value_body(&self.0, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        use serde_json::Value as J;
        match tag {
            VALUE_NULL => {
                let mut n = 0i32;
                encoding::int32::merge(wire_type, &mut n, buf, ctx)?;
                self.0 = J::Null;
            }
            VALUE_NUMBER => {
                let mut f = 0f64;
                encoding::double::merge(wire_type, &mut f, buf, ctx)?;
                self.0 = number_from_f64(f);
            }
            VALUE_STRING => {
                let mut s = String::new();
                encoding::string::merge(wire_type, &mut s, buf, ctx)?;
                self.0 = J::String(s);
            }
            VALUE_BOOL => {
                let mut b = false;
                encoding::bool::merge(wire_type, &mut b, buf, ctx)?;
                self.0 = J::Bool(b);
            }
            VALUE_STRUCT => {
                let mut s = match std::mem::take(&mut self.0) {
                    J::Object(m) => Struct(m),
                    _ => Struct::default(),
                };
                encoding::message::merge(wire_type, &mut s, buf, ctx)?;
                self.0 = J::Object(s.0);
            }
            VALUE_LIST => {
                let mut l = ListValue::default();
                encoding::message::merge(wire_type, &mut l, buf, ctx)?;
                self.0 = J::Array(l.values.into_iter().map(|v| v.0).collect());
            }
            _ => encoding::skip_field(wire_type, tag, buf, ctx)?,
        }
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        value_body_len(&self.0)
    }

    fn clear(&mut self) {
        self.0 = serde_json::Value::Null;
    }
}

impl Message for Struct {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        encode_struct_body(&self.0, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if tag == 1 {
            let mut entry = StructEntry::default();
            encoding::message::merge(wire_type, &mut entry, buf, ctx)?;
            let value = entry.value.map_or(serde_json::Value::Null, |v| v.0);
            self.0.insert(entry.key, value);
            Ok(())
        } else {
            encoding::skip_field(wire_type, tag, buf, ctx)
        }
    }

    fn encoded_len(&self) -> usize {
        struct_body_len(&self.0)
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

// ---- Timestamp ---------------------------------------------------------------

/// `google.protobuf.Timestamp`. JSON form: RFC 3339 in UTC with a `Z`, with 0,
/// 3, 6 or 9 fractional digits as ProtoJSON prints them; any RFC 3339 offset
/// is accepted on input and normalised to UTC.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, prost::Message)]
pub struct Timestamp {
    /// Seconds since the Unix epoch.
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Non-negative fraction of a second, 0..=999_999_999.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// Earliest and latest instants ProtoJSON can express (years 0001 to 9999).
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

impl Timestamp {
    /// The current time, to the millisecond (the precision the spec
    /// recommends, v1 §5.6.1).
    pub fn now() -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            seconds: now.as_secs() as i64,
            nanos: (now.subsec_millis() * 1_000_000) as i32,
        }
    }

    /// Milliseconds since the Unix epoch (for sorting and indexes).
    pub fn as_millis(&self) -> i64 {
        self.seconds.saturating_mul(1000) + i64::from(self.nanos / 1_000_000)
    }

    /// From milliseconds since the Unix epoch.
    pub fn from_millis(ms: i64) -> Self {
        Self {
            seconds: ms.div_euclid(1000),
            nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
        }
    }
}

/// The civil date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

impl Timestamp {
    /// Writes the RFC 3339 form into `buf`, returning its length, or `None`
    /// out of range. Done by hand (no `fmt` machinery): it runs for every
    /// status of every task on the hot path.
    fn format_into(&self, buf: &mut [u8; 30]) -> Option<usize> {
        if !(MIN_SECONDS..=MAX_SECONDS).contains(&self.seconds)
            || !(0..1_000_000_000).contains(&self.nanos)
        {
            return None;
        }
        fn put(buf: &mut [u8], at: usize, mut v: u32, width: usize) {
            for i in (0..width).rev() {
                buf[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        }
        let (days, secs) = (
            self.seconds.div_euclid(86_400),
            self.seconds.rem_euclid(86_400) as u32,
        );
        let (y, mo, d) = civil_from_days(days);
        *buf = *b"0000-00-00T00:00:00.000000000Z";
        put(buf, 0, y as u32, 4);
        put(buf, 5, mo, 2);
        put(buf, 8, d, 2);
        put(buf, 11, secs / 3600, 2);
        put(buf, 14, secs / 60 % 60, 2);
        put(buf, 17, secs % 60, 2);
        let n = self.nanos as u32;
        let digits = if n == 0 {
            0
        } else if n.is_multiple_of(1_000_000) {
            put(buf, 20, n / 1_000_000, 3);
            3
        } else if n.is_multiple_of(1_000) {
            put(buf, 20, n / 1_000, 6);
            6
        } else {
            put(buf, 20, n, 9);
            9
        };
        let end = if digits == 0 { 19 } else { 20 + digits };
        buf[end] = b'Z';
        Some(end + 1)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 30];
        let len = self.format_into(&mut buf).ok_or(fmt::Error)?;
        f.write_str(std::str::from_utf8(&buf[..len]).map_err(|_| fmt::Error)?)
    }
}

/// A timestamp string that is not RFC 3339 or is out of ProtoJSON's range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimestampError(String);

impl fmt::Display for TimestampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid RFC 3339 timestamp {:?}", self.0)
    }
}

impl std::error::Error for TimestampError {}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let dt =
            chrono::DateTime::parse_from_rfc3339(s).map_err(|_| TimestampError(s.to_owned()))?;
        let ts = Self {
            seconds: dt.timestamp(),
            nanos: dt.timestamp_subsec_nanos() as i32,
        };
        if (MIN_SECONDS..=MAX_SECONDS).contains(&ts.seconds) && ts.nanos < 1_000_000_000 {
            Ok(ts)
        } else {
            Err(TimestampError(s.to_owned()))
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 30];
        let len = self
            .format_into(&mut buf)
            .ok_or_else(|| serde::ser::Error::custom("timestamp out of range"))?;
        s.serialize_str(std::str::from_utf8(&buf[..len]).map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Timestamp, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamp_prints_z_with_protojson_precision() {
        let t: Timestamp = "2025-11-09T10:30:00+02:00".parse().expect("valid");
        assert_eq!(t.to_string(), "2025-11-09T08:30:00Z");
        let t = Timestamp {
            seconds: 0,
            nanos: 120_000_000,
        };
        assert_eq!(t.to_string(), "1970-01-01T00:00:00.120Z");
        let t = Timestamp {
            seconds: 0,
            nanos: 1_500,
        };
        assert_eq!(t.to_string(), "1970-01-01T00:00:00.000001500Z");
        assert!("2025-13-01T00:00:00Z".parse::<Timestamp>().is_err());
        for text in [
            "0001-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999Z",
            "2000-02-29T12:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
        ] {
            let t: Timestamp = text.parse().expect("valid");
            assert_eq!(t.to_string(), text, "formatting agrees with parsing");
        }
    }

    #[test]
    fn value_round_trips_through_protobuf() {
        let v = Value(json!({"a": [1, 2.5, "x", null, true, {"b": {}}], "": -7, "big": 1e300}));
        let bytes = v.encode_to_vec();
        let back = Value::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(back, v);
        assert_eq!(bytes.len(), v.encoded_len());
    }

    #[test]
    fn struct_matches_standard_encoding_of_a_simple_object() {
        // {"k": "v"} as google.protobuf.Struct, encoded by hand from the spec of struct.proto.
        let s = Struct::try_from(json!({"k": "v"})).expect("object");
        let expected = [0x0a, 0x08, 0x0a, 0x01, b'k', 0x12, 0x03, 0x1a, 0x01, b'v'];
        assert_eq!(s.encode_to_vec(), expected);
    }
}

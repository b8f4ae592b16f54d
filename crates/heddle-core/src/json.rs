//! JSON output, byte for byte what `serde_json::to_writer` writes, faster.
//!
//! serde_json escapes strings one byte at a time (about ten instructions a
//! byte under callgrind), and an A2A answer is mostly strings: ids, enum
//! names, timestamps, text. In a profile of an echo `SendMessage` that loop
//! was a tenth of the server's instructions, and a quarter of a stream's.
//! [`to_writer`] checks eight bytes at a time whether a string needs any
//! escaping and, when it does not (nearly always), copies it whole; a string
//! that does is handed to serde_json. Numbers are written by serde_json's own
//! [`CompactFormatter`], so the output is serde_json's exactly: the tests
//! compare the two on generated values.

use std::io::Write;

use serde::ser::{self, Error as _, Serialize};
use serde_json::ser::{CompactFormatter, Formatter};

type Result<T = ()> = serde_json::Result<T>;

/// The struct name by which serde_json's `RawValue` asks to be written as is.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// `serde_json::to_vec`, with room for `capacity` bytes from the start.
pub fn to_vec_with_capacity<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(capacity);
    to_writer(&mut out, value)?;
    Ok(out)
}

/// Appends `value`'s compact JSON to `out`: what `serde_json::to_writer`
/// would write.
pub fn to_writer<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result {
    value.serialize(&mut JsonWriter { out })
}

/// The serializer: a buffer, and serde_json's compact form.
struct JsonWriter<'a> {
    out: &'a mut Vec<u8>,
}

/// Whether any of the eight bytes is a control character, `"` or `\`: the
/// bytes JSON strings escape. Exact, by the classic "has a byte less than n"
/// and "has a zero byte" word tricks.
#[inline]
fn needs_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let quote = quote.wrapping_sub(ONES) & !quote;
    let backslash = backslash.wrapping_sub(ONES) & !backslash;
    (control | quote | backslash) & HIGH != 0
}

/// The eight bytes at `at`, as one little-endian word.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Whether `s` can be written between quotes as it is: a word at a time,
/// the last word overlapping the one before; a short string padded.
#[inline]
fn is_plain(s: &str) -> bool {
    let bytes = s.as_bytes();
    let len = bytes.len();
    if len < 8 {
        let mut word = [b'a'; 8];
        for (slot, &b) in word.iter_mut().zip(bytes) {
            *slot = b;
        }
        return !needs_escape(u64::from_le_bytes(word));
    }
    let mut at = 0;
    while at + 8 < len {
        if needs_escape(word_at(bytes, at)) {
            return false;
        }
        at += 8;
    }
    !needs_escape(word_at(bytes, len - 8))
}

impl JsonWriter<'_> {
    #[inline]
    fn string(&mut self, s: &str) -> Result {
        if is_plain(s) {
            self.out.reserve(s.len() + 2);
            self.out.push(b'"');
            self.out.extend_from_slice(s.as_bytes());
            self.out.push(b'"');
            Ok(())
        } else {
            serde_json::to_writer(&mut *self.out, s)
        }
    }

    #[inline]
    fn put(&mut self, byte: u8) {
        self.out.push(byte);
    }
}

/// `io::Error`s cannot happen writing to a `Vec`; mapped for the signature.
fn io(e: std::io::Error) -> serde_json::Error {
    serde_json::Error::io(e)
}

macro_rules! integers {
    ($($method:ident $write:ident $ty:ty),* $(,)?) => {$(
        #[inline]
        fn $method(self, v: $ty) -> Result {
            CompactFormatter.$write(self.out, v).map_err(io)
        }
    )*};
}

impl<'a, 'b> ser::Serializer for &'a mut JsonWriter<'b> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Compound<'a, 'b>;
    type SerializeTuple = Compound<'a, 'b>;
    type SerializeTupleStruct = Compound<'a, 'b>;
    type SerializeTupleVariant = Compound<'a, 'b>;
    type SerializeMap = Compound<'a, 'b>;
    type SerializeStruct = Compound<'a, 'b>;
    type SerializeStructVariant = Compound<'a, 'b>;

    integers! {
        serialize_i8 write_i8 i8, serialize_i16 write_i16 i16, serialize_i32 write_i32 i32,
        serialize_i64 write_i64 i64, serialize_i128 write_i128 i128,
        serialize_u8 write_u8 u8, serialize_u16 write_u16 u16, serialize_u32 write_u32 u32,
        serialize_u64 write_u64 u64, serialize_u128 write_u128 u128,
    }

    fn serialize_bool(self, v: bool) -> Result {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result {
        if v.is_finite() {
            CompactFormatter.write_f32(self.out, v).map_err(io)
        } else {
            self.serialize_unit()
        }
    }

    fn serialize_f64(self, v: f64) -> Result {
        if v.is_finite() {
            CompactFormatter.write_f64(self.out, v).map_err(io)
        } else {
            self.serialize_unit()
        }
    }

    fn serialize_char(self, v: char) -> Result {
        self.string(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result {
        self.string(v)
    }

    fn serialize_bytes(self, v: &[u8]) -> Result {
        CompactFormatter.write_byte_array(self.out, v).map_err(io)
    }

    fn serialize_none(self) -> Result {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result {
        self.string(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.put(b'{');
        self.string(variant)?;
        self.put(b':');
        value.serialize(&mut *self)?;
        self.put(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, 'b>> {
        self.put(b'[');
        Ok(Compound::new(self, Close::Array))
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'b>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a, 'b>> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'b>> {
        self.put(b'{');
        self.string(variant)?;
        self.out.extend_from_slice(b":[");
        Ok(Compound::new(self, Close::ArrayInObject))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, 'b>> {
        self.put(b'{');
        Ok(Compound::new(self, Close::Object))
    }

    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Compound<'a, 'b>> {
        if name == RAW_VALUE_TOKEN {
            return Ok(Compound::new(self, Close::Raw));
        }
        self.serialize_map(None)
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'b>> {
        self.put(b'{');
        self.string(variant)?;
        self.out.extend_from_slice(b":{");
        Ok(Compound::new(self, Close::ObjectInObject))
    }
}

/// How a compound value ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Close {
    Array,
    Object,
    ArrayInObject,
    ObjectInObject,
    /// A `RawValue`: its one field is JSON text, written as it is.
    Raw,
}

/// An array or object being written.
#[doc(hidden)]
pub struct Compound<'a, 'b> {
    ser: &'a mut JsonWriter<'b>,
    close: Close,
    first: bool,
}

impl<'a, 'b> Compound<'a, 'b> {
    fn new(ser: &'a mut JsonWriter<'b>, close: Close) -> Self {
        Compound {
            ser,
            close,
            first: true,
        }
    }

    #[inline]
    fn comma(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.ser.put(b',');
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.comma();
        value.serialize(&mut *self.ser)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        if self.close == Close::Raw {
            return value.serialize(RawText(self.ser.out));
        }
        self.comma();
        self.ser.string(key)?;
        self.ser.put(b':');
        value.serialize(&mut *self.ser)
    }

    fn finish(self) -> Result {
        match self.close {
            Close::Array => self.ser.put(b']'),
            Close::Object => self.ser.put(b'}'),
            Close::ArrayInObject => self.ser.out.extend_from_slice(b"]}"),
            Close::ObjectInObject => self.ser.out.extend_from_slice(b"}}"),
            Close::Raw => {}
        }
        Ok(())
    }
}

/// The four array-like compounds: each element after a comma.
macro_rules! array_like {
    ($($trait:ident $method:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = serde_json::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
                self.element(value)
            }
            fn end(self) -> Result {
                self.finish()
            }
        }
    )*};
}

array_like!(
    SerializeSeq serialize_element,
    SerializeTuple serialize_element,
    SerializeTupleStruct serialize_field,
    SerializeTupleVariant serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result {
        self.comma();
        key.serialize(MapKey(&mut *self.ser))
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result {
        self.ser.put(b':');
        value.serialize(&mut *self.ser)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        self.field(key, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result {
        self.field(key, value)
    }
    fn end(self) -> Result {
        self.finish()
    }
}

fn key_must_be_a_string() -> serde_json::Error {
    serde_json::Error::custom("key must be a string")
}

/// Serializer methods that refuse their kind of value with `$err()`; the
/// `types` arm declares the compound types such a serializer never builds.
macro_rules! refuse {
    ($err:ident: $($kind:ident)*) => {$(refuse!(@ $err $kind);)*};
    (@ $err:ident types) => {
        type SerializeSeq = ser::Impossible<(), serde_json::Error>;
        type SerializeTuple = ser::Impossible<(), serde_json::Error>;
        type SerializeTupleStruct = ser::Impossible<(), serde_json::Error>;
        type SerializeTupleVariant = ser::Impossible<(), serde_json::Error>;
        type SerializeMap = ser::Impossible<(), serde_json::Error>;
        type SerializeStruct = ser::Impossible<(), serde_json::Error>;
        type SerializeStructVariant = ser::Impossible<(), serde_json::Error>;
    };
    (@ $err:ident scalars) => {
        refuse!($err: bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char);
    };
    (@ $err:ident bool) => { fn serialize_bool(self, _: bool) -> Result { Err($err()) } };
    (@ $err:ident i8) => { fn serialize_i8(self, _: i8) -> Result { Err($err()) } };
    (@ $err:ident i16) => { fn serialize_i16(self, _: i16) -> Result { Err($err()) } };
    (@ $err:ident i32) => { fn serialize_i32(self, _: i32) -> Result { Err($err()) } };
    (@ $err:ident i64) => { fn serialize_i64(self, _: i64) -> Result { Err($err()) } };
    (@ $err:ident u8) => { fn serialize_u8(self, _: u8) -> Result { Err($err()) } };
    (@ $err:ident u16) => { fn serialize_u16(self, _: u16) -> Result { Err($err()) } };
    (@ $err:ident u32) => { fn serialize_u32(self, _: u32) -> Result { Err($err()) } };
    (@ $err:ident u64) => { fn serialize_u64(self, _: u64) -> Result { Err($err()) } };
    (@ $err:ident f32) => { fn serialize_f32(self, _: f32) -> Result { Err($err()) } };
    (@ $err:ident f64) => { fn serialize_f64(self, _: f64) -> Result { Err($err()) } };
    (@ $err:ident char) => { fn serialize_char(self, _: char) -> Result { Err($err()) } };
    (@ $err:ident bytes) => { fn serialize_bytes(self, _: &[u8]) -> Result { Err($err()) } };
    (@ $err:ident none) => { fn serialize_none(self) -> Result { Err($err()) } };
    (@ $err:ident some) => {
        fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result { Err($err()) }
    };
    (@ $err:ident unit) => { fn serialize_unit(self) -> Result { Err($err()) } };
    (@ $err:ident unit_struct) => {
        fn serialize_unit_struct(self, _: &'static str) -> Result { Err($err()) }
    };
    (@ $err:ident unit_variant) => {
        fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result {
            Err($err())
        }
    };
    (@ $err:ident newtype_struct) => {
        fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, _: &T) -> Result {
            Err($err())
        }
    };
    (@ $err:ident newtype_variant) => {
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self, _: &'static str, _: u32, _: &'static str, _: &T,
        ) -> Result {
            Err($err())
        }
    };
    (@ $err:ident compounds) => {
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> { Err($err()) }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> { Err($err()) }
        fn serialize_tuple_struct(
            self, _: &'static str, _: usize,
        ) -> Result<Self::SerializeTupleStruct> {
            Err($err())
        }
        fn serialize_tuple_variant(
            self, _: &'static str, _: u32, _: &'static str, _: usize,
        ) -> Result<Self::SerializeTupleVariant> {
            Err($err())
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> { Err($err()) }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
            Err($err())
        }
        fn serialize_struct_variant(
            self, _: &'static str, _: u32, _: &'static str, _: usize,
        ) -> Result<Self::SerializeStructVariant> {
            Err($err())
        }
    };
}

/// An object key: strings as they are (a `Some` as its value); integers,
/// booleans and finite floats quoted; anything else refused, as serde_json
/// does.
struct MapKey<'a, 'b>(&'a mut JsonWriter<'b>);

impl MapKey<'_, '_> {
    fn quoted(self, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result {
        self.0.put(b'"');
        write(self.0.out).map_err(io)?;
        self.0.put(b'"');
        Ok(())
    }
}

macro_rules! quoted_integers {
    ($($method:ident $write:ident $ty:ty),* $(,)?) => {$(
        fn $method(self, v: $ty) -> Result {
            self.quoted(|out| CompactFormatter.$write(out, v))
        }
    )*};
}

impl ser::Serializer for MapKey<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    refuse!(key_must_be_a_string: types);

    quoted_integers! {
        serialize_i8 write_i8 i8, serialize_i16 write_i16 i16, serialize_i32 write_i32 i32,
        serialize_i64 write_i64 i64, serialize_i128 write_i128 i128,
        serialize_u8 write_u8 u8, serialize_u16 write_u16 u16, serialize_u32 write_u32 u32,
        serialize_u64 write_u64 u64, serialize_u128 write_u128 u128,
    }

    fn serialize_bool(self, v: bool) -> Result {
        self.quoted(|out| CompactFormatter.write_bool(out, v))
    }

    fn serialize_f32(self, v: f32) -> Result {
        if !v.is_finite() {
            return Err(serde_json::Error::custom(
                "float key must be finite (got NaN or +/-inf)",
            ));
        }
        self.quoted(|out| CompactFormatter.write_f32(out, v))
    }

    fn serialize_f64(self, v: f64) -> Result {
        if !v.is_finite() {
            return Err(serde_json::Error::custom(
                "float key must be finite (got NaN or +/-inf)",
            ));
        }
        self.quoted(|out| CompactFormatter.write_f64(out, v))
    }

    fn serialize_char(self, v: char) -> Result {
        self.0.string(v.encode_utf8(&mut [0; 4]))
    }

    fn serialize_str(self, v: &str) -> Result {
        self.0.string(v)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result {
        value.serialize(self)
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result {
        self.0.string(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Result {
        value.serialize(self)
    }

    refuse!(key_must_be_a_string: bytes none unit unit_struct newtype_variant compounds);
}

/// The text of a `RawValue`, which serde_json hands over as its one string
/// field: already JSON, written unchanged.
struct RawText<'a>(&'a mut Vec<u8>);

impl ser::Serializer for RawText<'_> {
    type Ok = ();
    type Error = serde_json::Error;
    refuse!(not_raw: types);

    fn serialize_str(self, v: &str) -> Result {
        self.0.write_all(v.as_bytes()).map_err(io)
    }

    refuse!(not_raw: scalars bytes none some unit unit_struct unit_variant newtype_struct);
    refuse!(not_raw: newtype_variant compounds);
}

fn not_raw() -> serde_json::Error {
    serde_json::Error::custom("a RawValue holds its JSON as a string")
}

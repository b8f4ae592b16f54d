//! JSON-RPC 2.0 envelopes: ids, requests (single or batch), responses.
//!
//! Parsing is two-staged for speed: the envelope is read with `params` left
//! as raw JSON, and only the method's handler deserializes `params` into its
//! typed request. Error paths (invalid envelope) re-read the bytes as a
//! `serde_json::Value` to recover the `id` where there is one.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, value::RawValue};

use crate::error::{A2aError, ErrorCode};

/// A request id: string, number or null (JSON-RPC 2.0 §4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    /// A string id.
    Str(String),
    /// A numeric id, kept exactly as sent.
    Num(serde_json::Number),
    /// `null` (also used when the id could not be read).
    Null,
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Str(v) => s.serialize_str(v),
            Id::Num(n) => n.serialize(s),
            Id::Null => s.serialize_unit(),
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Id::Str(s)),
            Value::Number(n) => Ok(Id::Num(n)),
            Value::Null => Ok(Id::Null),
            _ => Err(serde::de::Error::custom(
                "id must be a string, number or null",
            )),
        }
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n.into())
    }
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
    Id::deserialize(d).map(Some)
}

/// The envelope as read off the wire, `params` still raw.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Id>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// A valid JSON-RPC request; `params` is raw JSON for the method to parse.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `None` for a notification (no `id` member).
    pub id: Option<Id>,
    /// Method name.
    pub method: Cow<'a, str>,
    /// Raw params (object or array), if present.
    pub params: Option<&'a RawValue>,
}

impl Request<'_> {
    /// The id to answer with (`null` for notifications).
    pub fn reply_id(&self) -> Id {
        self.id.clone().unwrap_or(Id::Null)
    }
}

/// One element of an incoming body: a request, or the error to answer it with.
pub type Incoming<'a> = Result<Request<'a>, (Id, A2aError)>;

/// What a POST body held.
#[derive(Debug)]
pub enum Body<'a> {
    /// One request (or one invalid one).
    Single(Incoming<'a>),
    /// A batch; each element answered separately. Never empty.
    Batch(Vec<Incoming<'a>>),
}

/// Reads a JSON-RPC body. Not JSON → `Err` with ParseError (answered with id
/// null); an empty batch → a single InvalidRequest, per JSON-RPC 2.0 §6; a
/// batch of more than `max_batch` requests → `Err` with InvalidRequest
/// (answered with id null), found as the element past the cap is reached,
/// before any element's envelope is decoded.
pub fn parse_body(bytes: &[u8], max_batch: usize) -> Result<Body<'_>, A2aError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        let too_long = std::cell::Cell::new(false);
        let seed = BoundedBatch {
            max: max_batch,
            too_long: &too_long,
        };
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let items = serde::de::DeserializeSeed::deserialize(seed, &mut de)
            .and_then(|items| de.end().map(|()| items))
            .map_err(|e| {
                if too_long.get() {
                    A2aError::new(
                        ErrorCode::InvalidRequest,
                        format!("a batch holds at most {max_batch} requests"),
                    )
                } else {
                    parse_error(e)
                }
            })?;
        if items.is_empty() {
            return Ok(Body::Single(Err((
                Id::Null,
                A2aError::new(ErrorCode::InvalidRequest, "empty batch"),
            ))));
        }
        return Ok(Body::Batch(
            items
                .into_iter()
                .map(|raw| parse_one(raw.get().as_bytes()))
                .collect(),
        ));
    }
    // Validate that the body is JSON at all before judging the envelope.
    match serde_json::from_slice::<Envelope<'_>>(bytes) {
        Ok(env) => Ok(Body::Single(check(env))),
        Err(e) if e.is_syntax() || e.is_eof() => Err(parse_error(e)),
        Err(_) => Ok(Body::Single(Err(invalid_envelope(bytes)))),
    }
}

/// A batch's elements as raw JSON, refused as soon as there are more than
/// `max` of them (so a long batch costs no more than its first elements).
struct BoundedBatch<'c> {
    max: usize,
    /// Set when the batch was refused for its length.
    too_long: &'c std::cell::Cell<bool>,
}

impl<'de> serde::de::DeserializeSeed<'de> for BoundedBatch<'_> {
    type Value = Vec<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for BoundedBatch<'_> {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC batch")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.max).min(64));
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            if items.len() == self.max {
                self.too_long.set(true);
                return Err(serde::de::Error::custom("batch too long"));
            }
            items.push(raw);
        }
        Ok(items)
    }
}

fn parse_one(bytes: &[u8]) -> Incoming<'_> {
    match serde_json::from_slice::<Envelope<'_>>(bytes) {
        Ok(env) => check(env),
        Err(_) => Err(invalid_envelope(bytes)),
    }
}

fn parse_error(e: serde_json::Error) -> A2aError {
    A2aError::new(ErrorCode::ParseError, format!("invalid JSON: {e}"))
}

/// An envelope whose members have the wrong types: recover the id if we can.
fn invalid_envelope(bytes: &[u8]) -> (Id, A2aError) {
    let id = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .and_then(|v| serde_json::from_value::<Id>(v).ok())
        .unwrap_or(Id::Null);
    let msg = if serde_json::from_slice::<Value>(bytes)
        .map(|v| v.is_object())
        .unwrap_or(false)
    {
        "request members have the wrong types (jsonrpc, method: string; id: string, number or null; params: object or array)"
    } else {
        "a request must be a JSON object"
    };
    (id, A2aError::new(ErrorCode::InvalidRequest, msg))
}

fn check(env: Envelope<'_>) -> Incoming<'_> {
    let id = env.id.clone().unwrap_or(Id::Null);
    if env.jsonrpc.as_deref() != Some("2.0") {
        return Err((
            id,
            A2aError::new(ErrorCode::InvalidRequest, "jsonrpc must be \"2.0\""),
        ));
    }
    let Some(method) = env.method else {
        return Err((
            id,
            A2aError::new(ErrorCode::InvalidRequest, "missing method"),
        ));
    };
    if let Some(p) = env.params {
        let first = p.get().as_bytes().first();
        if !matches!(first, Some(b'{') | Some(b'[')) {
            return Err((
                id,
                A2aError::new(
                    ErrorCode::InvalidRequest,
                    "params must be an object or array",
                ),
            ));
        }
    }
    Ok(Request {
        id: env.id,
        method,
        params: env.params,
    })
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// Error code.
    pub code: i64,
    /// Short description.
    pub message: String,
    /// Details (for A2A errors, an array of `@type`-tagged objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// A response to send: `result` or `error`, with the request's id.
#[derive(Debug, Serialize)]
pub struct Response<T> {
    jsonrpc: &'static str,
    id: Id,
    #[serde(flatten)]
    outcome: Outcome<T>,
}

/// The `result` / `error` member of a response.
#[derive(Debug, Serialize)]
pub enum Outcome<T> {
    /// Success.
    #[serde(rename = "result")]
    Result(T),
    /// Failure.
    #[serde(rename = "error")]
    Error(ErrorObject),
}

impl<T: Serialize> Response<T> {
    /// A success response.
    pub fn result(id: Id, result: T) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            outcome: Outcome::Result(result),
        }
    }
}

impl Response<()> {
    /// An error response.
    pub fn error(id: Id, err: &A2aError) -> Self {
        Self {
            jsonrpc: "2.0",
            id,
            outcome: Outcome::Error(err.to_jsonrpc()),
        }
    }
}

/// A response as read by a client: `result` stays raw for the caller to type.
#[derive(Debug, Deserialize)]
pub struct ClientResponse<'a> {
    /// Must be "2.0".
    pub jsonrpc: Cow<'a, str>,
    /// The request's id.
    #[serde(default)]
    pub id: Option<Id>,
    /// Success payload.
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    /// Failure.
    #[serde(default)]
    pub error: Option<ErrorObject>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(body: &str) -> Incoming<'_> {
        match parse_body(body.as_bytes(), usize::MAX).expect("json") {
            Body::Single(r) => r,
            Body::Batch(_) => panic!("expected single"),
        }
    }

    #[test]
    fn reads_ids_of_every_kind() {
        let r = single(r#"{"jsonrpc":"2.0","id":"a","method":"m","params":{}}"#).expect("valid");
        assert_eq!(r.id, Some(Id::Str("a".into())));
        let r = single(r#"{"jsonrpc":"2.0","id":7,"method":"m"}"#).expect("valid");
        assert_eq!(r.id, Some(Id::from(7)));
        let r = single(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#).expect("valid");
        assert_eq!(r.id, Some(Id::Null));
        let r = single(r#"{"jsonrpc":"2.0","method":"m"}"#).expect("valid");
        assert_eq!(r.id, None, "notification");
    }

    #[test]
    fn bad_envelopes_get_the_right_code_and_keep_the_id() {
        assert_eq!(
            parse_body(b"{nope", usize::MAX).expect_err("parse").code,
            ErrorCode::ParseError
        );
        let (id, e) = single(r#"{"jsonrpc":"1.0","id":3,"method":"m"}"#).expect_err("invalid");
        assert_eq!((id, e.code), (Id::from(3), ErrorCode::InvalidRequest));
        let (id, e) = single(r#"{"jsonrpc":"2.0","id":"x","method":5}"#).expect_err("invalid");
        assert_eq!((id, e.code), (Id::from("x"), ErrorCode::InvalidRequest));
        let (_, e) =
            single(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":3}"#).expect_err("invalid");
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        let (_, e) = single("[]").expect_err("empty batch");
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        let (_, e) = single("42").expect_err("not an object");
        assert_eq!(e.code, ErrorCode::InvalidRequest);
    }

    #[test]
    fn a_batch_past_the_cap_is_one_invalid_request() {
        let three = br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"a"},{"jsonrpc":"2.0","id":3,"method":"a"}]"#;
        assert!(matches!(parse_body(three, 3), Ok(Body::Batch(items)) if items.len() == 3));
        let e = parse_body(three, 2).expect_err("too long");
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.message.contains("at most 2"), "{}", e.message);
        // A syntax error within the cap stays a parse error.
        let e = parse_body(b"[1, 2", 2).expect_err("syntax");
        assert_eq!(e.code, ErrorCode::ParseError);
    }

    #[test]
    fn batches_answer_each_element() {
        let Body::Batch(items) = parse_body(
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, 1, {"jsonrpc":"2.0","method":"n"}]"#,
            usize::MAX,
        )
        .expect("json") else {
            panic!("batch")
        };
        assert_eq!(items.len(), 3);
        assert!(items[0].is_ok() && items[1].is_err() && items[2].is_ok());
    }

    #[test]
    fn responses_serialize_with_result_or_error() {
        let ok = serde_json::to_string(&Response::result(Id::from(1), 5)).expect("ser");
        assert_eq!(ok, r#"{"jsonrpc":"2.0","id":1,"result":5}"#);
        let err = serde_json::to_value(Response::error(
            Id::Null,
            &A2aError::from(ErrorCode::MethodNotFound),
        ))
        .expect("ser");
        assert_eq!(err["error"]["code"], -32601);
        assert!(err["id"].is_null());
    }
}

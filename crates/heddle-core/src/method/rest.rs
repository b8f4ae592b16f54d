//! REST routes as data: the server matches a request against them and the
//! client fills them in, so each route string is written once, in
//! [`super::METHODS`].
//!
//! A template is a path relative to the interface URL. Its segments are
//! literals, `{id}` (the task id), `{configId}` (a push config id), or
//! `{id}:verb`, a parameter and a verb in one segment (AIP-136 custom
//! methods). Segments are percent-decoded before they are compared, so a
//! client may send `%3A` for the colon; a verb is split off at the last
//! colon, so task ids may themselves hold colons.

use std::borrow::Cow;

use super::{METHODS, Method};
use crate::version::ProtocolVersion;

/// The HTTP methods the REST binding uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `DELETE`
    Delete,
}

impl Verb {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Delete => "DELETE",
        }
    }

    /// The verb named `name`, if the REST binding uses it.
    pub fn parse(name: &str) -> Option<Verb> {
        match name {
            "GET" => Some(Verb::Get),
            "POST" => Some(Verb::Post),
            "DELETE" => Some(Verb::Delete),
            _ => None,
        }
    }
}

/// One operation's REST route in one protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestRoute {
    /// The verb a client sends.
    pub verb: Verb,
    /// A second verb the server also accepts. Subscribe is `GET` in the
    /// proto's HTTP annotation and `POST` in the specification's text.
    pub also: Option<Verb>,
    /// The path template.
    pub path: &'static str,
}

/// The parameters a matched path carried, percent-decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestParams {
    /// The `/{tenant}` prefix of a v1.0 path, if it had one.
    pub tenant: Option<String>,
    /// `{id}`: the task id.
    pub task_id: Option<String>,
    /// `{configId}`: the push config id.
    pub config_id: Option<String>,
}

/// What a request path and verb name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RestMatch {
    /// An operation, with the version its path belongs to.
    Found(Method, ProtocolVersion, RestParams),
    /// The path is a route, but not for this verb (HTTP 405).
    WrongVerb,
    /// No route has this path (HTTP 404).
    NotFound,
}

impl RestRoute {
    /// A route served for one verb.
    pub const fn new(verb: Verb, path: &'static str) -> Self {
        Self {
            verb,
            also: None,
            path,
        }
    }

    /// A route sent as `verb` and also served for `also`.
    pub const fn either(verb: Verb, also: Verb, path: &'static str) -> Self {
        Self {
            verb,
            also: Some(also),
            path,
        }
    }

    /// Whether the server serves this route for `verb`.
    pub fn accepts(&self, verb: Verb) -> bool {
        self.verb == verb || self.also == Some(verb)
    }

    /// The path with its parameters filled in, each percent-encoded as one
    /// segment (RFC 3986 unreserved characters stay as they are).
    pub fn fill(&self, task_id: &str, config_id: &str) -> String {
        let mut out = String::with_capacity(self.path.len() + task_id.len() + config_id.len());
        let mut rest = self.path;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let value = match &rest[open + 1..open + close] {
                "id" => task_id,
                _ => config_id,
            };
            encode_segment(value, &mut out);
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// Matches `segments` (already decoded) against the template; on a
    /// match, the task and config ids it captured.
    fn capture(&self, segments: &[Cow<'_, str>]) -> Option<(Option<String>, Option<String>)> {
        let template = self.path.trim_start_matches('/').split('/');
        if template.clone().count() != segments.len() {
            return None;
        }
        let (mut task_id, mut config_id) = (None, None);
        for (pattern, segment) in template.zip(segments) {
            let segment: &str = segment;
            let Some(param) = pattern.strip_prefix('{') else {
                if pattern != segment {
                    return None;
                }
                continue;
            };
            let (name, value) = match param.split_once("}:") {
                // `{id}:verb`: the segment ends with `:verb`, after a non-empty id.
                Some((name, verb)) => {
                    let (value, got) = segment.rsplit_once(':')?;
                    if got != verb {
                        return None;
                    }
                    (name, value)
                }
                None => (param.trim_end_matches('}'), segment),
            };
            if value.is_empty() {
                return None;
            }
            match name {
                "id" => task_id = Some(value.to_owned()),
                _ => config_id = Some(value.to_owned()),
            }
        }
        Some((task_id, config_id))
    }

    /// How specific the template is: routes with more literal text win
    /// over a bare `{id}` that would also match (`x:cancel` is a cancel,
    /// not a task named `x:cancel`).
    fn weight(&self) -> usize {
        self.path.len()
    }
}

impl Method {
    /// This operation's REST route in `version`, if that version has one.
    pub fn rest_route(self, version: ProtocolVersion) -> Option<&'static RestRoute> {
        let names = self.names();
        match version {
            ProtocolVersion::V1_0 => Some(&names.rest),
            ProtocolVersion::V0_3 => names.rest_v03.as_ref(),
        }
    }

    /// The operation a REST request names. `path` is relative to the
    /// interface URL, without its query; empty segments do not count.
    /// v0.3 paths (under `/v1/`) are
    /// tried first, then v1.0 paths as written, then v1.0 paths after a
    /// `/{tenant}` segment (so a literal route wins over a tenant's name).
    pub fn from_rest(verb: Verb, path: &str) -> RestMatch {
        // Empty segments are dropped: a trailing or doubled slash reaches
        // the same route, as clients join URLs in both ways.
        let segments: Vec<Cow<'_, str>> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(decode_segment)
            .collect();
        let mut wrong_verb = false;
        for (version, skip) in [
            (ProtocolVersion::V0_3, 0),
            (ProtocolVersion::V1_0, 0),
            (ProtocolVersion::V1_0, 1),
        ] {
            let Some(rest) = segments.get(skip..) else {
                continue;
            };
            if skip == 1 && rest.is_empty() {
                continue;
            }
            let best = METHODS
                .iter()
                .filter_map(|n| {
                    let route = n.method.rest_route(version)?;
                    let ids = route.capture(rest)?;
                    Some((n.method, route, ids))
                })
                .filter(|(_, route, _)| {
                    let ok = route.accepts(verb);
                    wrong_verb |= !ok;
                    ok
                })
                .max_by_key(|(_, route, _)| route.weight());
            if let Some((method, _, (task_id, config_id))) = best {
                let tenant = (skip == 1).then(|| segments[0].clone().into_owned());
                return RestMatch::Found(
                    method,
                    version,
                    RestParams {
                        tenant,
                        task_id,
                        config_id,
                    },
                );
            }
        }
        if wrong_verb {
            RestMatch::WrongVerb
        } else {
            RestMatch::NotFound
        }
    }
}

/// Percent-decodes one path segment; invalid escapes and non-UTF-8 results
/// are kept as written (they then match no literal and become an id the
/// store does not know).
fn decode_segment(segment: &str) -> Cow<'_, str> {
    if !segment.contains('%') {
        return Cow::Borrowed(segment);
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let (h, l) = (hex(h).unwrap_or(0), hex(l).unwrap_or(0));
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(_) => Cow::Borrowed(segment),
    }
}

fn encode_segment(value: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xF)] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(verb: Verb, path: &str) -> (Method, ProtocolVersion, RestParams) {
        match Method::from_rest(verb, path) {
            RestMatch::Found(m, v, p) => (m, v, p),
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn every_route_matches_what_it_fills() {
        for n in METHODS {
            for v in [ProtocolVersion::V1_0, ProtocolVersion::V0_3] {
                let Some(route) = n.method.rest_route(v) else {
                    continue;
                };
                let path = route.fill("task 1/ä:x", "cfg:2");
                let (m, got_v, params) = found(route.verb, &path);
                assert_eq!((m, got_v), (n.method, v), "{path}");
                if route.path.contains("{id}") {
                    assert_eq!(params.task_id.as_deref(), Some("task 1/ä:x"));
                }
                if route.path.contains("{configId}") {
                    assert_eq!(params.config_id.as_deref(), Some("cfg:2"));
                }
                assert_eq!(params.tenant, None);
            }
        }
    }

    #[test]
    fn a_verb_is_split_at_the_last_colon_and_may_be_percent_encoded() {
        let (m, _, p) = found(Verb::Post, "/tasks/a:b%3Acancel");
        assert_eq!(m, Method::CancelTask);
        assert_eq!(p.task_id.as_deref(), Some("a:b"));
        let (m, _, p) = found(Verb::Get, "/tasks/a:b");
        assert_eq!(m, Method::GetTask);
        assert_eq!(p.task_id.as_deref(), Some("a:b"));
    }

    #[test]
    fn a_tenant_segment_comes_before_a_v1_route() {
        let (m, v, p) = found(Verb::Post, "/acme/message:send");
        assert_eq!((m, v), (Method::SendMessage, ProtocolVersion::V1_0));
        assert_eq!(p.tenant.as_deref(), Some("acme"));
        // A literal route wins over a tenant of the same name.
        let (m, _, p) = found(Verb::Get, "/tasks/t1");
        assert_eq!(m, Method::GetTask);
        assert_eq!(p.tenant, None);
        let (m, _, p) = found(Verb::Get, "/tasks/tasks");
        assert_eq!(m, Method::GetTask);
        assert_eq!(p.task_id.as_deref(), Some("tasks"));
    }

    #[test]
    fn subscribe_is_served_for_get_and_post() {
        for verb in [Verb::Get, Verb::Post] {
            assert_eq!(found(verb, "/tasks/t:subscribe").0, Method::SubscribeToTask);
            assert_eq!(
                found(verb, "/v1/tasks/t:subscribe").1,
                ProtocolVersion::V0_3
            );
        }
    }

    #[test]
    fn misses_say_whether_the_path_exists() {
        assert_eq!(
            Method::from_rest(Verb::Delete, "/message:send"),
            RestMatch::WrongVerb
        );
        assert_eq!(
            Method::from_rest(Verb::Get, "/nothing/here/at/all"),
            RestMatch::NotFound
        );
        assert_eq!(
            found(Verb::Post, "//message:send/").0,
            Method::SendMessage,
            "empty segments are dropped"
        );
        assert_eq!(
            Method::from_rest(Verb::Post, "/tasks/:cancel"),
            RestMatch::WrongVerb
        );
        assert_eq!(Method::from_rest(Verb::Get, ""), RestMatch::NotFound);
        // An invalid escape is kept as written.
        assert_eq!(
            found(Verb::Get, "/tasks/%zz").2.task_id.as_deref(),
            Some("%zz")
        );
    }
}

//! A2A protocol versions and the `A2A-Version` service parameter (v1 §3.6).

use std::fmt;

use crate::error::{A2aError, ErrorCode};

/// The protocol versions Heddle speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    /// v0.3: `kind`-tagged JSON, slash method names.
    V0_3,
    /// v1.0: ProtoJSON, PascalCase method names.
    V1_0,
}

/// Name of the version header (HTTP) and metadata key (gRPC, lowercase).
pub const VERSION_HEADER: &str = "A2A-Version";
/// Name of the extensions header.
pub const EXTENSIONS_HEADER: &str = "A2A-Extensions";
/// The v0.3 name of the extensions header, still accepted.
pub const LEGACY_EXTENSIONS_HEADER: &str = "X-A2A-Extensions";
/// Both extension header names as HTTP/2 and gRPC metadata spell them
/// (lowercase), current name first.
pub const EXTENSIONS_KEYS: [&str; 2] = ["a2a-extensions", "x-a2a-extensions"];

/// The extension URIs activated by `values`, the values of every
/// extensions header (or metadata entry) a request carried: each is a
/// comma-separated list; blanks are dropped.
pub fn extension_uris<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    values
        .into_iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl ProtocolVersion {
    /// The `Major.Minor` string.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V0_3 => "0.3",
            Self::V1_0 => "1.0",
        }
    }

    /// Reads a version string; only major.minor counts (`"0.3.0"` is 0.3).
    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.trim().split('.');
        let major = it.next()?.parse::<u32>().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse::<u32>().ok())?;
        match (major, minor) {
            (0, 3) => Some(Self::V0_3),
            (1, 0) => Some(Self::V1_0),
            _ => None,
        }
    }

    /// Reads the `A2A-Version` value of a request: absent or empty means 0.3
    /// (v1 §3.6.2); anything not served is VersionNotSupported.
    pub fn from_header(value: Option<&str>) -> Result<Self, A2aError> {
        match value.map(str::trim) {
            None | Some("") => Ok(Self::V0_3),
            Some(v) => Self::parse(v).ok_or_else(|| {
                A2aError::new(
                    ErrorCode::VersionNotSupported,
                    format!("A2A-Version {v:?} is not supported; use 1.0 or 0.3"),
                )
                .with_meta("requestedVersion", v)
            }),
        }
    }
}

/// The protocol versions a server serves: its card lists their interfaces,
/// and a request in any other version is VersionNotSupported (v1 §3.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VersionSet {
    v1_0: bool,
    v0_3: bool,
}

impl VersionSet {
    /// Both versions (the default).
    pub const ALL: Self = Self {
        v1_0: true,
        v0_3: true,
    };

    /// Only `v`.
    pub const fn only(v: ProtocolVersion) -> Self {
        Self {
            v1_0: matches!(v, ProtocolVersion::V1_0),
            v0_3: matches!(v, ProtocolVersion::V0_3),
        }
    }

    /// Whether `v` is served.
    pub const fn contains(self, v: ProtocolVersion) -> bool {
        match v {
            ProtocolVersion::V1_0 => self.v1_0,
            ProtocolVersion::V0_3 => self.v0_3,
        }
    }

    /// Reads a comma-separated list such as `1.0,0.3` (at least one version).
    pub fn parse_list(s: &str) -> Result<Self, String> {
        let mut set = Self {
            v1_0: false,
            v0_3: false,
        };
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match ProtocolVersion::parse(name) {
                Some(ProtocolVersion::V1_0) => set.v1_0 = true,
                Some(ProtocolVersion::V0_3) => set.v0_3 = true,
                None => return Err(format!("unknown A2A version {name:?}: use 1.0 and/or 0.3")),
            }
        }
        if !(set.v1_0 || set.v0_3) {
            return Err("name at least one A2A version (1.0, 0.3)".into());
        }
        Ok(set)
    }

    /// The error for a request in a version this server does not serve.
    pub fn refusal(self, v: ProtocolVersion) -> A2aError {
        let served = if self.v1_0 { "1.0" } else { "0.3" };
        A2aError::new(
            ErrorCode::VersionNotSupported,
            format!("A2A {v} is not served here; this agent speaks A2A {served} (send A2A-Version: {served})"),
        )
        .with_meta("requestedVersion", v.as_str())
    }
}

impl Default for VersionSet {
    fn default() -> Self {
        Self::ALL
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parsing_follows_major_minor_rule() {
        assert_eq!(
            ProtocolVersion::from_header(None),
            Ok(ProtocolVersion::V0_3)
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("")),
            Ok(ProtocolVersion::V0_3)
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("1.0")),
            Ok(ProtocolVersion::V1_0)
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("1.0.7")),
            Ok(ProtocolVersion::V1_0)
        );
        assert_eq!(
            ProtocolVersion::from_header(Some("0.3.0")),
            Ok(ProtocolVersion::V0_3)
        );
        let err = ProtocolVersion::from_header(Some("99.0")).expect_err("unsupported");
        assert_eq!(err.code, ErrorCode::VersionNotSupported);
    }

    #[test]
    fn version_lists_parse_and_refuse_what_they_leave_out() {
        assert_eq!(VersionSet::parse_list("1.0,0.3"), Ok(VersionSet::ALL));
        let strict = VersionSet::parse_list(" 1.0 ").expect("1.0");
        assert_eq!(strict, VersionSet::only(ProtocolVersion::V1_0));
        assert!(!strict.contains(ProtocolVersion::V0_3));
        assert!(VersionSet::parse_list("").is_err());
        assert!(VersionSet::parse_list("1.0,2.0").is_err());
        let e = strict.refusal(ProtocolVersion::V0_3);
        assert_eq!(e.code, ErrorCode::VersionNotSupported);
        assert!(e.message.contains("A2A-Version: 1.0"), "{e}");
    }
}

//! The rule for every URL the hub itself calls (an LLM endpoint, an MCP
//! server): https, or plain http on a loopback host or when the entry says
//! `allow_http`; never credentials in the URL, which would end up in logs
//! and error messages (they are named as secrets instead).

/// `url` parsed, when the hub may call it. The error says why not, never
/// echoing a credential.
pub(crate) fn check_url(url: &str, allow_http: bool, key_field: &str) -> Result<url::Url, String> {
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_http || is_loopback(&parsed) => {}
        "http" => {
            return Err(
                "plain http is refused off a loopback host; use https, or set allow_http = true"
                    .to_owned(),
            );
        }
        other => return Err(format!("unsupported scheme {other:?}")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "credentials in the URL are refused; name the key in {key_field}"
        ));
    }
    Ok(parsed)
}

/// Whether the URL's host is `localhost` or a loopback address.
fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn https_anywhere_http_on_loopback_or_when_allowed_and_no_credentials() {
        assert!(check_url("https://api.example/v1", false, "k").is_ok());
        assert!(check_url("http://127.0.0.1:9/v1", false, "k").is_ok());
        assert!(check_url("http://[::1]:9/v1", false, "k").is_ok());
        assert!(check_url("http://LOCALHOST:9/v1", false, "k").is_ok());
        assert!(check_url("http://api.example/v1", false, "k").is_err());
        assert!(check_url("http://api.example/v1", true, "k").is_ok());
        assert!(check_url("ftp://api.example/v1", true, "k").is_err());
        let err = check_url("https://u:sk-secret@api.example/v1", false, "x.key_env")
            .expect_err("credentials");
        assert!(
            err.contains("x.key_env") && !err.contains("sk-secret"),
            "{err}"
        );
    }
}

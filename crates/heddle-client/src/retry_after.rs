//! The `Retry-After` header (RFC 9110 §10.2.3): delay seconds or an HTTP
//! date, read without trusting the peer's numbers.

use std::time::{Duration, SystemTime};

/// The longest wait a `Retry-After` is read as: a day.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// How long `headers`' `Retry-After` asks to wait, at most
/// [`MAX_RETRY_AFTER`]: delay seconds (whole or fractional) or an
/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, a date past is no wait).
/// `None` when the header is absent or unreadable.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Digits beyond u64 are a wait longer than the cap.
        let secs = v.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    if let Ok(secs) = v.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Some(Duration::from_secs_f64(
            secs.min(MAX_RETRY_AFTER.as_secs_f64()),
        ));
    }
    let at = http_date(v)?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or_default()
            .min(MAX_RETRY_AFTER),
    )
}

/// An IMF-fixdate, years 1970 to 9999.
fn http_date(v: &str) -> Option<SystemTime> {
    let mut it = v.split_whitespace();
    let _weekday = it.next()?;
    let day: u64 = it.next()?.parse().ok()?;
    let month: u64 = match it.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: u64 = it.next()?.parse().ok()?;
    let mut hms = it.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if it.next()? != "GMT"
        || it.next().is_some()
        || !(1970..=9999).contains(&year)
        || !(1..=31).contains(&day)
        || h > 23
        || m > 59
        || s > 60
    {
        return None;
    }
    // Days since 1970-01-01 from the civil date (Howard Hinnant's
    // algorithm); with the year bounded above, nothing here can overflow.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    let secs = days
        .checked_mul(86_400)?
        .checked_add(h * 3600 + m * 60 + s)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(v: &str) -> reqwest::header::HeaderMap {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(reqwest::header::RETRY_AFTER, v.parse().expect("header"));
        h
    }

    #[test]
    fn seconds_and_dates_are_read_and_capped() {
        assert_eq!(retry_after(&header("2")), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_after(&header("0.5")),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            retry_after(&header("Sun, 06 Nov 1994 08:49:37 GMT")),
            Some(Duration::ZERO)
        );
        assert_eq!(
            http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        for huge in [
            "18446744073709551615",
            "99999999999999999999999",
            "1e300",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            assert_eq!(retry_after(&header(huge)), Some(MAX_RETRY_AFTER), "{huge}");
        }
        for bad in [
            "Fri, 31 Dec 99999 23:59:59 GMT",
            "Thu, 01 Jan 1969 00:00:00 GMT",
            "-1",
            "NaN",
            "soon",
        ] {
            assert_eq!(retry_after(&header(bad)), None, "{bad}");
        }
    }
}

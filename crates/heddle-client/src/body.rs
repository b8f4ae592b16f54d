//! Bounded reads of response bodies: a peer cannot make the client hold more
//! than the limit, whether it declares the size or streams without one.

use crate::ClientError;

/// The default bound on a unary answer or a card ([`crate::ClientOptions::max_body_bytes`]).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// Reads `resp`'s body chunk by chunk, refusing it with
/// [`ClientError::BodyTooLarge`] (naming `what`) as soon as it would exceed
/// `limit` bytes: a larger `Content-Length` is refused before any read.
pub async fn read_limited(
    mut resp: reqwest::Response,
    limit: usize,
    what: &'static str,
) -> Result<bytes::Bytes, ClientError> {
    let too_large = || ClientError::BodyTooLarge { what, limit };
    let declared = resp.content_length();
    if declared.is_some_and(|n| u64::try_from(limit).is_ok_and(|limit| n > limit)) {
        return Err(too_large());
    }
    // The declared size is only a hint (and a small one: it is the peer's word).
    let hint = declared
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
        .min(64 << 10);
    let mut body = Vec::with_capacity(hint);
    while let Some(chunk) = resp.chunk().await? {
        // `body` never holds more than `limit`, so this cannot underflow.
        if chunk.len() > limit - body.len() {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.into())
}

#[cfg(test)]
pub(crate) mod tests {
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
    };

    use super::*;

    /// Answers every request with `len` bytes of `x`, declared
    /// (`Content-Length`) or chunked; returns its base URL.
    pub(crate) async fn big(len: usize, declared: bool) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let head = if declared {
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n")
                } else {
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
                        .to_owned()
                };
                if sock.write_all(head.as_bytes()).await.is_err() {
                    continue;
                }
                let piece = vec![b'x'; 64 << 10];
                let mut left = len;
                while left > 0 {
                    let n = left.min(piece.len());
                    let ok = if declared {
                        sock.write_all(&piece[..n]).await
                    } else {
                        let mut c = format!("{n:x}\r\n").into_bytes();
                        c.extend_from_slice(&piece[..n]);
                        c.extend_from_slice(b"\r\n");
                        sock.write_all(&c).await
                    };
                    if ok.is_err() {
                        break;
                    }
                    left -= n;
                }
                if !declared {
                    let _ = sock.write_all(b"0\r\n\r\n").await;
                }
                let _ = sock.shutdown().await;
            }
        });
        format!("http://{addr}")
    }

    async fn get(url: &str, limit: usize) -> Result<bytes::Bytes, ClientError> {
        let resp = reqwest::get(format!("{url}/")).await.expect("answered");
        read_limited(resp, limit, "test body").await
    }

    #[tokio::test]
    async fn a_20_mb_body_is_refused_declared_or_not() {
        for declared in [true, false] {
            let url = big(20 << 20, declared).await;
            match get(&url, DEFAULT_MAX_BODY_BYTES).await {
                Err(ClientError::BodyTooLarge { what, limit }) => {
                    assert_eq!((what, limit), ("test body", DEFAULT_MAX_BODY_BYTES));
                }
                other => panic!("declared {declared}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_body_at_the_limit_is_read_whole() {
        for declared in [true, false] {
            let url = big(100_000, declared).await;
            assert_eq!(get(&url, 100_000).await.expect("fits").len(), 100_000);
            let url = big(100_001, declared).await;
            assert!(matches!(
                get(&url, 100_000).await,
                Err(ClientError::BodyTooLarge { .. })
            ));
        }
    }
}

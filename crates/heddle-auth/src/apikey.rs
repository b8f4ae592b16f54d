//! API keys: created once and shown once, stored only as a SHA-256 hash.
//!
//! A key reads `hdk_{id}_{secret}`: the `id` (16 hex digits) finds its row
//! without scanning, the secret (32 random bytes, base64url) is what makes
//! it a credential. The caller a key authenticates is `key:{id}`: the id is
//! never reused (rows are revoked, not deleted), so a new key that takes a
//! revoked key's name does not inherit its tasks. The name is for people
//! (`heddle keys list`).
//!
//! # Why a plain SHA-256
//!
//! The row keeps `sha256:` and the hex SHA-256 of the whole key. A slow
//! password hash (argon2, bcrypt) exists to make guessing a *low-entropy*
//! secret expensive; a key's secret is 256 bits from a CSPRNG, so a leaked
//! table is no help in finding a key (that is a SHA-256 preimage), and a
//! slow hash would only hand attackers a cheap way to burn the server's
//! memory and CPU with bogus keys. A keyed hash (HMAC with a server secret)
//! would add nothing that holds: `heddle keys create` and `heddle serve` are
//! separate processes, so the secret would have to sit in a file beside the
//! key table, where whoever reads one reads the other.
//!
//! # Verifying
//!
//! Each check hashes the presented key and compares it with the stored hash
//! in constant time ([`subtle`]). An unknown id, a revoked key and a wrong
//! secret all cost one row lookup, one hash and one comparison (against a
//! hash nothing matches when there is no usable row) and get the same
//! error, so neither the answer nor its timing tells which ids exist. Row
//! lookups run on blocking threads, at most [`MAX_CONCURRENT_LOOKUPS`] at a
//! time; the rest wait without holding a thread.
//!
//! A key that verified is remembered under its SHA-256 for
//! [`ApiKeys::cache_ttl`], so the hot path costs a hash and a map lookup; a
//! revocation through the same [`ApiKeys`] takes effect at once, one made by
//! another process (the `heddle keys revoke` command) within the TTL.
//!
//! # Keys from older versions
//!
//! Heddle used to store argon2id hashes (PHC strings, `$argon2id$…`). Such
//! rows are refused like any bad key, and the server logs, without the key,
//! that the key with that id must be recreated (`heddle keys revoke ID`,
//! then `heddle keys create`); [`KeyRecord::has_legacy_hash`] finds them.
//! Tasks such a key created belonged to `key:{name}` and stay with that
//! owner: the new key is a new caller.

use std::{
    collections::HashMap,
    fmt::Write as _,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;
use tokio::sync::Semaphore;

use crate::AuthError;

/// The prefix of every key this module issues.
pub const KEY_PREFIX: &str = "hdk_";

/// The prefix of every caller id an API key authenticates (`key:{id}`).
pub const CALLER_PREFIX: &str = "key:";

/// How a stored hash starts: `sha256:` and 64 hex digits.
const HASH_SCHEME: &str = "sha256:";

/// Most key-row lookups running at once; more wait their turn.
pub const MAX_CONCURRENT_LOOKUPS: usize = 4;

/// One stored key (no secret: only its hash).
#[derive(Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// Public id, part of the key, never reused; the caller id is `key:{id}`.
    pub id: String,
    /// Human name, unique among active keys (a revoked key's name may be
    /// taken again); for display only.
    pub name: String,
    /// `sha256:` and the hex SHA-256 of the whole key.
    pub hash: String,
    /// Seconds since the epoch.
    pub created_at: i64,
    /// Seconds since the epoch, when revoked.
    pub revoked_at: Option<i64>,
}

impl KeyRecord {
    /// The caller id this key authenticates: `key:{id}`.
    pub fn principal(&self) -> String {
        principal(&self.id)
    }

    /// Whether the row holds an argon2 hash from an older Heddle: such a key
    /// is refused and has to be recreated.
    pub fn has_legacy_hash(&self) -> bool {
        self.hash.starts_with("$argon2")
    }
}

impl std::fmt::Debug for KeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRecord")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("hash", &"<redacted>")
            .field("created_at", &self.created_at)
            .field("revoked_at", &self.revoked_at)
            .finish()
    }
}

/// A key as handed to its owner, once. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct NewKey(String);

impl NewKey {
    /// The key, to print once.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NewKey(<redacted>)")
    }
}

/// Where key records live: memory, SQLite (feature `sqlite`, blocking calls
/// run off the async executor) or PostgreSQL (feature `postgres`, shared by
/// every replica).
///
/// A key's id owns its tasks, so a store never deletes a row nor lets an id
/// name a second key.
#[async_trait::async_trait]
pub trait KeyStore: Send + Sync + 'static {
    /// Adds a record; fails if an active key has the same name or any key,
    /// revoked or not, the same id.
    async fn insert(&self, record: &KeyRecord) -> Result<(), AuthError>;
    /// The record with `id`, revoked or not.
    async fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError>;
    /// Every record, oldest first.
    async fn list(&self) -> Result<Vec<KeyRecord>, AuthError>;
    /// Revokes the active key named `name_or_id` (a name or an id); the revoked records.
    async fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError>;
}

/// Keys in memory (tests, embedded servers).
#[derive(Debug, Default)]
pub struct MemoryKeyStore {
    rows: Mutex<Vec<KeyRecord>>,
}

impl MemoryKeyStore {
    fn rows(&self) -> std::sync::MutexGuard<'_, Vec<KeyRecord>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl KeyStore for MemoryKeyStore {
    async fn insert(&self, record: &KeyRecord) -> Result<(), AuthError> {
        let mut rows = self.rows();
        if rows.iter().any(|r| r.id == record.id) {
            return Err(AuthError::Config(format!(
                "a key already has the id {}",
                record.id
            )));
        }
        if rows
            .iter()
            .any(|r| r.name == record.name && r.revoked_at.is_none())
        {
            return Err(AuthError::Config(format!(
                "an active key is already named {:?}",
                record.name
            )));
        }
        rows.push(record.clone());
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError> {
        Ok(self.rows().iter().find(|r| r.id == id).cloned())
    }

    async fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
        Ok(self.rows().clone())
    }

    async fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError> {
        let mut out = Vec::new();
        for r in self.rows().iter_mut() {
            if r.revoked_at.is_none() && (r.name == name_or_id || r.id == name_or_id) {
                r.revoked_at = Some(at);
                out.push(r.clone());
            }
        }
        Ok(out)
    }
}

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteKeyStore;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::PostgresKeyStore;

struct Cached {
    id: String,
    at: Instant,
}

/// Most verified keys remembered at once (the cache is cleared when full).
const CACHE_MAX: usize = 10_000;

/// Issues, verifies and revokes API keys over a [`KeyStore`].
#[derive(Clone)]
pub struct ApiKeys {
    store: Arc<dyn KeyStore>,
    cache: Arc<Mutex<HashMap<[u8; 32], Cached>>>,
    lookups: Arc<Semaphore>,
    ttl: Duration,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys")
            .field("cache_ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn principal(id: &str) -> String {
    format!("{CALLER_PREFIX}{id}")
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// The stored form of a key's digest: `sha256:` and lower-case hex.
fn stored_hash(digest: &[u8; 32]) -> String {
    let mut s = String::with_capacity(HASH_SCHEME.len() + 64);
    s.push_str(HASH_SCHEME);
    for b in digest {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The digest in a stored hash; `None` for anything else (an argon2 PHC
/// string from an older version, a damaged row).
fn parse_stored_hash(hash: &str) -> Option<[u8; 32]> {
    let hex = hash.strip_prefix(HASH_SCHEME)?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

/// The id part of a well-formed key.
fn key_id(key: &str) -> Option<&str> {
    let (id, _) = key.strip_prefix(KEY_PREFIX)?.split_once('_')?;
    (id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

/// What every refused key gets, whatever was wrong with it.
fn refused() -> AuthError {
    AuthError::Invalid("unknown or revoked API key".into())
}

impl ApiKeys {
    /// Keys in `store`, verified results cached for 60 s.
    pub fn new(store: Arc<dyn KeyStore>) -> Self {
        Self {
            store,
            cache: Arc::default(),
            lookups: Arc::new(Semaphore::new(MAX_CONCURRENT_LOOKUPS)),
            ttl: Duration::from_secs(60),
        }
    }

    /// How long a verified key is trusted without reading its row again
    /// (bounds how late another process's revocation is seen).
    #[must_use]
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Cached>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new key named `name`: the record as stored, and the key, to show once.
    pub async fn create(&self, name: &str) -> Result<(KeyRecord, NewKey), AuthError> {
        let name = name.trim();
        if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
            return Err(AuthError::Config(
                "a key name is 1 to 64 printable characters".into(),
            ));
        }
        // `rand::random` draws from the thread-local CSPRNG, seeded by the OS.
        let id = format!("{:016x}", rand::random::<u64>());
        let secret: [u8; 32] = rand::random();
        let key = format!(
            "{KEY_PREFIX}{id}_{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
        );
        let record = KeyRecord {
            id,
            name: name.to_owned(),
            hash: stored_hash(&digest(&key)),
            created_at: now_secs(),
            revoked_at: None,
        };
        self.store.insert(&record).await?;
        Ok((record, NewKey(key)))
    }

    /// Every key record, oldest first.
    pub async fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
        self.store.list().await
    }

    /// Revokes the key named (or with id) `name_or_id`; the revoked records
    /// (empty when none matched).
    pub async fn revoke(&self, name_or_id: &str) -> Result<Vec<KeyRecord>, AuthError> {
        let revoked = self.store.revoke(name_or_id, now_secs()).await?;
        self.cache()
            .retain(|_, c| !revoked.iter().any(|r| r.id == c.id));
        Ok(revoked)
    }

    /// The row with `id`, read once one of the [`MAX_CONCURRENT_LOOKUPS`]
    /// permits is free. The read runs as a task of its own holding the
    /// permit, so a caller that gives up does not free it early: callers
    /// that keep dropping bogus keys cannot pile up reads behind the store.
    async fn lookup(&self, id: &str) -> Result<Option<KeyRecord>, AuthError> {
        let permit = self
            .lookups
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| AuthError::Unavailable("the key store is closed".into()))?;
        let store = self.store.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let _permit = permit;
            store.get(&id).await
        })
        .await
        .map_err(|e| AuthError::Unavailable(format!("key check did not finish: {e}")))?
    }

    /// The caller id (`key:{id}`) of a valid, unrevoked key. Every refusal
    /// is the same [`AuthError::Invalid`].
    pub async fn verify(&self, key: &str) -> Result<String, AuthError> {
        let presented = digest(key);
        if let Some(c) = self.cache().get(&presented)
            && c.at.elapsed() < self.ttl
        {
            return Ok(principal(&c.id));
        }
        // A malformed key names no row: refusing it early tells nothing.
        let Some(id) = key_id(key) else {
            return Err(refused());
        };
        let record = self.lookup(id).await?;
        let live = record.filter(|r| r.revoked_at.is_none());
        let expected = live.as_ref().and_then(|r| parse_stored_hash(&r.hash));
        // The same comparison with or without a usable row; no key hashes
        // to all zeros (that would be a SHA-256 preimage).
        let equal: bool = presented
            .ct_eq(expected.as_ref().unwrap_or(&[0u8; 32]))
            .into();
        let record = match live {
            Some(record) if equal && expected.is_some() => record,
            other => {
                if let Some(r) = other.filter(KeyRecord::has_legacy_hash) {
                    tracing::warn!(
                        key_id = %r.id,
                        key_name = %r.name,
                        "refused API key {}: it is stored as an argon2 hash by an older heddle; \
                         revoke it (`heddle keys revoke {}`) and create a new one",
                        r.id,
                        r.id,
                    );
                }
                self.cache().remove(&presented);
                return Err(refused());
            }
        };
        let mut cache = self.cache();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(
            presented,
            Cached {
                id: record.id.clone(),
                at: Instant::now(),
            },
        );
        Ok(record.principal())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> ApiKeys {
        ApiKeys::new(Arc::new(MemoryKeyStore::default()))
    }

    #[tokio::test]
    async fn a_created_key_verifies_and_is_stored_only_as_a_hash() {
        let k = keys();
        let (record, key) = k.create("ci").await.expect("create");
        assert!(key.expose().starts_with(KEY_PREFIX));
        assert_eq!(record.hash, stored_hash(&digest(key.expose())));
        assert!(!record.hash.contains(key.expose()));
        assert!(!format!("{record:?}{key:?}").contains(key.expose()));
        let caller = format!("key:{}", record.id);
        assert_eq!(k.verify(key.expose()).await, Ok(caller.clone()));
        // Second time from the cache.
        assert_eq!(k.verify(key.expose()).await, Ok(caller));
    }

    #[tokio::test]
    async fn a_revoked_key_is_refused_at_once() {
        let k = keys();
        let (_, key) = k.create("ci").await.expect("create");
        k.verify(key.expose()).await.expect("valid first");
        assert_eq!(k.revoke("ci").await.expect("revoke").len(), 1);
        assert!(matches!(
            k.verify(key.expose()).await,
            Err(AuthError::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn a_key_revoked_elsewhere_is_refused_once_the_cache_expires() {
        let store = Arc::new(MemoryKeyStore::default());
        let k = ApiKeys::new(store.clone()).cache_ttl(Duration::from_millis(50));
        let (record, key) = k.create("ci").await.expect("create");
        k.verify(key.expose()).await.expect("valid first");
        store
            .revoke(&record.id, 1)
            .await
            .expect("revoke behind its back");
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(k.verify(key.expose()).await.is_err());
    }

    #[tokio::test]
    async fn wrong_secrets_and_malformed_keys_are_refused() {
        let k = keys();
        let (record, key) = k.create("ci").await.expect("create");
        let forged = format!("{KEY_PREFIX}{}_AAAA", record.id);
        for bad in [
            forged.as_str(),
            "",
            "hdk_",
            "hdk_zz_zz",
            "not-a-key",
            &key.expose()[..key.expose().len() - 1],
        ] {
            assert!(k.verify(bad).await.is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn names_are_unique_among_active_keys() {
        let k = keys();
        k.create("ci").await.expect("create");
        assert!(k.create("ci").await.is_err());
        k.revoke("ci").await.expect("revoke");
        k.create("ci").await.expect("the name is free again");
    }

    /// A store that counts how many lookups run at once, each taking a
    /// millisecond, like a busy database.
    #[derive(Default)]
    struct SlowStore {
        inner: MemoryKeyStore,
        now: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl KeyStore for SlowStore {
        async fn insert(&self, record: &KeyRecord) -> Result<(), AuthError> {
            self.inner.insert(record).await
        }
        async fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError> {
            use std::sync::atomic::Ordering::SeqCst;
            let n = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(n, SeqCst);
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.now.fetch_sub(1, SeqCst);
            self.inner.get(id).await
        }
        async fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
            self.inner.list().await
        }
        async fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError> {
            self.inner.revoke(name_or_id, at).await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_hundred_concurrent_bogus_secrets_are_refused_fast_with_few_lookups_at_once() {
        let store = Arc::new(SlowStore::default());
        let k = ApiKeys::new(store.clone());
        let (record, key) = k.create("ci").await.expect("create");
        let started = Instant::now();
        let attempts: Vec<_> = (0..200)
            .map(|i| {
                let k = k.clone();
                let bogus = format!("{KEY_PREFIX}{}_{i:043}", record.id);
                tokio::spawn(async move { k.verify(&bogus).await })
            })
            .collect();
        for a in attempts {
            assert!(matches!(a.await, Ok(Err(AuthError::Invalid(_)))));
        }
        let took = started.elapsed();
        let most = store.most.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            most <= MAX_CONCURRENT_LOOKUPS,
            "{most} lookups at once (blocking threads); at most {MAX_CONCURRENT_LOOKUPS}"
        );
        assert!(
            took < Duration::from_secs(2),
            "200 bogus keys took {took:?}"
        );
        assert_eq!(k.verify(key.expose()).await, Ok(record.principal()));
    }

    #[tokio::test]
    async fn unknown_ids_and_wrong_secrets_get_the_same_error_after_the_same_work() {
        let k = keys();
        let (record, _) = k.create("ci").await.expect("create");
        let secret = "A".repeat(43);
        let wrong = format!("{KEY_PREFIX}{}_{secret}", record.id);
        let unknown_id = if record.id == "0123456789abcdef" {
            "fedcba9876543210"
        } else {
            "0123456789abcdef"
        };
        let unknown = format!("{KEY_PREFIX}{unknown_id}_{secret}");
        let (e1, e2) = (k.verify(&wrong).await, k.verify(&unknown).await);
        assert!(e1.is_err());
        assert_eq!(e1, e2);
        assert_eq!(format!("{e1:?}"), format!("{e2:?}"));

        // Medians of interleaved runs: before, a wrong secret cost an argon2
        // run and an unknown id did not (35 times faster), so timing told
        // which ids exist.
        let mut t_wrong = Vec::new();
        let mut t_unknown = Vec::new();
        for _ in 0..41 {
            let t = Instant::now();
            let _ = k.verify(&wrong).await;
            t_wrong.push(t.elapsed());
            let t = Instant::now();
            let _ = k.verify(&unknown).await;
            t_unknown.push(t.elapsed());
        }
        t_wrong.sort();
        t_unknown.sort();
        let (w, u) = (t_wrong[20], t_unknown[20]);
        assert!(
            w < u * 5 && u < w * 5,
            "median wrong secret {w:?}, unknown id {u:?}"
        );
    }

    #[tokio::test]
    async fn a_new_key_reusing_a_revoked_name_is_another_caller() {
        let k = keys();
        let (old, old_key) = k.create("ci").await.expect("create");
        let old_caller = k.verify(old_key.expose()).await.expect("old key");
        k.revoke("ci").await.expect("revoke");
        let (new, new_key) = k.create("ci").await.expect("the name is free again");
        let new_caller = k.verify(new_key.expose()).await.expect("new key");
        assert_ne!(old_caller, new_caller);
        assert_eq!(old_caller, format!("key:{}", old.id));
        assert_eq!(new_caller, format!("key:{}", new.id));
    }

    #[tokio::test]
    async fn a_key_stored_as_argon2_by_an_older_version_is_refused_like_a_bad_key() {
        // Made by the argon2 code this replaced, for exactly this key.
        let legacy_key = "hdk_00000000000000aa_legacylegacylegacylegacylegacylegacylegacyle";
        let record = KeyRecord {
            id: "00000000000000aa".into(),
            name: "old".into(),
            hash: "$argon2id$v=19$m=19456,t=2,p=1$aGVkZGxlLWxlZ2FjeS1zYWx0$\
                   XlUs4ElS0vrCmtfx593fNNXeU1WmYQ4t5kpChjKLKac"
                .into(),
            created_at: 1,
            revoked_at: None,
        };
        assert!(record.has_legacy_hash());
        let store = Arc::new(MemoryKeyStore::default());
        store.insert(&record).await.expect("insert");
        let k = ApiKeys::new(store);
        let (_, key) = k.create("new").await.expect("create");
        assert!(!k.list().await.expect("list")[1].has_legacy_hash());
        let wrong = format!("{}x", key.expose());
        assert_eq!(k.verify(legacy_key).await, Err(refused()));
        assert_eq!(k.verify(legacy_key).await, k.verify(&wrong).await);
    }
}

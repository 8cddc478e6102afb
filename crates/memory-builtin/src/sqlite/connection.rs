//! Opening an index database and reaching its connections: the writer and the reader, WAL, sqlite-vec, the
//! read-only fallback for an index that cannot be written, and SQLite errors as the engine's. Every other part
//! reads and writes through `read` and `write` here.

use std::path::Path;
use std::sync::{Mutex, Once};

use memory_core::locks::{LockExt, ResetOnPoison};
use memory_core::{MemoryError, Result};
use rusqlite::Connection;
use tracing::warn;

use super::{schema, SqliteStore};

const BUSY_TIMEOUT_MS: u64 = 5_000;

static VEC_INIT: Once = Once::new();

/// Register sqlite-vec with every connection this process opens (it is compiled in, not loaded).
fn register_sqlite_vec() {
    VEC_INIT.call_once(|| unsafe {
        #[allow(
            clippy::missing_transmute_annotations,
            reason = "sqlite-vec's init has the C signature SQLite calls; its Rust binding declares it without one"
        )]
        rusqlite::ffi::sqlite3_auto_extension(Some(std::mem::transmute(sqlite_vec::sqlite3_vec_init as *const ())));
    });
}

pub(crate) fn db_err(context: &str, e: rusqlite::Error) -> MemoryError {
    use rusqlite::ffi::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
            MemoryError::CorruptIndex(format!("{context}: {e}"))
        }
        // Bytes a column cannot hold when the file is intact (text that is not UTF-8, a number where text was
        // written): damaged data pages, which SQLite's page checks do not see.
        rusqlite::Error::Utf8Error(_)
        | rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => MemoryError::CorruptIndex(format!("{context}: damaged data: {e}")),
        // The file system said no (full, read-only, an I/O error): an I/O error of the index, not a bug.
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DiskFull | ErrorCode::ReadOnly | ErrorCode::SystemIoFailure | ErrorCode::CannotOpen) =>
        {
            MemoryError::Io { context: context.to_string(), source: std::io::Error::other(e.to_string()) }
        }
        rusqlite::Error::SqliteFailure(f, _) if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            MemoryError::Unavailable(format!("{context}: index is busy: {e}"))
        }
        _ => MemoryError::Internal(format!("{context}: {e}")),
    }
}

pub(super) fn is_readonly(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ffi::ErrorCode::ReadOnly)
}

/// Switching a new database to WAL needs a lock that SQLite does not wait for: when another process opens the
/// same new index at the same moment, retry for up to the busy timeout.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(BUSY_TIMEOUT_MS);
    let mut pause = 5;
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, m))
                if matches!(e.code, rusqlite::ffi::ErrorCode::DatabaseBusy | rusqlite::ffi::ErrorCode::DatabaseLocked)
                    && std::time::Instant::now() < deadline =>
            {
                tracing::debug!(error = ?m, "index busy while opening; retrying");
                std::thread::sleep(std::time::Duration::from_millis(pause));
                pause = (pause * 2).min(200);
            }
            other => return other,
        }
    }
}

pub(super) fn open_connection(path: &Path) -> rusqlite::Result<Connection> {
    register_sqlite_vec();
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

/// Errors of opening a database that mean "cannot write here" (a read-only or full file system, no permission):
/// an existing index is then opened read-only.
fn is_write_trouble(e: &rusqlite::Error) -> bool {
    use rusqlite::ffi::ErrorCode;
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::SystemIoFailure | ErrorCode::DiskFull | ErrorCode::PermissionDenied))
}

/// Why nothing can be written in `dir`, found by writing a small probe file there (`None`: it can be written).
fn write_trouble(dir: &Path) -> Option<String> {
    use std::io::Write;
    let probe = dir.join(format!(".write-probe-{}", std::process::id()));
    let result = std::fs::File::create(&probe).and_then(|mut f| {
        f.write_all(&[0u8; 4096])?;
        f.sync_all()
    });
    let _ = std::fs::remove_file(&probe);
    result.err().map(|e| format!("cannot write in {}: {e}", dir.display()))
}

/// `path` as an SQLite URI (`file:` with the characters URIs reserve escaped).
fn sqlite_uri(path: &Path, query: &str) -> String {
    let mut out = String::from("file:");
    for ch in path.to_string_lossy().chars() {
        match ch {
            '%' | '?' | '#' => out.push_str(&format!("%{:02X}", ch as u32)),
            c => out.push(c),
        }
    }
    out.push('?');
    out.push_str(query);
    out
}

/// A read-only connection to an existing index that cannot be written: `mode=ro` when SQLite can still share
/// it (its WAL index can be created), else `immutable=1` (nothing can write that file system meanwhile).
fn open_read_only(path: &Path) -> rusqlite::Result<Connection> {
    use rusqlite::OpenFlags;
    register_sqlite_vec();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let check = |c: Connection| -> rusqlite::Result<Connection> {
        c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))?;
        Ok(c)
    };
    Connection::open_with_flags(sqlite_uri(path, "mode=ro"), flags)
        .and_then(check)
        .or_else(|_| Connection::open_with_flags(sqlite_uri(path, "immutable=1"), flags).and_then(check))
        .inspect(|c| {
            let _ = c.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS));
        })
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| MemoryError::io_path("cannot create index folder", dir, e))?;
        }
        let context = format!("cannot open index {}", path.display());
        let opened = retry_busy(|| {
            let mut c = open_connection(path)?;
            schema::create(&mut c)?;
            Ok(c)
        })
        .and_then(|writer| Ok((writer, retry_busy(|| open_connection(path))?)));
        let (writer, reader) = match opened {
            Ok(pair) => pair,
            Err(e) if is_write_trouble(&e) && path.is_file() => {
                // Degraded, not dead: an index that cannot be written still answers searches as it is.
                let dir = path.parent().unwrap_or(Path::new("."));
                let cause = write_trouble(dir).unwrap_or_else(|| format!("{context}: {e}"));
                let reader = open_read_only(path).map_err(|_| db_err(&format!("{context} ({cause})"), e))?;
                warn!(path = %path.display(), cause = %cause, "index opened read-only: searches answer from it as it is; nothing is synced until it can be written");
                return Ok(SqliteStore {
                    path: path.to_path_buf(),
                    read_only: Some(cause),
                    writer: Mutex::new(None),
                    reader: Mutex::new(Some(reader)),
                    vectors: Mutex::new(None),
                    searched_vectors: std::sync::atomic::AtomicBool::new(false),
                });
            }
            Err(e) => return Err(db_err(&context, e)),
        };
        Ok(SqliteStore {
            path: path.to_path_buf(),
            read_only: None,
            writer: Mutex::new(Some(writer)),
            reader: Mutex::new(Some(reader)),
            vectors: Mutex::new(None),
            searched_vectors: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` on a connection; on a "readonly database" error (the file was replaced or its permissions
    /// flipped under us) reopen the connection once and retry.
    pub(super) fn with<T>(&self, slot: &Mutex<Option<Connection>>, context: &str, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        // Errors name the index file: "disk full" alone does not say which disk.
        let context = &format!("{context} ({})", self.path.display());
        let mut guard = slot.locked();
        let conn = guard.as_mut().ok_or_else(|| MemoryError::Unavailable("index is closed".into()))?;
        match f(conn) {
            Ok(v) => Ok(v),
            Err(e) if is_readonly(&e) => {
                warn!(path = %self.path.display(), "readonly database error; reopening the connection once");
                let fresh = guard.insert(open_connection(&self.path).map_err(|e| db_err(context, e))?);
                // data_version values are per connection: the vector copy must not compare across two.
                if std::ptr::eq(slot, &self.reader) {
                    *self.vectors.locked_or_reset() = None;
                }
                f(fresh).map_err(|e| db_err(context, e))
            }
            Err(e) => Err(db_err(context, e)),
        }
    }

    pub(super) fn read<T>(&self, context: &str, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.with(&self.reader, context, f)
    }

    pub(super) fn write<T>(&self, context: &str, f: impl Fn(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        if let Some(cause) = &self.read_only {
            return Err(MemoryError::Unavailable(format!("{context}: the index {} is open read-only ({cause})", self.path.display())));
        }
        self.with(&self.writer, context, f)
    }

    /// Close both connections (checkpointing the WAL into the main file).
    pub fn close_now(&self) {
        for slot in [&self.reader, &self.writer] {
            if let Some(conn) = slot.locked().take() {
                if let Err((_, e)) = conn.close() {
                    warn!(error = %e, "closing index connection failed");
                }
            }
        }
    }
}

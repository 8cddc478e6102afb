//! LanceDB errors to [`MemoryError`] kinds, so callers (fallback, retries, status) act on the kind.

use memory_core::MemoryError;

/// Storage a store talks to, for error messages that say where things went wrong.
pub(crate) fn map_err(location: &str, action: &str, e: lancedb::Error) -> MemoryError {
    use lancedb::Error as E;
    let msg = format!("lancedb at {location}: {action}: {e}");
    // Layers wrap connection failures in other variants (a failed listing during connect is "invalid input"):
    // the transport error in the text decides.
    if looks_unreachable(&msg) {
        return MemoryError::Unavailable(format!("storage unreachable: {msg}"));
    }
    match &e {
        E::InvalidTableName { .. } | E::InvalidInput { .. } | E::InvalidExpression { .. } => MemoryError::InvalidInput(msg),
        // The engine reads and writes only its own table, with its own columns: a schema or column that does
        // not fit is a damaged (or foreign) table to rebuild, not the caller's mistake.
        E::Schema { .. } | E::ColumnNotFound { .. } | E::TableCorrupted { .. } => MemoryError::CorruptIndex(msg),
        E::TableNotFound { .. } | E::DatabaseNotFound { .. } | E::IndexNotFound { .. } => MemoryError::NotFound(msg),
        E::ObjectStore { source } => object_store_kind(source, msg),
        E::Timeout { .. } => MemoryError::Unavailable(format!("storage unreachable or too slow: {msg}")),
        E::CreateDir { .. } => MemoryError::Unavailable(msg),
        E::Lance { source } => lance_kind(source, msg),
        E::External { source } => {
            // DataFusion and user-code errors arrive here; an object-store failure inside a scan is the usual one.
            let text = source.to_string();
            if looks_unreachable(&text) {
                MemoryError::Unavailable(format!("storage unreachable: {msg}"))
            } else {
                MemoryError::Internal(msg)
            }
        }
        _ => {
            if looks_unreachable(&msg) {
                MemoryError::Unavailable(format!("storage unreachable: {msg}"))
            } else {
                MemoryError::Internal(msg)
            }
        }
    }
}

fn object_store_kind(e: &object_store::Error, msg: String) -> MemoryError {
    use object_store::Error as O;
    match e {
        O::NotFound { .. } => MemoryError::NotFound(msg),
        O::PermissionDenied { .. } | O::Unauthenticated { .. } => MemoryError::Unavailable(format!("storage refused the credentials: {msg}")),
        _ => MemoryError::Unavailable(format!("storage unreachable: {msg}")),
    }
}

fn lance_kind(e: &lance_core::Error, msg: String) -> MemoryError {
    use lance_core::Error as L;
    match e {
        L::InvalidInput { .. } => MemoryError::InvalidInput(msg),
        L::SchemaMismatch { .. } | L::Schema { .. } => MemoryError::CorruptIndex(msg),
        L::DatasetNotFound { .. } | L::NotFound { .. } | L::IndexNotFound { .. } => MemoryError::NotFound(msg),
        L::CorruptFile { .. } => MemoryError::CorruptIndex(msg),
        L::IO { .. } | L::Timeout { .. } => MemoryError::Unavailable(format!("storage unreachable: {msg}")),
        L::CommitConflict { .. } | L::RetryableCommitConflict { .. } | L::TooMuchWriteContention { .. } | L::IncompatibleTransaction { .. } => {
            MemoryError::Unavailable(format!("another writer changed the table at the same time; retry: {msg}"))
        }
        _ => {
            if looks_unreachable(&msg) {
                MemoryError::Unavailable(format!("storage unreachable: {msg}"))
            } else {
                MemoryError::Internal(msg)
            }
        }
    }
}

/// Connection failures are reported as text by several layers (reqwest inside object_store inside lance).
fn looks_unreachable(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "connection refused",
        "error sending request",
        "dns error",
        "timed out",
        "timeout",
        "connect error",
        "tcp connect",
        "no route to host",
        "retryerror",
        "connect error",
    ]
    .iter()
    .any(|p| t.contains(p))
}

/// Arrow errors while building or reading batches are bugs here or unexpected table contents.
pub(crate) fn arrow_err(action: &str, e: arrow_schema::ArrowError) -> MemoryError {
    MemoryError::Internal(format!("lancedb: {action}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::ErrorKind;

    #[test]
    fn schema_and_column_errors_on_the_engines_own_table_are_a_corrupt_index() {
        let schema = map_err("/x", "read", lancedb::Error::Schema { message: "field card missing".into() });
        assert_eq!(schema.kind(), ErrorKind::CorruptIndex, "{schema}");
        let column = map_err("/x", "read", lancedb::Error::ColumnNotFound { name: "card".into() });
        assert_eq!(column.kind(), ErrorKind::CorruptIndex, "{column}");
        let input = map_err("/x", "open", lancedb::Error::InvalidTableName { name: "a/b".into(), reason: "slash".into() });
        assert_eq!(input.kind(), ErrorKind::InvalidInput, "{input}");
    }
}

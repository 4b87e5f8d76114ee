//! JSON output for measurements, so runs can be compared by scripts.

use std::path::Path;

use super::ReportError;

/// Writes `value` as pretty-printed JSON to `path`.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), ReportError> {
    let text = serde_json::to_string_pretty(value).map_err(|source| ReportError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    std::fs::write(path, text + "\n").map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}

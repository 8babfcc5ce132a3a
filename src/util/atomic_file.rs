//! Writing a file so that a reader, or a crash, sees the old file or the new one whole, never a part:
//! one rule for every file memgym replaces in place (the harness's reports and Parquet files, a bank's
//! saved index).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `path` atomically: a temporary file in the same directory is written and synced,
/// then renamed over `path`, then the directory is synced. On failure, the path the failing step
/// touched (the temporary file, `path` or the directory) and the error; the temporary file is removed.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), (PathBuf, std::io::Error)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let at = |p: &Path| {
        let p = p.to_path_buf();
        move |e| (p, e)
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        Some(_) | None => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut file = fs::File::create(&tmp).map_err(at(&tmp))?;
        file.write_all(bytes).map_err(at(&tmp))?;
        file.sync_all().map_err(at(&tmp))?;
        drop(file);
        fs::rename(&tmp, path).map_err(at(path))?;
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(at(dir))
    })();
    if result.is_err() {
        // Best effort: the temporary file may or may not exist at this point.
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_whole_and_names_the_failing_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        write(&path, b"old").unwrap();
        write(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
        let (failed, _) = write(&dir.path().join("missing").join("f.bin"), b"x").unwrap_err();
        assert!(failed.starts_with(dir.path().join("missing")), "{}", failed.display());
    }
}

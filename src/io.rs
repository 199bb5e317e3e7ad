//! File output that never leaves a half-written file behind: everything is written to a
//! temporary file in the destination's directory and renamed over the destination only once
//! complete and flushed (rename is atomic on POSIX file systems). Also the stamp that says
//! where a result file was produced ([`machine_stamp`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A file being written; becomes visible at `path` on [`AtomicFile::commit`]. Dropping it
/// without committing deletes the temporary file.
pub struct AtomicFile {
    path: PathBuf,
    tmp: PathBuf,
    writer: Option<BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        let file = File::create(&tmp)?;
        Ok(Self { path: path.to_path_buf(), tmp, writer: Some(BufWriter::new(file)) })
    }

    pub fn writer(&mut self) -> &mut BufWriter<File> {
        self.writer.as_mut().expect("writer present until commit")
    }

    /// Flushes, syncs and renames into place.
    pub fn commit(mut self) -> std::io::Result<()> {
        let w = self.writer.take().expect("writer present until commit");
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.tmp, &self.path)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.writer.is_some() {
            self.writer = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.writer().flush()
    }
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

/// Writes `path` atomically through a writer that insists on a file name of its own (plotters'
/// bitmap backend, an image encoder): `write` gets a temporary path in the same directory with
/// the same extension (encoders pick the format from it), and the file is renamed into place
/// only when `write` succeeded. On failure the temporary file is removed.
pub fn write_atomic_with<E: std::fmt::Display>(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), E>,
) -> std::io::Result<()> {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "out".into());
    let tmp = match path.extension() {
        Some(ext) => path.with_file_name(format!(".{stem}.tmp-{}.{}", std::process::id(), ext.to_string_lossy())),
        None => path.with_file_name(format!(".{stem}.tmp-{}", std::process::id())),
    };
    if let Err(e) = write(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(std::io::Error::other(format!("{}: {e}", path.display())));
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Where and when a result was produced: the git revision of the checkout the binary was built
/// from (with `-dirty` if it has uncommitted changes outside `docs/`; `unknown` outside a git
/// checkout), host name, CPU model and count, the 1/5/15-minute load average (Linux; empty
/// elsewhere) and the UTC time (seconds since the epoch). Written into result files so a reader
/// can tell which code on which machine under what load gave the numbers.
pub fn machine_stamp() -> serde_json::Value {
    // The checkout this binary was built from, whatever the working directory.
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let revision = match git(&["rev-parse", "HEAD"]) {
        Some(rev) => {
            // Result files being rewritten do not make the code dirty.
            let dirty = git(&["status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{rev}-dirty")
            } else {
                rev
            }
        }
        None => "unknown".into(),
    };
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let load: Vec<f64> = read("/proc/loadavg").split_whitespace().take(3).filter_map(|x| x.parse().ok()).collect();
    serde_json::json!({
        "git_revision": revision,
        "host": read("/proc/sys/kernel/hostname").trim(),
        "cpu": cpu,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "load_average": load,
        "unix_time": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_writer_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.png");
        std::fs::write(&path, b"old").unwrap();
        let r = write_atomic_with(&path, |tmp| {
            std::fs::write(tmp, b"half").unwrap();
            Err("the encoder failed")
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old", "the old file is untouched");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
        write_atomic_with(&path, |tmp| std::fs::write(tmp, b"new")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }
}

//! Scratch directories and paths.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A scratch directory under cargo's per-target temporary directory, removed on drop
/// (a `tempfile::TempDir` with helpers for the tests' files).
pub struct TempDir {
    dir: tempfile::TempDir,
}

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        TempDir::new_in(name, std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
    }

    /// Under `base` instead: `/tmp` where a path must stay short (a Unix socket's, 107
    /// bytes at most, whatever directory the checkout is in).
    pub fn new_in(name: &str, base: &std::path::Path) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("load-{name}-"))
            .tempdir_in(base)
            .unwrap();
        TempDir { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    pub fn write(&self, file: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(file);
        std::fs::write(&p, contents).unwrap();
        p
    }
}

pub fn path_str(p: &Path) -> String {
    p.to_str().expect("UTF-8 path").to_string()
}

/// Every regular file under `dir`, at any depth (symbolic links not followed).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(entry.path()),
                Ok(t) if t.is_file() => files.push(entry.path()),
                _ => {}
            }
        }
    }
    files
}

//! The host configuration, `/etc/siloc/siloc.toml` (path from `--config` or
//! `SILOC_CONFIG`). Every setting has a default, so no file is needed. Each section
//! belongs to its feature (`[userns]` to [`crate::userns`], `[numa]` to
//! [`crate::numa`], `[io]` to [`crate::iopolicy`], `[image]` to [`crate::image`]),
//! which checks it; this module reads the file and names the file in errors.
//!
//! ```toml
//! data_root = "/var/lib/siloc"   # ephemeral upper dirs and the layer store; on a real disk
//!
//! [userns]
//! default = "off"                # "auto": every container gets its own user namespace
//! size = 65536                   # IDs per container
//! max_size = 1048576             # cap per container (size, spec mappings)
//! pool_start = 100000            # host ID pool; default: the `containers` entry of
//! pool_size = 1073741824         # /etc/subuid and /etc/subgid, else these numbers
//! pool_dir = "/run/siloc-idpool" # the host's one ID pool table, whatever --root
//!
//! [numa]
//! default = "off"                # auto | node:N | off
//!
//! [io]
//! default_class = "besteffort"   # optional
//! [io.class.besteffort]
//! wbps = "50M"                   # bytes/s, K/M/G suffixes; riops/wiops in IOPS
//! weight = 100                   # io.weight / blkio.weight
//! [io.class.latency-critical]
//! latency_target = "2ms"         # cgroup v2 io.latency target (µs without suffix)
//!
//! [image]
//! store = "/var/lib/siloc/store" # content-addressed layer store
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::iopolicy::IoConfig;
pub(crate) use crate::numa::NumaConfig;
pub(crate) use crate::userns::UsernsConfig;

/// Where the file is looked for when neither `--config` nor `SILOC_CONFIG` is given.
pub const DEFAULT_PATH: &str = "/etc/siloc/siloc.toml";
/// Default data root: on disk, because the NUMA and I/O features need the block device
/// that holds each container's writable layer (the state root under /run is tmpfs).
pub const DEFAULT_DATA_ROOT: &str = "/var/lib/siloc";
/// Errors from reading the host configuration; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path}: {msg}")]
    Parse { path: PathBuf, msg: String },
    #[error("config {path}: {key}: {msg}")]
    Invalid {
        path: PathBuf,
        key: String,
        msg: String,
    },
}

/// The whole host configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostConfig {
    /// Ephemeral upper/work dirs live in `<data_root>/containers/<id>`.
    pub data_root: PathBuf,
    pub userns: UsernsConfig,
    pub numa: NumaConfig,
    pub io: IoConfig,
    pub image: ImageConfig,
    /// The file this came from, for messages; `None` when built-in defaults are used.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// `[image]`: the layer store of `siloc image`. Kept here, not in `image`, because
/// `image` reads container records through `lifecycle`, which reads this config: the
/// CLI hands the store root to `image`, which never reads the config itself.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ImageConfig {
    /// Store root; default `<data_root>/store`.
    pub store: Option<std::path::PathBuf>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            data_root: PathBuf::from(DEFAULT_DATA_ROOT),
            userns: UsernsConfig::default(),
            numa: NumaConfig::default(),
            io: IoConfig::default(),
            image: ImageConfig::default(),
            source: None,
        }
    }
}

impl HostConfig {
    /// Loads the configuration: `explicit` (from `--config`/`SILOC_CONFIG`) must exist;
    /// the default path is used only when present. Errors: [`ConfigError`].
    pub fn load(explicit: Option<&Path>) -> Result<HostConfig, ConfigError> {
        let path = match explicit {
            Some(p) => p.to_path_buf(),
            None => {
                let p = PathBuf::from(DEFAULT_PATH);
                if !p.exists() {
                    return Ok(HostConfig::default());
                }
                p
            }
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        Self::parse(&text, &path)
    }

    /// Parses configuration text; `path` is only used in messages.
    /// Errors: TOML syntax, unknown keys and bad values, with line and key.
    pub fn parse(text: &str, path: &Path) -> Result<HostConfig, ConfigError> {
        let mut cfg: HostConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            msg: e.to_string().trim_end().replace('\n', " "),
        })?;
        cfg.source = Some(path.to_path_buf());
        cfg.check()?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, msg: String| ConfigError::Invalid {
            path: self.source.clone().unwrap_or_default(),
            key: key.to_string(),
            msg,
        };
        if !self.data_root.is_absolute() {
            return Err(invalid("data_root", "must be an absolute path".into()));
        }
        if let Err((key, msg)) = self.userns.check().and(self.numa.check()) {
            return Err(invalid(key, msg));
        }
        if let Err((key, msg)) = self.io.check() {
            return Err(invalid(&key, msg));
        }
        Ok(())
    }

    /// The layer store root: `[image] store`, else `<data_root>/store`.
    pub fn store_root(&self) -> PathBuf {
        self.image
            .store
            .clone()
            .unwrap_or_else(|| self.data_root.join("store"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<HostConfig, ConfigError> {
        HostConfig::parse(t, Path::new("/etc/siloc/siloc.toml"))
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.data_root, PathBuf::from(DEFAULT_DATA_ROOT));
        assert_eq!(c.userns.default, "off");
        assert_eq!(c.userns.size, 65536);
        assert_eq!(c.userns.pool_dir, PathBuf::from("/run/siloc-idpool"));
        assert_eq!(c.store_root(), PathBuf::from("/var/lib/siloc/store"));
    }

    #[test]
    fn classes_parse_with_units() {
        let c = parse(
            "[io]\ndefault_class = \"be\"\n[io.class.be]\nwbps = \"50M\"\nrbps = 1024\nweight = 100\n",
        )
        .unwrap();
        let be = &c.io.class["be"];
        assert_eq!(be.wbps.as_ref().unwrap().bytes().unwrap(), 50 << 20);
        assert_eq!(be.rbps.as_ref().unwrap().bytes().unwrap(), 1024);
        assert_eq!(be.weight, Some(100));
        let c =
            parse("[io.class.lc]\nlatency_target = \"2ms\"\n[io.class.n]\nlatency_target = 750\n")
                .unwrap();
        assert_eq!(
            c.io.class["lc"].latency_target.as_ref().unwrap().micros(),
            Ok(2000)
        );
        assert_eq!(
            c.io.class["n"].latency_target.as_ref().unwrap().micros(),
            Ok(750)
        );
        let e = parse("[io.class.lc]\nlatency_target = \"soon\"\n").unwrap_err();
        assert!(e.to_string().contains("io.class.lc.latency_target"), "{e}");
        let e = parse("[io.class.lc]\nlatency_target = 0\n").unwrap_err();
        assert!(e.to_string().contains("io.class.lc.latency_target"), "{e}");
    }

    #[test]
    fn errors_name_line_and_key() {
        let e = parse("data_root = \"/x\"\n[userns]\nsizee = 3\n").unwrap_err();
        let s = e.to_string();
        assert!(s.contains("line 3") && s.contains("sizee"), "{s}");
        let e = parse("[io.class.x]\nwbps = \"fast\"\n").unwrap_err();
        assert!(e.to_string().contains("io.class.x.wbps"), "{e}");
        let e = parse("[io]\ndefault_class = \"nope\"\n").unwrap_err();
        assert!(e.to_string().contains("io.default_class"), "{e}");
        let e = parse("[userns]\ndefault = \"maybe\"\n").unwrap_err();
        assert!(e.to_string().contains("userns.default"), "{e}");
        let e = parse("[userns]\npool_start = 4294000000\npool_size = 1000000\n").unwrap_err();
        assert!(e.to_string().contains("userns.pool_size"), "{e}");
        let e = parse("[userns]\npool_dir = \"run/pool\"\n").unwrap_err();
        assert!(e.to_string().contains("userns.pool_dir"), "{e}");
        let e = parse("[numa]\ndefault = \"on\"\n").unwrap_err();
        assert!(e.to_string().contains("numa.default"), "{e}");
        assert_eq!(
            parse("[numa]\ndefault = \"node:1\"\n")
                .unwrap()
                .numa
                .default,
            "node:1"
        );
    }

    /// The default pool_dir is the one README's host configuration shows.
    #[test]
    fn the_default_pool_dir_is_the_documented_one() {
        let readme = include_str!("../README.md");
        let line = format!("pool_dir = \"{}\"", crate::userns::idpool::DEFAULT_POOL_DIR);
        assert!(readme.contains(&line), "README lacks {line}");
        assert_eq!(
            HostConfig::default().userns.pool_dir,
            PathBuf::from(crate::userns::idpool::DEFAULT_POOL_DIR)
        );
    }

    #[test]
    fn explicit_missing_file_is_an_error() {
        let e = HostConfig::load(Some(Path::new("/nonexistent/siloc.toml"))).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/siloc.toml"));
    }
}

//! `siloc image unpack`: an image from a layout into the store, its missing layers
//! unpacked in parallel by a bounded number of workers, with a progress bar on a
//! terminal (a line per layer otherwise).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::layout::{Image, LayerRef};
use super::store::{ImageRecord, Installed, LayerMeta, Store, StoreError};

/// How to unpack.
#[derive(Debug, Clone)]
pub struct UnpackOptions {
    /// The image's name in the store; default [`Image::default_name`].
    pub name: Option<String>,
    /// Workers unpacking layers at the same time (at least 1).
    pub jobs: usize,
}

/// What an unpack did.
#[derive(Debug, Clone)]
pub struct UnpackReport {
    pub record: ImageRecord,
    /// Layers unpacked now.
    pub unpacked: Vec<LayerMeta>,
    /// Layers (distinct diffIDs) that were already stored.
    pub present: usize,
    /// Whether the image record was written (new or changed).
    pub record_changed: bool,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// The default worker count: the CPUs available, at most 4 (unpacking is as much
/// disk-bound as CPU-bound, and other work shares the host).
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Unpacks `image` into `store`. Unpacking an image whose layers are all stored reads
/// no blob. Errors: the first layer that failed ([`StoreError`]); layers other
/// workers completed stay stored (each is whole and verified), none is partial.
pub fn unpack_image(
    store: &Store,
    image: &Image,
    opts: &UnpackOptions,
) -> Result<UnpackReport, StoreError> {
    let start = Instant::now();
    let name = opts.name.clone().unwrap_or_else(|| image.default_name());
    Store::check_name(&name)?;
    let _lock = store.lock(false)?;
    store.clean_tmp();
    let mut seen = BTreeSet::new();
    let distinct: Vec<&LayerRef> = image
        .layers
        .iter()
        .filter(|l| seen.insert(l.diff_id.clone()))
        .collect();
    let todo: VecDeque<&LayerRef> = distinct
        .iter()
        .copied()
        .filter(|l| !store.has_layer(&l.diff_id))
        .collect();
    let present = distinct.len() - todo.len();
    let total: u64 = todo.iter().map(|l| l.size).sum();
    let count = todo.len();
    let unpacked = if todo.is_empty() {
        Vec::new()
    } else {
        run_workers(store, todo, total, count, opts.jobs.max(1))?
    };
    let record = ImageRecord {
        name,
        manifest: image.manifest_digest.clone(),
        config_digest: image.config_digest.clone(),
        source: std::fs::canonicalize(&image.layout).unwrap_or_else(|_| image.layout.clone()),
        layers: image
            .layers
            .iter()
            .map(|l| format!("sha256:{}", l.diff_id))
            .collect(),
        config: image.config_json.clone(),
    };
    let record_changed = store.save_image(&record)?;
    Ok(UnpackReport {
        record,
        unpacked,
        present,
        record_changed,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn run_workers(
    store: &Store,
    todo: VecDeque<&LayerRef>,
    total: u64,
    count: usize,
    jobs: usize,
) -> Result<Vec<LayerMeta>, StoreError> {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let done = Mutex::new(Vec::new());
    let failed: Mutex<Option<StoreError>> = Mutex::new(None);
    let queue = Mutex::new(todo);
    let message = |n: usize| format!("unpacking layers {n}/{count}");
    bar.set_message(message(0));
    std::thread::scope(|s| {
        for _ in 0..jobs.min(count) {
            s.spawn(|| {
                loop {
                    if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
                        return;
                    }
                    let Some(layer) = queue.lock().ok().and_then(|mut q| q.pop_front()) else {
                        return;
                    };
                    let t = Instant::now();
                    let pb = bar.clone();
                    match store.install_layer(layer, move |n| pb.inc(n)) {
                        Ok(Installed::New(meta)) => {
                            say(
                                &bar,
                                &format!(
                                    "layer sha256:{} {} ({}) in {:.1}s",
                                    &layer.diff_id[..12],
                                    human_bytes(meta.content_bytes),
                                    layer.compression.name(),
                                    t.elapsed().as_secs_f64()
                                ),
                            );
                            if let Ok(mut d) = done.lock() {
                                d.push(meta);
                                bar.set_message(message(d.len()));
                            }
                        }
                        Ok(Installed::Present) => {}
                        Err(e) => {
                            if let Ok(mut f) = failed.lock() {
                                f.get_or_insert(e);
                            }
                        }
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok(done.into_inner().unwrap_or_default())
}

/// A progress line: above the bar on a terminal, on stderr otherwise.
fn say(bar: &ProgressBar, line: &str) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// Bytes for people: `1.5 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::layout::{self, LayoutRef};
    use crate::image::testkit::{self, Comp, Entry, Tar};

    fn layer(i: u8) -> Vec<u8> {
        let mut t = Tar::new();
        t.add([Entry::dir("d"), Entry::file(&format!("d/f{i}"), &[i; 3000])]);
        t.bytes()
    }

    /// A layout of five layers, the first twice (the same diffID once gzip, once
    /// zstd), then the others in all three compressions.
    fn layout(dir: &std::path::Path) -> layout::Image {
        let layers = vec![
            (layer(0), Comp::Gzip),
            (layer(1), Comp::Zstd),
            (layer(2), Comp::None),
            (layer(0), Comp::Zstd),
            (layer(3), Comp::Gzip),
        ];
        testkit::write_layout(dir, &layers, serde_json::json!({"Cmd": ["sh"]}), "v1");
        layout::open(&LayoutRef::parse(&format!("{}:v1", dir.display()))).unwrap()
    }

    fn root() -> bool {
        let r = nix::unistd::geteuid().is_root();
        if !r {
            eprintln!("SKIPPED import test: needs root (unpacking sets owners)");
        }
        r
    }

    #[test]
    fn a_name_the_store_cannot_hold_fails_before_any_layer_is_unpacked() {
        let d = tempfile::tempdir().unwrap();
        let img = layout(&d.path().join("img"));
        let store = Store::open(&d.path().join("store")).unwrap();
        // "" was saved as images/.json, which `ls`, `bundle` and `rm` never saw; a
        // long name failed only after every layer was unpacked.
        for name in [String::new(), "a".repeat(300)] {
            let opts = UnpackOptions {
                name: Some(name.clone()),
                jobs: 1,
            };
            let e = unpack_image(&store, &img, &opts).unwrap_err().to_string();
            assert!(e.contains("image name"), "{name:?}: {e}");
            assert!(store.layers().unwrap().is_empty(), "{name:?}");
            assert!(store.images().unwrap().is_empty(), "{name:?}");
        }
    }

    #[test]
    fn parallel_unpack_stores_each_layer_once_and_a_second_unpack_reads_nothing() {
        if !root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let img = layout(&d.path().join("img"));
        let store = Store::open(&d.path().join("store")).unwrap();
        let opts = UnpackOptions {
            name: None,
            jobs: 3,
        };
        let r = unpack_image(&store, &img, &opts).unwrap();
        assert_eq!((r.unpacked.len(), r.present), (4, 0));
        assert!(r.record_changed);
        assert_eq!(r.record.name, "img:v1");
        assert_eq!(r.record.layers.len(), 5);
        assert_eq!(store.layers().unwrap().len(), 4);
        let dirs = store.image_layers(&r.record).unwrap();
        assert_eq!(dirs.len(), 4);
        for (i, dir) in dirs.iter().enumerate() {
            // layer 0 is repeated: listed once, where it is topmost
            let want = [1, 2, 0, 3][i];
            assert_eq!(
                std::fs::read(dir.join(format!("d/f{want}"))).unwrap(),
                vec![want; 3000]
            );
        }
        // Without its layer blobs the image still "unpacks": nothing is read again.
        for l in &img.layers {
            let _ = std::fs::remove_file(&l.blob);
        }
        let again = unpack_image(&store, &img, &opts).unwrap();
        assert_eq!(
            (again.unpacked.len(), again.present, again.record_changed),
            (0, 4, false)
        );
        assert_eq!(
            std::fs::read_dir(store.root().join("tmp")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_digest_mismatch_stores_nothing() {
        if !root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let img = layout(&d.path().join("img"));
        let store = Store::open(&d.path().join("store")).unwrap();
        // One content byte of the uncompressed layer changes: the tar still reads,
        // only the digest tells.
        let bad = &img.layers[2];
        let mut b = std::fs::read(&bad.blob).unwrap();
        b[1024 + 100] ^= 0xff;
        std::fs::write(&bad.blob, b).unwrap();
        let opts = UnpackOptions {
            name: None,
            jobs: 1,
        };
        let e = unpack_image(&store, &img, &opts).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&bad.blob.display().to_string()) && msg.contains("nothing was stored"),
            "{msg}"
        );
        assert!(!store.has_layer(&bad.diff_id));
        assert!(
            store.images().unwrap().is_empty(),
            "no image record for a failed unpack"
        );
        assert_eq!(
            std::fs::read_dir(store.root().join("tmp")).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_diff_id_mismatch_stores_nothing() {
        if !root() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let mut img = layout(&d.path().join("img"));
        img.layers.truncate(1);
        img.layers[0].diff_id = "0".repeat(64);
        let store = Store::open(&d.path().join("store")).unwrap();
        let e = unpack_image(
            &store,
            &img,
            &UnpackOptions {
                name: None,
                jobs: 2,
            },
        )
        .unwrap_err();
        assert!(matches!(e, StoreError::DiffId { .. }), "{e}");
        assert!(store.layers().unwrap().is_empty());
        assert_eq!(
            std::fs::read_dir(store.root().join("tmp")).unwrap().count(),
            0
        );
    }

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}

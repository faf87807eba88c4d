//! `siloc image unpack|bundle|ls|rm`: OCI image layouts into the layer store, and
//! stored images into bundles (see crate::image).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use serde_json::json;

use super::Ctx;
use crate::image::bundle::{self, BundleOptions};
use crate::image::import::{self, UnpackOptions, human_bytes};
use crate::image::layout::{self, LayoutRef};
use crate::image::store::Store;

#[derive(clap::Args, Debug)]
pub(crate) struct ImageArgs {
    #[command(subcommand)]
    command: ImageCommand,
}

#[derive(Subcommand, Debug)]
enum ImageCommand {
    /// Unpack an OCI image layout's layers into the layer store (each layer once)
    Unpack(UnpackArgs),
    /// Write a bundle (config.json and an empty rootfs/) that runs a stored image
    Bundle(BundleArgs),
    /// List the stored images (or layers)
    Ls(LsArgs),
    /// Remove stored images, and the layers no remaining image uses
    Rm(RmArgs),
}

#[derive(clap::Args, Debug)]
struct StoreArg {
    /// Layer store directory [default: the config's [image] store, else <data_root>/store]
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct UnpackArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Name for the image in the store [default: the layout's ref name when it is a
    /// full reference, else <layout dir name>:<tag>]
    #[arg(long)]
    name: Option<String>,
    /// Layers unpacked at the same time [default: CPUs, at most 4]
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// OCI image layout directory, optionally with the tag to unpack (DIR:TAG)
    #[arg(value_name = "LAYOUT[:TAG]")]
    layout: String,
}

#[derive(clap::Args, Debug)]
struct BundleArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Allocate a terminal for the process (process.terminal) [default: no]
    #[arg(long, short = 't')]
    tty: bool,
    /// Per-container user namespace: auto (io.siloc.userns=auto) or off
    #[arg(long, default_value = "auto", value_parser = ["auto", "off"])]
    userns: String,
    /// Stored image: name, short name, or manifest digest (prefix)
    #[arg(value_name = "IMAGE")]
    image: String,
    /// Bundle directory to write (created if missing)
    #[arg(value_name = "BUNDLE")]
    bundle: PathBuf,
    /// Command replacing the image's Cmd (after --)
    #[arg(last = true, value_name = "ARGS")]
    args: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct LsArgs {
    #[command(flatten)]
    store: StoreArg,
    /// List layers (with the images and live containers using them) instead of images
    #[arg(long)]
    layers: bool,
    /// Output format: table or json
    #[arg(long, short = 'f', default_value = "table", value_parser = ["table", "json"])]
    format: String,
    /// Only names (or layer diffIDs)
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(clap::Args, Debug)]
struct RmArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Stored images to remove
    #[arg(required = true, value_name = "IMAGE")]
    images: Vec<String>,
}

/// Runs one `siloc image` command.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn image(ctx: &Ctx, a: ImageArgs) -> anyhow::Result<()> {
    match a.command {
        ImageCommand::Unpack(a) => unpack(ctx, a),
        ImageCommand::Bundle(a) => make_bundle(ctx, a),
        ImageCommand::Ls(a) => ls(ctx, a),
        ImageCommand::Rm(a) => rm(ctx, a),
    }
}

fn open_store(ctx: &Ctx, arg: &StoreArg) -> anyhow::Result<Store> {
    let root = match &arg.store {
        Some(s) => s.clone(),
        None => ctx.runtime()?.config.store_root(),
    };
    Ok(Store::open(&root)?)
}

fn unpack(ctx: &Ctx, a: UnpackArgs) -> anyhow::Result<()> {
    let image = layout::open(&LayoutRef::parse(&a.layout))?;
    let store = open_store(ctx, &a.store)?;
    let opts = UnpackOptions {
        name: a.name,
        jobs: a.jobs.unwrap_or_else(import::default_jobs),
    };
    let r = import::unpack_image(&store, &image, &opts)?;
    let size: u64 = r.unpacked.iter().map(|m| m.content_bytes).sum();
    let what = if r.unpacked.is_empty() {
        format!("all {} already stored", r.present)
    } else {
        format!(
            "{} unpacked ({}), {} already stored",
            r.unpacked.len(),
            human_bytes(size),
            r.present
        )
    };
    let n = r.record.layers.len();
    super::emit(&format!(
        "{} {}: {n} layer{}, {what}{} in {:.1}s",
        r.record.name,
        short(&r.record.manifest),
        if n == 1 { "" } else { "s" },
        if r.record_changed {
            ""
        } else {
            ", image unchanged"
        },
        r.seconds
    ))
}

fn make_bundle(ctx: &Ctx, a: BundleArgs) -> anyhow::Result<()> {
    let store = open_store(ctx, &a.store)?;
    let _lock = store.lock(false)?;
    let image = store.find_image(&a.image)?;
    let layers = store.image_layers(&image)?;
    let user_spec = image.config["config"]["User"].as_str().unwrap_or("");
    let user = crate::image::user::resolve(user_spec, &layers)
        .with_context(|| format!("image {}", image.name))?;
    let opts = BundleOptions {
        args: (!a.args.is_empty()).then_some(a.args),
        terminal: a.tty,
        userns: a.userns == "auto",
    };
    let spec = bundle::runtime_spec(super::spec::default_spec(), &image, &layers, &user, &opts)?;
    bundle::write(&a.bundle, &super::spec::to_tabbed_json(&spec)?)?;
    Ok(())
}

fn short(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("sha256:{}", &hex[..hex.len().min(12)])
}

fn ls(ctx: &Ctx, a: LsArgs) -> anyhow::Result<()> {
    let store = open_store(ctx, &a.store)?;
    let layers = store.layers()?;
    let images = store.images()?;
    if a.layers {
        return ls_layers(ctx, &store, &a, &layers, &images);
    }
    let size = |i: &crate::image::store::ImageRecord| -> u64 {
        i.layers
            .iter()
            .filter_map(|d| layers.get(d.strip_prefix("sha256:").unwrap_or(d)))
            .map(|m| m.content_bytes)
            .sum()
    };
    if a.quiet {
        for i in &images {
            super::emit(&i.name)?;
        }
        return Ok(());
    }
    if a.format == "json" {
        let v: Vec<_> = images
            .iter()
            .map(|i| {
                json!({"name": i.name, "manifest": i.manifest, "layers": i.layers,
                       "size": size(i), "source": i.source,
                       "layer_dirs": i.layers.iter()
                           .map(|d| store.layer_fs(d.strip_prefix("sha256:").unwrap_or(d)))
                           .collect::<Vec<_>>()})
            })
            .collect();
        return super::emit(&serde_json::to_string_pretty(&v)?);
    }
    let mut out = format!(
        "{:<40} {:<19} {:>6} {:>10}",
        "NAME", "MANIFEST", "LAYERS", "SIZE"
    );
    for i in &images {
        out.push_str(&format!(
            "\n{:<40} {:<19} {:>6} {:>10}",
            i.name,
            short(&i.manifest),
            i.layers.len(),
            human_bytes(size(i))
        ));
    }
    super::emit(&out)
}

fn ls_layers(
    ctx: &Ctx,
    store: &Store,
    a: &LsArgs,
    layers: &std::collections::BTreeMap<String, crate::image::store::LayerMeta>,
    images: &[crate::image::store::ImageRecord],
) -> anyhow::Result<()> {
    let used = store.layer_use(&ctx.root)?;
    let users_of = |hex: &str| -> Vec<&str> {
        images
            .iter()
            .filter(|i| {
                i.layers
                    .iter()
                    .any(|d| d.strip_prefix("sha256:") == Some(hex))
            })
            .map(|i| i.name.as_str())
            .collect()
    };
    if a.quiet {
        for m in layers.values() {
            super::emit(&m.diff_id)?;
        }
        return Ok(());
    }
    if a.format == "json" {
        let v: Vec<_> = layers
            .iter()
            .map(|(hex, m)| {
                json!({"diff_id": m.diff_id, "digest": m.digest, "media_type": m.media_type,
                       "size": m.content_bytes, "entries": m.entries, "path": store.layer_fs(hex),
                       "images": users_of(hex), "containers": used.get(hex).cloned().unwrap_or_default()})
            })
            .collect();
        return super::emit(&serde_json::to_string_pretty(&v)?);
    }
    let mut out = format!(
        "{:<19} {:>10} {:>8} {:>6} {:<20} PATH",
        "LAYER", "SIZE", "ENTRIES", "IMAGES", "CONTAINERS"
    );
    for (hex, m) in layers {
        let c = used
            .get(hex)
            .map(|v| v.join(","))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "\n{:<19} {:>10} {:>8} {:>6} {:<20} {}",
            short(&m.diff_id),
            human_bytes(m.content_bytes),
            m.entries,
            users_of(hex).len(),
            c,
            store.layer_fs(hex).display()
        ));
    }
    super::emit(&out)
}

fn rm(ctx: &Ctx, a: RmArgs) -> anyhow::Result<()> {
    let store = open_store(ctx, &a.store)?;
    let r = store.remove(&a.images, Path::new(&ctx.root))?;
    let mut out: Vec<String> = r
        .images
        .iter()
        .map(|i| format!("removed image {i}"))
        .collect();
    out.push(format!(
        "removed {} layers ({})",
        r.layers.len(),
        human_bytes(r.bytes)
    ));
    super::emit(&out.join("\n"))
}

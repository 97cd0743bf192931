//! Image folders as data (`aicf train --data DIR`), laid out as
//! torchvision's `ImageFolder` reads them: a subfolder per class, its
//! images (at any depth below it) the class's examples, the classes the
//! subfolders' names in sorted order. A folder holding `train/` and `val/`
//! (or `valid/`, `validation/`, `test/`), each with the class subfolders,
//! trains on the first and holds out the second, as ImageNet's layout and
//! most downloaded sets are split.
//!
//! Each image is decoded (PNG, JPEG, BMP, GIF's first frame, WebP, TIFF,
//! whatever its name's ending says: the bytes decide), converted to the
//! model's channels (1: luma; 3: RGB; 4: RGBA), resized to its height and
//! width where it differs (bilinear, as torchvision's `Resize((h, w))`,
//! said), and read as 0 to 1 (`ToTensor`'s scale). The model's data input
//! says how the values are laid out: `[C, H, W]` (PyTorch's), `[H, W, C]`
//! (TensorFlow's), `[H, W]`, or flat, `[H * W]` or `[3 * H * W]` (an MLP on
//! flattened images, channels first as `torch.flatten` leaves them).
//!
//! Predictions read every image under a folder, subfolders or not, in the
//! order of their paths; each prediction's row is named by its path.

use super::{Array, DataOptions, Input, Result, Role, Signature, bad, count, is_int};
use std::path::{Path, PathBuf};

/// The file endings read as images (in any case), as `ImageFolder`'s
/// `IMG_EXTENSIONS` (and JFIF's, PBM's and PNM's).
pub const EXTENSIONS: [&str; 13] =
    ["png", "jpg", "jpeg", "bmp", "gif", "webp", "tif", "tiff", "jfif", "ppm", "pgm", "pbm", "pnm"];

/// Folders below this depth are not walked (a link that loops).
const MOST_DEPTH: usize = 32;

/// The training folder of a split layout.
const TRAIN_FOLDERS: [&str; 2] = ["train", "training"];

/// The held-out folders of a split layout, in the order they are looked
/// for beside the training one (the first with class folders is held out).
const HELD_FOLDERS: [&str; 7] = ["val", "valid", "validation", "test", "testing", "dev", "eval"];

/// Checkpoint metadata: how a run read its image folder's images
/// (`8x8 gray images, channels first, pixels / 255 (0 to 1)`), for what
/// runs the model elsewhere (an exported ONNX graph) to feed them so.
pub const IMAGES_KEY: &str = "images";

/// Whether `path` is read as an image folder: a directory.
pub fn is_image_folder(path: &Path) -> bool {
    path.is_dir()
}

/// Whether `path` is read as images: a folder of them, or one.
pub fn is_images(path: &Path) -> bool {
    is_image_folder(path) || is_image(path)
}

/// How the model's data input takes an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// `[C, H, W]`, and flat inputs (channels first, as `torch.flatten`).
    ChannelsFirst,
    /// `[H, W, C]`.
    ChannelsLast,
}

/// The image the model's data input takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Form {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub layout: Layout,
}

impl Form {
    /// Of the model's data input (its shape without the batch's dimension).
    pub(super) fn of(name: &str, input: &Input) -> Result<Form> {
        let refused = || {
            bad(format!(
                "{name}: the model's input #0 is {}; images feed an input of images: [batch, C, H, W] (C 1, 3 or 4: \
                 gray, RGB, RGBA), [batch, H, W, C], [batch, H, W], or flat, [batch, H * W] (gray) or [batch, 3 * H \
                 * W] (RGB)",
                input.describe()
            ))
        };
        if is_int(input.dtype) {
            return Err(bad(format!(
                "{name}: the model's input #0 is {}, integers; an image folder's pixels are read as floats from 0 \
                 to 1",
                input.describe()
            )));
        }
        let channel = |c: usize| matches!(c, 1 | 3 | 4);
        let square = |n: usize| {
            let s = (n as f64).sqrt().round() as usize;
            (s > 0 && s * s == n).then_some(s)
        };
        let first = Layout::ChannelsFirst;
        let form = |channels, height, width, layout| Form { channels, height, width, layout };
        let f = match input.shape.get(1..).unwrap_or_default() {
            &[c, h, w] if channel(c) => form(c, h, w, first),
            &[h, w, c] if channel(c) => form(c, h, w, Layout::ChannelsLast),
            &[h, w] => form(1, h, w, first),
            &[d] => match (square(d), (d % 3 == 0).then(|| square(d / 3)).flatten()) {
                (Some(s), _) => form(1, s, s, first),
                (None, Some(s)) => form(3, s, s, first),
                _ => return Err(refused()),
            },
            _ => return Err(refused()),
        };
        if f.height == 0 || f.width == 0 {
            return Err(refused());
        }
        Ok(f)
    }

    fn per(&self) -> usize {
        self.channels * self.height * self.width
    }

    fn describe(&self) -> String {
        let kind = match self.channels {
            1 => "gray",
            3 => "RGB",
            _ => "RGBA",
        };
        format!("{}x{} {kind}", self.width, self.height)
    }

    /// How the model reads an image, for the checkpoint ([`IMAGES_KEY`]).
    fn record(&self) -> String {
        let order = match self.layout {
            Layout::ChannelsFirst => "channels first",
            Layout::ChannelsLast => "channels last",
        };
        let gray = if self.channels == 1 { ", colour as 0.299 R + 0.587 G + 0.114 B (PIL's L)" } else { "" };
        format!("{} images, {order}, pixels / 255 (0 to 1){gray}", self.describe())
    }
}

/// The images of a folder, sorted by path, with their classes.
struct Found {
    files: Vec<PathBuf>,
    /// Each file's class (none where predicting).
    labels: Vec<usize>,
    classes: Vec<String>,
    /// The held-out images (indices into `files`) of a split layout.
    held: Option<Vec<usize>>,
    notes: Vec<String>,
}

fn hidden(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Whether `path`'s name ends as an image file's does.
pub fn is_image(path: &Path) -> bool {
    path.extension().is_some_and(|e| EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// A folder's entries (hidden ones left out: `.ipynb_checkpoints`,
/// `.DS_Store`), sorted by name: (folders, files).
fn entries(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let read = |e: std::io::Error| bad(format!("{}: {e}", dir.display()));
    let mut folders = Vec::new();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if hidden(&path) {
            continue;
        }
        // (Links are followed, as ImageFolder does; a loop ends at the depth
        // limit.)
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => folders.push(path),
            Ok(m) if m.is_file() => files.push(path),
            // A pipe named as an image would be read forever.
            Ok(_) if is_image(&path) => {
                return Err(bad(format!(
                    "{}: not a regular file (a pipe, socket or device): an image is read from a file",
                    path.display()
                )));
            }
            Ok(_) => files.push(path),
            Err(e) if is_image(&path) => {
                return Err(bad(format!("{}: {e} (a link to a file that is not there?)", path.display())));
            }
            Err(_) => files.push(path),
        }
    }
    folders.sort();
    files.sort();
    Ok((folders, files))
}

/// Every image under `dir`, at any depth, sorted by path; `others` counts
/// the files that are not images.
fn walk(dir: &Path, depth: usize, images: &mut Vec<PathBuf>, others: &mut Vec<PathBuf>) -> Result<()> {
    if depth > MOST_DEPTH {
        return Err(bad(format!(
            "{}: folders nested deeper than {MOST_DEPTH} (a link to a folder above it?)",
            dir.display()
        )));
    }
    let (folders, files) = entries(dir)?;
    for f in files {
        if is_image(&f) { images.push(f) } else { others.push(f) }
    }
    for d in folders {
        walk(&d, depth + 1, images, others)?;
    }
    Ok(())
}

/// The path of `file` below `root`, with `/` between its parts.
fn relative(root: &Path, file: &Path) -> String {
    // (Images given themselves are named as given.)
    match file.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty()) {
        Some(rel) => {
            rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
        }
        None => file.display().to_string(),
    }
}

/// A note on files that are not images, skipped.
fn skipped(root: &Path, others: &[PathBuf]) -> Option<String> {
    let first = others.first()?;
    Some(format!(
        "{}: {} not read: not an image by its name's ending (.{}; e.g. {})",
        root.display(),
        count(others.len(), "file is", "files are"),
        EXTENSIONS.join(", ."),
        relative(root, first)
    ))
}

/// A note on the images directly in `folder` (of `root`), beside its class
/// folders: no class is theirs, so they are not read.
fn loose_images(root: &Path, folder: &Path) -> Result<Option<String>> {
    let (_, files) = entries(folder)?;
    let loose: Vec<&PathBuf> = files.iter().filter(|f| is_image(f)).collect();
    Ok(loose.first().map(|first| {
        format!(
            "{}: {} beside the class folders of {}/ not read: an image's class is the folder it is in (e.g. {})",
            root.display(),
            count(loose.len(), "image", "images"),
            relative(root, folder),
            relative(root, first)
        )
    }))
}

/// The class subfolders of `dir` and the images below each: (name, images).
fn class_folders(dir: &Path, others: &mut Vec<PathBuf>) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let (folders, _) = entries(dir)?;
    let mut classes = Vec::new();
    for f in folders {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut images = Vec::new();
        walk(&f, 1, &mut images, others)?;
        // (By path: a folder's files and its subfolders' interleave as
        // their names do.)
        images.sort();
        classes.push((name, images));
    }
    Ok(classes)
}

/// A split layout: its training folder, the held-out one (none where no
/// folder beside it holds class folders), and what is said of the rest.
struct Split {
    train: PathBuf,
    held: Option<PathBuf>,
    notes: Vec<String>,
}

fn named_as(folder: &Path, names: &[&str]) -> bool {
    folder.file_name().is_some_and(|n| names.iter().any(|w| n.to_string_lossy().eq_ignore_ascii_case(w)))
}

/// The split layout of `dir`, where it is one: a training folder
/// ([`TRAIN_FOLDERS`]) of class folders, and beside it a held-out one
/// ([`HELD_FOLDERS`]).
fn split_folders(dir: &Path) -> Result<Option<Split>> {
    let (folders, _) = entries(dir)?;
    // (A class named `train`, its images directly in it, is no split.)
    let mut train = None;
    for f in folders.iter().filter(|f| named_as(f, &TRAIN_FOLDERS)) {
        if !entries(f)?.0.is_empty() {
            train = Some(f.clone());
            break;
        }
    }
    let Some(train) = train else { return Ok(None) };
    let name = dir.display();
    let mut notes = Vec::new();
    let mut held = None;
    for want in HELD_FOLDERS {
        for f in folders.iter().filter(|f| named_as(f, &[want])) {
            let (classes, files) = entries(f)?;
            let shown = relative(dir, f);
            if classes.is_empty() {
                // Kaggle's test/ of unlabelled images: nothing to score.
                let images = files.iter().filter(|p| is_image(p)).count();
                notes.push(format!(
                    "{name}: {shown}/ holds {} and no class folders: not read (`aicf predict --data {}` predicts them)",
                    count(images, "image", "images"),
                    f.display()
                ));
            } else if held.is_none() {
                held = Some(f.clone());
            } else {
                notes.push(format!(
                    "{name}: {shown}/ not read ({}/ is held out)",
                    held.as_deref().map(|h| relative(dir, h)).unwrap_or_default()
                ));
            }
        }
    }
    for f in &folders {
        if *f != train && !named_as(f, &HELD_FOLDERS) {
            let ends = held.as_deref().map(|h| format!(" and {}/", relative(dir, h))).unwrap_or_default();
            notes.push(format!("{name}: {}/ beside {}/{ends} not read", relative(dir, f), relative(dir, &train)));
        }
    }
    Ok(Some(Split { train, held, notes }))
}

/// What a class layout's folders look like where each holds no images of
/// its own, only folders.
enum Nested {
    /// A split whose folders are not named as one (`Training2/0`,
    /// `seg_train/...`): read as classes, it would train on the split's
    /// names; refused.
    Split(String),
    /// Folders whose subfolders' names recur (`cat/day`, `dog/day`): classes
    /// with a shared structure, or a split; read as classes, said.
    Maybe(String),
}

/// Whether the folders of a class layout in `dir` look like a split rather
/// than classes: every folder holds folders and no images of its own, and
/// either a name says split (train, test, val, dev, eval), or there is one
/// folder of several, or their folders' names recur. Class folders that
/// each keep their images in one folder (Tiny ImageNet's `n01/images/`)
/// are classes.
fn nested(dir: &Path, folders: &[PathBuf]) -> Result<Option<Nested>> {
    if folders.is_empty() {
        return Ok(None);
    }
    let mut inner: Vec<Vec<String>> = Vec::new();
    for f in folders {
        let (sub, files) = entries(f)?;
        if sub.is_empty() || files.iter().any(|p| is_image(p)) {
            return Ok(None);
        }
        inner.push(sub.iter().filter_map(|s| s.file_name()).map(|n| n.to_string_lossy().into_owned()).collect());
    }
    let split_word = folders.iter().any(|f| {
        let n = f.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        ["train", "test", "val", "dev", "eval"].iter().any(|w| n.contains(w))
    });
    let several = inner.iter().all(|names| names.len() >= 2);
    let recur = several && inner[1..].iter().any(|names| names.iter().any(|n| inner[0].contains(n)));
    let one = folders.len() == 1 && several;
    if !(split_word || one || recur) {
        return Ok(None);
    }
    let shown: Vec<String> = folders.iter().take(3).map(|f| format!("{}/", relative(dir, f))).collect();
    let sub: Vec<&str> = inner[0].iter().take(4).map(String::as_str).collect();
    let what = format!(
        "{}: {} {} no images of {}own, only folders ({}{})",
        dir.display(),
        shown.join(", "),
        if folders.len() == 1 { "holds" } else { "hold" },
        if folders.len() == 1 { "its " } else { "their " },
        sub.join(", "),
        if inner[0].len() > 4 { ", ..." } else { "" },
    );
    let names = format!("{}/ and the held-out one {}/", TRAIN_FOLDERS.join("/ or "), HELD_FOLDERS.join("/, "));
    // The folder to give alone: the one named for training (Intel's
    // seg_train/, not seg_pred/ of unlabelled images), through folders
    // that hold one folder alone (seg_train/seg_train/).
    let training = folders
        .iter()
        .find(|f| f.file_name().is_some_and(|n| n.to_string_lossy().to_lowercase().contains("train")))
        .unwrap_or(&folders[0]);
    let mut alone = training.clone();
    for _ in 0..4 {
        match entries(&alone)? {
            (sub, files) if sub.len() == 1 && !files.iter().any(|p| is_image(p)) => alone = sub[0].clone(),
            _ => break,
        }
    }
    Ok(Some(if split_word || one {
        Nested::Split(format!(
            "{what}: a split? Its folders would be read as classes: name the training one {names}; or give {}--data \
             {}",
            if folders.len() == 1 { "" } else { "the training one alone, " },
            alone.display()
        ))
    } else {
        Nested::Maybe(format!(
            "{what}: read as {} classes; if they are a split, name the training one {names}",
            folders.len()
        ))
    }))
}

/// Finds the images of `dir` and their classes: `trained` the classes of
/// the checkpoint's run (labels are read by their names). A split layout's
/// held-out folder is held out where `options` holds any out (else it
/// trains, or is scored, with the rest).
fn find(dir: &Path, options: &DataOptions, trained: Option<&[String]>, outputs: Option<usize>) -> Result<Found> {
    let (predicting, starting, split) = (options.predicting, options.starting, options.val_split > 0.0);
    let name = dir.display().to_string();
    let mut others = Vec::new();
    let mut notes = Vec::new();
    if predicting {
        let mut files = Vec::new();
        walk(dir, 0, &mut files, &mut others)?;
        files.sort();
        if files.is_empty() {
            return Err(bad(format!("{name}: no images in it or its subfolders (.{})", EXTENSIONS.join(", ."))));
        }
        notes.extend(skipped(dir, &others));
        let labels = vec![0; files.len()];
        return Ok(Found { files, labels, classes: Vec::new(), held: None, notes });
    }
    let layout = "an image folder holds a subfolder per class, its images the class's examples (DIR/cat/1.png, \
                  DIR/dog/2.png), as torchvision's ImageFolder reads; or DIR/train and DIR/val, each with a \
                  subfolder per class";
    let (mut parts, split_names) = match split_folders(dir)? {
        Some(Split { train, held: Some(held), notes: said }) => {
            notes.extend(said);
            for part in [&train, &held] {
                notes.extend(loose_images(dir, part)?);
            }
            let t = class_folders(&train, &mut others)?;
            let h = class_folders(&held, &mut others)?;
            let names = (relative(dir, &train), relative(dir, &held));
            (vec![t, h], Some(names))
        }
        // A training folder alone: its images, some held out as --val-split
        // says.
        Some(Split { train, held: None, notes: said }) => {
            notes.extend(said);
            notes.extend(loose_images(dir, &train)?);
            if split {
                notes.push(format!(
                    "{name}: no folder of classes beside {}/ to hold out: --val-split's fraction of its images is held out",
                    relative(dir, &train)
                ));
            }
            (vec![class_folders(&train, &mut others)?], None)
        }
        None => {
            let (folders, _) = entries(dir)?;
            match nested(dir, &folders)? {
                Some(Nested::Split(why)) => return Err(bad(why)),
                Some(Nested::Maybe(said)) => notes.push(said),
                None => {}
            }
            (vec![class_folders(dir, &mut others)?], None)
        }
    };
    // Images beside the class folders have no class: not read, and said.
    let (_, loose) = entries(dir)?;
    let loose: Vec<&PathBuf> = loose.iter().filter(|f| is_image(f)).collect();
    if parts[0].is_empty() {
        let why = if loose.is_empty() {
            "no subfolders".to_string()
        } else {
            format!(
                "{} and no subfolders (a flat folder is read for predictions, `aicf predict`)",
                count(loose.len(), "image", "images")
            )
        };
        return Err(bad(format!("{name}: {why}: {layout}")));
    }
    if let Some(first) = loose.first() {
        notes.push(format!(
            "{name}: {} beside the class folders not read: an image's class is the folder it is in (e.g. {})",
            count(loose.len(), "image", "images"),
            relative(dir, first)
        ));
    }
    // The classes: the checkpoint's, by name. Else the training folders'
    // names, in ImageFolder's order (sorted by name), or, where every one is
    // a number, in the numbers' order (folder 10 after folder 9, not after
    // folder 1: 0 to 10 are classes 0 to 10). A checkpoint whose run read
    // numbered labels (a table's) reads numbered folders as those numbers.
    let number = |n: &str| n.parse::<usize>().ok().filter(|_| n.bytes().all(|b| b.is_ascii_digit()));
    let names: Vec<&String> = parts[0].iter().map(|(n, _)| n).collect();
    let numbered = names.iter().all(|n| number(n).is_some());
    let (classes, by_number): (Vec<String>, bool) = match trained {
        Some(t) => (t.to_vec(), false),
        None if !starting => {
            let all: Vec<&String> = parts.iter().flatten().map(|(n, _)| n).collect();
            if let Some(other) = all.iter().find(|n| number(n).is_none()) {
                return Err(bad(format!(
                    "{name}: the folder '{other}' is no class index, and the checkpoint's run read its labels as \
                     numbers (0, 1, ...): folders named by those numbers feed it (a run that starts reads classes \
                     by name)"
                )));
            }
            let most = all.iter().filter_map(|n| number(n)).max().unwrap_or(0);
            if let Some(c) = outputs.filter(|&c| most >= c) {
                return Err(bad(format!(
                    "{name}: the folder '{most}' is class {most}, and the model's output has {c} classes (0 to {})",
                    c.saturating_sub(1)
                )));
            }
            ((0..=most).map(|i| i.to_string()).collect(), true)
        }
        None if numbered => {
            let mut sorted: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            sorted.sort_by_key(|n| number(n));
            if sorted.iter().zip(&names).any(|(a, b)| a != *b) {
                let as_text: Vec<&str> = names.iter().take(3).map(|n| n.as_str()).collect();
                notes.push(format!(
                    "{name}: the class folders are numbers, read in their order (class 0 is '{}', class {} is \
                     '{}'); torchvision's ImageFolder sorts them as text ({}, ...)",
                    sorted[0],
                    sorted.len() - 1,
                    sorted[sorted.len() - 1],
                    as_text.join(", ")
                ));
            }
            (sorted, false)
        }
        None => (names.iter().map(|n| n.to_string()).collect(), false),
    };
    let mut files = Vec::new();
    let mut labels = Vec::new();
    let mut held = Vec::new();
    for (k, part) in parts.iter_mut().enumerate() {
        for (class, images) in part.iter_mut() {
            let found = if by_number { number(class) } else { classes.iter().position(|c| c == class) };
            let Some(label) = found else {
                let whose = if trained.is_some() {
                    "the classes the checkpoint's run trained on".to_string()
                } else {
                    format!("the classes of {}/", split_names.as_ref().map_or("train", |(t, _)| t.as_str()))
                };
                let folder = match &split_names {
                    Some((t, h)) => format!("{}/{class}", if k == 0 { t } else { h }),
                    None => class.clone(),
                };
                return Err(bad(format!("{name}: the folder '{folder}' is not among {whose}: {}", classes.join(", "))));
            };
            if images.is_empty() {
                let folder = match &split_names {
                    Some((t, h)) => format!("{}/{class}", if k == 0 { t } else { h }),
                    None => class.clone(),
                };
                return Err(bad(format!(
                    "{name}: the class folder '{folder}' holds no images (.{}): remove it, or it is a class no \
                     example shows",
                    EXTENSIONS.join(", .")
                )));
            }
            for f in images.drain(..) {
                if k == 1 && split {
                    held.push(files.len());
                }
                files.push(f);
                labels.push(label);
            }
        }
    }
    notes.extend(skipped(dir, &others));
    if let Some((t, h)) = &split_names {
        notes.push(if split {
            format!(
                "{name}: trains on {t}/ and holds out {h}/ ({}; the folder's split, not --val-split's)",
                count(held.len(), "image", "images")
            )
        } else {
            format!("{name}: {t}/ and {h}/ read together, none held out")
        });
    }
    // The held-out images in a seeded order, not class by class: a model
    // whose ops fix its batch scores whole batches alone, and would leave
    // out the last classes' images.
    let mut state = options.seed ^ 0x9E37_79B9_7F4A_7C15;
    super::shuffle(&mut held, &mut state);
    Ok(Found { files, labels, classes, held: (split && split_names.is_some()).then_some(held), notes })
}

/// Reads `file` as `form` asks: its values in the input's order, 0 to 1;
/// `Some((w, h))` where it was resized from `w` x `h`, and whether it had
/// colour that a gray input dropped.
fn decode(file: &Path, form: Form) -> std::result::Result<(Vec<f32>, Option<(u32, u32)>, bool), String> {
    // (On one line: a decoder's message may hold a line break.)
    let said = |e: &dyn std::fmt::Display| e.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
    let reader = image::ImageReader::open(file).map_err(|e| said(&e))?;
    let reader = reader.with_guessed_format().map_err(|e| said(&e))?;
    let mut img = reader.decode().map_err(|e| said(&e))?;
    let (w, h) = (img.width(), img.height());
    if w == 0 || h == 0 {
        return Err(format!("{w} x {h} pixels: no image"));
    }
    let resized = (w as usize != form.width || h as usize != form.height).then_some((w, h));
    if resized.is_some() {
        img = img.resize_exact(form.width as u32, form.height as u32, image::imageops::FilterType::Triangle);
    }
    let colour = img.color().has_color();
    let pixels: Vec<f32> = match form.channels {
        1 if !colour => img.to_luma32f().into_raw(),
        // Colour to gray as PIL's convert("L") (torchvision's Grayscale):
        // ITU-R 601's weights, not the image crate's (Rec. 709's).
        1 => img.to_rgb32f().into_raw().chunks(3).map(|p| GRAY[0] * p[0] + GRAY[1] * p[1] + GRAY[2] * p[2]).collect(),
        3 => img.to_rgb32f().into_raw(),
        _ => img.to_rgba32f().into_raw(),
    };
    let c = form.channels;
    let values = match form.layout {
        Layout::ChannelsLast => pixels,
        Layout::ChannelsFirst => {
            let plane = form.height * form.width;
            let mut v = vec![0f32; pixels.len()];
            for (i, px) in pixels.chunks(c).enumerate() {
                for (k, &p) in px.iter().enumerate() {
                    v[k * plane + i] = p;
                }
            }
            v
        }
    };
    Ok((values, resized, colour && c == 1))
}

/// The weights of red, green and blue in a gray image's value (PIL's `L`).
const GRAY: [f32; 3] = [0.299, 0.587, 0.114];

/// Decodes every file, on the machine's cores: the values of all, in order.
fn decode_all(root: &Path, files: &[PathBuf], form: Form) -> Result<(Vec<f64>, Vec<String>)> {
    let per = form.per();
    // (Each value as f64, beside its decoded f32 until all are in.)
    let bytes = (files.len() as u64).saturating_mul(per as u64).saturating_mul(12);
    aicf_runtime::host::check_memory(&format!("the images of {}", root.display()), bytes)
        .map_err(|e| bad(e.to_string()))?;
    let mut values = Vec::new();
    let too_many = || {
        bad(format!("{}: {} of {} do not fit in memory", root.display(), count(files.len(), "image", "images"), per))
    };
    values.try_reserve_exact(files.len().checked_mul(per).ok_or_else(too_many)?).map_err(|_| too_many())?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let chunk = files.len().div_ceil(threads).max(1);
    type Decoded = std::result::Result<(Vec<f32>, Option<(u32, u32)>, bool), String>;
    let parts: Vec<Vec<Decoded>> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(|f| decode(f, form)).collect::<Vec<_>>()))
            .collect();
        // (A decoder that panicked fails each file of its chunk, in place.)
        handles
            .into_iter()
            .zip(files.chunks(chunk))
            .map(|(h, part)| {
                h.join().unwrap_or_else(|_| part.iter().map(|_| Err("its decoder panicked".into())).collect())
            })
            .collect()
    });
    // (How many were resized, and the first of them with its size.)
    let mut resized = 0;
    let mut first_resized = None;
    let mut gray = None;
    let mut at = 0;
    // Every image that does not read is counted, the first named with why.
    let mut failed: Vec<(&Path, String)> = Vec::new();
    for decoded in parts.into_iter().flatten() {
        let file = files.get(at).map(PathBuf::as_path).unwrap_or(root);
        at += 1;
        let (v, was, colour) = match decoded {
            Ok(d) => d,
            Err(e) => {
                failed.push((file, e));
                continue;
            }
        };
        if let Some(size) = was {
            resized += 1;
            first_resized = first_resized.or(Some((file, size)));
        }
        if colour && gray.is_none() {
            gray = Some(file);
        }
        values.extend(v.into_iter().map(f64::from));
    }
    if let Some((file, why)) = failed.first() {
        let more = match &failed[1..] {
            [] => String::new(),
            rest => format!(
                "; and {} more that do not read ({}{})",
                rest.len(),
                rest.iter().take(3).map(|(f, _)| relative(root, f)).collect::<Vec<_>>().join(", "),
                if rest.len() > 3 { ", ..." } else { "" }
            ),
        };
        return Err(bad(format!("{}: not an image this reads ({why}){more}", file.display())));
    }
    if at != files.len() {
        return Err(bad(format!("{}: decoding its images stopped (a decoder panicked)", root.display())));
    }
    let mut notes = Vec::new();
    if let Some((file, (w, h))) = first_resized {
        notes.push(format!(
            "{}: {} of {} not {}x{} as the model takes them (e.g. {}, {w}x{h}): resized (bilinear, the aspect ratio \
             not kept)",
            root.display(),
            count(resized, "image", "images"),
            files.len(),
            form.width,
            form.height,
            relative(root, file)
        ));
    }
    if let Some(file) = gray {
        notes.push(format!(
            "{}: colour images (e.g. {}) read as gray (luma): the model takes 1 channel",
            root.display(),
            relative(root, file)
        ));
    }
    Ok((values, notes))
}

/// The mean and deviation of each channel of `values` (images of `form`)
/// over the examples `rows`, as per-element statistics (each pixel of a
/// channel its channel's): torchvision's `Normalize(mean, std)`; and the
/// channels' own (mean, deviation).
pub(super) fn channel_stats(values: &[f64], form: Form, rows: &[usize]) -> (super::Standardization, Vec<(f64, f64)>) {
    let (c, plane) = (form.channels, form.height * form.width);
    let per = c * plane;
    let channel = |i: usize| match form.layout {
        Layout::ChannelsFirst => i / plane.max(1),
        Layout::ChannelsLast => i % c.max(1),
    };
    let mut sum = vec![0f64; c];
    let mut squares = vec![0f64; c];
    for &r in rows {
        for (i, v) in values[r * per..(r + 1) * per].iter().enumerate() {
            sum[channel(i)] += v;
            squares[channel(i)] += v * v;
        }
    }
    let n = (rows.len() * plane).max(1) as f64;
    let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
    let std: Vec<f64> = squares
        .iter()
        .zip(&mean)
        .map(|(q, m)| (q / n - m * m).max(0.0).sqrt())
        .map(|d| if d > 0.0 && d.is_finite() { d } else { 1.0 })
        .collect();
    let each = (0..per).map(channel);
    let stats =
        super::Standardization { mean: each.clone().map(|k| mean[k]).collect(), std: each.map(|k| std[k]).collect() };
    (stats, mean.into_iter().zip(std).collect())
}

/// What an image folder gives the data loader.
pub(super) struct Loaded {
    pub arrays: Vec<Array>,
    /// The fixed split of a split layout: (training, held-out) examples.
    pub split: Option<(Vec<usize>, Vec<usize>)>,
    pub classes: Vec<String>,
    /// Each example's path below the folder.
    pub names: Vec<String>,
    pub notes: Vec<String>,
    pub description: String,
    /// [`Form::record`].
    pub form: String,
    pub shape: Form,
}

/// Reads the image folder `dir` for a model of signature `sig`.
/// `paths`: the folder, or (predicting) image files themselves.
pub(super) fn load(paths: &[PathBuf], sig: &Signature, options: &DataOptions) -> Result<Loaded> {
    let Some(dir) = paths.first().map(PathBuf::as_path) else { return Err(bad("no data file given")) };
    let name = dir.display().to_string();
    let fed = sig.fed();
    let data: Vec<&&Input> = fed.iter().filter(|i| i.role == Role::Data).collect();
    let targets: Vec<&&Input> = fed.iter().filter(|i| i.role == Role::Target).collect();
    let ([x], [y]) = (&data[..], &targets[..]) else {
        return Err(bad(format!(
            "{name}: an image folder feeds a model of one data input (the images) and one target (their classes); \
             this one takes {} and {}",
            count(data.len(), "data input", "data inputs"),
            count(targets.len(), "target", "targets")
        )));
    };
    let form = Form::of(&name, x)?;
    let trained: Option<Vec<String>> = match &options.class_names {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| bad(format!("{name}: the checkpoint's {} does not read ({e})", super::CLASSES_KEY)))?,
        ),
        None => None,
    };
    if !options.predicting && sig.classes().is_none() {
        return Err(bad(format!(
            "{name}: an image folder's labels are classes (its subfolders); the model's @loss is no cross-entropy \
             over classes (its target is {}): give its targets as arrays (.npy, .safetensors)",
            y.describe()
        )));
    }
    let found = if is_image_folder(dir) {
        find(dir, options, trained.as_deref(), sig.classes())?
    } else if options.predicting {
        Found {
            files: paths.to_vec(),
            labels: vec![0; paths.len()],
            classes: Vec::new(),
            held: None,
            notes: Vec::new(),
        }
    } else {
        return Err(bad(format!(
            "{name}: an image alone has no class to train or score on: give a folder of class folders (DIR/cat/1.png, \
             DIR/dog/2.png); `aicf predict` reads images alone"
        )));
    };
    let n = found.files.len();
    if let Some(c) = sig.classes()
        && found.classes.len() > c
    {
        return Err(bad(format!(
            "{name}: {} ({}, ...), and the model's output has {c}: give it an output per class",
            count(found.classes.len(), "class folder", "class folders"),
            found.classes.iter().take(4).cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let (values, decode_notes) = decode_all(dir, &found.files, form)?;
    let mut shape = vec![n];
    shape.extend(&x.shape[1..]);
    let mut arrays = vec![Array { name: name.clone(), key: None, shape, values, bytes: false }];
    if !options.predicting {
        let want = &y.shape[1..];
        let labels: Vec<f64> = found.labels.iter().map(|&l| l as f64).collect();
        // A float target of a class's width: one-hot rows.
        let (shape, values) = match (want, sig.classes()) {
            (&[c], Some(classes)) if !is_int(y.dtype) && c == classes && c > 1 => {
                let mut v = vec![0.0; n * c];
                for (r, &l) in found.labels.iter().enumerate() {
                    v[r * c + l] = 1.0;
                }
                (vec![n, c], v)
            }
            _ => (std::iter::once(n).chain(want.iter().copied()).collect::<Vec<_>>(), labels),
        };
        if shape.iter().product::<usize>() != values.len() {
            return Err(bad(format!(
                "{name}: the model's target is {}; an image folder gives a class per image",
                y.describe()
            )));
        }
        arrays.push(Array { name: format!("{name} (the class folders)"), key: None, shape, values, bytes: false });
    }
    // (Both in a seeded order, as a table's split is: the probe batch a
    // policy checks rewrites on is the first training examples.)
    let split = found.held.map(|held| {
        let mut is_held = vec![false; n];
        held.iter().for_each(|&h| is_held[h] = true);
        let mut train: Vec<usize> = (0..n).filter(|&i| !is_held[i]).collect();
        let mut state = options.seed ^ 0x2545_F491_4F6C_DD1D;
        super::shuffle(&mut train, &mut state);
        (train, held)
    });
    let names: Vec<String> = found.files.iter().map(|f| relative(dir, f)).collect();
    let mut notes = found.notes;
    notes.extend(decode_notes);
    let classes_text = if found.classes.is_empty() {
        String::new()
    } else {
        let shown: Vec<String> = found.classes.iter().take(6).enumerate().map(|(i, c)| format!("{c} = {i}")).collect();
        let more = if found.classes.len() > 6 { ", ...".to_string() } else { String::new() };
        format!(" of {} ({}{more})", count(found.classes.len(), "class", "classes"), shown.join(", "))
    };
    let description = format!("{}{classes_text}, {} ({name})", count(n, "image", "images"), form.describe());
    Ok(Loaded { arrays, split, classes: found.classes, names, notes, description, form: form.record(), shape: form })
}

/// The hash of an image folder's contents: every file's path below it and
/// bytes (renamed or edited images are other data).
pub fn folder_hash(dir: &Path) -> std::io::Result<String> {
    // The images a run reads (an unlabelled test/ beside train/, which it
    // does not, may gain files); else, a folder to predict from, all.
    let reading = DataOptions { starting: true, ..DataOptions::default() };
    let files = match find(dir, &reading, None, None) {
        Ok(found) => found.files,
        Err(_) => {
            let (mut files, mut others) = (Vec::new(), Vec::new());
            walk(dir, 0, &mut files, &mut others).map_err(|e| std::io::Error::other(e.to_string()))?;
            files.sort();
            files
        }
    };
    let mut listing = String::new();
    for f in &files {
        let hash = aicf_runtime::artifact::file_hash(f)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", f.display())))?;
        listing.push_str(&format!("{}\t{hash}\n", relative(dir, f)));
    }
    aicf_runtime::artifact::reader_hash(listing.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aicf_runtime::artifact::DType;

    fn input(shape: &[usize]) -> Input {
        Input { shape: shape.to_vec(), dtype: DType::F32, role: Role::Data, indexes: None, fill: None, name: None }
    }

    #[test]
    fn forms_follow_the_input_shape() {
        let f = |s: &[usize]| Form::of("d", &input(s)).map(|f| (f.channels, f.height, f.width, f.layout));
        use Layout::*;
        assert_eq!(f(&[8, 3, 32, 24]).ok(), Some((3, 32, 24, ChannelsFirst)));
        assert_eq!(f(&[8, 28, 28, 1]).ok(), Some((1, 28, 28, ChannelsLast)));
        assert_eq!(f(&[8, 28, 28]).ok(), Some((1, 28, 28, ChannelsFirst)));
        assert_eq!(f(&[8, 64]).ok(), Some((1, 8, 8, ChannelsFirst)));
        assert_eq!(f(&[8, 3 * 16 * 16]).ok(), Some((3, 16, 16, ChannelsFirst)));
        let refused = f(&[8, 10]).expect_err("10 values are no image");
        assert!(refused.to_string().contains("[8, 10] f32"), "{refused}");
        assert!(f(&[8, 2, 5, 5, 5]).is_err());
    }

    /// A fresh folder under the system's temporary one.
    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("aicf-images-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary folder");
        dir
    }

    fn gray(path: &Path, level: u8) {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("class folder");
        image::GrayImage::from_pixel(2, 2, image::Luma([level])).save(path).expect("png");
    }

    /// The class of the image found in `dir`'s folder `name`.
    fn label_of(found: &Found, dir: &Path, name: &str) -> usize {
        let at = found.files.iter().position(|f| f.starts_with(dir.join(name))).expect("an image of the folder");
        found.labels[at]
    }

    fn starting() -> DataOptions {
        DataOptions { starting: true, ..DataOptions::default() }
    }

    #[test]
    fn numbered_folders_are_their_numbers_and_named_ones_sorted() {
        let dir = folder("numbered");
        for class in ["0", "1", "2", "10"] {
            gray(&dir.join(class).join("a.png"), 0);
        }
        let found = find(&dir, &starting(), None, None).expect("a folder of classes");
        // (ImageFolder's order would make folder 10 class 2.)
        assert_eq!(found.classes, ["0", "1", "2", "10"]);
        assert_eq!((label_of(&found, &dir, "2"), label_of(&found, &dir, "10")), (2, 3));
        // A checkpoint's classes decide, by name, whatever the folder holds.
        let trained = ["10".to_string(), "2".to_string(), "1".to_string(), "0".to_string()];
        let found = find(&dir, &DataOptions::default(), Some(&trained), None).expect("the checkpoint's classes");
        assert_eq!((label_of(&found, &dir, "10"), label_of(&found, &dir, "0")), (0, 3));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_split_layout_holds_out_its_val_folder() {
        let dir = folder("split");
        for (part, n) in [("train", 3), ("val", 2)] {
            for class in ["cat", "dog"] {
                for i in 0..n {
                    gray(&dir.join(part).join(class).join(format!("{i}.png")), 0);
                }
            }
        }
        // A hidden folder and a file that is no image are not read.
        gray(&dir.join("train/.ipynb_checkpoints/x.png"), 0);
        std::fs::write(dir.join("train/cat/notes.txt"), "x").expect("a note");
        let found = find(&dir, &starting(), None, None).expect("train/ and val/");
        assert_eq!(found.classes, ["cat", "dog"]);
        assert_eq!(found.files.len(), 10);
        let held = found.held.clone().expect("val/ held out");
        assert_eq!(held.len(), 4);
        assert!(held.iter().all(|&h| found.files[h].starts_with(dir.join("val"))), "{:?}", found.files);
        assert!(found.notes.iter().any(|n| n.contains("1 file is not read")), "{:?}", found.notes);
        // Nothing held out: val/ trains too.
        let all = find(&dir, &DataOptions { val_split: 0.0, ..starting() }, None, None).expect("all of it");
        assert_eq!((all.files.len(), all.held), (10, None));
        // A class in val/ that train/ lacks is named.
        gray(&dir.join("val/bird/0.png"), 0);
        let e = find(&dir, &starting(), None, None).err().expect("an unknown class").to_string();
        assert!(e.contains("the folder 'val/bird' is not among the classes of train/"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn splits_by_other_names_and_flat_test_folders() {
        // Kaggle's layout: Training/ and Testing/ of classes, and a test/ of
        // unlabelled images beside them (not held out: said).
        let dir = folder("kaggle");
        for (part, class) in [("Training", "a"), ("Training", "b"), ("Testing", "a")] {
            gray(&dir.join(part).join(class).join("0.png"), 0);
        }
        gray(&dir.join("test/x.png"), 0);
        let found = find(&dir, &starting(), None, None).expect("Training/ and Testing/");
        assert_eq!((found.classes.len(), found.held.as_ref().map(Vec::len)), (2, Some(1)));
        assert!(found.notes.iter().any(|n| n.contains("test/ holds 1 image and no class folders: not read")));
        // Without Testing/: --val-split's fraction of Training/, said.
        std::fs::remove_dir_all(dir.join("Testing")).expect("removed");
        let found = find(&dir, &starting(), None, None).expect("Training/ alone");
        assert_eq!((found.files.len(), found.held), (2, None));
        assert!(found.notes.iter().any(|n| n.contains("--val-split's fraction")), "{:?}", found.notes);
        // Folders of classes under names that say split (Intel's
        // seg_train/, seg_test/): refused, not trained on as two classes.
        std::fs::rename(dir.join("Training"), dir.join("seg_train")).expect("renamed");
        std::fs::remove_dir_all(dir.join("test")).expect("removed");
        gray(&dir.join("seg_test/a/0.png"), 0);
        let e = find(&dir, &starting(), None, None).err().expect("a split of other names").to_string();
        assert!(e.contains("seg_test/, seg_train/ hold no images of their own, only folders (a): a split?"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn classes_that_keep_their_images_in_folders_are_classes() {
        // Tiny ImageNet: each class's images in its images/ folder.
        let dir = folder("tiny");
        for class in ["n01", "n02"] {
            gray(&dir.join(class).join("images/0.png"), 0);
        }
        let found = find(&dir, &starting(), None, None).expect("classes");
        assert_eq!((found.classes.len(), found.notes.len()), (2, 0), "{:?}", found.notes);
        // Classes of a shared structure (cat/day, cat/night, dog/...): read
        // as classes, said (they may be a split under other names).
        for class in ["n01", "n02"] {
            gray(&dir.join(class).join("more/0.png"), 0);
        }
        let found = find(&dir, &starting(), None, None).expect("classes");
        assert_eq!(found.classes, ["n01", "n02"]);
        assert!(found.notes.iter().any(|n| n.contains("read as 2 classes; if they are a split")), "{:?}", found.notes);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn held_out_images_are_in_a_seeded_order_and_numbers_bounded() {
        let dir = folder("order");
        for class in ["0", "1", "2"] {
            for i in 0..4 {
                gray(&dir.join("train").join(class).join(format!("{i}.png")), 0);
                gray(&dir.join("val").join(class).join(format!("{i}.png")), 0);
            }
        }
        let found = find(&dir, &starting(), None, None).expect("a split");
        let held = found.held.expect("val/");
        let labels: Vec<usize> = held.iter().map(|&h| found.labels[h]).collect();
        assert_ne!(labels, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2], "class by class");
        // A checkpoint of numbered labels reads folder 12 as class 12, which
        // a model of 10 classes has not.
        gray(&dir.join("train/12/0.png"), 0);
        let scoring = DataOptions { starting: false, ..DataOptions::default() };
        let e = find(&dir, &scoring, None, Some(10)).err().expect("class 12 of 10").to_string();
        assert!(e.contains("the folder '12' is class 12, and the model's output has 10 classes"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn special_files_are_refused_by_name() {
        let dir = folder("special");
        gray(&dir.join("a/0.png"), 0);
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.join("nowhere.png"), dir.join("a/link.png")).expect("a link");
        let e = find(&dir, &starting(), None, None).err().expect("a dangling link").to_string();
        assert!(e.contains("link.png") && e.contains("a link to a file that is not there"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn channels_are_standardized_as_normalize_does() {
        // Two 1 x 2 RGB images, channels last: red 0 and 1, green 0.5
        // everywhere, blue 1 and 0.
        let form = Form { channels: 3, height: 1, width: 2, layout: Layout::ChannelsLast };
        let values = [0.0, 0.5, 1.0, 0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 1.0, 0.5, 0.0];
        let (stats, channels) = channel_stats(&values, form, &[0, 1]);
        assert_eq!(channels, vec![(0.5, 0.5), (0.5, 1.0), (0.5, 0.5)]);
        assert_eq!(stats.mean, vec![0.5; 6]);
        assert_eq!(stats.std, vec![0.5, 1.0, 0.5, 0.5, 1.0, 0.5]);
    }

    #[test]
    fn pixels_are_zero_to_one_in_the_input_layout() {
        let dir = folder("layout");
        let path = dir.join("rgb.png");
        // Two pixels: red, then green (channels first: the red plane, then the
        // green one; last: each pixel's three).
        let pixel = |x: u32| if x == 0 { image::Rgb([255, 0, 0]) } else { image::Rgb([0, 255, 0]) };
        image::RgbImage::from_fn(2, 1, |x, _| pixel(x)).save(&path).expect("png");
        let first = Form { channels: 3, height: 1, width: 2, layout: Layout::ChannelsFirst };
        let (v, resized, _) = decode(&path, first).expect("decoded");
        assert_eq!((v, resized), (vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0], None));
        let last = Form { layout: Layout::ChannelsLast, ..first };
        assert_eq!(decode(&path, last).expect("decoded").0, vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        // Resized to 4 x 2, said; colour read as gray, said, by PIL's
        // weights (red 0.299, green 0.587).
        let gray_form = Form { channels: 1, height: 2, width: 4, layout: Layout::ChannelsFirst };
        let (v, resized, dropped) = decode(&path, gray_form).expect("decoded");
        assert_eq!((v.len(), resized, dropped), (8, Some((2, 1)), true));
        let same = Form { channels: 1, height: 1, width: 2, layout: Layout::ChannelsFirst };
        let (v, _, _) = decode(&path, same).expect("decoded");
        assert!((v[0] - 0.299).abs() < 1e-6 && (v[1] - 0.587).abs() < 1e-6, "{v:?}");
        std::fs::write(dir.join("bad.png"), b"not a png").expect("a damaged file");
        assert!(decode(&dir.join("bad.png"), first).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}

//! What a training run writes beside its checkpoints: the metrics as JSON
//! lines, the plot (SVG, drawn with `plotters`), and the profile as a
//! trace-event JSON file that Perfetto and `chrome://tracing` open.

use crate::train::TrainError;
use aicf_runtime::TraceEvent;
use plotters::prelude::*;
use std::path::Path;

type Result<T, E = TrainError> = std::result::Result<T, E>;

fn io(path: &Path) -> impl Fn(String) -> TrainError + '_ {
    move |message| TrainError::Io { path: path.to_path_buf(), message }
}

/// `write_atomically` into `path`, its error naming `path` once.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::codegen::write_atomically(path, bytes).map_err(|e| match e {
        crate::CompileError::Io { message, .. } => io(path)(message),
        other => io(path)(other.to_string()),
    })
}

/// One epoch's numbers.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpochRecord {
    pub epoch: usize,
    /// Steps taken by the end of the epoch.
    pub step: u64,
    /// Mean training loss over the epoch's examples.
    pub train_loss: f64,
    /// Held-out loss (NaN, `null` in JSON, without held-out examples).
    #[serde(with = "nan_as_null")]
    pub val_loss: f64,
    /// Held-out accuracy of `@forward`'s argmax (NaN without one).
    #[serde(with = "nan_as_null")]
    pub val_accuracy: f64,
    /// What the losses are measured in (`nats`, `nats/char`).
    pub unit: String,
    pub seconds: f64,
    pub steps_per_second: f64,
    pub params: usize,
    pub train_flops: f64,
    /// The learning rate of the epoch's last step (before an adaptive
    /// run's re-warm-up, rollback and growth factors).
    #[serde(default)]
    pub lr: f64,
    /// The rate that step trained at: `lr` times an adaptive run's factors
    /// (a grown model's `lr_factor`, a rollback's, the re-warm-up ramp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr_applied: Option<f64>,
    /// An adaptive run's observer: the last global gradient norm and the
    /// per-layer statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_norm: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<serde_json::Value>,
    /// An fp16 run's loss scale at the epoch's end: halved at each step
    /// whose gradients overflowed (that step's update skipped), doubled
    /// after 2000 clean steps. It was seen only in a checkpoint's tensors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<f64>,
    /// The loss scale at the epoch's start (the first epoch's: 65536, or
    /// the checkpoint's on a resume): each halving since is a step whose
    /// update was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scale_start: Option<f64>,
}

/// One logged step's numbers (`--log-every`, `--eval-every`): a line of
/// the run's `steps.jsonl`, the curve inside epochs (a language model's
/// run is often one long epoch, its plot a single point).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepRecord {
    /// Steps taken so far (the optimizer's count).
    pub step: u64,
    pub epoch: usize,
    /// The epoch's batches done, of `steps_per_epoch`.
    pub batch: usize,
    pub steps_per_epoch: usize,
    /// Mean training loss over the steps since the last record (each
    /// batch's mean, weighted by its examples), and how many they are.
    pub train_loss: f64,
    pub steps: u64,
    /// Held-out loss and accuracy where the step was evaluated
    /// (`--eval-every`; NaN, `null` in JSON, where it was not).
    #[serde(with = "nan_as_null")]
    pub val_loss: f64,
    #[serde(with = "nan_as_null")]
    pub val_accuracy: f64,
    /// What the losses are measured in (`nats`, `nats/char`).
    pub unit: String,
    /// The learning rate of the record's step.
    pub lr: f64,
    /// The wall time of those steps (an evaluation's not counted).
    pub seconds: f64,
    pub steps_per_second: f64,
}

impl StepRecord {
    /// Where the record stands on the plot's axis of epochs: epoch `e`'s
    /// record is at `e` (its end), its batch `b`'s at `e - 1 + b / steps`.
    pub fn at(&self) -> f64 {
        (self.epoch as f64 - 1.0) + self.batch as f64 / self.steps_per_epoch.max(1) as f64
    }
}

/// The step records of `path` (a run's `steps.jsonl`) up to step `through`:
/// what a resumed run keeps. Lines that do not parse are dropped (the file
/// is written again from what reads).
pub fn read_steps(path: &Path, through: u64) -> Vec<StepRecord> {
    let Ok(bytes) = std::fs::read(path) else { return Vec::new() };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| serde_json::from_str::<StepRecord>(line).ok())
        .filter(|r| r.step <= through)
        .collect()
}

/// Writes `records` to `path` as JSON lines (atomically), or removes the
/// file where there are none (an earlier run's, which no longer belongs).
pub fn write_steps(path: &Path, records: &[StepRecord]) -> Result<()> {
    if records.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path)(e.to_string())),
            _ => Ok(()),
        };
    }
    write_json_lines(path, records)
}

/// Appends `record` to `path` (a line at a time: a long run logs often,
/// and writing the file whole each time grew with its square).
pub fn append_step(path: &Path, record: &StepRecord) -> Result<()> {
    use std::io::Write;
    let mut line = serde_json::to_string(record).map_err(|e| io(path)(e.to_string()))?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| io(path)(e.to_string()))
}

mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() { s.serialize_f64(*v) } else { s.serialize_none() }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

/// The records of `path` (a run's `metrics.jsonl`) before epoch `before`:
/// what a resumed run keeps of the run it continues. Lines that do not
/// parse are dropped.
pub fn read_metrics(path: &Path, before: usize) -> Vec<EpochRecord> {
    read_metrics_noting(path, before).0
}

/// [`read_metrics`], and the first line that is not an epoch record (its
/// number from 1, and why), where one is not: a damaged file, whose
/// readable records a resume goes on with.
pub fn read_metrics_noting(path: &Path, before: usize) -> (Vec<EpochRecord>, Option<(usize, String)>) {
    let Ok(bytes) = std::fs::read(path) else { return (Vec::new(), None) };
    let text = String::from_utf8_lossy(&bytes);
    let mut bad = None;
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match serde_json::from_str::<EpochRecord>(line) {
            Ok(r) if r.epoch < before => records.push(r),
            Ok(_) => {}
            Err(e) => {
                bad.get_or_insert((i + 1, e.to_string()));
            }
        }
    }
    (records, bad)
}

/// Writes `records` to `path` as JSON lines (atomically).
pub fn write_metrics(path: &Path, records: &[EpochRecord]) -> Result<()> {
    write_json_lines(path, records)
}

/// Writes `records` to `path` as JSON lines (atomically).
fn write_json_lines<T: serde::Serialize>(path: &Path, records: &[T]) -> Result<()> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).map_err(|e| io(path)(e.to_string()))?);
        text.push('\n');
    }
    write_file(path, text.as_bytes())
}

/// The losses (left axis) and the held-out accuracy (right axis, when
/// there is one) per epoch, as SVG; with the step records of
/// `--log-every` and `--eval-every`, their curve inside the epochs too.
pub fn plot(path: &Path, records: &[EpochRecord], steps: &[StepRecord]) -> Result<()> {
    let mut svg = String::new();
    draw(&mut svg, records, steps)
        .map_err(|e| e.to_string())
        .map_err(|e| io(path)(format!("drawing the plot: {e}")))?;
    write_file(path, svg.as_bytes())
}

fn draw<'a>(
    svg: &'a mut String,
    records: &[EpochRecord],
    steps: &[StepRecord],
) -> std::result::Result<(), Box<dyn std::error::Error + 'a>> {
    let root = SVGBackend::with_string(svg, (720, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    // The axis spans the epochs' records and the steps' (a run of one
    // epoch drew on an axis from 1 to 1).
    let xs = records.iter().map(|r| r.epoch as f64).chain(steps.iter().map(StepRecord::at));
    let (mut first, mut last) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if !first.is_finite() {
        (first, last) = (1.0, 1.0);
    }
    let last = if last - first < 1e-9 { first + 1.0 } else { last };
    let losses = records
        .iter()
        .flat_map(|r| [r.train_loss, r.val_loss])
        .chain(steps.iter().flat_map(|r| [r.train_loss, r.val_loss]))
        .filter(|v| v.is_finite());
    let top = losses.fold(1e-9f64, f64::max) * 1.05;
    let unit = records.first().map(|r| r.unit.as_str()).or(steps.first().map(|r| r.unit.as_str())).unwrap_or("nats");
    let accuracy = records.iter().any(|r| r.val_accuracy.is_finite());
    let mut chart = ChartBuilder::on(&root)
        .caption("training", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .right_y_label_area_size(if accuracy { 56 } else { 0 })
        .build_cartesian_2d(first..last, 0.0..top)?
        .set_secondary_coord(first..last, 0.0..1.0);
    let y = if unit.is_empty() { "loss".to_string() } else { format!("loss ({unit})") };
    chart.configure_mesh().x_desc("epoch").y_desc(y).draw()?;
    if accuracy {
        chart.configure_secondary_axes().y_desc("held-out accuracy").draw()?;
    }
    let series = |f: &dyn Fn(&EpochRecord) -> f64| -> Vec<(f64, f64)> {
        records.iter().filter(|r| f(r).is_finite()).map(|r| (r.epoch as f64, f(r))).collect()
    };
    chart
        .draw_series(LineSeries::new(series(&|r| r.train_loss), BLUE.stroke_width(2)).point_size(3))?
        .label("train loss")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE.stroke_width(2)));
    // The steps' curve, thinner and lighter, under the epochs'.
    let by_step = |f: &dyn Fn(&StepRecord) -> f64| -> Vec<(f64, f64)> {
        steps.iter().filter(|r| f(r).is_finite()).map(|r| (r.at(), f(r))).collect()
    };
    let light_blue = RGBColor(120, 170, 230);
    let train_steps = by_step(&|r| r.train_loss);
    if !train_steps.is_empty() {
        chart
            .draw_series(LineSeries::new(train_steps, light_blue.stroke_width(1)))?
            .label("train loss (logged steps)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], light_blue.stroke_width(1)));
    }
    let val_steps = by_step(&|r| r.val_loss);
    if !val_steps.is_empty() {
        let light_red = RGBColor(235, 120, 120);
        chart
            .draw_series(LineSeries::new(val_steps, light_red.stroke_width(1)).point_size(2))?
            .label("held-out loss (evaluated steps)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], light_red.stroke_width(1)));
    }
    let val = series(&|r| r.val_loss);
    if !val.is_empty() {
        chart
            .draw_series(LineSeries::new(val, RED.stroke_width(2)).point_size(3))?
            .label("held-out loss")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED.stroke_width(2)));
    }
    if accuracy {
        let orange = RGBColor(255, 127, 14);
        chart
            .draw_secondary_series(LineSeries::new(series(&|r| r.val_accuracy), orange.stroke_width(2)).point_size(3))?
            .label("held-out accuracy")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], orange.stroke_width(2)));
    }
    // (Upper right: losses fall away from it.)
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}

/// Writes `events` as a trace-event JSON file (the "JSON object format" of
/// the Trace Event Format: complete events, `ph` "X", microseconds), one
/// track per stream of each device.
/// Whether the file at `path` is a trace [`write_trace`] wrote: its JSON
/// object starts with one of the two keys it writes (in either order, as
/// `serde_json` keeps them sorted or as inserted).
pub fn is_trace(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 20];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    head[..n].starts_with(b"{\"displayTimeUnit\"") || head[..n].starts_with(b"{\"traceEvents\"")
}

/// Writes `events` as a Chrome trace to `path`, refusing a file there that
/// holds no trace (`eager::finish_trace` wrote over a checkpoint; the CLI
/// and `fit` checked before their runs, and still do).
pub fn write_trace(path: &Path, device: &str, events: &[TraceEvent]) -> Result<()> {
    super::refuse_overwriting_all_but_traces(path, "the trace").map_err(io(path))?;
    let mut out = Vec::with_capacity(events.len() + 2);
    out.push(serde_json::json!({"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": device}}));
    let mut streams: Vec<u32> = events.iter().map(|e| e.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in streams {
        out.push(serde_json::json!({"name": "thread_name", "ph": "M", "pid": 0, "tid": s,
            "args": {"name": format!("stream {s}")}}));
    }
    for e in events {
        out.push(serde_json::json!({
            "name": e.op, "cat": "kernel", "ph": "X", "pid": 0, "tid": e.stream,
            "ts": e.start_us, "dur": e.duration_us,
            "args": {"kernel": e.kernel, "hl": e.origin.clone().unwrap_or_default(),
                     "function": e.function, "call": e.call},
        }));
    }
    let trace = serde_json::json!({"traceEvents": out, "displayTimeUnit": "ms"});
    let text = serde_json::to_string(&trace).map_err(|e| io(path)(e.to_string()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| io(path)(e.to_string()))?;
    }
    write_file(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed run reads its earlier epochs' records back and writes them
    /// again: each figure must come back as the f64 written (serde_json's
    /// default float parser read 1.7064971263030113 as 1.706497126303011).
    #[test]
    fn metrics_read_back_are_the_figures_written() {
        let dir = std::env::temp_dir().join(format!("aicf-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.jsonl");
        let figures =
            [1.7064971263030113, 0.1 + 0.2, 1.0 / 3.0, 2.2250738585072014e-308, 5e-324, 1.7976931348623157e308];
        let records: Vec<EpochRecord> = figures
            .iter()
            .enumerate()
            .map(|(i, &v)| EpochRecord {
                epoch: i + 1,
                step: i as u64,
                train_loss: v,
                val_loss: v,
                val_accuracy: f64::NAN,
                unit: "nats".into(),
                seconds: v,
                steps_per_second: v,
                params: 1,
                train_flops: v,
                lr: v,
                lr_applied: Some(v),
                grad_norm: Some(v),
                layers: None,
                loss_scale: Some(v),
                loss_scale_start: Some(v),
            })
            .collect();
        write_metrics(&path, &records).unwrap();
        let back = read_metrics(&path, usize::MAX);
        assert_eq!(back.len(), figures.len());
        for (r, &v) in back.iter().zip(&figures) {
            let applied = r.lr_applied.unwrap_or(f64::NAN);
            let norm = r.grad_norm.unwrap_or(f64::NAN);
            for got in [r.train_loss, r.val_loss, r.seconds, r.steps_per_second, r.train_flops, r.lr, applied, norm] {
                assert_eq!(got.to_bits(), v.to_bits(), "{v:e} read back as {got:e}");
            }
            assert!(r.val_accuracy.is_nan());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Step records append, read back up to a step (a resume's), and are
    /// drawn: a run of one epoch with them has a curve, not a point.
    #[test]
    fn step_records_append_read_back_to_a_step_and_draw() {
        let dir = std::env::temp_dir().join(format!("aicf-steps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("steps.jsonl");
        let record = |step: u64, val: f64| StepRecord {
            step,
            epoch: 1,
            batch: step as usize,
            steps_per_epoch: 40,
            train_loss: 4.0 - step as f64 * 0.05,
            steps: 10,
            val_loss: val,
            val_accuracy: f64::NAN,
            unit: "nats/char".into(),
            lr: 1e-3,
            seconds: 0.1,
            steps_per_second: 100.0,
        };
        for (step, val) in [(10, f64::NAN), (20, 3.25), (30, f64::NAN), (40, 2.5)] {
            append_step(&path, &record(step, val)).unwrap();
        }
        let all = read_steps(&path, u64::MAX);
        assert_eq!(all.iter().map(|r| r.step).collect::<Vec<_>>(), [10, 20, 30, 40]);
        assert!(all[0].val_loss.is_nan() && all[1].val_loss == 3.25);
        let kept = read_steps(&path, 25);
        assert_eq!(kept.len(), 2);
        write_steps(&path, &kept).unwrap();
        // (As JSON: NaN is not equal to itself.)
        let json = |r: &[StepRecord]| serde_json::to_string(r).unwrap();
        assert_eq!(json(&read_steps(&path, u64::MAX)), json(&kept));
        let epoch = EpochRecord {
            epoch: 1,
            step: 40,
            train_loss: 3.0,
            val_loss: 2.5,
            val_accuracy: f64::NAN,
            unit: "nats/char".into(),
            seconds: 0.4,
            steps_per_second: 100.0,
            params: 1,
            train_flops: 1.0,
            lr: 1e-3,
            lr_applied: None,
            grad_norm: None,
            layers: None,
            loss_scale: None,
            loss_scale_start: None,
        };
        let mut svg = String::new();
        draw(&mut svg, std::slice::from_ref(&epoch), &all).unwrap();
        assert!(svg.contains("train loss (logged steps)") && svg.contains("held-out loss (evaluated steps)"));
        // The steps' curve is a polyline of its 4 points (none was drawn
        // on an axis from epoch 1 to 1).
        let lines = svg.matches("<polyline").count();
        assert!(lines >= 2, "{lines} polylines in {svg}");
        // No records: the file goes (an earlier run's, stale).
        write_steps(&path, &[]).unwrap();
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The GEMM registry does not keep a decision forever: a later process that
//! finds the chosen kernel's time far from the recorded one measures every
//! candidate again (runtime/src/registry.rs), end to end through `aicf bench`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bench(cache: &Path, out: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = Command::new(env!("CARGO_BIN_EXE_aicf"))
        .current_dir(&repo)
        .env("AICF_CACHE_DIR", cache)
        .args(["bench", "examples/mlp784/mlp784.mlir", "--optimizer", "sgd", "--steps", "2", "--threads", "2"])
        .arg("--out")
        .arg(out)
        .output()
        .expect("aicf starts");
    assert!(o.status.success(), "aicf bench failed: {}", String::from_utf8_lossy(&o.stderr));
}

fn read(path: &Path) -> BTreeMap<String, String> {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the registry was written")).expect("it is JSON")
}

/// `"generated 0.1234, library 0.0567"` -> [("generated", 0.1234), ...].
fn times(detail: &str) -> Vec<(String, f64)> {
    detail
        .split(", ")
        .map(|p| {
            let (name, ms) = p.rsplit_once(' ').expect("candidate and time");
            (name.to_string(), ms.parse().expect("a time"))
        })
        .collect()
}

#[test]
fn a_decision_whose_time_drifted_is_measured_again() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("registry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (cache, out) = (dir.join("cache"), dir.join("out"));
    bench(&cache, &out);
    let file = cache.join("gemm-registry.json");
    let measured = read(&file);
    let details: Vec<&String> = measured.keys().filter(|k| k.ends_with(" (ms)")).collect();
    assert!(!details.is_empty(), "the first run measured its GEMMs: {measured:?}");
    // Every recorded time 1000x what it was: as if the decisions had been
    // measured while the machine was very busy.
    let planted: BTreeMap<String, String> = measured
        .iter()
        .map(|(k, v)| {
            let v = if k.ends_with(" (ms)") {
                times(v).iter().map(|(c, ms)| format!("{c} {:.4}", ms * 1000.0)).collect::<Vec<_>>().join(", ")
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect();
    std::fs::write(&file, serde_json::to_string_pretty(&planted).unwrap()).unwrap();
    bench(&cache, &out);
    let again = read(&file);
    for k in details {
        let before = times(&planted[k]);
        let after = times(&again[k]);
        // Measured again: every candidate's time is back to a real one (the
        // candidates recorded may differ: one far behind after its warm-up
        // is left out).
        assert!(!after.is_empty(), "{k}: no candidate recorded");
        for (c, new) in &after {
            if let Some((_, old)) = before.iter().find(|(b, _)| b == c) {
                assert!(*new < old / 10.0, "{k}: {c} still {new} ms (planted {old})");
            }
        }
        assert!(after.iter().any(|(c, _)| before.iter().any(|(b, _)| b == c)), "{k}: nothing timed again");
        let choice = &again[k.trim_end_matches(" (ms)")];
        assert!(after.iter().any(|(c, _)| c == choice), "{k}: the decision names a measured candidate");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

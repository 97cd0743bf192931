//! Training that changes the model while it trains: the growth operators
//! (widen, deepen, attention heads) preserve the function and carry the optimizer state by their rules
//! (values checked), a rollback restores everything bit for bit, forks keep
//! the better candidate, and policies and observers behave as documented.

use crate::optimizer::digits;
use aicf_compiler::train::adapt::{
    Action, Adaptive, Observation, Observer, Operator, Outcome, Policy, Progress, Rule, State, Template, Trigger,
    WidenRule, grow,
};
use aicf_compiler::train::{Options, Trainer};
use aicf_runtime::{Tensor, artifact::DType};
use std::path::PathBuf;

fn narrow() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/grow/narrow_mlp.mlir"))
}

fn options(optimizer: &str, momentum: f64) -> Options {
    // One cache for the file: the same models compile once.
    let cache_dir = crate::tmp_root().join("adapt");
    Options {
        optimizer: optimizer.into(),
        momentum,
        device: aicf_runtime::Device::Cpu { threads: 2 },
        seed: 3,
        cache_dir,
        ..Options::default()
    }
}

/// Batch `i` (32 rows) of the digits, features scaled to [0, 1].
fn batch(i: usize) -> [Tensor; 2] {
    let rows = digits();
    let take = &rows[(i * 32) % 1760..(i * 32) % 1760 + 32];
    let x = take.iter().flat_map(|r| r.0.map(|v| v / 16.0)).collect();
    let y = take.iter().map(|r| r.1 as f64).collect();
    [Tensor::new([32, 64], DType::F32, x), Tensor::new([32], DType::I32, y)]
}

/// The narrow MLP after `steps` steps: parameters and optimizer state away
/// from their initial values.
/// `hl-widen` of `layer` to `width` with zero outgoing weights (an exact
/// identity), no noise, no mask.
pub(crate) fn zero_widen(layer: &str, width: usize) -> Operator {
    Operator::Widen {
        layer: layer.into(),
        width,
        rule: WidenRule::ZeroOut,
        split_noise: 0.0,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    }
}

/// [`zero_widen`] as a policy rule's template states it.
fn zero_widen_rule(layer: &str, width: usize) -> Template {
    Template::Widen {
        layer: layer.into(),
        width: Some(width),
        factor: None,
        max_width: None,
        rule: WidenRule::ZeroOut,
        split_noise: 0.0,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    }
}

fn trained(optimizer: &str, momentum: f64, steps: usize) -> Trainer {
    let mut t = Trainer::from_file(&narrow(), options(optimizer, momentum)).unwrap();
    for i in 0..steps {
        let [x, y] = batch(i);
        t.step(&[&x, &y], if optimizer == "sgd" { 0.05 } else { 3e-3 }).unwrap();
    }
    t
}

fn row(t: &Tensor, r: usize) -> &[f64] {
    let cols = t.shape[1..].iter().product::<usize>();
    &t.values[r * cols..(r + 1) * cols]
}

fn column(t: &Tensor, c: usize) -> Vec<f64> {
    let cols = t.shape[1];
    (0..t.shape[0]).map(|r| t.values[r * cols + c]).collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.abs().max(b.abs()).max(1e-6)
}

/// `@loss` on a probe batch and `@forward`'s logits, before and after.
fn assert_same_function(old: &mut Trainer, new: &mut Trainer) {
    let [x, y] = batch(40);
    let (a, b) = (old.loss(&[&x, &y]).unwrap(), new.loss(&[&x, &y]).unwrap());
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let (la, lb) = (old.predict(&[&x]).unwrap().remove(0), new.predict(&[&x]).unwrap().remove(0));
    let worst = la.values.iter().zip(&lb.values).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max);
    assert!(worst < 1e-4, "logits differ by {worst}");
}

#[test]
fn net2wider_preserves_the_function_and_splits_weights_and_adam_moments() {
    let mut old = trained("adam", 0.0, 20);
    let s = 0.2;
    let op = Operator::Widen {
        layer: "fc1".into(),
        width: 40,
        rule: WidenRule::Net2wider,
        split_noise: s,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    };
    assert!(op.exact());
    let mut g = grow(&old, &op, 7).unwrap();
    assert_eq!(g.rewrite.diff, ["fc1.weight 16x64 -> 40x64", "fc1.bias 16 -> 40", "fc2.weight 10x16 -> 10x40"]);
    assert_same_function(&mut old, &mut g.trainer);
    let (o, n): (State, State) = (old.state(), g.trainer.state());
    // Each unit's source: itself, or the old unit whose incoming weights it copies.
    let source: Vec<usize> = (0..40)
        .map(|j| {
            let found: Vec<usize> = (0..16).filter(|&s| row(&n["fc1.weight"], j) == row(&o["fc1.weight"], s)).collect();
            assert_eq!(found.len(), 1, "unit {j} copies {found:?}");
            found[0]
        })
        .collect();
    assert!((0..16).all(|j| source[j] == j));
    let copies = |g: usize| source.iter().filter(|&&x| x == g).count() as f64;
    for j in 0..40 {
        let (src, c) = (source[j], copies(source[j]));
        let alpha = if j < 16 { (1.0 + s * (c - 1.0)) / c } else { (1.0 - s) / c };
        // Outgoing weights split by alpha (they sum to the old column over the copies).
        for (new, old_w) in column(&n["fc2.weight"], j).iter().zip(column(&o["fc2.weight"], src)) {
            assert!(close(*new, alpha * old_w, 1e-6), "fc2.weight[:, {j}] {new} vs {alpha} x {old_w}");
        }
        // Incoming: bias copied; Adam moments scaled by alpha and alpha^2.
        assert_eq!(n["fc1.bias"].values[j], o["fc1.bias"].values[src]);
        for (p, kind, scale) in [
            ("fc1.weight", "exp_avg", alpha),
            ("fc1.weight", "exp_avg_sq", alpha * alpha),
            ("fc1.bias", "exp_avg", alpha),
        ] {
            let name = format!("{p}.{kind}");
            let (new, old_m) = (row(&n[&name], j), row(&o[&name], src));
            for (a, b) in new.iter().zip(old_m) {
                assert!(close(*a, scale * b, 1e-6), "{name}[{j}] {a} vs {scale} x {b}");
            }
        }
        // Outgoing moments copied unchanged.
        assert_eq!(column(&n["fc2.weight.exp_avg"], j), column(&o["fc2.weight.exp_avg"], src));
        assert_eq!(column(&n["fc2.weight.exp_avg_sq"], j), column(&o["fc2.weight.exp_avg_sq"], src));
    }
    for g in 0..16 {
        let total: f64 = (0..40)
            .filter(|&j| source[j] == g)
            .map(|j| if j < 16 { (1.0 + s * (copies(g) - 1.0)) / copies(g) } else { (1.0 - s) / copies(g) })
            .sum();
        assert!((total - 1.0).abs() < 1e-12);
    }
    assert_eq!(n["fc2.bias"], o["fc2.bias"]);
    assert_eq!(n["step"], o["step"]);
    assert_eq!(g.trainer.steps(), 20);
    // Training goes on from the carried state.
    let [x, y] = batch(21);
    assert!(g.trainer.step(&[&x, &y], 3e-3).unwrap().loss.is_finite());
}

#[test]
fn zero_out_widening_preserves_the_function_and_zeroes_new_momentum() {
    let mut old = trained("sgd", 0.9, 20);
    let op = zero_widen("fc1", 32);
    let mut g = grow(&old, &op, 1).unwrap();
    assert_same_function(&mut old, &mut g.trainer);
    let (o, n) = (old.state(), g.trainer.state());
    for j in 0..32 {
        if j < 16 {
            assert_eq!(row(&n["fc1.weight"], j), row(&o["fc1.weight"], j));
            assert_eq!(row(&n["fc1.weight.momentum"], j), row(&o["fc1.weight.momentum"], j));
            assert_eq!(column(&n["fc2.weight"], j), column(&o["fc2.weight"], j));
            assert_eq!(column(&n["fc2.weight.momentum"], j), column(&o["fc2.weight.momentum"], j));
        } else {
            // Fresh incoming weights (from the initialiser), zero outgoing, zero momentum.
            assert!(row(&n["fc1.weight"], j).iter().any(|v| *v != 0.0));
            assert!((0..16).all(|s| row(&n["fc1.weight"], j) != row(&o["fc1.weight"], s)));
            assert!(column(&n["fc2.weight"], j).iter().all(|v| *v == 0.0));
            assert!(row(&n["fc1.weight.momentum"], j).iter().all(|v| *v == 0.0));
            assert_eq!(n["fc1.bias.momentum"].values[j], 0.0);
            assert!(column(&n["fc2.weight.momentum"], j).iter().all(|v| *v == 0.0));
        }
    }
    assert_eq!(n["fc2.bias.momentum"], o["fc2.bias.momentum"]);
    // The zero outgoing weights get a gradient at once: one step moves them.
    let [x, y] = batch(21);
    g.trainer.step(&[&x, &y], 0.05).unwrap();
    assert!(column(&g.trainer.state()["fc2.weight"], 20).iter().any(|v| *v != 0.0));
}

#[test]
fn deepening_preserves_the_function_with_identity_or_zero_output_layers() {
    let mut old = trained("adam", 0.0, 20);
    let identity = Operator::Deepen { after: "fc1".into(), name: Some("mid".into()), residual: false };
    let mut g = grow(&old, &identity, 0).unwrap();
    assert_eq!(g.rewrite.diff, ["+mid.weight 16x16", "+mid.bias 16"]);
    assert_same_function(&mut old, &mut g.trainer);
    let (o, n) = (old.state(), g.trainer.state());
    for i in 0..16 {
        for j in 0..16 {
            assert_eq!(n["mid.weight"].values[i * 16 + j], if i == j { 1.0 } else { 0.0 });
        }
    }
    assert!(
        n["mid.bias"]
            .values
            .iter()
            .chain(&n["mid.weight.exp_avg"].values)
            .chain(&n["mid.weight.exp_avg_sq"].values)
            .all(|v| *v == 0.0)
    );
    for name in ["fc1.weight", "fc1.weight.exp_avg", "fc2.weight.exp_avg_sq", "step"] {
        assert_eq!(n[name], o[name], "{name} carried unchanged");
    }

    let residual = Operator::Deepen { after: "fc1".into(), name: Some("blk".into()), residual: true };
    let mut r = grow(&old, &residual, 0).unwrap();
    assert_same_function(&mut old, &mut r.trainer);
    let n = r.trainer.state();
    assert!(n["blk.fc_in.weight"].values.iter().any(|v| *v != 0.0), "fc_in from its initialiser");
    assert!(n["blk.fc_out.weight"].values.iter().chain(&n["blk.fc_out.bias"].values).all(|v| *v == 0.0));
    assert!(n["blk.fc_in.weight.exp_avg"].values.iter().all(|v| *v == 0.0));
    // A relu must end the chain for an identity layer; a tanh model is refused.
    let tanh = old.source().replace("hl.relu", "hl.tanh");
    let t = Trainer::from_source(&tanh, "tanh.mlir", options("adam", 0.0)).unwrap();
    let e = grow(&t, &identity, 0).err().expect("identity deepening after tanh").to_string();
    assert!(e.contains("not followed by a relu"), "{e}");
}

fn policy(rules: Vec<Rule>) -> Policy {
    Policy { prefetch: false, watch_steps: 50, rules, ..Policy::default() }
}

#[test]
fn a_rollback_restores_parameters_state_step_and_rng_bit_for_bit() {
    let checkpoints = crate::tmp_root().join("adapt-checkpoints");
    let _ = std::fs::remove_dir_all(&checkpoints);
    let mut run =
        Adaptive::new(trained("adam", 0.0, 0), Policy { checkpoint_dir: Some(checkpoints.clone()), ..policy(vec![]) });
    let progress = |i: usize| Progress { epoch: 1 + i / 10, batch: i % 10 + 1, rng: 0x5eed ^ (i as u64 / 10) };
    for i in 0..15 {
        let [x, y] = batch(i);
        assert!(matches!(run.step(&[&x, &y], 3e-3, progress(i)).unwrap(), Outcome::Trained(_, None)));
    }
    let (before, steps) = (run.trainer().state(), run.trainer().steps());
    let op = Operator::Widen {
        layer: "fc1".into(),
        width: 48,
        rule: WidenRule::Net2wider,
        split_noise: 0.1,
        noise: 0.0,
        mask: None,
        mask_delay: 0,
    };
    let d = run.apply(&op, "test", &[], progress(14)).unwrap().expect("the widening is accepted");
    assert_eq!(run.decisions()[d].outcome, "accepted");
    assert_eq!(aicf_compiler::train::adapt::param_count(run.trainer()), 48 * 64 + 48 + 10 * 48 + 10);
    // The model before the rewrite was checkpointed: it loads into the narrow model.
    let mut reloaded = trained("adam", 0.0, 0);
    reloaded.load_checkpoint(&checkpoints.join("before-rewrite-1.safetensors")).unwrap();
    assert_eq!(reloaded.state(), before);
    assert_eq!(reloaded.steps(), steps);
    // A diverging step inside the watch window rolls the rewrite back.
    for i in 15..20 {
        let [x, y] = batch(i);
        run.step(&[&x, &y], 3e-3, progress(i)).unwrap();
    }
    // A step at an absurd rate: its own loss is finite, the next one is not.
    let [x, y] = batch(20);
    assert!(matches!(run.step(&[&x, &y], 1e30, progress(20)).unwrap(), Outcome::Trained(..)));
    let [x, y] = batch(21);
    let Outcome::RolledBack(r, to) = run.step(&[&x, &y], 3e-3, progress(21)).unwrap() else {
        panic!("a non-finite loss after a watched rewrite rolls it back")
    };
    assert_eq!(to, progress(14), "the data loop resumes where the rewrite happened");
    assert_eq!(run.decisions()[d].outcome, "rolled back");
    let reason = &run.decisions()[r].reason;
    assert!(reason.contains("rolled back to step 15; that growth is not tried again"), "{reason}");
    assert_eq!(run.trainer().steps(), steps);
    let after = run.trainer().state();
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for (name, t) in &before {
        let bits = |v: &Tensor| v.values.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&after[name]), bits(t), "{name} restored bit for bit");
    }
    // Training goes on from the restored state.
    let [x, y] = batch(22);
    assert!(matches!(run.step(&[&x, &y], 3e-3, progress(15)).unwrap(), Outcome::Trained(_, None)));
}

#[test]
fn a_rewrite_whose_probe_loss_moves_is_rejected_and_the_model_kept() {
    let mut run = Adaptive::new(trained("adam", 0.0, 10), Policy { max_loss_increase: 0.001, ..policy(vec![]) });
    let [x, y] = batch(3);
    run.set_probe(vec![x, y]);
    let state = run.trainer().state();
    // Net2Wider with noise on the copies' incoming weights is not exact: the
    // probe may rise by max_loss_increase (0.1% here); this much noise
    // exceeds it.
    let op = Operator::Widen {
        layer: "fc1".into(),
        width: 40,
        rule: WidenRule::Net2wider,
        split_noise: 0.0,
        noise: 20.0,
        mask: None,
        mask_delay: 0,
    };
    assert!(!op.exact());
    let applied = run.apply(&op, "test", &[], Progress::default()).unwrap();
    assert_eq!(applied, None, "{:?}", run.decisions());
    let d = &run.decisions()[0];
    assert_eq!(d.outcome, "rejected");
    assert!(d.loss_after.unwrap() > 1.001 * d.loss_before.unwrap() && d.reason.contains("probe loss rose"), "{d:?}");
    assert_eq!(run.trainer().state(), state, "the model is unchanged");
    // A little noise is within bounds and accepted.
    let gentle = Operator::Widen {
        layer: "fc1".into(),
        width: 40,
        rule: WidenRule::Net2wider,
        split_noise: 0.0,
        noise: 0.01,
        mask: None,
        mask_delay: 0,
    };
    assert!(run.apply(&gentle, "test", &[], Progress::default()).unwrap().is_some());
    assert_eq!(run.decisions()[1].outcome, "accepted");
}

#[test]
fn a_fork_trains_both_candidates_and_keeps_the_lower_loss() {
    let candidates = vec![zero_widen_rule("fc1", 32), Template::Deepen { after: "fc1".into(), residual: true }];
    let rule = Rule {
        trigger: Trigger::Steps { at: 10 },
        action: Action::Fork { candidates, steps: 8 },
        min_gap: 0,
        max_times: 1,
        lr_factor: 1.0,
        reset_optimizer: false,
        shrink: 1.0,
    };
    let mut run = Adaptive::new(trained("adam", 0.0, 0), policy(vec![rule]));
    run.set_fork_data((30..34).map(|i| batch(i).to_vec()).collect(), (40..42).map(|i| batch(i).to_vec()).collect());
    let mut forked = None;
    for i in 0..10 {
        let [x, y] = batch(i);
        if let Outcome::Trained(_, Some(d)) = run.step(&[&x, &y], 3e-3, Progress::default()).unwrap() {
            forked = Some(d);
        }
    }
    let d = &run.decisions()[forked.expect("the fork ran at step 10")];
    assert_eq!(d.outcome, "accepted");
    assert_eq!(d.candidates.len(), 2);
    assert!(d.candidates.iter().all(|c| c.1.is_finite()));
    let best = d.candidates.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    assert!(d.reason.contains(&best.0), "{} keeps {}", d.reason, best.0);
    assert_eq!(run.trainer().steps(), 10 + 8, "the kept candidate's fork steps count");
}

/// `optimizer_state = "reset"`: the grown model keeps the carried
/// parameters, its moments are zero and its step count and ages 0, and its
/// next step is a fresh Adam's first (each entry moves by about the
/// learning rate, `m / sqrt(v) = g / |g|`); a carrying rule keeps the state.
#[test]
fn a_rule_may_reset_the_optimizer_state_at_a_growth() {
    let rule = |reset: bool| Rule {
        trigger: Trigger::Steps { at: 12 },
        action: Action::Grow(zero_widen_rule("fc1", 24)),
        min_gap: 0,
        max_times: 1,
        lr_factor: 1.0,
        reset_optimizer: reset,
        shrink: 1.0,
    };
    let lr = 3e-3;
    let grown = |reset: bool| {
        let policy = Policy { age_bias_correction: true, rewarmup_steps: 0, ..policy(vec![rule(reset)]) };
        let mut run = Adaptive::new(trained("adam", 0.0, 0), policy);
        for i in 0..12 {
            let [x, y] = batch(i);
            run.step(&[&x, &y], lr, Progress::default()).unwrap();
        }
        assert_eq!(run.decisions().len(), 1, "{:?}", run.decisions());
        assert_eq!(run.decisions()[0].outcome, "accepted", "{:?}", run.decisions()[0]);
        run
    };
    let (carry, mut reset) = (grown(false), grown(true));
    assert!(reset.decisions()[0].action.ends_with("; optimizer state reset"), "{}", reset.decisions()[0].action);
    assert!(!carry.decisions()[0].action.contains("reset"));
    let (c, r) = (carry.trainer().state(), reset.trainer().state());
    assert_eq!(c.keys().collect::<Vec<_>>(), r.keys().collect::<Vec<_>>());
    assert!(r.contains_key("fc1.weight.age"), "the grown parameter has ages");
    let mut moments = 0;
    for (name, t) in &r {
        let slot = name.rsplit('.').next().unwrap();
        if ["exp_avg", "exp_avg_sq", "age"].contains(&slot) || name == "step" {
            assert!(t.values.iter().all(|&v| v == 0.0), "{name} starts again");
            moments += usize::from(slot != "age" && c[name].values.iter().any(|&v| v != 0.0));
        } else {
            assert_eq!(t.values, c[name].values, "{name}: the parameters are the carried ones");
        }
    }
    assert!(moments >= 8, "the carrying run had state to reset ({moments} symbols)");
    assert!(c["step"].values[0] == 12.0, "{:?}", c["step"].values);
    // The next step is Adam's first: |update| = lr |g| / (|g| + eps) on
    // every entry whose gradient is well above eps.
    let [x, y] = batch(12);
    reset.step(&[&x, &y], lr, Progress::default()).unwrap();
    let after = reset.trainer().state();
    let mut full = 0;
    for name in ["fc1.weight", "fc2.weight"] {
        for (k, (&a, &b)) in after[name].values.iter().zip(&r[name].values).enumerate() {
            let g = after[&format!("{name}.exp_avg")].values[k] / 0.1;
            let moved = (a - b).abs();
            assert!(moved <= lr * 1.0001, "{name}[{k}] moved {moved:e}, more than lr");
            if g.abs() > 1e-5 {
                assert!(close(moved, lr * g.abs() / (g.abs() + 1e-8), 1e-3), "{name}[{k}]: moved {moved:e}, g {g:e}");
                full += 1;
            }
        }
    }
    assert!(full > 100, "{full} entries with a gradient");
    assert_eq!(after["step"].values[0], 1.0);
}

#[test]
fn policy_files_parse_and_errors_name_the_rule() {
    let p = Policy::from_file(&PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/grow/policy.toml")))
        .unwrap();
    assert_eq!(p.rules.len(), 2);
    assert_eq!(p.rules[0].trigger, Trigger::Plateau { window: 45, threshold: 0.1 });
    assert!(matches!(
        &p.rules[0].action,
        Action::Grow(Template::Widen { max_width: Some(128), rule: WidenRule::ZeroOut, .. })
    ));
    assert_eq!(p.rules[1].action, Action::Rollback { lr_factor: 0.5 });
    // The char LM experiment's policies (make grow-lm) parse too: a typo
    // there would only show an hour into the experiment.
    for name in [
        "grow2x",
        "grow2x_late",
        "grow2x_late_restart",
        "grow2x_plateau",
        "grow4x",
        "grow4x_restart",
        "grow_staged",
        "stack_restart",
    ] {
        let path = PathBuf::from(format!("{}/../examples/grow_lm/{name}.toml", env!("CARGO_MANIFEST_DIR")));
        let p = Policy::from_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let steps = p.rules.iter().filter(|r| matches!(r.trigger, Trigger::Steps { .. })).count();
        let plateaus = p.rules.iter().filter(|r| matches!(r.trigger, Trigger::ValPlateau { .. })).count();
        let expected = match name {
            "grow_staged" => (2, 0),
            "grow2x_plateau" => (0, 1),
            _ => (1, 0),
        };
        assert_eq!((steps, plateaus), expected, "{name}");
        assert_eq!(p.restart_schedule, name.ends_with("_restart"), "{name}");
    }
    let reset = Policy::parse(
        "[[rule]]\nwhen = \"steps\"\nat = 5\noptimizer_state = \"reset\"\naction = { op = \"widen\", layer = \"fc1\" }",
    )
    .unwrap();
    assert!(reset.rules[0].reset_optimizer);
    assert!(!p.rules[0].reset_optimizer, "carried by default");
    let err = |text: &str| Policy::parse(text).unwrap_err();
    assert!(
        err("[[rule]]\nwhen = \"steps\"\nat = 5\noptimizer_state = \"zero\"\naction = { op = \"widen\", layer = \"fc1\" }")
            .contains("optimizer_state = \"zero\": expected \"carry\" or \"reset\""),
    );
    assert!(
        err("[[rule]]\nwhen = \"plateau\"\naction = \"rollback\"")
            .contains("policy rule 1: when = \"plateau\" needs window")
    );
    assert!(
        err("[[rule]]\nwhen = \"epoch\"\naction = { op = \"widen\", layr = \"fc1\" }").contains("unknown field `layr`")
    );
    assert!(err("[[rule]]\nwhen = \"epoch\"\naction = { fork = [], steps = 3 }").contains("a fork needs candidates"));
    assert!(err("spike_factor = 0.5").contains("spike_factor"));
    // Another trigger's key would be ignored: it is an error naming both.
    let e = err("[[rule]]\nwhen = \"epoch\"\nat = 5\naction = \"rollback\"");
    assert!(e.contains("policy rule 1: when = \"epoch\" takes every = ..., not at"), "{e}");
    assert!(e.contains("to act once, at epoch 5: every = 5 with max_times = 1"), "{e}");
    // A policy-wide key after a rule is that rule's in TOML: said so.
    let e = err("[[rule]]\nwhen = \"epoch\"\naction = \"rollback\"\nverify_tolerance = 1e-3");
    assert!(
        e.contains("unknown field `verify_tolerance`") && e.contains("write verify_tolerance above the first [[rule]]"),
        "{e}"
    );
    // Settings that contradict each other (the cap won, silently).
    let e = err("[[rule]]\nwhen = \"epoch\"\naction = { op = \"widen\", layer = \"fc1\", width = 64, max_width = 32 }");
    assert!(e.contains("width = 64 is above max_width = 32"), "{e}");
    let e = err("[[rule]]\nwhen = \"epoch\"\naction = { op = \"add-block\", count = 3, max_blocks = 2 }");
    assert!(e.contains("count = 3 is above max_blocks = 2"), "{e}");
    let e = err("[[rule]]\nwhen = \"epoch\"\naction = { op = \"add-block\", state = \"copy\" }");
    assert!(e.contains("state = \"copy\" needs init = \"copy\"") && !e.contains("pipeline"), "{e}");
    let e = err("[[rule]]\nwhen = \"instability\"\nwindow = 5\naction = \"rollback\"");
    assert!(e.contains("when = \"instability\" takes no trigger keys, not window"), "{e}");
    assert!(err("[[rule]]\nwhen = \"epoch\"\nevery = 0\naction = \"rollback\"").contains("count from 1"));
    let e = err("[[rule]]\nwhen = \"plateau\"\nwindow = 5\nthreshold = -1.0\naction = \"rollback\"");
    assert!(e.contains("threshold = -1 is not a number of at least 0"), "{e}");
    // A count that lets a rule act never (it was taken as no limit).
    let e = err("[[rule]]\nwhen = \"epoch\"\nmax_times = 0\naction = \"rollback\"");
    assert!(e.contains("max_times = 0 would let the rule act never; leave it out for no limit"), "{e}");
    let e = err("spike_factor = 0.0");
    assert!(e.contains("spike_factor = 0 must be above 1") && !e.contains("verify_tolerance"), "{e}");
    let e = err("[[rule]]\nwhen = \"instability\"\naction = { rollback = { lr_factor = 0.0 } }");
    assert!(e.contains("rollback lr_factor = 0 is not in (0, 1]"), "{e}");
    let v = Policy::parse("[[rule]]\nwhen = \"val-plateau\"\nwindow = 2\nthreshold = 0.01\naction = { op = \"heads\", attention = \"attn\", max_heads = 8 }").unwrap();
    assert_eq!(v.rules[0].trigger, Trigger::ValPlateau { window: 2, threshold: 0.01 });
    assert_eq!(
        v.rules[0].action,
        Action::Grow(Template::Heads {
            attention: "attn".into(),
            add: None,
            max_heads: Some(8),
            mask: None,
            mask_delay: 0
        })
    );
    assert!(Policy::from_file(&PathBuf::from("no/such/policy.toml")).is_err());
}

#[test]
fn the_observer_sees_plateaus_and_spikes_not_one_hard_batch() {
    let mut o = Observer::default();
    o.losses = (1..=40).map(|s| (s, 2.0 / s as f64)).collect();
    assert_eq!(o.plateau(0, 10, 0.05), None, "still improving");
    o.losses.extend((41..=60).map(|s| (s, 0.05 + 0.001 * (s % 2) as f64)));
    assert!(o.plateau(0, 10, 0.05).unwrap().starts_with("plateau"));
    assert_eq!(o.plateau(55, 10, 0.05), None, "too few steps since the last rewrite");
    o.losses.push((61, 0.5));
    assert_eq!(o.instability(4.0, 20), None, "one hard batch is not a spike");
    o.losses.extend([(62, 0.6), (63, 0.7)]);
    assert!(o.instability(4.0, 20).unwrap().contains("over 4x the median"));
    o.losses.push((64, f64::NAN));
    assert!(o.instability(4.0, 20).unwrap().contains("became NaN"));
    // Near a loss of 0 a spike must also rise by a tenth of the run's early
    // loss: 0.01 against a median of 0.001 is 10x, and nothing went wrong.
    let mut o = Observer::default();
    o.loss_scale = Some(2.3);
    o.losses = (1..=20).map(|s| (s, 0.001)).collect();
    o.losses.extend([(21, 0.01), (22, 0.012), (23, 0.011)]);
    assert_eq!(o.instability(4.0, 20), None, "a tiny rise near 0 is not a spike");
    o.losses.extend([(24, 0.9), (25, 1.1), (26, 1.0)]);
    assert!(o.instability(4.0, 20).unwrap().contains("over 4x the median"), "a rise of 1.0 is");
    o.losses.push((27, f64::INFINITY));
    assert!(o.instability(4.0, 20).unwrap().contains("became inf"));
    // Gradient norms: a rise of half the run's early norm at least.
    let mut o = Observer::default();
    o.grad_scale = Some(0.7);
    o.losses = (1..=30).map(|s| (s, 0.01)).collect();
    let observed = |step: u64, grad_norm: f64| Observation { step, loss: 0.01, grad_norm, ..Default::default() };
    o.observations = (1..=6).map(|i| observed(i * 4, 0.02)).collect();
    o.observations.push(observed(30, 0.1));
    assert_eq!(o.instability(4.0, 20), None, "one misfit example late in a run");
    o.observations.push(observed(30, 0.6));
    assert!(o.instability(4.0, 20).unwrap().contains("gradient norm 0.6000"));
    // Held-out plateaus, a value per epoch.
    o.val_losses = vec![(45, 0.5), (90, 0.3), (135, 0.29), (180, 0.289)];
    assert!(o.val_plateau(0, 1, 0.05).unwrap().contains("held-out loss 0.2890 over the last 1 epoch,"));
    assert_eq!(o.val_plateau(0, 2, 0.05), None, "0.2895 against 0.4: still improving");
}

#[test]
fn a_held_out_plateau_grows_the_model_at_an_epoch_end() {
    let widen = zero_widen_rule("fc1", 24);
    let rule = Rule {
        trigger: Trigger::ValPlateau { window: 1, threshold: 0.5 },
        action: Action::Grow(widen),
        min_gap: 0,
        max_times: 0,
        lr_factor: 1.0,
        reset_optimizer: false,
        shrink: 1.0,
    };
    let mut run = Adaptive::new(trained("adam", 0.0, 3), policy(vec![rule]));
    assert_eq!(run.epoch_end(Progress { epoch: 1, ..Progress::default() }, Some(1.0)).unwrap(), None);
    let d = run
        .epoch_end(Progress { epoch: 2, ..Progress::default() }, Some(0.9))
        .unwrap()
        .expect("10% better is a plateau at 50%");
    assert!(run.decisions()[d].trigger.contains("held-out loss"), "{}", run.decisions()[d].trigger);
    assert_eq!(run.trainer().state()["fc1.weight"].shape, [24, 64]);
    // Widened to its cap: the rule has nothing left to do.
    assert_eq!(run.epoch_end(Progress { epoch: 3, ..Progress::default() }, Some(0.9)).unwrap(), None);
}

#[test]
fn observed_gradient_norms_agree_between_sgd_and_adam() {
    // Same initial parameters (same seed), same batch: the gradient is the
    // same, recovered from SGD's update and from Adam's first moment.
    let norms = |optimizer: &str| {
        let every = Policy { observe_every: 1, ..policy(vec![]) };
        let mut run = Adaptive::new(trained(optimizer, 0.0, 0), every);
        let [x, y] = batch(5);
        run.step(&[&x, &y], if optimizer == "sgd" { 0.05 } else { 3e-3 }, Progress::default()).unwrap();
        let o = run.observer().observations.last().cloned().expect("step 1 is observed");
        assert!(o.layers["fc1"].update_ratio > 0.0 && o.layers["fc2"].update_ratio > 0.0);
        (o.layers["fc1"].grad_norm, o.layers["fc2"].grad_norm, o.grad_norm)
    };
    let (s, a) = (norms("sgd"), norms("adam"));
    for (x, y) in [(s.0, a.0), (s.1, a.1), (s.2, a.2)] {
        assert!(x > 0.0 && close(x, y, 1e-3), "sgd {x} vs adam {y}");
    }
}

/// A causal self-attention (8 wide, 2 heads of 4) and a linear head over
/// 5 classes, per token, through the layer API.
fn attention_model() -> String {
    use aicf_compiler::nn::{self, DType as NnDType, Linear, MultiHeadAttention, Sequential, TensorSpec};
    let model =
        Sequential::new().push(MultiHeadAttention::new("attn", 8, 2, true).unwrap()).push(Linear::new("head", 8, 5));
    let x = TensorSpec::new([2, 6, 8], NnDType::F32);
    let targets = TensorSpec::new([2, 6], NnDType::I32);
    nn::classifier_module(&model, &x, &targets).unwrap().to_string()
}

fn tokens(i: usize) -> [Tensor; 2] {
    let x = (0..96).map(|k| (((k * 7 + i * 13) % 17) as f64 - 8.0) / 8.0).collect();
    let y = (0..12).map(|k| ((k + i) % 5) as f64).collect();
    [Tensor::new([2, 6, 8], DType::F32, x), Tensor::new([2, 6], DType::I32, y)]
}

#[test]
fn adding_attention_heads_preserves_the_function_and_starts_new_heads_at_zero_output() {
    let mut old = Trainer::from_source(&attention_model(), "attention.mlir", options("adam", 0.0)).unwrap();
    for i in 0..5 {
        let [x, y] = tokens(i);
        old.step(&[&x, &y], 1e-2).unwrap();
    }
    let op = Operator::Heads { attention: "attn".into(), heads: 3, mask: None, mask_delay: 0 };
    let mut g = grow(&old, &op, 0).unwrap();
    assert_eq!(
        g.rewrite.diff,
        [
            "attn.q_proj.weight 8x8 -> 12x8",
            "attn.q_proj.bias 8 -> 12",
            "attn.k_proj.weight 8x8 -> 12x8",
            "attn.k_proj.bias 8 -> 12",
            "attn.v_proj.weight 8x8 -> 12x8",
            "attn.v_proj.bias 8 -> 12",
            "attn.out_proj.weight 8x8 -> 8x12"
        ]
    );
    let [x, y] = tokens(9);
    let (a, b) = (old.loss(&[&x, &y]).unwrap(), g.trainer.loss(&[&x, &y]).unwrap());
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let (o, n) = (old.state(), g.trainer.state());
    for p in ["q_proj", "k_proj", "v_proj"] {
        let w = format!("attn.{p}.weight");
        for r in 0..12 {
            if r < 8 {
                assert_eq!(row(&n[&w], r), row(&o[&w], r));
                assert_eq!(row(&n[&format!("{w}.exp_avg")], r), row(&o[&format!("{w}.exp_avg")], r));
            } else {
                assert!(row(&n[&w], r).iter().any(|v| *v != 0.0), "{w} row {r} from the initialiser");
                assert!(row(&n[&format!("{w}.exp_avg_sq")], r).iter().all(|v| *v == 0.0));
            }
        }
    }
    for c in 0..12 {
        let col = column(&n["attn.out_proj.weight"], c);
        if c < 8 {
            assert_eq!(col, column(&o["attn.out_proj.weight"], c));
        } else {
            assert!(col.iter().all(|v| *v == 0.0), "new head's output column {c} starts at zero");
        }
    }
    assert_eq!(n["head.weight"], o["head.weight"]);
    let [x, y] = tokens(10);
    assert!(g.trainer.step(&[&x, &y], 1e-2).unwrap().loss.is_finite());
}

/// A small char LM (vocabulary 11, context 8, width 8, 2 heads, `layers`
/// pre-norm blocks), through the examples' layer-API model.
fn small_lm(layers: usize, dropout: f64) -> String {
    let config = crate::models::char_lm::Config { vocab: 11, context: 8, dim: 8, heads: 2, layers, dropout, batch: 2 };
    crate::models::char_lm::build(config).unwrap().text
}

/// Tokens and next tokens for step `i` (and, for a model with dropout, the
/// step's seed and offset).
fn lm_batch(i: usize, dropout: bool) -> Vec<Tensor> {
    let x: Vec<f64> = (0..16).map(|k| ((k * 5 + i * 3) % 11) as f64).collect();
    let y: Vec<f64> = (0..16).map(|k| ((k * 5 + i * 3 + 5) % 11) as f64).collect();
    let mut out = vec![Tensor::new([2, 8], DType::I32, x), Tensor::new([2, 8], DType::I32, y)];
    if dropout {
        out.push(Tensor::new(Vec::<usize>::new(), DType::I64, vec![7.0]));
        out.push(Tensor::new(Vec::<usize>::new(), DType::I64, vec![i as f64]));
    }
    out
}

fn trained_lm(layers: usize, dropout: f64, steps: usize) -> Trainer {
    let mut t = Trainer::from_source(&small_lm(layers, dropout), "small_lm.mlir", options("adam", 0.0)).unwrap();
    for i in 0..steps {
        let b = lm_batch(i, dropout > 0.0);
        t.step(&b.iter().collect::<Vec<_>>(), 1e-2).unwrap();
    }
    t
}

fn lm_loss(t: &mut Trainer, i: usize, dropout: bool) -> f64 {
    let b = lm_batch(i, dropout);
    t.loss(&b.iter().collect::<Vec<_>>()).unwrap()
}

fn lm_logits(t: &mut Trainer, i: usize) -> Tensor {
    let b = lm_batch(i, false);
    t.predict(&[&b[0]]).unwrap().remove(0)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    a.values.iter().zip(&b.values).map(|(p, q)| (p - q).abs()).fold(0.0, f64::max)
}

#[test]
fn widening_the_residual_stream_preserves_the_function_and_follows_each_slots_rule() {
    let mut old = trained_lm(2, 0.0, 6);
    let op = Operator::WidenResidual { width: 12, rule: Default::default(), noise: 0.0 };
    let mut g = grow(&old, &op, 0).unwrap();
    assert!(g.rewrite.exact, "no dropout: exact");
    for p in ["tok_emb.weight 11x8 -> 11x12", "blocks.1.ln2.weight 8 -> 12", "lm_head.weight 11x8 -> 11x12"] {
        assert!(g.rewrite.diff.iter().any(|d| d == p), "{p} in {:?}", g.rewrite.diff);
    }
    assert!(g.rewrite.source.contains("eps = 6.66666"), "eps scaled by 8/12");
    let (a, b) = (lm_loss(&mut old, 20, false), lm_loss(&mut g.trainer, 20, false));
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let worst = max_diff(&lm_logits(&mut old, 21), &lm_logits(&mut g.trainer, 21));
    assert!(worst < 1e-4, "logits differ by {worst}");

    let (o, n) = (old.state(), g.trainer.state());
    let s = (8.0f64 / 12.0).sqrt();
    // Values are f32 in the session: 1e-6.
    // Producers: old columns kept, new columns the mean of the old; state zero-filled.
    for p in ["tok_emb.weight", "pos_emb.weight"] {
        for r in 0..n[p].shape[0] {
            let (nr, or) = (row(&n[p], r), row(&o[p], r));
            assert_eq!(&nr[..8], or);
            let mean = or.iter().sum::<f64>() / 8.0;
            assert!(nr[8..].iter().all(|v| close(*v, mean, 1e-6)), "{p} row {r} new columns are the mean");
            assert!(row(&n[&format!("{p}.exp_avg")], r)[8..].iter().all(|v| *v == 0.0));
            assert_eq!(&row(&n[&format!("{p}.exp_avg_sq")], r)[..8], row(&o[&format!("{p}.exp_avg_sq")], r));
        }
    }
    let w = "blocks.0.attn.out_proj.weight";
    for r in 8..12 {
        let mean: Vec<f64> = (0..8).map(|c| column(&o[w], c).iter().sum::<f64>() / 8.0).collect();
        assert!(row(&n[w], r).iter().zip(&mean).all(|(v, m)| close(*v, *m, 1e-6)), "{w} new row {r} is the mean row");
    }
    // Layer norms: old weights times sqrt(8/12), moments by the gradient's scale, new bias zero.
    let ln = "blocks.1.ln1.weight";
    for c in 0..12 {
        let v = n[ln].values[c];
        if c < 8 {
            assert!(close(v, o[ln].values[c] * s, 1e-6));
            assert!(close(n[&format!("{ln}.exp_avg")].values[c], o[&format!("{ln}.exp_avg")].values[c] / s, 1e-6));
            assert!(close(
                n[&format!("{ln}.exp_avg_sq")].values[c],
                o[&format!("{ln}.exp_avg_sq")].values[c] / (s * s),
                1e-6
            ));
        } else {
            assert!(close(v, s, 1e-6));
            assert_eq!(n[&format!("{ln}.exp_avg")].values[c], 0.0);
            assert_eq!(n["blocks.1.ln1.bias"].values[c], 0.0);
        }
    }
    // Consumers of a norm: new columns from the initialiser (not zero), state zero.
    let q = "blocks.0.attn.q_proj.weight";
    assert!((8..12).any(|c| column(&n[q], c).iter().any(|v| *v != 0.0)));
    assert!((8..12).all(|c| column(&n[&format!("{q}.exp_avg")], c).iter().all(|v| *v == 0.0)));
    assert_eq!(n["step"], o["step"], "the step count is kept");
    let b = lm_batch(30, false);
    assert!(g.trainer.step(&b.iter().collect::<Vec<_>>(), 1e-2).unwrap().loss.is_finite());
}

#[test]
fn widening_the_residual_stream_by_duplication_preserves_the_function_and_rescales_the_writers_moments() {
    use aicf_compiler::passes::grow_stream::ResidualRule;
    let mut old = trained_lm(2, 0.0, 6);
    let op = Operator::WidenResidual { width: 16, rule: ResidualRule::Duplicate, noise: 0.5 };
    let mut g = grow(&old, &op, 0).unwrap();
    assert!(g.rewrite.exact, "no dropout: exact");
    // Copies keep every token's mean and variance: no norm's eps changes.
    let eps = |text: &str| {
        text.lines().filter_map(|l| l.split_once(" eps = ").map(|(_, e)| e.to_string())).collect::<Vec<_>>()
    };
    let (before, after) = (eps(old.source()), eps(&g.rewrite.source));
    assert!(!before.is_empty() && before.len() == after.len());
    assert!(
        before.iter().zip(&after).all(|(a, b)| a.split(' ').next() == b.split(' ').next()),
        "{before:?} -> {after:?}"
    );
    let (a, b) = (lm_loss(&mut old, 20, false), lm_loss(&mut g.trainer, 20, false));
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let worst = max_diff(&lm_logits(&mut old, 21), &lm_logits(&mut g.trainer, 21));
    assert!(worst < 1e-4, "logits differ by {worst}");

    let (o, n) = (old.state(), g.trainer.state());
    let slot = |t: &State, p: &str, k: &str| t[&format!("{p}.{k}")].clone();
    // Writers (embeddings, projections added into the stream) and the norms:
    // channel j copies channel j mod 8; first moments / 2, second / 4.
    for p in [
        "tok_emb.weight",
        "blocks.0.attn.out_proj.weight",
        "blocks.1.mlp.proj.bias",
        "blocks.1.ln1.weight",
        "ln_f.bias",
    ] {
        let (nw, ow) = (&n[p], &o[p]);
        let axis = nw.shape.len() - if p.ends_with("out_proj.weight") { 2 } else { 1 };
        let (m_new, m_old) = (slot(&n, p, "exp_avg"), slot(&o, p, "exp_avg"));
        let (v_new, v_old) = (slot(&n, p, "exp_avg_sq"), slot(&o, p, "exp_avg_sq"));
        let inner: usize = ow.shape[axis + 1..].iter().product();
        for k in 0..nw.values.len() {
            let (outer, j, i) = (k / (16 * inner), (k / inner) % 16, k % inner);
            let src = (outer * 8 + j % 8) * inner + i;
            assert_eq!(nw.values[k], ow.values[src], "{p}[{k}] copies its channel");
            assert!(close(m_new.values[k], m_old.values[src] / 2.0, 1e-6), "{p}.exp_avg[{k}]");
            assert!(close(v_new.values[k], v_old.values[src] / 4.0, 1e-6), "{p}.exp_avg_sq[{k}]");
        }
    }
    // Readers: each old column split between its two copies (they sum to
    // it and differ by the noise); their moments copied.
    for p in ["blocks.0.attn.q_proj.weight", "blocks.1.mlp.fc.weight", "lm_head.weight"] {
        for c in 0..8 {
            let (x, y, old_col) = (column(&n[p], c), column(&n[p], c + 8), column(&o[p], c));
            assert!(x.iter().zip(&y).zip(&old_col).all(|((a, b), w)| close(a + b, *w, 1e-5)), "{p} column {c} split");
            assert!(
                x.iter().zip(&y).any(|(a, b)| (a - b).abs() > 1e-4),
                "{p} column {c}: the noise breaks the symmetry"
            );
            for k in ["exp_avg", "exp_avg_sq"] {
                let (nm, om) = (slot(&n, p, k), slot(&o, p, k));
                assert_eq!(column(&nm, c), column(&om, c));
                assert_eq!(column(&nm, c + 8), column(&om, c));
            }
        }
    }
    assert_eq!(n["step"], o["step"], "the step count is kept");
    // One step: the copies' writers see different gradients (the readers differ) and part.
    let b = lm_batch(30, false);
    assert!(g.trainer.step(&b.iter().collect::<Vec<_>>(), 1e-2).unwrap().loss.is_finite());
    let e = &g.trainer.state()["tok_emb.weight"];
    assert!((0..8).any(|c| column(e, c) != column(e, c + 8)), "the copies part after a step");

    // A width that is not a multiple of the old one cannot be duplicated.
    let op = Operator::WidenResidual { width: 12, rule: ResidualRule::Duplicate, noise: 0.5 };
    let err = grow(&old, &op, 0).err().expect("width 12 refused").to_string();
    assert!(err.contains("must be a multiple of the stream's 8 channels"), "{err}");
    for (bad, says) in [
        ("{ op = \"widen-residual\", noise = 0.5 }", "noise is the duplicate rule's"),
        ("{ op = \"widen-residual\", rule = \"duplicate\", noise = -1.0 }", "it must be at least 0"),
        ("{ op = \"widen-residual\", rule = \"copy\" }", "unknown variant"),
    ] {
        let err = Policy::parse(&format!("[[rule]]\nwhen = \"steps\"\nat = 3\naction = {bad}")).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn a_new_block_with_zero_output_projections_is_the_identity_under_dropout_and_renames_the_later_blocks() {
    let mut old = trained_lm(2, 0.1, 6);
    let op = Operator::AddBlock {
        prefix: "blocks".into(),
        at: Some(1),
        from: Some(0),
        init: Default::default(),
        state: Default::default(),
        mask: None,
        mask_delay: 0,
    };
    let mut g = grow(&old, &op, 0).unwrap();
    assert!(g.rewrite.exact);
    assert!(g.rewrite.diff.iter().any(|d| d == "+blocks.2.mlp.proj.weight 8x32"), "{:?}", g.rewrite.diff);
    // Dropout included: the old ops keep their masks, the new block adds zero.
    let (a, b) = (lm_loss(&mut old, 20, true), lm_loss(&mut g.trainer, 20, true));
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let (o, n) = (old.state(), g.trainer.state());
    // Old block 1 is block 2 now, values and state.
    for s in ["blocks.1.attn.q_proj.weight", "blocks.1.mlp.fc.bias.exp_avg_sq", "blocks.1.ln2.weight"] {
        assert_eq!(n[&s.replace("blocks.1", "blocks.2")], o[s], "{s} moved up");
    }
    for s in ["blocks.0.attn.q_proj.weight", "lm_head.weight"] {
        assert_eq!(n[s], o[s]);
    }
    // The new block: output projections zero, the rest from the initialisers, state zero.
    for p in ["attn.out_proj.weight", "attn.out_proj.bias", "mlp.proj.weight", "mlp.proj.bias"] {
        assert!(n[&format!("blocks.1.{p}")].values.iter().all(|v| *v == 0.0), "blocks.1.{p} zero");
    }
    assert!(n["blocks.1.attn.q_proj.weight"].values.iter().any(|v| *v != 0.0));
    assert_ne!(n["blocks.1.attn.q_proj.weight"], o["blocks.0.attn.q_proj.weight"]);
    assert!(n["blocks.1.mlp.fc.weight.exp_avg"].values.iter().all(|v| *v == 0.0));
    assert_eq!(n["step"], o["step"]);
    let b = lm_batch(30, true);
    assert!(g.trainer.step(&b.iter().collect::<Vec<_>>(), 1e-2).unwrap().loss.is_finite());
}

#[test]
fn stacking_copies_a_blocks_values_and_by_its_rule_its_state() {
    let old = trained_lm(2, 0.0, 6);
    let op = Operator::AddBlock {
        prefix: "blocks".into(),
        at: None,
        from: Some(0),
        init: aicf_compiler::train::adapt::BlockInit::Copy,
        state: aicf_compiler::train::adapt::SlotRule::Copy,
        mask: None,
        mask_delay: 0,
    };
    assert!(!op.exact());
    let g = grow(&old, &op, 0).unwrap();
    let (o, n) = (old.state(), g.trainer.state());
    for s in ["attn.q_proj.weight", "attn.out_proj.bias", "mlp.proj.weight.exp_avg", "ln1.weight.exp_avg_sq"] {
        assert_eq!(n[&format!("blocks.2.{s}")], o[&format!("blocks.0.{s}")], "blocks.2.{s} copies blocks.0's");
    }
    // Copying state needs copied values.
    let bad = Operator::AddBlock {
        prefix: "blocks".into(),
        at: None,
        from: None,
        init: Default::default(),
        state: aicf_compiler::train::adapt::SlotRule::Copy,
        mask: None,
        mask_delay: 0,
    };
    assert!(grow(&old, &bad, 0).is_err());
}

#[test]
fn composed_transformer_growth_reaches_the_target_shape_and_preserves_the_function() {
    // 2 blocks of width 8 (2 heads, MLP 32) to 4 blocks of width 16 (4 heads, MLP 64), as a policy would.
    let mut old = trained_lm(2, 0.0, 6);
    let text = r#"
        [[rule]]
        when = "steps"
        at = 7
        action = { op = "compose", ops = [
            { op = "widen-residual", factor = 2.0 },
            { op = "heads", attention = "blocks.*.attn", add = 2 },
            { op = "widen", layer = "blocks.*.mlp.fc", factor = 2.0, rule = "zero-out" },
            { op = "add-block", count = 2, max_blocks = 4 },
        ] }
    "#;
    let policy = Policy::parse(text).unwrap();
    let Action::Grow(template) = &policy.rules[0].action else { panic!("a growth action") };
    let op = template.resolve(&old, 0).expect("resolves");
    let Operator::Compose { ops } = &op else { panic!("a composition, got {op:?}") };
    assert_eq!(ops.len(), 1 + 2 + 2 + 2, "{ops:?}");
    let mut g = grow(&old, &op, 0).unwrap();
    let config =
        crate::models::char_lm::Config { vocab: 11, context: 8, dim: 16, heads: 4, layers: 4, dropout: 0.0, batch: 2 };
    let target_text = crate::models::char_lm::build(config).unwrap().text;
    let target = Trainer::from_source(&target_text, "target.mlir", options("adam", 0.0)).unwrap();
    let (shapes, want): (Vec<_>, Vec<_>) = (
        g.trainer.state().into_iter().map(|(k, v)| (k, v.shape)).collect(),
        target.state().into_iter().map(|(k, v)| (k, v.shape)).collect(),
    );
    assert_eq!(shapes, want, "the grown model has the target's parameters");
    let (a, b) = (lm_loss(&mut old, 20, false), lm_loss(&mut g.trainer, 20, false));
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let b = lm_batch(30, false);
    assert!(g.trainer.step(&b.iter().collect::<Vec<_>>(), 1e-2).unwrap().loss.is_finite());
}

#[test]
fn a_masked_block_trains_bit_for_bit_like_the_model_without_it_then_ramps_in() {
    // A block copied from block 0 (not function-preserving by itself), masked: delay 3, ramp over 4.
    let mut old = trained_lm(2, 0.1, 4);
    let op = Operator::AddBlock {
        prefix: "blocks".into(),
        at: Some(1),
        from: Some(0),
        init: aicf_compiler::train::adapt::BlockInit::Copy,
        state: Default::default(),
        mask: Some(4),
        mask_delay: 3,
    };
    assert!(op.exact(), "masked: exact for any values");
    let mut g = grow(&old, &op, 0).unwrap();
    assert!(
        g.rewrite.source.contains("hl.state @blocks.1.mask : tensor<f32> slot \"mask\""),
        "the mask counter is declared"
    );
    let renamed = |name: &str| name.replace("blocks.1.", "blocks.2.");
    let at_growth = old.state();
    for k in 0..3 {
        let b = lm_batch(40 + k, true);
        let inputs: Vec<&Tensor> = b.iter().collect();
        let (a, c) = (old.step(&inputs, 1e-2).unwrap().loss, g.trainer.step(&inputs, 1e-2).unwrap().loss);
        assert_eq!(a.to_bits(), c.to_bits(), "step {k}: loss {a} vs {c}");
        let (o, n) = (old.state(), g.trainer.state());
        for (name, t) in &o {
            assert_eq!(t.values, n[&renamed(name)].values, "step {k}: {name} bit for bit");
        }
        assert_eq!(n["blocks.1.mask"].values, [k as f64 + 1.0], "the counter advances");
    }
    // The new block has not moved while masked; its state is still zero.
    let n = g.trainer.state();
    assert_eq!(n["blocks.1.attn.q_proj.weight"], at_growth["blocks.0.attn.q_proj.weight"]);
    assert!(n["blocks.1.mlp.fc.weight.exp_avg"].values.iter().all(|v| *v == 0.0));
    // Then it ramps in: the runs part, the new block trains.
    let mut parted = false;
    for k in 3..6 {
        let b = lm_batch(40 + k, true);
        let inputs: Vec<&Tensor> = b.iter().collect();
        let (a, c) = (old.step(&inputs, 1e-2).unwrap().loss, g.trainer.step(&inputs, 1e-2).unwrap().loss);
        parted |= a.to_bits() != c.to_bits();
    }
    assert!(parted, "with the mask above 0 the grown model computes something else");
    assert!(g.trainer.state()["blocks.1.mlp.fc.weight.exp_avg"].values.iter().any(|v| *v != 0.0));
}

#[test]
fn grown_entries_are_bias_corrected_by_their_own_age_when_the_policy_asks() {
    use aicf_compiler::train::adapt::grow_with;
    let old = trained("adam", 0.0, 20);
    let op = zero_widen("fc1", 24);
    let mut aged = grow_with(&old, &op, 0, true).unwrap();
    let mut plain = grow(&old, &op, 0).unwrap();
    assert!(aged.rewrite.source.contains("hl.state @fc1.weight.age : tensor<24x64xf32> of @fc1.weight slot \"age\""));
    assert!(!plain.rewrite.source.contains(".age"));
    let n = aged.trainer.state();
    // Kept entries are as old as the run, new ones 0.
    for r in 0..24 {
        let want = if r < 16 { 20.0 } else { 0.0 };
        assert!(row(&n["fc1.weight.age"], r).iter().all(|v| *v == want), "fc1.weight.age row {r}");
        assert_eq!(n["fc1.bias.age"].values[r], want);
    }
    assert!((0..24).all(|c| column(&n["fc2.weight.age"], c).iter().all(|v| *v == if c < 16 { 20.0 } else { 0.0 })));
    let lr = 3e-3;
    let [x, y] = batch(50);
    aged.trainer.step(&[&x, &y], lr).unwrap();
    plain.trainer.step(&[&x, &y], lr).unwrap();
    let (a, p) = (aged.trainer.state(), plain.trainer.state());
    assert!(
        row(&a["fc1.weight.age"], 20).iter().all(|v| *v == 1.0)
            && row(&a["fc1.weight.age"], 0).iter().all(|v| *v == 21.0)
    );
    // The new, zero outgoing weights' first Adam step: by their own age
    // (t = 1) it is lr * g / |g| = lr; by the run's (t = 21) about 0.51 lr.
    // (Each model draws its new units from its own initialiser, so each is
    // checked where its own gradient is clearly non-zero.)
    let first_steps = |s: &State| -> Vec<f64> {
        let mut out = Vec::new();
        for c in 16..24 {
            let (w, m) = (column(&s["fc2.weight"], c), column(&s["fc2.weight.exp_avg"], c));
            out.extend(w.iter().zip(&m).filter(|(_, m)| (*m / 0.1).abs() > 1e-4).map(|(w, _)| w.abs() / lr));
        }
        out
    };
    let (by_age, by_run) = (first_steps(&a), first_steps(&p));
    let seen = by_age.len().min(by_run.len());
    let worst_aged = by_age.iter().map(|u| (u - 1.0).abs()).fold(0.0, f64::max);
    let worst_plain = by_run.iter().map(|u| (u - 0.51).abs()).fold(0.0, f64::max);
    assert!(seen > 10, "enough new entries with a gradient ({seen})");
    assert!(worst_aged < 1e-3, "by age: |update| = lr (worst relative error {worst_aged})");
    assert!(worst_plain < 0.01, "by the run's step: 0.51 lr (worst {worst_plain})");
    // Kept entries update as before: the same values either way.
    assert_eq!(row(&a["fc1.weight"], 3), row(&p["fc1.weight"], 3));
}

#[test]
fn schedules_grow_every_k_steps_or_at_a_flops_budget_and_bad_schedules_are_refused() {
    let text = r#"
        [[rule]]
        when = "steps"
        every = 4
        action = { op = "widen", layer = "fc1", factor = 2.0, max_width = 64, rule = "zero-out" }

        [[rule]]
        when = "flops"
        flops = 2.0e6
        action = { op = "deepen", after = "fc1", residual = true }
    "#;
    let mut p = Policy::parse(text).unwrap();
    assert_eq!(p.rules[0].trigger, Trigger::EverySteps { every: 4 });
    assert_eq!(p.rules[1].trigger, Trigger::Flops { at: 2.0e6 });
    p.prefetch = false;
    let mut run = Adaptive::new(trained("adam", 0.0, 0), p);
    let mut grown = Vec::new();
    for i in 0..13 {
        let [x, y] = batch(i);
        if let Outcome::Trained(_, Some(d)) = run.step(&[&x, &y], 3e-3, Progress::default()).unwrap() {
            grown.push((run.trainer().steps(), run.decisions()[d].action.clone()));
        }
    }
    // 16 -> 32 at step 4, -> 64 at step 8, then capped; the FLOPs budget
    // (the narrow model's steps count about 0.2 MFLOPs each, more once wider) once.
    let widen: Vec<u64> = grown.iter().filter(|(_, a)| a.starts_with("widen")).map(|(s, _)| *s).collect();
    assert_eq!(widen, [4, 8], "{grown:?}");
    let deepen: Vec<&(u64, String)> = grown.iter().filter(|(_, a)| a.starts_with("deepen")).collect();
    assert_eq!(deepen.len(), 1, "{grown:?}");
    assert_eq!(run.trainer().state()["fc1.weight"].shape, [64, 64]);
    assert!(run.decisions().iter().any(|d| d.trigger.contains("training FLOPs reached")));

    for (bad, says) in [
        ("when = \"steps\"\naction = \"rollback\"", "needs at = STEP or every = STEPS"),
        ("when = \"steps\"\nat = 3\nevery = 2\naction = \"rollback\"", "needs at = STEP or every = STEPS"),
        ("when = \"flops\"\nflops = -1.0\naction = \"rollback\"", "is not a positive number"),
        ("when = \"epoch\"\nflops = 1.0\naction = \"rollback\"", "takes every = ..., not flops"),
        ("when = \"steps\"\nat = 3\naction = { op = \"add-block\", init = \"sideways\" }", "unknown variant"),
        ("when = \"steps\"\nat = 3\naction = { op = \"add-block\", count = 0 }", "count = 0: it counts from 1"),
        (
            "when = \"steps\"\nat = 3\naction = { op = \"compose\", ops = [{ op = \"widen\", layer = \"fc1\", mask = 0 }] }",
            "mask = 0",
        ),
    ] {
        let err = Policy::parse(&format!("[[rule]]\n{bad}")).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn shrink_moves_every_parameter_toward_a_fresh_initialisation_and_keeps_the_optimizer_state() {
    let policy = |shrink: &str| {
        let mut p = Policy::parse(&format!(
            "max_loss_increase = 100.0\n[[rule]]\nwhen = \"steps\"\nat = 4\n{shrink}\naction = {{ op = \"widen\", \
             layer = \"fc1\", width = 32, rule = \"zero-out\" }}"
        ))
        .unwrap();
        p.prefetch = false;
        p
    };
    assert_eq!(policy("").rules[0].shrink, 1.0, "none by default");
    let mut plain = Adaptive::new(trained("adam", 0.0, 0), policy(""));
    let mut shrunk = Adaptive::new(trained("adam", 0.0, 0), policy("shrink = 0.25"));
    let progress = Progress::default();
    for i in 0..4 {
        let [x, y] = batch(i);
        plain.step(&[&x, &y], 3e-3, progress).unwrap();
        shrunk.step(&[&x, &y], 3e-3, progress).unwrap();
    }
    let t = shrunk.trainer();
    assert_eq!(t.state()["fc1.weight"].shape, [32, 64]);
    let d = &shrunk.decisions()[0];
    assert_eq!(d.outcome, "accepted");
    assert!(d.action.contains("shrunk to 0.25 x toward a fresh initialisation") && !d.exact, "{d:?}");
    // Each parameter: a quarter of the plain growth's value plus three
    // quarters of the grown model's initialiser draw; slots unchanged.
    let init = aicf_compiler::train::adapt::rewrite::initial_state(t.source(), t.name(), t.options()).unwrap();
    let (a, b) = (plain.trainer().state(), t.state());
    for name in ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"] {
        for ((&p, &s), &i) in a[name].values.iter().zip(&b[name].values).zip(&init[name].values) {
            assert!((s - (0.25 * p + 0.75 * i)).abs() < 1e-6, "{name}: {s} against {p} and {i}");
        }
        assert_ne!(a[name].values, b[name].values, "{name} moved");
    }
    for slot in ["fc1.weight.exp_avg", "fc1.weight.exp_avg_sq", "fc2.bias.exp_avg"] {
        assert_eq!(a[slot].values, b[slot].values, "{slot}");
    }
    for (bad, says) in
        [("shrink = 0.0", "shrink = 0 is not in (0, 1]"), ("shrink = 1.5", "shrink = 1.5 is not in (0, 1]")]
    {
        let text = format!("[[rule]]\nwhen = \"steps\"\nat = 4\n{bad}\naction = {{ op = \"widen\", layer = \"fc1\" }}");
        let err = Policy::parse(&text).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
    let err = Policy::parse("[[rule]]\nwhen = \"instability\"\nshrink = 0.5\naction = \"rollback\"").unwrap_err();
    assert!(err.contains("shrink applies to a growth"), "{err}");
}

#[test]
fn a_growth_rules_lr_factor_scales_the_rate_from_then_on_and_its_rollback_undoes_it() {
    // With restart_schedule the run's schedule counts from the growth too.
    let text = r#"
        watch_steps = 20
        restart_schedule = true

        [[rule]]
        when = "steps"
        at = 4
        lr_factor = 0.25
        action = { op = "widen", layer = "fc1", width = 32, rule = "zero-out" }

        [[rule]]
        when = "instability"
        action = { rollback = { lr_factor = 0.5 } }
    "#;
    let mut p = Policy::parse(text).unwrap();
    assert_eq!(p.rules[0].lr_factor, 0.25);
    assert_eq!(p.rules[1].lr_factor, 1.0);
    assert!(p.restart_schedule && !Policy::parse("").unwrap().restart_schedule, "off by default");
    p.prefetch = false;
    let mut run = Adaptive::new(trained("adam", 0.0, 0), p);
    let progress = Progress::default();
    for i in 0..4 {
        let [x, y] = batch(i);
        let out = run.step(&[&x, &y], 3e-3, progress).unwrap();
        assert_eq!(run.lr_scale(), if i < 3 { 1.0 } else { 0.25 }, "step {i}: {out:?}");
        assert_eq!(run.schedule_from(), if i < 3 { 0 } else { 4 }, "step {i}");
    }
    // The schedule's origin is carried through a checkpoint's adaptive state.
    assert_eq!(run.snapshot().0.schedule_from, 4);
    assert_eq!(run.trainer().state()["fc1.weight"].shape, [32, 64]);
    // The grown model's steps run at a quarter of the rate: the same update
    // as the grown model trained alone at 3e-3 / 4.
    let mut alone = Trainer::from_source(run.trainer().source(), "alone", options("adam", 0.0)).unwrap();
    alone.set_state(&run.trainer().state()).unwrap();
    alone.set_steps(run.trainer().steps());
    let [x, y] = batch(4);
    run.step(&[&x, &y], 3e-3, progress).unwrap();
    alone.step(&[&x, &y], 3e-3 * 0.25).unwrap();
    assert_eq!(run.trainer().state()["fc1.weight"].values, alone.state()["fc1.weight"].values);
    // A diverging step in the watch window rolls the growth back, and the
    // factor before it returns.
    let [x, y] = batch(5);
    run.step(&[&x, &y], 1e30, progress).unwrap();
    let [x, y] = batch(6);
    assert!(matches!(run.step(&[&x, &y], 3e-3, progress).unwrap(), Outcome::RolledBack(..)));
    assert_eq!(run.trainer().state()["fc1.weight"].shape, [16, 64]);
    assert_eq!(run.lr_scale(), 1.0);
    assert_eq!(run.schedule_from(), 0, "the schedule counts from where it did before the growth");

    for (bad, says) in [
        ("when = \"instability\"\nlr_factor = 0.5\naction = \"rollback\"", "a rollback takes its learning-rate factor"),
        (
            "when = \"steps\"\nat = 3\nlr_factor = 0.0\naction = { op = \"widen\", layer = \"fc1\" }",
            "lr_factor = 0 is not in (0, 100]",
        ),
    ] {
        let err = Policy::parse(&format!("[[rule]]\n{bad}")).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn blocks_added_one_after_another_with_ages_keep_their_declarations_in_block_order() {
    // 1 block to 4, with ages declared by each rewrite (the 4x experiment's path).
    use aicf_compiler::train::adapt::grow_with;
    let mut old = trained_lm(1, 0.0, 4);
    let block = |_: usize| Operator::AddBlock {
        prefix: "blocks".into(),
        at: None,
        from: None,
        init: Default::default(),
        state: Default::default(),
        mask: None,
        mask_delay: 0,
    };
    let op = Operator::Compose {
        ops: vec![
            Operator::WidenResidual { width: 16, rule: Default::default(), noise: 0.0 },
            block(1),
            block(2),
            block(3),
        ],
    };
    let mut g = grow_with(&old, &op, 0, true).unwrap();
    let n = g.trainer.state();
    for i in 0..4 {
        assert_eq!(n[&format!("blocks.{i}.mlp.proj.weight")].shape, [16, 32]);
        assert!(n.contains_key(&format!("blocks.{i}.attn.out_proj.weight.age")), "blocks.{i} has ages");
    }
    assert!(n["blocks.3.attn.q_proj.weight.age"].values.iter().all(|v| *v == 0.0));
    let (a, b) = (lm_loss(&mut old, 20, false), lm_loss(&mut g.trainer, 20, false));
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
}

#[test]
fn blocks_copied_or_moved_up_take_their_sources_ages_or_the_runs_step() {
    // With ages, a block stacked by copy (values and state) takes its
    // source's ages, and a block inserted before others moves their ages up,
    // also where no earlier rewrite declared them: then every entry is as old
    // as the run.
    use aicf_compiler::train::adapt::{BlockInit, SlotRule, grow_with};
    let old = trained_lm(2, 0.0, 6);
    let step = old.state()["step"].values[0];
    assert!(step > 0.0);
    let add = |at, from, init, state| Operator::AddBlock {
        prefix: "blocks".into(),
        at,
        from,
        init,
        state,
        mask: None,
        mask_delay: 0,
    };
    let stacked = Operator::Compose {
        ops: vec![
            add(Some(2), Some(0), BlockInit::Copy, SlotRule::Copy),
            add(Some(3), Some(1), BlockInit::Copy, SlotRule::Copy),
        ],
    };
    let g = grow_with(&old, &stacked, 0, true).unwrap();
    let (o, n) = (old.state(), g.trainer.state());
    for (to, from) in [(2, 0), (3, 1)] {
        for s in ["attn.q_proj.weight", "mlp.fc.bias.exp_avg"] {
            assert_eq!(n[&format!("blocks.{to}.{s}")], o[&format!("blocks.{from}.{s}")], "blocks.{to}.{s}");
        }
        let age = &n[&format!("blocks.{to}.attn.k_proj.bias.age")];
        assert!(age.values.iter().all(|v| *v == step), "blocks.{to}'s ages are its source's, the run's step");
    }
    // A fresh block at 1: its ages start at 0; old block 1, now 2, keeps the run's.
    let inserted = add(Some(1), Some(0), BlockInit::Zero, SlotRule::Zero);
    let g = grow_with(&old, &inserted, 0, true).unwrap();
    let n = g.trainer.state();
    assert!(n["blocks.1.mlp.proj.weight.age"].values.iter().all(|v| *v == 0.0));
    assert!(n["blocks.2.mlp.proj.weight.age"].values.iter().all(|v| *v == step));
    assert_eq!(n["blocks.2.mlp.proj.weight"], o["blocks.1.mlp.proj.weight"]);
}

#[test]
fn masked_fresh_units_preserve_the_function_and_ramp_in_by_their_own_counters() {
    // New units with non-zero outgoing weights (`fresh`) change the function
    // unless masked; masked (delay 2, ramp 4) they do not, get no gradient
    // while their mask is 0, and a later masked widening keeps the counters.
    let mut old = trained("adam", 0.0, 10);
    let widen = |width: usize, mask: Option<usize>| Operator::Widen {
        layer: "fc1".into(),
        width,
        rule: WidenRule::Fresh,
        split_noise: 0.0,
        noise: 0.0,
        mask,
        mask_delay: 2,
    };
    assert!(!widen(24, None).exact() && widen(24, Some(4)).exact());
    assert!(grow(&old, &widen(24, Some(0)), 0).is_err(), "a mask over 0 steps is refused");
    let [x, y] = batch(40);
    let unmasked = grow(&old, &widen(24, None), 0).unwrap();
    let mut masked = grow(&old, &widen(24, Some(4)), 0).unwrap();
    let mut unmasked = unmasked.trainer;
    let base = old.loss(&[&x, &y]).unwrap();
    let (a, b) = (unmasked.loss(&[&x, &y]).unwrap(), masked.trainer.loss(&[&x, &y]).unwrap());
    assert!(!close(base, a, 1e-4), "fresh outgoing weights move the loss ({base} -> {a})");
    assert!(close(base, b, 1e-6), "masked: {base} -> {b}");
    let n = masked.trainer.state();
    assert_eq!(n["fc1.mask"].values, [vec![6.0; 16], vec![0.0; 8]].concat(), "kept units full, new ones at 0");
    assert!((16..24).all(|c| column(&n["fc2.weight"], c).iter().any(|v| *v != 0.0)), "fresh outgoing weights");
    let before = n["fc1.weight"].clone();
    for i in 0..2 {
        let [x, y] = batch(41 + i);
        masked.trainer.step(&[&x, &y], 3e-3).unwrap();
    }
    let n = masked.trainer.state();
    for r in 16..24 {
        assert_eq!(row(&n["fc1.weight"], r), row(&before, r), "masked unit {r} gets no gradient");
    }
    assert!((0..16).any(|r| row(&n["fc1.weight"], r) != row(&before, r)), "kept units train");
    assert_eq!(n["fc1.mask"].values[20], 2.0);
    // A second masked widening: the counters carry, the new units start at 0.
    let g = grow(&masked.trainer, &widen(32, Some(4)), 0).unwrap();
    let m = &g.trainer.state()["fc1.mask"].values;
    assert_eq!(&m[..24], &[vec![8.0; 16], vec![2.0; 8]].concat()[..]);
    assert!(m[24..].iter().all(|v| *v == 0.0));
    assert_eq!(g.rewrite.source.matches("hl.mask").count(), masked.trainer.source().matches("hl.mask").count());
    // Net2Wider with a mask is refused: its copies share the kept units' outgoing weights.
    let bad = Operator::Widen {
        layer: "fc1".into(),
        width: 24,
        rule: WidenRule::Net2wider,
        split_noise: 0.0,
        noise: 0.0,
        mask: Some(4),
        mask_delay: 0,
    };
    assert!(grow(&old, &bad, 0).is_err());
}

#[test]
fn a_models_initial_state_without_compiling_is_the_compiled_sessions() {
    // What a composition's intermediate models start from.
    let source = small_lm(2, 0.1);
    let compiled = Trainer::from_source(&source, "small_lm.mlir", options("adam", 0.0)).unwrap();
    let state =
        aicf_compiler::train::adapt::rewrite::initial_state(&source, "small_lm.mlir", &options("adam", 0.0)).unwrap();
    assert_eq!(state, compiled.state());
}

#[test]
fn masked_heads_with_fresh_output_columns_preserve_the_function_and_stay_still_while_masked() {
    let mut old = Trainer::from_source(&attention_model(), "attention.mlir", options("adam", 0.0)).unwrap();
    for i in 0..5 {
        let [x, y] = tokens(i);
        old.step(&[&x, &y], 1e-2).unwrap();
    }
    let op = Operator::Heads { attention: "attn".into(), heads: 3, mask: Some(4), mask_delay: 1 };
    let mut g = grow(&old, &op, 0).unwrap();
    let [x, y] = tokens(9);
    let (a, b) = (old.loss(&[&x, &y]).unwrap(), g.trainer.loss(&[&x, &y]).unwrap());
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
    let n = g.trainer.state();
    assert!((8..12).any(|c| column(&n["attn.out_proj.weight"], c).iter().any(|v| *v != 0.0)), "fresh output columns");
    assert_eq!(n["attn.mask"].values, [vec![5.0; 8], vec![0.0; 4]].concat());
    let q = n["attn.q_proj.weight"].clone();
    for i in 0..2 {
        let [x, y] = tokens(20 + i);
        g.trainer.step(&[&x, &y], 1e-2).unwrap();
    }
    let n = g.trainer.state();
    for r in 8..12 {
        assert_eq!(row(&n["attn.q_proj.weight"], r), row(&q, r), "masked head row {r} gets no gradient");
    }
    assert!((0..8).any(|r| row(&n["attn.q_proj.weight"], r) != row(&q, r)));
    // A second masked growth carries the counters and keeps one mask.
    let more = Operator::Heads { attention: "attn".into(), heads: 4, mask: Some(4), mask_delay: 1 };
    let g2 = grow(&g.trainer, &more, 0).unwrap();
    assert_eq!(g2.trainer.state()["attn.mask"].values, [vec![7.0; 8], vec![2.0; 4], vec![0.0; 4]].concat());
    assert_eq!(g2.rewrite.source.matches("hl.mask").count(), g.rewrite.source.matches("hl.mask").count());
}

#[test]
fn the_residual_stream_widens_through_masked_blocks() {
    let mut old = trained_lm(2, 0.0, 4);
    let block = Operator::AddBlock {
        prefix: "blocks".into(),
        at: None,
        from: None,
        init: aicf_compiler::train::adapt::BlockInit::Copy,
        state: Default::default(),
        mask: Some(3),
        mask_delay: 0,
    };
    let op = Operator::Compose {
        ops: vec![block, Operator::WidenResidual { width: 16, rule: Default::default(), noise: 0.0 }],
    };
    let mut g = grow(&old, &op, 0).unwrap();
    assert_eq!(g.trainer.state()["blocks.2.mlp.proj.weight"].shape, [16, 32]);
    let (a, b) = (lm_loss(&mut old, 20, false), lm_loss(&mut g.trainer, 20, false));
    assert!(close(a, b, 1e-5), "probe loss {a} -> {b}");
}

/// A run's background compile of the model its rules would grow into is
/// waited for when the run is dropped: a process that ended while that
/// thread was still in MLIR crashed at exit (a segmentation fault after
/// `aicf train` had finished, seen once in CI). So once the run is gone,
/// no compile holds an artifact's lock, and the grown model is either
/// whole in the cache (compiling it again finds it there) or was never
/// begun (the drop cancels a compile that had not started: on a loaded
/// machine the thread may not have reached it), never left half written.
/// (Where the compile ends within the step, this passes without the wait
/// too: the unit test `dropping_the_background_compile_joins_it_and_stops_
/// the_rest` is the one a missing wait fails.)
#[test]
fn dropping_a_run_waits_for_its_background_compile() {
    let cache = crate::tmp_root().join("adapt-prefetch");
    let _ = std::fs::remove_dir_all(&cache);
    let opts = Options { cache_dir: cache, ..options("sgd", 0.0) };
    let t = Trainer::from_file(&narrow(), opts.clone()).unwrap();
    let rule = Rule {
        trigger: Trigger::Steps { at: 1_000_000 },
        action: Action::Grow(zero_widen_rule("fc1", 48)),
        min_gap: 0,
        max_times: 1,
        lr_factor: 1.0,
        reset_optimizer: false,
        shrink: 1.0,
    };
    let mut run = Adaptive::new(t, Policy { prefetch: true, ..policy(vec![rule]) });
    let [x, y] = batch(0);
    run.step(&[&x, &y], 0.05, Progress { epoch: 1, batch: 1, rng: 0 }).unwrap();
    let (source, name) = (run.trainer().source().to_string(), run.trainer().name().to_string());
    let cache = run.trainer().options().cache_dir.clone();
    drop(run);
    // No compile holds an artifact's lock any more (one would make the
    // compile below wait for it, and find its artifact whole).
    for entry in std::fs::read_dir(&cache).unwrap().flatten() {
        let lock = entry.path();
        if lock.extension().is_some_and(|e| e == "lock") {
            let f = std::fs::OpenOptions::new().write(true).open(&lock).unwrap();
            assert!(f.try_lock().is_ok(), "{} is held: the run's compile goes on", lock.display());
        }
    }
    let before: Vec<std::path::PathBuf> = std::fs::read_dir(&cache).unwrap().flatten().map(|e| e.path()).collect();
    let grown = aicf_compiler::train::adapt::rewrite(&source, &name, &zero_widen("fc1", 48)).unwrap();
    let again = aicf_compiler::train::precompile(&grown.source, &name, &opts, &[None]).unwrap();
    if again[0].seconds.is_some() {
        assert!(
            !before.contains(&again[0].dir),
            "the grown model was compiled again over {}: the run's compile had not finished",
            again[0].dir.display()
        );
    }
}

/// A composition, and a run that gives grown parameters ages, are
/// compiled ahead as the growth will compile them: the prefetch rewrote
/// only single operators, without ages, so a composed rule's growth (a
/// `*` in a layer's name makes one) compiled every kernel in the pause.
#[test]
fn a_composed_growth_with_ages_is_compiled_ahead() {
    let cache = crate::tmp_root().join("adapt-prefetch-composed");
    let _ = std::fs::remove_dir_all(&cache);
    let opts = Options { cache_dir: cache, ..options("adam", 0.0) };
    let t = Trainer::from_file(&narrow(), opts).unwrap();
    let rule = Rule {
        trigger: Trigger::Steps { at: 3 },
        action: Action::Grow(Template::Compose { ops: vec![zero_widen_rule("fc1", 24), zero_widen_rule("fc1", 40)] }),
        min_gap: 0,
        max_times: 1,
        lr_factor: 1.0,
        reset_optimizer: false,
        shrink: 1.0,
    };
    let mut run = Adaptive::new(t, Policy { prefetch: true, age_bias_correction: true, ..policy(vec![rule]) });
    for i in 0..4 {
        let [x, y] = batch(i);
        run.step(&[&x, &y], 3e-3, Progress { epoch: 1, batch: i + 1, rng: 0 }).unwrap();
    }
    let d = run.decisions().iter().find(|d| d.outcome == "accepted").expect("the growth at step 3");
    assert_eq!((d.kernels, d.compiled_kernels), (0, 0), "the grown model was compiled in the pause: {}", d.summary());
    assert!(d.summary().contains("compiled ahead"), "{}", d.summary());
}

#[test]
fn compounded_rollbacks_stop_at_a_thousandth_of_the_rate() {
    // Each rollback lowers the rate by its factor: 0.1, 0.01, 0.001; a
    // fourth would take it to 1e-4 of the run's, so the rule stops there
    // (said as a rejected decision) and the diverged step's error stands.
    let text = "[[rule]]\nwhen = \"instability\"\naction = { rollback = { lr_factor = 0.1 } }";
    let mut p = Policy::parse(text).unwrap();
    p.prefetch = false;
    let mut run = Adaptive::new(trained("adam", 0.0, 0), p);
    let mut rolled = 0;
    let mut stopped = None;
    for epoch in 1..=5 {
        let progress = Progress { epoch, ..Progress::default() };
        for i in 0..2 {
            let [x, y] = batch(i);
            run.step(&[&x, &y], 3e-3, progress).unwrap();
        }
        run.epoch_end(progress, None).unwrap();
        let [x, y] = batch(2);
        run.step(&[&x, &y], 1e30 / run.lr_scale(), progress).unwrap();
        let outcome = (3..6).find_map(|i| {
            let [x, y] = batch(i);
            match run.step(&[&x, &y], 3e-3, progress) {
                Ok(Outcome::RolledBack(..)) => Some(Ok(())),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            }
        });
        match outcome {
            Some(Ok(())) => rolled += 1,
            Some(Err(e)) => {
                stopped = Some(e.to_string());
                break;
            }
            None => panic!("epoch {epoch}: a step at 1e30 did not diverge"),
        }
    }
    assert_eq!(rolled, 3, "stopped: {stopped:?}");
    let e = stopped.expect("the fourth divergence is not rolled back");
    assert!(e.contains("not finite") || e.contains("NaN") || e.contains("inf"), "{e}");
    assert!((run.lr_scale() - 1e-3).abs() < 1e-9, "the rate stays at {}", run.lr_scale());
    let last = run.decisions().last().unwrap();
    assert_eq!(last.outcome, "rejected");
    assert!(last.reason.contains("this rule stops") && last.reason.contains("(3 of them)"), "{}", last.reason);
}

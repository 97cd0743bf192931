//! What one split of a kernel over two threads costs: two 5 us pieces on
//! the runtime's team (its helper spinning between splits) and on a rayon
//! pool of two, started from a thread outside the pool (as the caller of a
//! step is) and from a worker inside it (`install`), after a pause of
//! 0-300 us (rayon's workers spin briefly, then sleep; the team's helper
//! spins for `team::SPIN`): `cargo run --release -p aicf-runtime --example
//! forkjoin_probe`. Prints the median and 90th percentile of the time
//! beyond the pieces'.
use aicf_runtime::cpu::team::Team;

fn spin(us: f64) {
    let t = std::time::Instant::now();
    while t.elapsed().as_secs_f64() * 1e6 < us {
        std::hint::spin_loop();
    }
}

fn main() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool of 2 threads");
    let team = Team::new(2, || {}).expect("a team of 2 threads");
    let measure = |split: &dyn Fn(), gap: f64| {
        let mut us = Vec::new();
        for _ in 0..3000 {
            spin(gap);
            let t = std::time::Instant::now();
            split();
            us.push(t.elapsed().as_secs_f64() * 1e6 - 5.0);
        }
        us.sort_by(f64::total_cmp);
        (us[us.len() / 2], us[us.len() * 9 / 10])
    };
    let rayon_split = || pool.scope(|s| (0..2).for_each(|_| s.spawn(|_| spin(5.0))));
    for gap in [0.0, 20.0, 100.0, 300.0] {
        let runs: [(&str, (f64, f64)); 3] = [
            ("rayon, from outside the pool", measure(&rayon_split, gap)),
            ("rayon, from a worker", pool.install(|| measure(&rayon_split, gap))),
            ("the runtime's team", measure(&|| team.run(2, &|_| spin(5.0)), gap)),
        ];
        for (label, (median, p90)) in runs {
            println!("pause {gap:>5} us, {label:<29}: median {median:5.1} us, p90 {p90:5.1} us");
        }
    }
}

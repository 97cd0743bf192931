//! What one split of a kernel over the pool costs: a `scope` of two 5 us
//! pieces on a 2-thread rayon pool, started from a thread outside the pool
//! (as the caller of a step is) and from a worker inside it (`install`),
//! after a pause of 0-300 us (the workers spin, then sleep):
//! `cargo run --release -p aicf-runtime --example forkjoin_probe`.
//! Prints the median and 90th percentile of the time beyond the pieces'.
fn spin(us: f64) {
    let t = std::time::Instant::now();
    while t.elapsed().as_secs_f64() * 1e6 < us {
        std::hint::spin_loop();
    }
}

fn main() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a pool of 2 threads");
    let split = || pool.scope(|s| (0..2).for_each(|_| s.spawn(|_| spin(5.0))));
    let measure = |from_worker: bool, gap: f64| {
        let mut us = Vec::new();
        let mut run = || {
            for _ in 0..3000 {
                spin(gap);
                let t = std::time::Instant::now();
                split();
                us.push(t.elapsed().as_secs_f64() * 1e6 - 5.0);
            }
        };
        if from_worker { pool.install(run) } else { run() }
        us.sort_by(f64::total_cmp);
        (us[us.len() / 2], us[us.len() * 9 / 10])
    };
    for gap in [0.0, 20.0, 100.0, 300.0] {
        for (from_worker, label) in [(false, "from outside the pool"), (true, "from a worker")] {
            let (median, p90) = measure(from_worker, gap);
            println!("pause {gap:>5} us, split {label:<21}: median {median:5.1} us, p90 {p90:5.1} us");
        }
    }
}

//! AICF's compiler: `hl` and `ll` dialects (ODS, C++), passes written in
//! Rust over MLIR through melior, and the pipelines that turn a model into a
//! compiled training step.
//!
//! ```text
//!  model.mlir (hl) / Rust layer API (nn: traced into hl op by op)
//!        |  parse + verify: every hl op infers its result type and checks
//!        |  its shape rule; parameters are hl.param symbols with owner,
//!        |  shape, dtype and initializer
//!        v
//!  hl (tensors, value semantics)      hl-print-param-table: the model's state
//!        |  hl-autodiff: @loss -> @loss_grad (backward graph as hl)
//!        |  hl-optimizer: + hl.state slots, @train_step (the train-step ABI);
//!        |      {data-parallel}: loss and gradients hl.all_reduce'd (weighted)
//!        |      {accumulate}: + @train_grad (a micro-batch's share added to
//!        |      accumulator states) and @train_apply (the update from them)
//!        |  hl-fuse-gemm-epilogue: matmul/linear + epilogue -> hl.gemm
//!        |  hl-fuse-reductions: cross-entropy + backward -> hl.softmax_cross_entropy
//!        |  hl-fuse-gemm-epilogue also: bias gradient -> gemm sum_lhs
//!        |  hl-fuse-elementwise: elementwise groups -> hl.fused_elementwise
//!        |      (multi-output: a value used later becomes one more result)
//!        |  hl-fuse-optimizer: update kernels -> one hl.multi_tensor_apply
//!        v
//!  convert-hl-to-ll: tensors -> buffers, one ll op per kernel, hl illegal
//!        v
//!  ll (buffers; one op = one kernel: gemm+epilogue, elementwise region,
//!      multi_tensor_apply, softmax_cross_entropy, softmax and norm (each
//!      with its backward), reduce, attention, conv2d (+ 2 backward),
//!      pool2d (+ backward), gather, scatter_add, slice, concat, argmax,
//!      mse_loss, dropout, random, transpose, copy, fill; reshape is a view;
//!      all_reduce is a collective the runtime runs, not a kernel)
//!        |  ll-bucket-collectives{bucket-bytes}: reductions moved to their
//!        |      producers and merged into buckets (data parallel)
//!        |  ll-plan-memory{budget report}: one arena, in place, recompute
//!        |  ll-schedule{max-streams}: streams and events (collectives on
//!        |      a stream of their own)
//!        |  (aicf-train-pipeline runs hl-optimizer .. ll-schedule)
//!        v
//!  codegen::compile(.., &Target): each op family's generator (codegen/ops)
//!        |  writes its kernels through the target's hooks, as scf/arith/
//!        |  math/vector over flat buffers; identical kernels once
//!        |  Target::Cpu: lowered to the LLVM dialect, clang -O3
//!        |    -march=native per missing kernel -> kernels.so + manifest.json
//!        |  Target::Cuda: gpu.func entries, NVVM -> PTX modules per chip
//!        v
//!  aicf-runtime: the Backend interface (CPU: dlopen, thread pool, GEMM
//!        |  registry; CUDA: device arena, graph replay, staged inputs)
//!        v
//!  train: Trainer (a model on a device), data for any signature, the
//!        epoch loop (run::fit), growth while training (adapt); data
//!        parallel: a Trainer is one replica of a run over a
//!        collective::Communicator (MPI), each step its shard of the batch
//! ```
//!
//! What holds at each stage:
//! - After parsing, the module verifies: types inferred by the ops match the
//!   written ones, every `hl.get_param` names an `hl.param` of its type.
//! - After the fusion passes: the interpreter computes the same numbers as
//!   before them (up to rounding); every fused op is one future kernel.
//! - After `hl-autodiff`: `@loss_grad` returns the loss, then one gradient
//!   per `hl.param` in declaration order; after `hl-optimizer`, every
//!   `@train_step` result is tagged `hl.bind` with the symbol it updates.
//! - After `convert-hl-to-ll`: every shape is static; no `hl` op in any function body (the
//!   `hl.param`/`hl.state` table stays); every function returns nothing and
//!   its arguments carry `ll.bind`; temporaries are `memref.alloc`s.
//! - After `ll-plan-memory`: no `memref.alloc`; one `%arena` argument; the
//!   function carries `ll.memory` (arena, lower bound, naive sum); two
//!   buffers share bytes only when their lifetimes do not overlap (or the
//!   kernel is elementwise and the input dies there).
//! - After `ll-bucket-collectives`: each `ll.all_reduce` stands right after
//!   the last op that writes one of its buffers, and no op between a
//!   bucket's members and its place touches their buffers.
//! - After `ll-schedule`: every kernel has `ll.stream`; a kernel depending
//!   on another stream's kernel waits on its event; program order is a
//!   valid execution order.
//! - After `codegen::compile`: every kernel of every function is one or
//!   more calls of `aicf_<hash>` kernels in the manifest, in program order;
//!   each computes what the interpreter computes for its op (tested per
//!   kernel kind and per train step on the CPU; the GPU's PTX is checked by
//!   ptxas here and against the CPU on a GPU machine).
//! - A pass either succeeds or reports a located diagnostic and fails; no
//!   pass panics on bad input ([`passes`]).
//!
//! Entry points: [`CompilerContext`] to parse and verify, [`nn`] to build
//! models in Rust, [`interp`] to run `hl` functions on the CPU as the
//! numerical oracle, [`run_pipeline`] to run a textual pass pipeline
//! ([`pipeline`] spells them all, and compiles a model's text with its
//! stages timed), [`train`] to train, [`opt_main`] for the `aicf-opt`
//! driver.

pub mod codegen;
pub mod consistency;
pub mod context;
pub mod eager;
pub mod error;
pub mod export;
pub mod ffi;
pub mod import;
pub mod interp;
pub(crate) mod ir;
pub mod nn;
pub mod passes;
pub mod pipeline;
pub mod timing;
pub mod train;
pub mod types;
pub mod weights;

pub use context::CompilerContext;
pub use error::{CompileError, Diagnostic, Result, Severity};
pub use passes::register_passes;

use melior::{ir::Module, pass::PassManager};
use std::ffi::{CString, c_char, c_int};

/// Runs a textual pipeline (`builtin.module(...)`) on `module` in place.
pub fn run_pipeline(ctx: &CompilerContext, module: &mut Module<'_>, pipeline: &str) -> Result<()> {
    register_passes();
    static UPSTREAM: std::sync::Once = std::sync::Once::new();
    UPSTREAM.call_once(melior::utility::register_all_passes);
    ctx.take_diagnostics();
    let pm = PassManager::new(ctx.mlir());
    melior::utility::parse_pass_pipeline(pm.as_operation_pass_manager(), pipeline).map_err(|e| {
        CompileError::Pipeline {
            pipeline: pipeline.to_string(),
            message: {
                let diags = ctx.take_diagnostics();
                if diags.is_empty() {
                    e.to_string()
                } else {
                    diags.iter().map(|d| d.message.clone()).collect::<Vec<_>>().join("; ")
                }
            },
        }
    })?;
    pm.run(module)
        .map_err(|_| CompileError::PassFailed { pipeline: pipeline.to_string(), diagnostics: ctx.take_diagnostics() })
}

/// Whether `aicf-opt`'s arguments name no input file (or `-`): it reads
/// standard input. `-o` takes the next argument as its value; `--help`,
/// `--version` and the listings read nothing (reading first would wait on
/// a terminal).
fn reads_stdin() -> bool {
    let mut args = std::env::args_os().skip(1);
    let mut inputs = Vec::new();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        let flag = text.trim_start_matches('-');
        if text.starts_with('-')
            && (matches!(flag, "h" | "version" | "show-dialects" | "list-passes") || flag.starts_with("help"))
        {
            return false;
        }
        if text == "-o" {
            args.next();
        } else if text == "-" || !text.starts_with('-') {
            inputs.push(text.into_owned());
        }
    }
    inputs.is_empty() || inputs.iter().any(|a| a == "-")
}

/// Makes `text` this process's standard input again: a pipe whose read end
/// becomes descriptor 0, filled by a thread.
fn refeed_stdin(text: Vec<u8>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    unsafe extern "C" {
        fn dup2(old: c_int, new: c_int) -> c_int;
    }
    let (reader, mut writer) = std::io::pipe()?;
    if unsafe { dup2(reader.as_raw_fd(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(reader);
    std::thread::spawn(move || {
        // The parser stopping early closes the pipe: nothing to report.
        let _ = std::io::Write::write_all(&mut writer, &text);
    });
    Ok(())
}

/// The `aicf-opt` driver (MLIR's `MlirOptMain` over AICF's registry) on this
/// process's arguments. Returns the exit code.
pub fn opt_main() -> i32 {
    use std::os::unix::ffi::OsStringExt;
    register_passes();
    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.into_vec()).unwrap_or_else(|_| CString::new("<argument with NUL>").unwrap()))
        .collect();
    // Input files nested past what the parser's recursion survives are
    // refused before it reads them (a stack overflow is a crash).
    for arg in std::env::args_os().skip(1) {
        let path = std::path::Path::new(&arg);
        if arg.to_string_lossy().starts_with('-') || !path.is_file() {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(path)
            && let Err(context::TooDeep { line, message }) = context::nesting_within(&text, context::MAX_NESTING)
        {
            eprintln!("{}:{line}: error: {message}", path.display());
            return 1;
        }
    }
    // Standard input is read here first, checked the same way, and handed
    // on through a pipe that takes its place.
    if reads_stdin() {
        let mut text = Vec::new();
        if let Err(e) = std::io::Read::read_to_end(&mut std::io::stdin(), &mut text) {
            eprintln!("<stdin>: error: cannot read standard input: {e}");
            return 1;
        }
        if let Err(context::TooDeep { line, message }) =
            context::nesting_within(&String::from_utf8_lossy(&text), context::MAX_NESTING)
        {
            eprintln!("<stdin>:{line}: error: {message}");
            return 1;
        }
        if let Err(e) = refeed_stdin(text) {
            eprintln!("<stdin>: error: cannot hand standard input on: {e}");
            return 1;
        }
    }
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    argv.push(std::ptr::null_mut());
    unsafe { ffi::aicfOptMain(args.len() as c_int, argv.as_mut_ptr()) }
}

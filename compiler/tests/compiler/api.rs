//! The compiler as a Rust program embeds it: parse and verify `.mlir`, read
//! the parameter table, run pipelines, and get errors as values that name
//! file, line and column.

use aicf_compiler::{CompileError, CompilerContext, Severity, passes::collect_params, run_pipeline};
use melior::ir::operation::OperationLike;

const MLP: &str = include_str!("../../../examples/mlp/digits_mlp.mlir");

#[test]
fn parses_the_example_and_reads_its_parameters() {
    let ctx = CompilerContext::new();
    let module = ctx.parse(MLP, "digits_mlp.mlir").expect("the example verifies");
    let params = collect_params(module.as_operation()).expect("hl.param ops are well formed");
    let summary: Vec<(&str, &str, &[u64])> =
        params.iter().map(|p| (p.path.as_str(), p.owner.as_str(), p.shape.as_slice())).collect();
    assert_eq!(
        summary,
        vec![
            ("fc1.weight", "fc1", &[128, 64][..]),
            ("fc1.bias", "fc1", &[128][..]),
            ("fc2.weight", "fc2", &[10, 128][..]),
            ("fc2.bias", "fc2", &[10][..]),
        ]
    );
    assert_eq!(params.iter().map(|p| p.elements()).sum::<u64>(), 64 * 128 + 128 + 128 * 10 + 10);
    assert!(params.iter().all(|p| p.dtype == "f32" && p.bytes() == 4 * p.elements()));
    assert!(params[0].init.starts_with("kaiming_uniform"), "{}", params[0].init);
}

#[test]
fn parse_errors_name_file_line_and_column() {
    let ctx = CompilerContext::new();
    let source = "func.func @f(%x: tensor<8x63xf32>, %w: tensor<32x64xf32>) {\n  \
                  %0 = hl.linear %x, %w : tensor<8x63xf32>, tensor<32x64xf32>\n  return\n}\n";
    let Err(CompileError::Parse { source_name, diagnostics }) = ctx.parse(source, "model.mlir") else {
        panic!("a shape error must be a parse error");
    };
    assert_eq!(source_name, "model.mlir");
    assert_eq!(diagnostics.len(), 1);
    let d = &diagnostics[0];
    assert_eq!(d.location, "model.mlir:2:8");
    assert_eq!(d.severity, Severity::Error);
    assert!(d.message.contains("has 63 features but the weight"), "{}", d.message);
    let shown = CompileError::Parse { source_name, diagnostics: diagnostics.clone() }.to_string();
    assert!(shown.contains("model.mlir:2:8: error: 'hl.linear' op input 'tensor<8x63xf32>' has 63"), "{shown}");
}

#[test]
fn verifier_errors_are_reported_after_a_clean_parse() {
    let ctx = CompilerContext::new();
    // Parses (the symbol is looked up only by the verifier), then fails to verify.
    let source = "func.func @f() {\n  %0 = hl.get_param @missing : tensor<4xf32>\n  return\n}\n";
    match ctx.parse(source, "m.mlir") {
        Err(CompileError::Verify { diagnostics, .. }) => {
            assert_eq!(diagnostics[0].location, "m.mlir:2:8");
            assert!(diagnostics[0].message.contains("'@missing' does not name an hl.param"));
        }
        other => panic!("expected a verification error, got {:?}", other.err()),
    }
}

#[test]
fn missing_file_is_an_error_naming_the_path() {
    let ctx = CompilerContext::new();
    let err = ctx.parse_file(std::path::Path::new("/nonexistent/model.mlir")).expect_err("no such file");
    let text = err.to_string();
    assert!(text.starts_with("/nonexistent/model.mlir: No such file"), "{text}");
    assert!(!text.contains("not valid IR"), "a missing file is no parse error: {text}");
    // The runtime, given a model's source or a missing path for an
    // artifact, says what it was given.
    let cpu = aicf_runtime::Device::Cpu { threads: 1 };
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mlp/digits_mlp.mlir");
    let e = aicf_runtime::open(&source, &cpu, 0).err().unwrap().to_string();
    assert!(e.contains("digits_mlp.mlir") && e.contains("a file, not a compiled artifact"), "{e}");
    let e = aicf_runtime::open("/nonexistent/model.aicf".as_ref(), &cpu, 0).err().unwrap().to_string();
    assert!(e.contains("/nonexistent/model.aicf") && e.contains("no compiled artifact here"), "{e}");
}

#[test]
fn runs_pipelines_and_reports_failures_as_values() {
    let ctx = CompilerContext::new();
    let mut module = ctx.parse(MLP, "digits_mlp.mlir").unwrap();
    run_pipeline(&ctx, &mut module, "builtin.module(hl-print-param-table,func.func(cse,canonicalize))")
        .expect("the example's pipeline runs");
    assert!(module.as_operation().verify());

    let mut empty = ctx.parse("func.func @f() { return }", "empty.mlir").unwrap();
    match run_pipeline(&ctx, &mut empty, "builtin.module(hl-print-param-table{require-params=true})") {
        Err(CompileError::PassFailed { diagnostics, .. }) => {
            assert!(diagnostics[0].message.contains("module declares no hl.param"), "{:?}", diagnostics);
        }
        other => panic!("expected a pass failure, got {:?}", other.err()),
    }

    match run_pipeline(&ctx, &mut empty, "builtin.module(hl-no-such-pass)") {
        Err(CompileError::Pipeline { message, .. }) => assert!(message.contains("hl-no-such-pass"), "{message}"),
        other => panic!("expected a pipeline error, got {:?}", other.err()),
    }
}

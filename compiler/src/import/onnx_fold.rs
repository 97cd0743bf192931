//! Rewrites of an ONNX graph before it is imported: layers that PyTorch's
//! exporters write out as several nodes are folded back into the one node
//! that says what they are.
//!
//! - **Linear layers.** An `nn.Linear` applied to a sequence (a 3-D input:
//!   every transformer's projections) is exported as `MatMul(x, W)` and a
//!   separate `Add(_, bias)`: the TorchScript exporter stores `W` already
//!   transposed, `[in, out]`, under a made-up name (`onnx::MatMul_255`);
//!   the dynamo exporter keeps the weight `[out, in]` under its own name
//!   and transposes it with a `Transpose` node. Folded, the layer is one
//!   `Gemm(x, weight, bias, transB = 1)`, which imports as `hl.linear`
//!   (any rank of `x`), its weight `[out, in]` as PyTorch's `state_dict`
//!   holds it, named as there: `<module>.weight`, from the bias's name
//!   (`<module>.bias`) or the MatMul node's (`/blocks.0/qkv/MatMul`).
//! - **SiLU.** `x * sigmoid(x)` is a `Swish` node (ONNX's, opset 24, with
//!   alpha 1: `hl.silu`).
//! - **GELU.** Before opset 20 ONNX has no Gelu: `nn.GELU()` is exported
//!   as `x * (1 + erf(x / sqrt(2))) * 0.5` and the tanh form (GPT-2's) as
//!   `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`. Folded,
//!   each is a `Gelu` node (`hl.gelu`).
//!
//! Why: imported as written, these are matmuls, adds and pointwise chains
//! that the growth operators (`hl-widen`, `hl-widen-residual`,
//! `hl-insert-block`), which find a model's layers by `hl.linear` and its
//! activations, cannot see, so an exported transformer did not grow; and a
//! layer is one GEMM with its bias in the epilogue, a GELU one kernel. The
//! values are the same: each fold is exactly the math of the nodes it
//! replaces (the weight's values are moved, not changed).
//!
//! A fold applies only where the intermediate values have no other reader
//! (nor are graph outputs) and the weight and bias no other use.

use aicf_onnx::proto::{AttributeProto, GraphProto, NodeProto, ValueInfoProto, attribute_proto::AttributeType};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The graph's nodes after the folds, and the initializers the linear fold
/// made: `(name, the ONNX initializer it holds transposed)`.
pub(super) struct Folded {
    pub nodes: Vec<NodeProto>,
    pub transposed: Vec<(String, String)>,
    /// `(initializer, the weight it is the exact transpose of)`: a tied
    /// output layer, read as that weight.
    pub tied: Vec<(String, String)>,
}

struct Graph<'a> {
    nodes: &'a [NodeProto],
    /// Value name -> (node index, input position) of each reader.
    readers: HashMap<&'a str, Vec<usize>>,
    producer: HashMap<&'a str, usize>,
    outputs: HashSet<&'a str>,
    /// Scalars: 1-element float initializers and Constant nodes' values.
    scalars: HashMap<String, f64>,
    taken: HashSet<usize>,
}

impl<'a> Graph<'a> {
    fn new(
        graph: &'a GraphProto,
        inits: &HashMap<String, aicf_onnx::Tensor>,
        aliased: &HashSet<String>,
        base: &Path,
    ) -> Self {
        let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut producer = HashMap::new();
        let mut scalars = HashMap::new();
        for (i, n) in graph.node.iter().enumerate() {
            // An Identity copy of an initializer that became one of its
            // own (the importer's `aliased`) does not read the original.
            let copy = n.op_type() == "Identity" && n.output.first().is_some_and(|o| aliased.contains(o));
            for input in n.input.iter().filter(|s| !s.is_empty() && !copy) {
                readers.entry(input.as_str()).or_default().push(i);
            }
            for o in &n.output {
                producer.insert(o.as_str(), i);
            }
            if n.op_type() == "Constant"
                && let (Some(out), Some(a)) = (n.output.first(), n.attribute.first())
            {
                let value = match a.name() {
                    "value_float" => Some(a.f() as f64),
                    "value" => {
                        a.t.as_ref().and_then(|t| aicf_onnx::tensor(t, base).ok()).and_then(|t| float_scalar(&t))
                    }
                    _ => None,
                };
                if let Some(v) = value {
                    scalars.insert(out.clone(), v);
                }
            }
        }
        for (name, t) in inits {
            if let Some(v) = float_scalar(t) {
                scalars.insert(name.clone(), v);
            }
        }
        let outputs = graph.output.iter().map(|o| o.name()).collect();
        Graph { nodes: &graph.node, readers, producer, outputs, scalars, taken: HashSet::new() }
    }

    /// The one node that reads `value` (none where it is a graph output or
    /// read more than once), if it is an `op` and not in another fold.
    fn sole_reader(&self, value: &str, op: &str) -> Option<usize> {
        if self.outputs.contains(value) {
            return None;
        }
        // (A node without an output, malformed, is nobody's fold.)
        match self.readers.get(value).map(Vec::as_slice) {
            Some(&[i])
                if self.nodes[i].op_type() == op && !self.taken.contains(&i) && !self.nodes[i].output.is_empty() =>
            {
                Some(i)
            }
            _ => None,
        }
    }

    /// How many nodes read `value` (a graph output counts as one more).
    fn uses(&self, value: &str) -> usize {
        self.readers.get(value).map_or(0, Vec::len) + usize::from(self.outputs.contains(value))
    }

    /// The node that makes `value`, if it is an `op` read by nothing else.
    fn sole_producer(&self, value: &str, op: &str) -> Option<usize> {
        let &i = self.producer.get(value)?;
        (self.nodes[i].op_type() == op && self.uses(value) == 1 && !self.taken.contains(&i)).then_some(i)
    }

    /// For a binary node: its other input than `value`, if one of them is
    /// `value` (the other may be `value` too: `x * x`).
    fn other<'n>(&self, node: &'n NodeProto, value: &str) -> Option<&'n str> {
        match node.input.as_slice() {
            [a, b] if a == value => Some(b),
            [a, b] if b == value => Some(a),
            _ => None,
        }
    }

    fn scalar(&self, value: &str) -> Option<f64> {
        self.scalars.get(value).copied()
    }

    /// For a binary node with a scalar operand near `want`: the other one.
    fn with_scalar<'n>(&self, node: &'n NodeProto, want: f64) -> Option<&'n str> {
        let [a, b] = node.input.as_slice() else { return None };
        let near = |v: &str| self.scalar(v).is_some_and(|s| (s - want).abs() <= 1e-6 * want.abs().max(1.0));
        if near(b) {
            Some(a)
        } else if near(a) {
            Some(b)
        } else {
            None
        }
    }
}

fn float_scalar(t: &aicf_onnx::Tensor) -> Option<f64> {
    match &t.data {
        aicf_onnx::Data::F32(v) if v.len() == 1 => Some(v[0] as f64),
        _ => None,
    }
}

/// Parameters the dynamo exporter merged: its optimizer keeps one
/// initializer of values that are equal, so a fresh model's layers that
/// start alike (every LayerNorm's ones and zeros; the copied layers of an
/// `nn.TransformerEncoder`) read one tensor, and would train tied. Each
/// node's `pkg.torch.onnx.fx_node` metadata names the parameter the model
/// read there (`%p_blocks_1_ln1_weight`); where a reader of a shared
/// initializer names another parameter than the initializer is, and its
/// `pkg.torch.onnx.name_scopes` module plus the initializer's last name
/// component spells that parameter (`blocks.1.ln1` + `weight`), the reader
/// gets a copy under that name. Weights the model ties itself are one
/// parameter in the metadata too, and stay one. Returns the nodes and
/// `(copy, original)` for each copy made.
pub(super) fn untie(
    graph: &GraphProto,
    inits: &mut HashMap<String, aicf_onnx::Tensor>,
) -> (Vec<NodeProto>, Vec<(String, String)>) {
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for n in &graph.node {
        let mut seen = HashSet::new();
        for i in n.input.iter().filter(|i| inits.contains_key(*i) && seen.insert(i.as_str())) {
            *readers.entry(i.as_str()).or_default() += 1;
        }
    }
    // (In lower case, as the FX record spells a module `LayerNorm`'s
    // parameters: `%p_..._layernorm_weight`.)
    let flat = |name: &str| name.replace('.', "_").to_lowercase();
    // An initializer the exporter folded from one parameter (a GroupNorm's
    // weight reshaped to [C, 1, 1], `val_20`): named by that parameter's
    // last components, as the parameter itself would be.
    let folded_from: HashMap<String, String> = graph
        .value_info
        .iter()
        .filter(|v| inits.contains_key(v.name()))
        .filter_map(|v| {
            let sources: Vec<&str> = folded_from(v)?.into_iter().filter(|s| s.contains('.')).collect();
            match sources.as_slice() {
                [one] => Some((v.name().to_string(), one.to_string())),
                _ => None,
            }
        })
        .collect();
    // Every parameter the exported program declares (flat: `a_b_c`), for
    // a node of the exporter's optimizer, which records no FX node.
    let declared: Vec<String> = super::onnx::signature_kinds(graph)
        .into_iter()
        .filter(|(_, kind)| kind == "PARAMETER")
        .map(|(target, _)| flat(&target))
        .collect();
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for input in &n.input {
            consumers.entry(input.as_str()).or_default().push(i);
        }
    }
    // The module of the nearest nodes downstream of node `i` that name one
    // (a Split of a merged bias that the optimizer rewrote reads for
    // `dec.multihead_attn`'s linear layers), where they agree.
    let downstream_module = |i: usize| -> Option<String> {
        let mut front = vec![i];
        for _ in 0..4 {
            let next: Vec<usize> = front
                .iter()
                .flat_map(|&k| graph.node[k].output.iter())
                .flat_map(|o| consumers.get(o.as_str()).into_iter().flatten().copied())
                .collect();
            let named: HashSet<String> = next.iter().filter_map(|&k| module_of(&graph.node[k])).collect();
            match named.len() {
                0 => front = next,
                1 => return named.into_iter().next(),
                _ => return None,
            }
        }
        None
    };
    let mut nodes = graph.node.clone();
    let mut copies: Vec<(String, String)> = Vec::new();
    // Each reader's name for a merged initializer: (node, input, name).
    let mut plans: Vec<(usize, usize, String)> = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let fx =
            node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.fx_node").map(|p| p.value().to_string());
        // The parameters the model's node read (`%p_<path with _>`), and
        // its module; for a node without a record, every parameter the
        // program declares, and the module its outputs are read in.
        let (placeholders, module): (Vec<String>, Option<String>) = match &fx {
            Some(fx) => (
                fx.split('%')
                    .skip(1)
                    .filter_map(|t| t.strip_prefix("p_"))
                    .map(|t| t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or(""))
                    .filter(|t| !t.is_empty())
                    .map(str::to_lowercase)
                    .collect(),
                module_of(node),
            ),
            None if node.metadata_props.is_empty() => (declared.clone(), downstream_module(index)),
            None => continue,
        };
        let Some(module) = module else { continue };
        for (k, original) in node.input.iter().enumerate() {
            let Some(t) = inits.get(original) else { continue };
            if !t.is_float() || readers.get(original.as_str()).copied().unwrap_or(0) < 2 {
                continue;
            }
            if fx.is_some() && placeholders.contains(&flat(original)) {
                continue;
            }
            // A reader of the very parameter a fold came from reads that
            // parameter, under its name (two layers the model ties
            // themselves read one copy, and stay one). Else the module,
            // then the initializer's last components (its own tail within
            // its module: `weight`, or `out_proj.weight` where the module
            // calls a submodule's function; a fold's, its parameter's),
            // spelling one of the node's parameters.
            let name = match folded_from.get(original) {
                Some(p) if placeholders.contains(&flat(p)) => p.clone(),
                spelled => {
                    let parts: Vec<&str> = spelled.unwrap_or(original).split('.').collect();
                    let Some(name) = (1..parts.len())
                        .map(|k| format!("{module}.{}", parts[parts.len() - k..].join(".")))
                        .find(|n| placeholders.contains(&flat(n)))
                    else {
                        continue;
                    };
                    name
                }
            };
            if name != *original {
                plans.push((index, k, name));
            }
        }
    }
    // Transposes to insert before their readers: (reader, node).
    let mut transposes: Vec<(usize, NodeProto)> = Vec::new();
    for (index, k, name) in plans {
        let original = nodes[index].input[k].clone();
        let Some(t) = inits.get(&original).cloned() else { continue };
        // The exporter's own transposed fold of a weight (a `val_<n>` a
        // MatMul reads as `[in, out]`) becomes the weight in PyTorch's
        // layout, read through a Transpose (which `fold` takes as a linear
        // layer of that weight): as a copy under the weight's name, its
        // values were the transpose (a checkpoint PyTorch could not load).
        let made_up = original.starts_with("onnx::")
            || original.strip_prefix("val_").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let transposed = made_up && nodes[index].op_type() == "MatMul" && k == 1 && t.dims.len() == 2;
        if !inits.contains_key(&name) {
            let copy = if transposed {
                let aicf_onnx::Data::F32(v) = &t.data else { continue };
                let (rows, cols) = (t.dims[0], t.dims[1]);
                let values = transposed_values(v, rows, cols);
                aicf_onnx::Tensor {
                    name: name.clone(),
                    dims: vec![cols, rows],
                    data: aicf_onnx::Data::F32(values),
                    ..t
                }
            } else {
                aicf_onnx::Tensor { name: name.clone(), ..t }
            };
            inits.insert(name.clone(), copy);
            copies.push((name.clone(), original.clone()));
        } else if !copies.iter().any(|(c, _)| *c == name) {
            // A tensor of that name that is not our copy: left alone.
            continue;
        }
        if transposed {
            let read = format!("{name}::transposed_{index}");
            transposes.push((index, transpose_node(format!("{name}::transpose_{index}"), &name, &read)));
            nodes[index].input[k] = read;
        } else {
            nodes[index].input[k] = name;
        }
    }
    transposes.sort_by_key(|(index, _)| std::cmp::Reverse(*index));
    for (index, node) in transposes {
        nodes.insert(index, node);
    }
    // A fold every reader now reads under one name was renamed, not
    // untied: no copy of it to report.
    let still_read: HashSet<&str> = nodes.iter().flat_map(|n| n.input.iter().map(String::as_str)).collect();
    let renamed: HashSet<String> = copies
        .iter()
        .map(|(_, o)| o.clone())
        .filter(|o| !still_read.contains(o.as_str()) && copies.iter().filter(|(_, x)| x == o).count() == 1)
        .collect();
    // An initializer no node reads now is gone (else a transposed fold,
    // read as its weight now, was taken for a second copy of it).
    let unread: Vec<String> =
        copies.iter().map(|(_, o)| o.clone()).filter(|o| !still_read.contains(o.as_str())).collect();
    for o in &unread {
        if !graph.output.iter().any(|g| g.name() == o) {
            inits.remove(o);
        }
    }
    copies.retain(|(_, o)| !renamed.contains(o));
    (nodes, copies)
}

/// The values of a row-major `rows x cols` matrix, transposed.
fn transposed_values(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut values = vec![0f32; v.len()];
    for r in 0..rows {
        for c in 0..cols {
            values[c * rows + r] = v[r * cols + c];
        }
    }
    values
}

/// A node `name` writing `output`, the 2-D `input` transposed.
fn transpose_node(name: String, input: &str, output: &str) -> NodeProto {
    NodeProto {
        name: Some(name),
        op_type: Some("Transpose".into()),
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        attribute: vec![AttributeProto {
            name: Some("perm".into()),
            r#type: Some(AttributeType::Ints as i32),
            ints: vec![1, 0],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// What the dynamo exporter's optimizer folded a value from (its
/// `pkg.onnxscript.optimizer.folded_from` metadata, a Python list of
/// names: `['arange', 'pos.weight']`), where it says.
pub(super) fn folded_from(v: &aicf_onnx::proto::ValueInfoProto) -> Option<Vec<&str>> {
    let f = v.metadata_props.iter().find(|p| p.key() == "pkg.onnxscript.optimizer.folded_from")?;
    Some(
        f.value()
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|s| s.trim().trim_matches(|c| c == '\'' || c == '"'))
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// Parameters the dynamo exporter folded into their transpose (`F.linear(z,
/// W.t())`, a tied autoencoder's decoder: an initializer `t` of `W`'s
/// values transposed, its `folded_from` metadata naming `W` alone), read
/// again as the transpose of that parameter: as an initializer of its own
/// it trained apart from `W` (PyTorch's gradient reaches `W` through both
/// uses). Only where the metadata names the one source and the values are
/// its exact transpose. Returns `(initializer, parameter)` for each.
pub(super) fn retie_transposes(
    graph: &GraphProto,
    nodes: &mut Vec<NodeProto>,
    inits: &mut HashMap<String, aicf_onnx::Tensor>,
) -> Vec<(String, String)> {
    let mut tied = Vec::new();
    let mut transposes = Vec::new();
    for v in &graph.value_info {
        let Some(sources) = folded_from(v) else { continue };
        let [source] = sources[..] else { continue };
        let name = v.name();
        let (Some(t), Some(w)) = (inits.get(name), inits.get(source)) else { continue };
        if name == source || t.dims.len() != 2 || w.dims != [t.dims[1], t.dims[0]] {
            continue;
        }
        let (aicf_onnx::Data::F32(tv), aicf_onnx::Data::F32(wv)) = (&t.data, &w.data) else { continue };
        let (rows, cols) = (w.dims[0], w.dims[1]);
        let exact = (0..rows).all(|r| (0..cols).all(|c| tv[c * rows + r].to_bits() == wv[r * cols + c].to_bits()));
        // A weight equal to its own transpose (symmetric, or of one value:
        // a fresh zero or identity matrix) tells no transpose from another
        // fold of it (`W.abs()`): tied only where the exporter named the
        // value by a transposing op (`t`, `transpose_2`, `permute`).
        let base = match name.rsplit_once('_') {
            Some((b, n)) if n.bytes().all(|c| c.is_ascii_digit()) => b,
            _ => name,
        };
        let symmetric = tv.iter().zip(wv).all(|(a, b)| a.to_bits() == b.to_bits());
        let exact = exact && (!symmetric || matches!(base, "t" | "transpose" | "permute" | "swapaxes" | "swapdims"));
        // (A graph output or input of that name is not a value to compute.)
        let io = graph.input.iter().chain(&graph.output).any(|x| x.name() == name);
        if !exact || io {
            continue;
        }
        transposes.push(transpose_node(format!("{name}/retied_transpose"), source, name));
        tied.push((name.to_string(), source.to_string()));
    }
    for (name, _) in &tied {
        inits.remove(name);
    }
    // (First: each reads an initializer alone, and every reader of its
    // output comes after.)
    nodes.splice(0..0, transposes);
    tied
}

/// The float initializer other than `except` that holds exactly `values`
/// (bit for bit) in shape `dims`: a weight's exact transpose, which both
/// exporters write for an output layer tied to an embedding.
fn holding<'a>(
    inits: &'a HashMap<String, aicf_onnx::Tensor>,
    except: &str,
    values: &[f32],
    dims: [usize; 2],
) -> Option<&'a String> {
    inits
        .iter()
        .find(|(n, o)| {
            *n != except
                && o.dims == dims
                && matches!(&o.data, aicf_onnx::Data::F32(w)
                    if w.len() == values.len() && w.iter().zip(values).all(|(a, b)| a.to_bits() == b.to_bits()))
        })
        .map(|(n, _)| n)
}

/// Values tf2onnx merged: its optimizer keeps one initializer of equal
/// constants, so a fresh Keras model's norms (each LayerNormalization's
/// gamma of ones, beta of zeros) read one tensor, and trained tied (each
/// update the sum of all the layers' gradients). An initializer of two or
/// more values, all ones or all zeros, read by nodes of several Keras
/// layers (`lm_1/ln1_1/mul`, `lm_1/ln2_1/mul`) gets a copy for each layer
/// past the one it is named in, named as the initializer in that layer's
/// scope (`lm_1/ln1_1/Reshape:0`). A layer's scope is its name with the suffix
/// TensorFlow makes each call's unique (`ln_1`, `ln_3`: two calls of one
/// Keras layer `ln`, shared, stay tied). Returns `(copy, original)` for
/// each copy.
pub(super) fn untie_tf2onnx(
    nodes: &mut [NodeProto],
    inits: &mut HashMap<String, aicf_onnx::Tensor>,
) -> Vec<(String, String)> {
    let scope = |name: &str| name.rsplit_once('/').map(|(s, _)| s.to_string());
    // The Keras layer of a scope: its last name less TensorFlow's `_<n>`.
    let layer = |scope: &str| match scope.rsplit_once('_') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base.to_string(),
        _ => scope.to_string(),
    };
    let mut candidates: Vec<String> = inits
        .iter()
        .filter(|(_, t)| {
            let values = t.data.to_f64();
            t.is_float() && values.len() >= 2 && (values.iter().all(|&v| v == 1.0) || values.iter().all(|&v| v == 0.0))
        })
        .map(|(n, _)| n.clone())
        .collect();
    candidates.sort();
    let mut copies = Vec::new();
    for init in candidates {
        let own = scope(&init).map(|s| layer(&s));
        let tail = init.rsplit('/').next().unwrap_or(&init).to_string();
        // Each layer reading it, with the first scope it is read in.
        let mut layers: Vec<(String, String)> = Vec::new();
        for n in nodes.iter() {
            if n.input.iter().any(|i| *i == init)
                && let Some(s) = scope(n.name())
                && !layers.iter().any(|(l, _)| *l == layer(&s))
            {
                layers.push((layer(&s), s));
            }
        }
        if layers.len() < 2 {
            continue;
        }
        // The initializer stays with the layer it is named in (else the
        // first reader's); each other layer reads a copy.
        let keep = own.filter(|o| layers.iter().any(|(l, _)| l == o)).unwrap_or_else(|| layers[0].0.clone());
        for (l, s) in layers.iter().filter(|(l, _)| *l != keep) {
            let name = format!("{s}/{tail}");
            if inits.contains_key(&name) || nodes.iter().any(|n| n.output.iter().any(|o| *o == name)) {
                continue;
            }
            let copy = aicf_onnx::Tensor { name: name.clone(), ..inits[&init].clone() };
            inits.insert(name.clone(), copy);
            for n in nodes.iter_mut().filter(|n| scope(n.name()).is_some_and(|s| layer(&s) == *l)) {
                for input in n.input.iter_mut().filter(|i| **i == init) {
                    *input = name.clone();
                }
            }
            copies.push((name, init.clone()));
        }
    }
    copies
}

/// Embedding tables the dynamo exporter named by the output layer tied to
/// them: a model that ties its head to its embedding (`lm_head.weight =
/// wte.weight`, Hugging Face's `tie_word_embeddings`) holds one tensor
/// under two names, and the export calls it by the head's
/// (`m.lm_head.weight`), where `named_parameters()`, the TorchScript
/// export and Hugging Face's checkpoints call it by the embedding's
/// (`m.transformer.wte.weight`, which `from_pretrained` reads: a
/// checkpoint with only the head's name loads an untrained embedding). A
/// Gather whose metadata places it in a module of an `Embedding` class
/// (`pkg.torch.onnx.class_hierarchy`) reading another module's weight
/// (`<other>.weight`) that is tied (another node reads it, or its exact
/// transpose is an initializer too) gets the table under
/// `<module>.weight`, where that name is free. Returns `(export's name,
/// new name)` for each.
pub(super) fn name_tables_by_embedding(
    graph: &GraphProto,
    nodes: &mut [NodeProto],
    value_info: &mut [ValueInfoProto],
    inits: &mut HashMap<String, aicf_onnx::Tensor>,
) -> Vec<(String, String)> {
    // (A subgraph may read a table by its name: none is renamed then.)
    if nodes.iter().any(|n| n.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty())) {
        return Vec::new();
    }
    // (The exporter's value_info lists each parameter: the table's entry
    // is renamed with it; a value or another parameter under the new name
    // keeps the table as it is.)
    let declared = |name: &str| graph.input.iter().chain(&graph.output).any(|v| v.name() == name);
    let listed = |name: &str| graph.value_info.iter().any(|v| v.name() == name);
    let mut renamed: Vec<(String, String)> = Vec::new();
    for i in 0..nodes.len() {
        let node = &nodes[i];
        if node.op_type() != "Gather" || !node.domain().is_empty() {
            continue;
        }
        let Some(table) = node.input.first().filter(|t| inits.contains_key(*t)).cloned() else { continue };
        // The last module of the chain is an embedding (`nn.Embedding`, or
        // a subclass such as Gemma's scaled one, which keeps `weight`).
        let Some(classes) = node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.class_hierarchy") else {
            continue;
        };
        let Some(scopes) = node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.name_scopes") else {
            continue;
        };
        let Some(module) = module_of(node) else { continue };
        // The class list runs beside the scopes (`''` and the model's
        // class first, the op last).
        let Some(depth) = metadata_list(scopes.value()).iter().position(|m| *m == module) else { continue };
        let Some(class) = metadata_list(classes.value()).get(depth).copied() else { continue };
        // (A table of another module, `<m>.weight`: a custom embedding
        // reading its own `pos.pos_weight` keeps its name.)
        let owner = table.strip_suffix(".weight");
        if !class.ends_with("Embedding") || owner.is_none_or(|o| o == module) {
            continue;
        }
        // Tied: another layer reads the table, or its exact transpose (the
        // head's copy both exporters write).
        let t = &inits[&table];
        let read_elsewhere = nodes.iter().enumerate().any(|(k, n)| k != i && n.input.iter().any(|x| *x == table));
        let transposed = match (&t.data, t.dims.as_slice()) {
            (aicf_onnx::Data::F32(v), &[rows, cols]) => {
                holding(inits, &table, &transposed_values(v, rows, cols), [cols, rows]).is_some()
            }
            _ => false,
        };
        if !read_elsewhere && !transposed {
            continue;
        }
        let want = format!("{module}.weight");
        if want == table || inits.contains_key(&want) || declared(&want) || declared(&table) || listed(&want) {
            continue;
        }
        if nodes.iter().any(|n| n.output.iter().any(|o| *o == want)) {
            continue;
        }
        let Some(mut t) = inits.remove(&table) else { continue };
        t.name = want.clone();
        inits.insert(want.clone(), t);
        for n in nodes.iter_mut() {
            for input in n.input.iter_mut().filter(|x| **x == table) {
                *input = want.clone();
            }
        }
        for v in value_info.iter_mut().filter(|v| v.name() == table) {
            v.name = Some(want.clone());
        }
        renamed.push((table, want));
    }
    renamed
}

/// Biases the dynamo exporter dropped: a linear layer's bias that was zero
/// when exported (as Hugging Face initializes them) is left out of the
/// graph, so the model would train without it. A MatMul or Gemm whose
/// `fx_node` metadata reads a bias parameter (`%p_<path>_bias`) that no
/// initializer is gets it back as zeros, under its name (its
/// `name_scopes` module and `bias`): a Gemm or a Conv as its third input
/// (its `RemoveOptionalBiasFromConv` rule drops a convolution's, as a
/// squeeze-excitation's in MobileNetV3), a MatMul through an `Add` after
/// it (which the linear fold then takes). Returns the names restored.
pub(super) fn restore_biases(
    nodes: &mut Vec<NodeProto>,
    inits: &mut HashMap<String, aicf_onnx::Tensor>,
) -> Vec<String> {
    // (In lower case, as the FX record spells a module's capitals.)
    let flat = |name: &str| name.replace('.', "_").to_lowercase();
    let known: HashSet<String> = inits.keys().map(|n| flat(n)).collect();
    let producer: HashMap<String, usize> =
        nodes.iter().enumerate().flat_map(|(i, n)| n.output.iter().map(move |o| (o.clone(), i))).collect();
    let mut restored = Vec::new();
    let mut inserts: Vec<(usize, NodeProto)> = Vec::new();
    let mut taken_names: HashSet<String> = nodes.iter().flat_map(|n| n.output.iter().cloned()).collect();
    for i in 0..nodes.len() {
        let node = &nodes[i];
        if !matches!(node.op_type(), "MatMul" | "Gemm" | "Conv") || !node.domain().is_empty() || node.output.is_empty()
        {
            continue;
        }
        let Some(fx) = node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.fx_node").map(|p| p.value())
        else {
            continue;
        };
        let conv = node.op_type() == "Conv";
        if !(fx.contains("aten.linear") || fx.contains("aten.addmm") || (conv && fx.contains("aten.conv"))) {
            continue;
        }
        let Some(bias) = fx
            .split('%')
            .skip(1)
            .filter_map(|t| t.strip_prefix("p_"))
            .map(|t| t.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or(""))
            .find(|t| t.ends_with("_bias"))
            .map(str::to_lowercase)
        else {
            continue;
        };
        if known.contains(&bias) {
            continue;
        }
        // Its name: the node's module's, or its weight's (a submodule's
        // function called from the module: `self_attn` calling
        // `out_proj`'s weight and bias).
        let from_weight = node.input.get(1).and_then(|w| w.strip_suffix(".weight")).map(|m| format!("{m}.bias"));
        // Else the FX name itself: a bias the model's own module holds
        // (`F.linear(z, W.t(), self.dec_bias)`: `%p_dec_bias`, no module
        // path to split it by).
        let Some(name) = module_of(node)
            .map(|m| format!("{m}.bias"))
            .into_iter()
            .chain(from_weight)
            .chain(std::iter::once(bias.to_string()))
            .find(|n| flat(n) == bias && !inits.contains_key(n))
        else {
            continue;
        };
        // The layer's output features, from its weight.
        let weight_dims = |w: &str| -> Option<Vec<usize>> {
            inits.get(w).map(|t| t.dims.clone()).or_else(|| {
                let t = &nodes[*producer.get(w)?];
                (t.op_type() == "Transpose")
                    .then(|| inits.get(t.input.first()?).map(|t| t.dims.iter().rev().copied().collect()))?
            })
        };
        // (A convolution's weight is [out, in / groups, k...]: its
        // output channels first.)
        let rank_ok = |d: &Vec<usize>| if conv { d.len() >= 3 } else { d.len() == 2 };
        let Some(dims) = node.input.get(1).and_then(|w| weight_dims(w)).filter(rank_ok) else { continue };
        let trans_b = node.attribute.iter().find(|a| a.name() == "transB").is_some_and(|a| a.i() != 0);
        let features = if conv || (node.op_type() == "Gemm" && trans_b) { dims[0] } else { dims[1] };
        match node.op_type() {
            "Gemm" | "Conv" if node.input.len() == 2 => nodes[i].input.push(name.clone()),
            "MatMul" => {
                let out = node.output[0].clone();
                let mut inner = format!("{out}_without_bias");
                while taken_names.contains(&inner) {
                    inner.push('_');
                }
                taken_names.insert(inner.clone());
                nodes[i].output[0] = inner.clone();
                let add = NodeProto {
                    name: Some(format!("{}_bias", nodes[i].name())),
                    op_type: Some("Add".into()),
                    input: vec![inner, name.clone()],
                    output: vec![out],
                    ..Default::default()
                };
                inserts.push((i + 1, add));
            }
            _ => continue,
        }
        inits.insert(
            name.clone(),
            aicf_onnx::Tensor {
                name: name.clone(),
                dims: vec![features],
                data_type: aicf_onnx::proto::tensor_proto::DataType::Float,
                data: aicf_onnx::Data::F32(vec![0.0; features]),
            },
        );
        restored.push(name);
    }
    for (at, node) in inserts.into_iter().rev() {
        nodes.insert(at, node);
    }
    restored
}

/// The folded graph: linear layers first, then GELUs.
pub(super) fn fold(
    graph: &GraphProto,
    inits: &mut HashMap<String, aicf_onnx::Tensor>,
    aliased: &HashSet<String>,
    base: &Path,
) -> Folded {
    let mut g = Graph::new(graph, inits, aliased, base);
    // Index of the node each fold replaces -> the new node; the other nodes
    // of each fold are dropped.
    let mut replace: HashMap<usize, NodeProto> = HashMap::new();
    let mut transposed = Vec::new();
    let mut tied = Vec::new();
    let mut new_inits: Vec<aicf_onnx::Tensor> = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    for (i, node) in graph.node.iter().enumerate() {
        if node.op_type() != "MatMul" || !node.domain().is_empty() || g.taken.contains(&i) {
            continue;
        }
        let Some(linear) = plan_linear(&g, i, inits) else { continue };
        let name = match &linear.weight {
            Weight::Transpose { node: t, init } => {
                g.taken.insert(*t);
                init.clone()
            }
            Weight::PreTransposed(init) => {
                // PyTorch's name for it, where it is free.
                // (`<m>.bias` -> `<m>.weight`; `nn.MultiheadAttention`'s
                // `in_proj_bias` -> `in_proj_weight`.)
                let from_bias = linear.bias.as_ref().and_then(|(b, _)| {
                    b.strip_suffix(".bias")
                        .map(|m| format!("{m}.weight"))
                        .or_else(|| b.strip_suffix("_bias").map(|m| format!("{m}_weight")))
                });
                let free = |n: &String| {
                    !inits.contains_key(n)
                        && !new_inits.iter().any(|t| t.name == *n)
                        && !g.producer.contains_key(n.as_str())
                        && !graph.input.iter().any(|x| x.name() == n)
                };
                // (First the parameter the exporter's records say it folded
                // this from: `nn.MultiheadAttention(kdim=..)`'s separate
                // `q_proj_weight`, `k_proj_weight`, `v_proj_weight` share
                // one split bias, and were `mha.weight`, `val_3`, `val_4`.)
                let recorded = graph.value_info.iter().find(|v| v.name() == init.as_str()).and_then(|v| {
                    match folded_from(v)?.as_slice() {
                        [one] if one.contains('.') => Some(one.to_string()),
                        _ => None,
                    }
                });
                let name = recorded
                    .filter(free)
                    .or_else(|| {
                        from_bias
                            .or_else(|| module_of(node).map(|m| format!("{}.weight", qualified(&m, inits))))
                            .filter(free)
                    })
                    .unwrap_or_else(|| init.clone());
                let t = &inits[init];
                let (rows, cols) = (t.dims[0], t.dims[1]);
                let aicf_onnx::Data::F32(v) = &t.data else { continue };
                let values = transposed_values(v, rows, cols);
                // The exact transpose of another weight (an embedding table
                // the output layer is tied to, which both exporters write
                // again, transposed): that weight, read twice, as the
                // model reads it.
                if let Some(twin) = holding(inits, init, &values, [cols, rows]) {
                    removed.push(init.clone());
                    tied.push((init.clone(), twin.clone()));
                    let twin = twin.clone();
                    g.taken.insert(i);
                    emit(&mut g, &mut replace, graph, i, &linear, twin);
                    continue;
                }
                new_inits.push(aicf_onnx::Tensor {
                    name: name.clone(),
                    dims: vec![cols, rows],
                    data_type: t.data_type,
                    data: aicf_onnx::Data::F32(values),
                });
                removed.push(init.clone());
                transposed.push((name.clone(), init.clone()));
                name
            }
        };
        g.taken.insert(i);
        emit(&mut g, &mut replace, graph, i, &linear, name);
    }
    // A Gemm of a weight stored [in, out] (Hugging Face's `Conv1D`, written
    // `Gemm(x, W, b)` without transB): the weight transposed, the same
    // name, `transB = 1`: `hl.linear`.
    for (i, node) in graph.node.iter().enumerate() {
        if node.op_type() != "Gemm" || !node.domain().is_empty() || g.taken.contains(&i) {
            continue;
        }
        let int = |key: &str| node.attribute.iter().find(|a| a.name() == key).map_or(0, |a| a.i());
        let float = |key: &str| node.attribute.iter().find(|a| a.name() == key).map_or(1.0, |a| a.f());
        if int("transA") != 0 || int("transB") != 0 || float("alpha") != 1.0 || float("beta") != 1.0 {
            continue;
        }
        let Some(w) = node.input.get(1) else { continue };
        let Some(t) = weight_init(&g, inits, w, true) else { continue };
        let (rows, cols) = (t.dims[0], t.dims[1]);
        if let Some(c) = node.input.get(2).filter(|c| !c.is_empty())
            && inits.get(c).is_none_or(|b| b.dims != [cols])
        {
            continue;
        }
        let aicf_onnx::Data::F32(v) = &t.data else { continue };
        let values = transposed_values(v, rows, cols);
        new_inits.push(aicf_onnx::Tensor { dims: vec![cols, rows], data: aicf_onnx::Data::F32(values), ..t.clone() });
        transposed.push((w.clone(), w.clone()));
        g.taken.insert(i);
        let mut gemm = node.clone();
        gemm.attribute.retain(|a| a.name() != "transB");
        gemm.attribute.push(AttributeProto {
            name: Some("transB".into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(1),
            ..Default::default()
        });
        replace.insert(i, gemm);
    }
    for name in removed {
        inits.remove(&name);
    }
    for t in new_inits {
        inits.insert(t.name.clone(), t);
    }
    for (i, node) in graph.node.iter().enumerate() {
        if !matches!(node.op_type(), "Erf" | "Tanh") || !node.domain().is_empty() || g.taken.contains(&i) {
            continue;
        }
        let found = if node.op_type() == "Erf" { plan_erf_gelu(&g, i) } else { plan_tanh_gelu(&g, i) };
        let Some((x, chain, last)) = found else { continue };
        let out = graph.node[last].output[0].clone();
        g.taken.extend(chain.iter().copied());
        let mut attribute = Vec::new();
        if node.op_type() == "Tanh" {
            attribute.push(AttributeProto {
                name: Some("approximate".into()),
                r#type: Some(AttributeType::String as i32),
                s: Some(b"tanh".to_vec()),
                ..Default::default()
            });
        }
        replace.insert(
            last,
            NodeProto {
                name: node.name.clone(),
                op_type: Some("Gelu".into()),
                input: vec![x],
                output: vec![out],
                attribute,
                ..Default::default()
            },
        );
    }
    // SiLU: x * sigmoid(x) (either order) -> Swish (alpha 1).
    for (i, node) in graph.node.iter().enumerate() {
        if node.op_type() != "Sigmoid" || !node.domain().is_empty() || g.taken.contains(&i) {
            continue;
        }
        let (Some(x), Some(so)) = (node.input.first(), node.output.first()) else { continue };
        let Some(m) = g.sole_reader(so, "Mul") else { continue };
        if g.other(&graph.node[m], so) != Some(x.as_str()) {
            continue;
        }
        g.taken.extend([i, m]);
        replace.insert(
            m,
            NodeProto {
                name: node.name.clone(),
                op_type: Some("Swish".into()),
                input: vec![x.clone()],
                output: graph.node[m].output.clone(),
                ..Default::default()
            },
        );
    }
    let nodes = graph
        .node
        .iter()
        .enumerate()
        .filter_map(|(i, n)| match replace.remove(&i) {
            Some(new) => Some(new),
            None if g.taken.contains(&i) => None,
            None => Some(n.clone()),
        })
        .collect();
    Folded { nodes, transposed, tied }
}

/// The Gemm that replaces MatMul node `i` (and its bias's Add).
fn emit(
    g: &mut Graph,
    replace: &mut HashMap<usize, NodeProto>,
    graph: &GraphProto,
    i: usize,
    linear: &Linear,
    weight: String,
) {
    let node = &graph.node[i];
    let mut inputs = vec![node.input[0].clone(), weight];
    let mut output = node.output[0].clone();
    if let Some((bias, add)) = &linear.bias {
        g.taken.insert(*add);
        inputs.push(bias.clone());
        output = graph.node[*add].output[0].clone();
    }
    let trans_b = AttributeProto {
        name: Some("transB".into()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(1),
        ..Default::default()
    };
    replace.insert(
        i,
        NodeProto {
            name: node.name.clone(),
            op_type: Some("Gemm".into()),
            input: inputs,
            output: vec![output],
            attribute: vec![trans_b],
            ..Default::default()
        },
    );
}

enum Weight {
    /// `MatMul(x, Transpose(init))`: the weight as it is, `[out, in]`.
    Transpose { node: usize, init: String },
    /// `MatMul(x, init)` with an unnamed `[in, out]` initializer.
    PreTransposed(String),
}

struct Linear {
    weight: Weight,
    /// The bias initializer and the Add node that adds it.
    bias: Option<(String, usize)>,
}

/// A 2-D float initializer (read by one node only, where `single`: its
/// values are to be moved).
fn weight_init<'t>(
    g: &Graph,
    inits: &'t HashMap<String, aicf_onnx::Tensor>,
    name: &str,
    single: bool,
) -> Option<&'t aicf_onnx::Tensor> {
    inits.get(name).filter(|t| t.is_float() && t.dims.len() == 2 && (!single || g.uses(name) == 1))
}

fn plan_linear(g: &Graph, i: usize, inits: &HashMap<String, aicf_onnx::Tensor>) -> Option<Linear> {
    let node = &g.nodes[i];
    let [_, w] = node.input.as_slice() else { return None };
    let (weight, out_features) = if let Some(t) = weight_init(g, inits, w, true) {
        // Only the exporter's own pre-transposed copies: a name it made up
        // (TorchScript's `onnx::MatMul_N`, dynamo's `val_N`), or any name
        // beside a bias `<m>.bias` whose `<m>.weight` the graph lacks. A
        // named [in, out] initializer is otherwise the model's own layout,
        // kept.
        let made_up = w.starts_with("onnx::")
            || w.strip_prefix("val_").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let beside_bias = || {
            let out = node.output.first()?;
            let add = g.sole_reader(out, "Add")?;
            let stem = g.other(&g.nodes[add], out)?.strip_suffix(".bias")?;
            (!inits.contains_key(&format!("{stem}.weight"))).then_some(())
        };
        if !made_up && beside_bias().is_none() {
            return None;
        }
        (Weight::PreTransposed(w.clone()), t.dims[1])
    } else {
        let t = g.sole_producer(w, "Transpose")?;
        let transpose = &g.nodes[t];
        let perm = transpose.attribute.iter().find(|a| a.name() == "perm").map(|a| a.ints.clone());
        if !matches!(perm.as_deref(), None | Some([1, 0])) {
            return None;
        }
        let init = transpose.input.first()?;
        let t_init = weight_init(g, inits, init, false)?;
        (Weight::Transpose { node: t, init: init.clone() }, t_init.dims[0])
    };
    let out = node.output.first()?;
    let bias = g.sole_reader(out, "Add").and_then(|add| {
        let b = g.other(&g.nodes[add], out)?;
        let t = inits.get(b)?;
        (t.is_float() && t.dims == [out_features] && g.uses(b) == 1).then(|| (b.to_string(), add))
    });
    Some(Linear { weight, bias })
}

/// `module` as the initializers name its module path: the TorchScript
/// exporter's scopes leave out a container the model iterates rather than
/// calls (nanoGPT's `for block in self.transformer.h`: `h.0.attn.c_attn`,
/// where its norms are `transformer.h.0.ln_1.weight`), so where no
/// initializer starts with the module's first component but some have it
/// after one same prefix, that prefix goes before it.
fn qualified(module: &str, inits: &HashMap<String, aicf_onnx::Tensor>) -> String {
    let first = module.split('.').next().unwrap_or(module);
    if inits.keys().any(|n| n.starts_with(&format!("{first}."))) {
        return module.to_string();
    }
    let needle = format!(".{first}.");
    let mut prefixes = inits.keys().filter_map(|n| n.find(&needle).map(|at| &n[..at]));
    match prefixes.next() {
        Some(p) if prefixes.all(|q| q == p) => format!("{p}.{module}"),
        _ => module.to_string(),
    }
}

/// A list the dynamo exporter writes in its metadata (`['', 'blocks.0',
/// 'linear']`), its items.
fn metadata_list(text: &str) -> Vec<&str> {
    text.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().trim_matches('\'').trim_matches('"'))
        .collect()
}

/// The module a node belongs to: from the dynamo exporter's
/// `pkg.torch.onnx.name_scopes` metadata (`['', 'blocks.0', 'blocks.0.attn',
/// 'blocks.0.attn.qkv', 'linear']`: the last module path of the chain), or
/// from the TorchScript exporter's node name (`/blocks.0/attn/qkv/MatMul`),
/// as `blocks.0.attn.qkv`.
pub(super) fn module_of(node: &NodeProto) -> Option<String> {
    let plain =
        |name: &str| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if let Some(scopes) = node.metadata_props.iter().find(|p| p.key() == "pkg.torch.onnx.name_scopes") {
        let list = metadata_list(scopes.value());
        // Each module's path extends its parent's; the op's name does not.
        let mut module: Option<&str> = None;
        for pair in list.windows(2) {
            if pair[1].starts_with(pair[0]) && (pair[0].is_empty() || pair[1][pair[0].len()..].starts_with('.')) {
                module = Some(pair[1]);
            } else {
                break;
            }
        }
        if let Some(m) = module.filter(|m| plain(m)) {
            return Some(m.to_string());
        }
    }
    let path = node.name().strip_prefix('/')?;
    let (module, _) = path.rsplit_once('/')?;
    let name = module.replace('/', ".");
    plain(&name).then_some(name)
}

const SQRT_2: f64 = std::f64::consts::SQRT_2;
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// `erf(x / sqrt 2)` (or `x * (1 / sqrt 2)`) at Erf node `i`, then
/// `(1 + _)`, times `x` and `0.5` in either order: `(x, nodes, last)`.
fn plan_erf_gelu(g: &Graph, i: usize) -> Option<(String, Vec<usize>, usize)> {
    let erf = &g.nodes[i];
    let u = erf.input.first()?;
    let (x, scale) = if let Some(d) = g.sole_producer(u, "Div") {
        let n = &g.nodes[d];
        let [x, c] = n.input.as_slice() else { return None };
        (g.scalar(c).is_some_and(|s| (s - SQRT_2).abs() < 1e-6).then_some(x.as_str())?, d)
    } else {
        let m = g.sole_producer(u, "Mul")?;
        (g.with_scalar(&g.nodes[m], 1.0 / SQRT_2)?, m)
    };
    finish_gelu(g, x, vec![scale, i], i)
}

/// `tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))` at Tanh node `i` (x^3 as
/// `Pow(x, 3)` or `x * x * x`), then as [`plan_erf_gelu`].
fn plan_tanh_gelu(g: &Graph, i: usize) -> Option<(String, Vec<usize>, usize)> {
    let u = g.nodes[i].input.first()?;
    let scaled = g.sole_producer(u, "Mul")?;
    let inner = g.with_scalar(&g.nodes[scaled], SQRT_2_OVER_PI)?;
    let add = g.sole_producer(inner, "Add")?;
    let [a, b] = g.nodes[add].input.as_slice() else { return None };
    // One side is 0.044715 * x^3; the other, x.
    for (x, cubic) in [(a, b), (b, a)] {
        let Some(m) = g.sole_producer(cubic, "Mul") else { continue };
        let Some(cube) = g.with_scalar(&g.nodes[m], 0.044715) else { continue };
        let Some(mut nodes) = cube_of(g, cube, x) else { continue };
        nodes.extend([m, add, scaled, i]);
        return finish_gelu(g, x, nodes, i);
    }
    None
}

/// The nodes that make `value` = `x^3`.
fn cube_of(g: &Graph, value: &str, x: &str) -> Option<Vec<usize>> {
    if let Some(p) = g.sole_producer(value, "Pow") {
        let n = &g.nodes[p];
        return (n.input.first().map(String::as_str) == Some(x)
            && n.input.get(1).and_then(|e| g.scalar(e)) == Some(3.0))
        .then(|| vec![p]);
    }
    let outer = g.sole_producer(value, "Mul")?;
    let square = g.other(&g.nodes[outer], x)?;
    let inner = g.sole_producer(square, "Mul")?;
    (g.nodes[inner].input.iter().all(|v| v == x)).then(|| vec![inner, outer])
}

/// From the Erf or Tanh node `f` of `x`: `s = 1 + f`, then `(x * s) *
/// 0.5`, `(x * 0.5) * s` or `x * (0.5 * s)` (products in either order).
fn finish_gelu(g: &Graph, x: &str, mut nodes: Vec<usize>, f: usize) -> Option<(String, Vec<usize>, usize)> {
    let fo = g.nodes[f].output.first()?;
    let plus = g.sole_reader(fo, "Add")?;
    g.with_scalar(&g.nodes[plus], 1.0).filter(|v| *v == fo.as_str())?;
    let so = g.nodes[plus].output.first()?;
    let m1 = g.sole_reader(so, "Mul")?;
    let y = g.other(&g.nodes[m1], so)?;
    nodes.push(plus);
    nodes.push(m1);
    let last = if g.scalar(y).is_some_and(|h| h == 0.5) {
        // 0.5 * (1 + f), then times x.
        let ho = g.nodes[m1].output.first()?;
        let times_x = g.sole_reader(ho, "Mul")?;
        g.other(&g.nodes[times_x], ho).filter(|v| *v == x)?;
        nodes.push(times_x);
        times_x
    } else if y == x {
        let po = g.nodes[m1].output.first()?;
        let half = g.sole_reader(po, "Mul")?;
        g.with_scalar(&g.nodes[half], 0.5).filter(|v| *v == po.as_str())?;
        nodes.push(half);
        half
    } else {
        let h = g.sole_producer(y, "Mul")?;
        g.with_scalar(&g.nodes[h], 0.5).filter(|v| *v == x)?;
        nodes.push(h);
        m1
    };
    if nodes.iter().any(|n| g.taken.contains(n)) {
        return None;
    }
    Some((x.to_string(), nodes, last))
}

/// In the imported module: `reshape(linear(reshape(x)))`, where the inner
/// reshape flattens `x`'s leading axes into rows and the outer one gives
/// them back (a linear layer of flattened rows, as Hugging Face's `Conv1D`
/// and `view(-1, C)` write one), becomes `linear(x)`: the layer's units
/// reach the next layer through activations alone, as the growth operators
/// follow them. The same values (each row's product is the same).
pub(super) fn fold_reshaped_linears(module: mlir_sys::MlirOperation) -> usize {
    use crate::ir::{self, op_name, ops_of};
    use mlir_sys::*;
    let mut folded = 0;
    for (_, block) in ir::functions(module) {
        for linear in ops_of(block).into_iter().filter(|&op| op_name(op) == "hl.linear") {
            let operand = |op: MlirOperation, i: isize| unsafe { mlirOperationGetOperand(op, i) };
            let result = |op: MlirOperation| unsafe { mlirOperationGetResult(op, 0) };
            let rows = operand(linear, 0);
            let Some(flatten) = ir::producer(rows).filter(|&p| op_name(p) == "hl.reshape") else { continue };
            if ir::single_user(rows).is_none() {
                continue;
            }
            let y = result(linear);
            let Some(unflatten) = ir::single_user(y).filter(|&u| op_name(u) == "hl.reshape") else { continue };
            let x = operand(flatten, 0);
            let (rs, ys, out) = (ir::spec(rows).shape, ir::spec(y).shape, ir::spec(result(unflatten)).shape);
            // The rows given back as `out`'s leading axes: the input is
            // those with the features last (`x` as it is, or `x` reshaped
            // so: heads merged, [B, T, H, D] -> [B, T, H D], the same
            // elements in the same order as the rows).
            let n = out.len();
            let fits = n >= 3
                && rs.len() == 2
                && ys.len() == 2
                && rs[0] == out[..n - 1].iter().product::<usize>()
                && out[n - 1] == ys[1];
            if !fits {
                continue;
            }
            let mut input_shape = out[..n - 1].to_vec();
            input_shape.push(rs[1]);
            let ctx = unsafe { mlirOperationGetContext(linear) };
            let x = if ir::spec(x).shape == input_shape {
                x
            } else {
                let spec = crate::types::TensorSpec::new(input_shape.clone(), ir::spec(x).dtype);
                let Ok(ty) = ir::parse_type(ctx, &spec.mlir_type()) else { continue };
                let reshape = ir::OpSpec { operands: &[x], results: Some(&[ty]), ..ir::OpSpec::new("hl.reshape") };
                let Ok(op) = ir::create_op(ctx, ir::op_loc(flatten), &reshape) else { continue };
                unsafe { mlirBlockInsertOwnedOperationBefore(block, linear, op) };
                result(op)
            };
            let count = unsafe { mlirOperationGetNumOperands(linear) };
            let mut operands = vec![x];
            operands.extend((1..count).map(|i| operand(linear, i)));
            let ty = unsafe { mlirValueGetType(result(unflatten)) };
            let spec = ir::OpSpec { operands: &operands, results: Some(&[ty]), ..ir::OpSpec::new("hl.linear") };
            let Ok(new) = ir::create_op(ctx, ir::op_loc(linear), &spec) else { continue };
            unsafe {
                mlirBlockInsertOwnedOperationBefore(block, linear, new);
                mlirValueReplaceAllUsesOfWith(result(unflatten), result(new));
                mlirOperationDestroy(unflatten);
                mlirOperationDestroy(linear);
                mlirOperationDestroy(flatten);
            }
            folded += 1;
        }
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::{module_of, qualified};
    use aicf_onnx::proto::{NodeProto, StringStringEntryProto};
    use std::collections::HashMap;

    #[test]
    fn a_nodes_module_comes_from_its_scopes_or_its_name() {
        let scoped = NodeProto {
            name: Some("node_linear_3".into()),
            metadata_props: vec![StringStringEntryProto {
                key: Some("pkg.torch.onnx.name_scopes".into()),
                value: Some(
                    "['', 'transformer.h.0', 'transformer.h.0.attn', 'transformer.h.0.attn.c_attn', 'linear']".into(),
                ),
            }],
            ..Default::default()
        };
        assert_eq!(module_of(&scoped).as_deref(), Some("transformer.h.0.attn.c_attn"));
        let named = NodeProto { name: Some("/h.0/attn/c_attn/MatMul".into()), ..Default::default() };
        assert_eq!(module_of(&named).as_deref(), Some("h.0.attn.c_attn"));
        let unnamed = NodeProto { name: Some("MatMul_12".into()), ..Default::default() };
        assert_eq!(module_of(&unnamed), None);
    }

    #[test]
    fn a_module_gets_the_container_prefix_its_initializers_have() {
        let t = |name: &str| aicf_onnx::Tensor {
            name: name.into(),
            dims: vec![1],
            data_type: aicf_onnx::proto::tensor_proto::DataType::Float,
            data: aicf_onnx::Data::F32(vec![0.0]),
        };
        let inits: HashMap<String, aicf_onnx::Tensor> =
            ["transformer.wte.weight", "transformer.h.0.ln_1.weight", "transformer.h.1.ln_1.weight"]
                .into_iter()
                .map(|n| (n.to_string(), t(n)))
                .collect();
        assert_eq!(qualified("h.0.attn.c_attn", &inits), "transformer.h.0.attn.c_attn");
        // Already a prefix of the initializers': as it is.
        assert_eq!(qualified("transformer.h.0.mlp.c_fc", &inits), "transformer.h.0.mlp.c_fc");
        // Nothing to go by: as it is.
        assert_eq!(qualified("lm_head", &inits), "lm_head");
    }
}

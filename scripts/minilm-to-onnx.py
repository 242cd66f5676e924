"""Write all-MiniLM-L6-v2 as an ONNX graph, from the model.safetensors and config.json that
scripts/fetch-model.sh verified, for shale-embed's ONNX Runtime embedder.

    python minilm-to-onnx.py MODEL_DIR OUT.onnx

No PyTorch and no third-party model file: the graph is BertModel's forward pass written out
with standard ONNX operators (opset 17), and the weights are the safetensors' own float32
bytes (transposed for MatMul, never rounded), so the graph computes the same function as the
candle reference. It outputs `last_hidden_state` (batch, sequence, 384); mean pooling and
normalisation stay in Rust, as for candle. Run by scripts/fetch-model.sh with pinned `onnx`
and `numpy` in a cached virtual environment; the output is byte for byte reproducible and its
sha256 is pinned there and in crates/shale-embed/src/model_files.rs.

Per layer, as in Hugging Face's BertLayer (post-LayerNorm, erf GELU):

    q, k, v = x Wq + bq, x Wk + bk, x Wv + bv           (12 heads of 32)
    a = softmax(q k^T / sqrt(32) + mask) v              (mask: 0 or -10000 per key)
    x = LayerNorm(a Wo + bo + x)
    x = LayerNorm(gelu(x Wi + bi) Wo2 + bo2 + x)
"""

import json
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path):
    """name -> array, from the format's 8-byte little-endian header length and JSON header."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = DTYPES[meta["dtype"]]
        out[name] = np.frombuffer(data[base + start : base + end], dtype=dtype).reshape(meta["shape"])
    return out


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.count += 1
        out = f"{op_type.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.count}", **attrs))
        return out


def build(model_dir):
    cfg = json.load(open(f"{model_dir}/config.json"))
    w = read_safetensors(f"{model_dir}/model.safetensors")
    hidden, heads, layers = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    head_dim = hidden // heads
    eps = cfg["layer_norm_eps"]
    g = Graph()
    f32 = lambda x: np.array(x, np.float32)

    def linear(x, prefix, name):
        y = g.op("MatMul", [x, g.init(f"{name}_w", w[prefix + ".weight"].T)])
        return g.op("Add", [y, g.init(f"{name}_b", w[prefix + ".bias"])])

    def layer_norm(x, prefix, name):
        gamma = g.init(f"{name}_gamma", w[prefix + ".weight"])
        beta = g.init(f"{name}_beta", w[prefix + ".bias"])
        return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=eps)

    # Embeddings: word + token type + position, then LayerNorm.
    ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
    word = g.op("Gather", [g.init("word_embeddings", w["embeddings.word_embeddings.weight"]), ids], axis=0)
    typ = g.op("Gather", [g.init("token_type_embeddings", w["embeddings.token_type_embeddings.weight"]), types], axis=0)
    seq = g.op("Shape", [ids], start=1, end=2)
    positions = g.op(
        "Slice",
        [
            g.init("position_ids", w["embeddings.position_ids"]),
            g.init("zero_1d", np.array([0], np.int64)),
            seq,
            g.init("one_1d", np.array([1], np.int64)),
        ],
    )
    pos = g.op("Gather", [g.init("position_embeddings", w["embeddings.position_embeddings.weight"]), positions], axis=0)
    x = layer_norm(g.op("Add", [g.op("Add", [word, typ]), pos]), "embeddings.LayerNorm", "embeddings_ln")

    # (batch, 1, 1, sequence): 0 for a real token, -10000 for padding, added to every score.
    m = g.op("Unsqueeze", [g.op("Cast", [mask], to=TensorProto.FLOAT), g.init("axes_1_2", np.array([1, 2], np.int64))])
    mask_bias = g.op("Mul", [g.op("Sub", [g.init("one", f32(1.0)), m]), g.init("minus_10000", f32(-10000.0))])

    split = g.init("split_heads", np.array([0, 0, heads, head_dim], np.int64))
    merge = g.init("merge_heads", np.array([0, 0, hidden], np.int64))
    sqrt_head_dim = g.init("sqrt_head_dim", f32(np.sqrt(head_dim)))
    sqrt2, one, half = g.init("sqrt2", f32(np.sqrt(2.0))), g.init("one_f", f32(1.0)), g.init("half", f32(0.5))
    for i in range(layers):
        p = f"encoder.layer.{i}"
        # (batch, heads, sequence, head_dim); k as (batch, heads, head_dim, sequence).
        q = g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.attention.self.query", f"l{i}_q"), split])], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.attention.self.key", f"l{i}_k"), split])], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [linear(x, f"{p}.attention.self.value", f"l{i}_v"), split])], perm=[0, 2, 1, 3])
        scores = g.op("Add", [g.op("Div", [g.op("MatMul", [q, k]), sqrt_head_dim]), mask_bias])
        probs = g.op("Softmax", [scores], axis=-1)
        context = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge])
        attn = linear(context, f"{p}.attention.output.dense", f"l{i}_attn_out")
        x = layer_norm(g.op("Add", [attn, x]), f"{p}.attention.output.LayerNorm", f"l{i}_attn_ln")
        h = linear(x, f"{p}.intermediate.dense", f"l{i}_ffn_in")
        # Exact GELU: h * 0.5 * (1 + erf(h / sqrt 2)).
        gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [g.op("Erf", [g.op("Div", [h, sqrt2])]), one])]), half])
        out = linear(gelu, f"{p}.output.dense", f"l{i}_ffn_out")
        x = layer_norm(g.op("Add", [out, x]), f"{p}.output.LayerNorm", f"l{i}_ffn_ln")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))

    token_input = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [token_input(ids), token_input(mask), token_input(types)],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        g.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="shale")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: minilm-to-onnx.py MODEL_DIR OUT.onnx")
    onnx.save(build(sys.argv[1]), sys.argv[2])

"""The reference set: which networks, with which seeds, inputs and cases.

Every model has its own numpy RandomState seed for its inputs and a torch
seed for its weights. For each model the cases listed first are the ones of
the project's original reference set, drawn in the same order, so they
reproduce it; extra cases (longer sequences, more trips) are drawn after
them and so leave the first ones unchanged.

`MODELS` maps a name to a function that builds the model's spec; building is
deferred so that `--only NAME` does not pay for the others.
"""
from collections import namedtuple

import numpy as np
import torch

from . import MODEL_NAMES, nets
from .treelstm import make_treelstm, random_trees

OnnxModel = namedtuple("OnnxModel", [
    "name", "description", "net", "example", "inputs", "outputs", "dynamic_axes",
    "cases", "rtol", "atol", "reference", "note"])

TreeModel = namedtuple("TreeModel", ["name", "description", "net", "trees", "rtol", "atol"])

EAGER = "PyTorch eager on the exported module"
SCRIPTED = "the TorchScript module that was exported"


def _f32(a):
    # np.array, not np.ascontiguousarray: the latter turns a scalar into [1].
    return torch.from_numpy(np.array(a, dtype=np.float32, order="C"))


def _i64(a):
    return torch.from_numpy(np.array(a, dtype=np.int64, order="C"))


def _dim_note(label, axis, arg=0):
    return lambda args, outs: "%s=%d" % (label, args[arg].shape[axis])


def _lstm(name, seed_w, seed_x, input_size, hidden, layers, seqs, atol, description):
    r = np.random.RandomState(seed_x)
    example = (_f32(r.randn(8, 1, input_size)),)
    cases = [(_f32(r.randn(s, 1, input_size)),) for s in seqs]
    return OnnxModel(name, description, nets.make_lstm(seed_w, input_size, hidden, layers), example,
                     ["x"], ["y", "h", "c"], {"x": {0: "seq"}, "y": {0: "seq"}}, cases,
                     1e-4, atol, EAGER, _dim_note("seq", 0))


def lstm():
    return _lstm("lstm", 1, 101, 128, 128, 1, (1, 7, 32, 128), 1e-5,
                 "1-layer LSTM (ONNX LSTM op), input 128, hidden 128, batch 1, seq-first [seq,1,128]; "
                 "outputs y [seq,1,128], h_n/c_n [1,1,128]; zero initial state")


def lstm2():
    return _lstm("lstm2", 11, 102, 300, 512, 2, (1, 5, 20, 128), 2e-5,
                 "2-layer LSTM, input 300, hidden 512, batch 1, seq-first [seq,1,300]; "
                 "outputs y [seq,1,512], h_n/c_n [2,1,512]; zero initial state")


def gru():
    r = np.random.RandomState(112)
    example = (_f32(r.randn(8, 1, 128)),)
    cases = [(_f32(r.randn(s, 1, 128)),) for s in (1, 7, 32, 128)]
    return OnnxModel("gru", "1-layer GRU (ONNX GRU op, linear_before_reset 1 as PyTorch exports it), input 128, "
                     "hidden 128, batch 1, seq-first [seq,1,128]; outputs y [seq,1,128], h_n [1,1,128]; zero "
                     "initial state",
                     nets.make_gru(12, 128, 128), example, ["x"], ["y", "h"], {"x": {0: "seq"}, "y": {0: "seq"}},
                     cases, 1e-4, 1e-5, EAGER, _dim_note("seq", 0))


def bert_tiny():
    r = np.random.RandomState(103)
    example = (_f32(r.randn(1, 16, 128)),)
    cases = [(_f32(r.randn(1, s, 128)),) for s in (1, 5, 16, 50, 128)]
    return OnnxModel("bert_tiny",
                     "2-layer post-LN Transformer encoder, hidden 128, 2 heads, FFN 512, GELU(erf); "
                     "input float [1,seq,128], no mask, no embedding",
                     nets.make_encoder(2), example, ["x"], ["y"], {"x": {1: "seq"}, "y": {1: "seq"}},
                     cases, 1e-4, 5e-5, EAGER, _dim_note("seq", 1))


def bert_tiny_emb():
    r = np.random.RandomState(104)
    example = (_i64(r.randint(0, 1000, (1, 16))),)
    cases = [(_i64(r.randint(0, 1000, (1, s))),) for s in (1, 9, 64, 128)]
    return OnnxModel("bert_tiny_emb",
                     "bert_tiny + word embedding (vocab 1000) + position embedding (512) + LayerNorm; "
                     "input int64 token ids [1,seq]",
                     nets.make_embedded_encoder(3), example, ["ids"], ["y"],
                     {"ids": {1: "seq"}, "y": {1: "seq"}}, cases, 1e-4, 5e-5, EAGER, _dim_note("seq", 1))


def mlp():
    r = np.random.RandomState(105)
    example = (_f32(r.randn(4, 784)),)
    cases = [(_f32(r.randn(b, 784)),) for b in (1, 3, 64)]
    return OnnxModel("mlp", "MLP 784-512-512-10 with ReLU, dynamic batch", nets.make_mlp(4), example,
                     ["x"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}}, cases, 1e-4, 1e-5, EAGER,
                     _dim_note("batch", 0))


def cnn():
    r = np.random.RandomState(106)
    example = (_f32(r.randn(2, 3, 32, 32)),)
    cases = [(_f32(r.randn(b, 3, 32, 32)),) for b in (1, 4)]
    return OnnxModel("cnn",
                     "small CNN: 3x[conv3x3 pad1 + relu + maxpool2] (32,64,128 ch) + flatten + fc256 + "
                     "relu + fc10; input [batch,3,32,32]",
                     nets.make_cnn(5), example, ["x"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}},
                     cases, 1e-4, 1e-4, EAGER, _dim_note("batch", 0))


def _torchvision(arch, seed_x):
    r = np.random.RandomState(seed_x)
    example = (_f32(r.randn(1, 3, 224, 224)),)
    cases = [(_f32(r.randn(b, 3, 224, 224)),) for b in (1, 2)]
    return OnnxModel(arch, "torchvision %s, random weights (torch seed 6), input [batch,3,224,224]" % arch,
                     nets.make_torchvision(arch, 6), example, ["x"], ["y"],
                     {"x": {0: "batch"}, "y": {0: "batch"}}, cases, 1e-3, 1e-4, EAGER,
                     _dim_note("batch", 0))


def squeezenet1_0():
    return _torchvision("squeezenet1_0", 107)


def mobilenet_v2():
    return _torchvision("mobilenet_v2", 108)


def loop_if():
    net = nets.make_loop_if(7)
    r = np.random.RandomState(109)
    x0 = _f32(r.randn(1, 16))
    cases = [(x0, _i64(0)), (x0, _i64(3)), (_f32(r.randn(2, 16)), _i64(7)),
             (_f32(-np.abs(r.randn(3, 16)) * 3), _i64(0)),
             (_f32(r.randn(1, 16)), _i64(100))]

    def note(args, outs):
        # Which branch ran, recomputed in eager mode rather than read back.
        x, n = args
        h = x
        with torch.no_grad():
            for _ in range(int(n)):
                h = torch.tanh(net.lin(h))
        branch = "then (h*2)" if float(h.sum()) > 0 else "else (h-1)"
        return "trip count %d, If takes %s branch" % (int(n), branch)

    return OnnxModel("loop_if",
                     "TorchScript: for _ in range(int(n)): h = tanh(Linear16(h)); then If(sum(h)>0) h*2 "
                     "else h-1. n is an int64 scalar input => Loop with data-dependent trip count",
                     net, (x0, _i64(3)), ["x", "n"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}},
                     cases, 1e-4, 1e-5, SCRIPTED, note)


def while_loop():
    cases = [(_f32([0.1, -0.2, 0.3, 0.05]), _f32(10.0)),
             (_f32([5.0, 1.0]), _f32(2.0)),
             (_f32(np.random.RandomState(110).randn(7) * 1e-3), _f32(1e30))]
    return OnnxModel("while_loop",
                     "TorchScript while loop: while max|h| < limit and i < 100: h = h*1.5+0.1; returns h "
                     "and iteration count (int64 [1]); condition-driven Loop with an If inside "
                     "(short-circuit and)",
                     nets.make_while_loop(), (_f32([0.1, 0.2]), _f32(10.0)), ["x", "limit"],
                     ["h", "iters"], {"x": {0: "n"}, "h": {0: "n"}}, cases, 1e-4, 1e-5, SCRIPTED,
                     lambda a, o: "n=%d, iterations %d" % (a[0].shape[0], int(o[1][0])))


def dyn_ops():
    r = np.random.RandomState(111)
    cases = [(_f32(r.randn(10)), _i64([3])), (_f32(r.randn(37)), _i64([10])),
             (_f32(-np.abs(r.randn(5)) - 0.1), _i64([2])), (_f32([1.5]), _i64([1]))]
    example = (_f32(r.randn(10)), _i64([3]))
    cases.append((_f32(r.randn(64)), _i64([64])))
    return OnnxModel("dyn_ops",
                     "x [n] float32, k [1] int64: nz = nonzero(x>0) [nnz,1] int64 (NonZero); sel = x[x>0] "
                     "[nnz] (masked_select -> NonZero/GatherND); topv/topi = topk(x, k) (TopK, K from "
                     "input). Case 2 has nnz = 0 (empty outputs); case 4 has k = n.",
                     nets.make_dyn_ops(), example, ["x", "k"], ["nz", "sel", "topv", "topi"],
                     {"x": {0: "n"}}, cases, 1e-4, 1e-5, SCRIPTED,
                     lambda a, o: "n=%d nnz=%d k=%d" % (a[0].shape[0], o[0].shape[0], int(a[1][0])))


def treelstm():
    return TreeModel("treelstm",
                     "Binary Tree-LSTM (Tai et al. 2015, N-ary N=2), hidden 128, word emb 128, vocab 1000. "
                     "leaf: [i,o,u] = leaf.weight @ emb[word] + leaf.bias; c = sig(i)*tanh(u); "
                     "h = sig(o)*tanh(c). node: [i,fl,fr,o,u] = node.weight @ concat(hl,hr) + node.bias; "
                     "c = sig(i)*tanh(u) + sig(fl)*cl + sig(fr)*cr; h = sig(o)*tanh(c). "
                     "trees: nested lists, leaf = word id, node = [left, right].",
                     make_treelstm(8), random_trees(9), 1e-4, 1e-5)


MODELS = {name: globals()[name] for name in MODEL_NAMES}

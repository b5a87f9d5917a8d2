"""PyTorch definitions of Nimble's reference networks.

Each `make_*` function seeds torch's global generator and then creates the
module, so the weights depend only on the seed and on the order in which
parameters are created. That order is part of the contract: it is what makes
these weights equal, bit for bit, to the ones the project's reference set was
first made with (see docs/reference-models.md), so do not reorder the layers
in a constructor.

Control-flow networks are returned as TorchScript modules: tracing would
unroll their loops for one trip count, scripting keeps `Loop`/`If` in the
exported ONNX graph.
"""
import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F


# --- recurrent -------------------------------------------------------------

class SeqLSTM(nn.Module):
    """nn.LSTM over a seq-first input [seq, 1, input]; returns y, h_n, c_n."""

    def __init__(self, input_size, hidden, layers):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return y, h, c


def make_lstm(seed, input_size, hidden, layers):
    torch.manual_seed(seed)
    return SeqLSTM(input_size, hidden, layers).eval()


class SeqGRU(nn.Module):
    """nn.GRU over a seq-first input [seq, 1, input]; returns y, h_n."""

    def __init__(self, input_size, hidden):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden)

    def forward(self, x):
        y, h = self.gru(x)
        return y, h


def make_gru(seed, input_size, hidden):
    torch.manual_seed(seed)
    return SeqGRU(input_size, hidden).eval()


# --- Transformer encoder ---------------------------------------------------

class EncoderBlock(nn.Module):
    """Post-LN encoder block with the attention written out in primitives
    (MatMul/Softmax/Transpose/Reshape in ONNX rather than one fused op)."""

    def __init__(self, width, heads, ffn):
        super().__init__()
        self.heads = heads
        self.head_dim = width // heads
        # Creation order (qkv, out, ln1, ff1, ff2, ln2) fixes the weights.
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.ln1 = nn.LayerNorm(width)
        self.ff1 = nn.Linear(width, ffn)
        self.ff2 = nn.Linear(ffn, width)
        self.ln2 = nn.LayerNorm(width)

    def forward(self, x):
        b, s, w = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # [3, b, heads, s, head_dim]
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, w)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Encoder(nn.Module):
    """A stack of EncoderBlocks over float hidden states [1, seq, width]."""

    def __init__(self, width=128, heads=2, ffn=512, depth=2):
        super().__init__()
        self.layers = nn.ModuleList(EncoderBlock(width, heads, ffn) for _ in range(depth))

    def forward(self, x):
        for block in self.layers:
            x = block(x)
        return x


class EmbeddedEncoder(nn.Module):
    """Token ids [1, seq] -> word + position embeddings -> LayerNorm ->
    Encoder. The position ids come from the input's shape, so the ONNX graph
    computes with Shape/Range/Gather at run time."""

    def __init__(self, vocab=1000, max_pos=512, width=128):
        super().__init__()
        self.wemb = nn.Embedding(vocab, width)
        self.pemb = nn.Embedding(max_pos, width)
        self.ln = nn.LayerNorm(width)
        self.enc = Encoder(width)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.long).unsqueeze(0)
        return self.enc(self.ln(self.wemb(ids) + self.pemb(pos)))


def make_encoder(seed):
    torch.manual_seed(seed)
    return Encoder().eval()


def make_embedded_encoder(seed):
    torch.manual_seed(seed)
    return EmbeddedEncoder().eval()


# --- feed-forward and convolutional ----------------------------------------

class MLP(nn.Module):
    def __init__(self, sizes=(784, 512, 512, 10)):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])
        self.fc3 = nn.Linear(sizes[2], sizes[3])

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def make_mlp(seed):
    torch.manual_seed(seed)
    return MLP().eval()


class SmallCNN(nn.Module):
    """Three conv3x3/ReLU/maxpool2 stages (32, 64, 128 channels) on 3x32x32,
    then fc 2048->256->10."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.c3 = nn.Conv2d(64, 128, 3, padding=1)
        self.fc1 = nn.Linear(128 * 4 * 4, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        for conv in (self.c1, self.c2, self.c3):
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def make_cnn(seed):
    torch.manual_seed(seed)
    return SmallCNN().eval()


def make_torchvision(arch, seed):
    """A torchvision architecture with random weights.

    With default initialisation, eval-mode BatchNorm (running mean 0, var 1)
    lets mobilenet_v2's activations shrink to ~1e-15 by the classifier, which
    would make a useless reference. So the running statistics are
    re-estimated as a cumulative average over two random batches in training
    mode, drawn from the same seeded generator."""
    import torchvision

    torch.manual_seed(seed)
    net = getattr(torchvision.models, arch)(weights=None)
    norms = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    if norms:
        for bn in norms:
            bn.reset_running_stats()
            bn.momentum = None
        net.train()
        with torch.no_grad():
            for _ in range(2):
                net(torch.randn(4, 3, 224, 224))
    return net.eval()


# --- control flow (TorchScript) --------------------------------------------

class LoopThenIf(nn.Module):
    """h = x; repeat n times: h = tanh(lin(h)); then 2h if sum(h) > 0 else
    h - 1. n is an int64 scalar input, so the trip count is data."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x: Tensor, n: Tensor) -> Tensor:
        h = x
        for _ in range(int(n)):
            h = torch.tanh(self.lin(h))
        if bool(h.sum() > 0):
            y = h * 2.0
        else:
            y = h - 1.0
        return y


class GrowUntil(nn.Module):
    """while max|h| < limit and i < 100: h = 1.5 h + 0.1; i += 1.
    Returns h and i (int64 [1]); the loop condition is data."""

    def forward(self, x: Tensor, limit: Tensor):
        h = x
        i = torch.zeros([1], dtype=torch.long)
        while bool(h.abs().max() < limit) and int(i) < 100:
            h = h * 1.5 + 0.1
            i = i + 1
        return h, i


class DataDependentShapes(nn.Module):
    """x [n] float, k [1] int64 -> nonzero(x > 0) [nnz, 1], x[x > 0] [nnz],
    topk(x, k) values and indices [k]."""

    def forward(self, x: Tensor, k: Tensor):
        positive = x > 0
        nz = torch.nonzero(positive)
        sel = torch.masked_select(x, positive)
        values, indices = torch.topk(x, int(k[0]))
        return nz, sel, values, indices


def make_loop_if(seed):
    torch.manual_seed(seed)
    return torch.jit.script(LoopThenIf().eval())


def make_while_loop():
    return torch.jit.script(GrowUntil().eval())


def make_dyn_ops():
    return torch.jit.script(DataDependentShapes().eval())

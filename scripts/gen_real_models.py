#!/usr/bin/python3
"""Writes Nimble's corpus of real-world-style exported models (docs/real-models.md).

    /usr/bin/python3 scripts/gen_real_models.py OUTDIR [--only NAME,...] [--force] [--list]

The reference models (scripts/gen_reference_models.py) are clean exports.
These are small modules written the way users write the networks they ship
-- a voice-activity detector whose `if` returns tensors of different ranks,
a text detector that resizes by its input's height and width, an LSTM inside
a scripted branch, a log-mel front end, a detector head with TopK and
NonMaxSuppression, attention masking with bool masks, CenterNet's int64
index arithmetic, a YOLO grid decode with in-place slice writes -- exported
by torch.onnx exactly as a user would (torch.jit.script where the model has
data-dependent control flow, tracing otherwise), at the opsets users pick.

For each model NAME: OUTDIR/NAME.onnx, OUTDIR/NAME.json (inputs and outputs
with dtypes and symbolic dims, op types, tolerance, cases) and
OUTDIR/NAME.ref/<case>/input_<i>.npy, output_<i>.npy (i: the position in
the graph's inputs or outputs; the json maps names to files, since some
output names are not file-name-safe). Outputs are what PyTorch computed.

Deterministic (fixed seeds, one thread, pinned BLAS kernels) and idempotent:
OUTDIR/.realmodels-stamp.json holds this script's digest (with the versions of
torch, torchvision, onnx and numpy) and the sha256 of every file written; a
model whose files still match is not made again, and torch is not imported.

Needs Debian's /usr/bin/python3 with python3-torch, python3-torchvision,
python3-onnx and python3-numpy.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STAMP = ".realmodels-stamp.json"

# Generation order; kept free of imports so that an up-to-date run never
# loads torch.
MODEL_NAMES = ("vad", "text_det", "lstm_if", "logmel", "det_nms", "attn_mask", "mean_pool",
               "centernet_decode", "yolo_decode")


def generator_digest():
    """sha256 over this script and the refmodels modules it shares with
    the reference models' generator (stamp.py, files.py), the library
    versions and OPENBLAS_CORETYPE."""
    from refmodels import stamp

    files = [os.path.abspath(__file__)] + [os.path.join(HERE, "refmodels", n) for n in ("stamp.py", "files.py")]
    return stamp.generator_digest(files, HERE)


# --- the models ----------------------------------------------------------------

def _models():
    """name -> function building the model's spec. Defined inside a function
    so that torch is imported only when a model has to be made."""
    import math
    from collections import namedtuple

    import numpy as np
    import torch
    import torchvision
    from torch import Tensor, nn
    from torch.nn import functional as F

    Spec = namedtuple("Spec", [
        "name", "description", "exercises", "net", "export", "opset", "example", "inputs", "outputs",
        "dynamic_axes", "cases", "rtol", "atol", "reference", "check"])
    # export: "script" (torch.jit.script, then torch.onnx.export: If/Loop stay
    # in the graph) or "trace" (torch.onnx.export of the eager module).
    # cases: [(note, args)]. reference: None (the exported module itself) or
    # (text, fn(*args) -> outputs). check: None or fn(args, outs) that raises
    # when the case's expected outputs are not well defined (ties in TopK...).

    def f32(a):
        return torch.from_numpy(np.array(a, dtype=np.float32, order="C"))

    def i64(a):
        return torch.from_numpy(np.array(a, dtype=np.int64, order="C"))

    def boolean(a):
        return torch.from_numpy(np.array(a, dtype=np.bool_, order="C"))

    def distinct_top(values, k, what):
        """The k+1 largest of `values` (1-d) are distinct and, but for the
        (k+1)-th, positive: TopK's order is then unique."""
        v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
        top = v[:min(k + 1, v.size)]
        if np.any(top[:k] <= 0) or np.unique(top).size != top.size:
            raise RuntimeError("%s: TopK inputs tie among the largest %d values; pick other data" % (what, k))

    # 1. Voice-activity detector (Silero-VAD-like) -----------------------------
    class VadLike(nn.Module):
        """x [N,64,T] features, sr int64 scalar -> speech probability [N,1]
        and an embedding whose RANK depends on sr: [N,128] (pooled over time)
        at 16 kHz, [N,128,T] (per frame) otherwise."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(64, 128, 3, padding=1)
            self.head = nn.Linear(128, 1)

        def forward(self, x: Tensor, sr: Tensor):
            h = torch.relu(self.conv(x))
            prob = torch.sigmoid(self.head(h.mean(dim=2)))
            if int(sr) == 16000:
                emb = h.amax(dim=2)
            else:
                emb = h * 0.5
            return prob, emb

    def vad():
        torch.manual_seed(201)
        net = torch.jit.script(VadLike().eval())
        r = np.random.RandomState(301)
        cases = []
        for n, t, sr in ((1, 1, 16000), (2, 10, 8000), (3, 37, 16000), (1, 1, 8000), (2, 50, 8000)):
            cases.append(("N=%d T=%d sr=%d -> emb rank %d" % (n, t, sr, 2 if sr == 16000 else 3),
                          (f32(r.randn(n, 64, t)), i64(sr))))
        return Spec("vad", "VAD-like: Conv1d+ReLU, sigmoid head; `if int(sr) == 16000` returns the time-pooled "
                    "embedding [N,128] (ReduceMax) else the per-frame one [N,128,T]",
                    ["If on an input's value", "If branches of different ranks ([N,128] vs [N,128,T])",
                     "the exporter declares the If output with the then-branch's rank",
                     "int64 0-d input"],
                    net, "script", 16, (f32(r.randn(2, 64, 10)), i64(16000)), ["x", "sr"], ["prob", "emb"],
                    {"x": {0: "N", 2: "T"}}, cases, 1e-4, 1e-5, None, None)

    # 2. Text detector (DBNet/EAST-like) with dynamic-size interpolation -------
    class TextDet(nn.Module):
        """image [B,3,H,W] -> prob_map [B,1,H,W]. The image is first resized to
        the next multiple of 16 in each dim (size computed from H and W), then a
        3-level FPN (nearest upsampling to the size of the finer level, bilinear
        x2 with a crop), and the map is resized back to H x W."""

        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
            self.c3 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
            self.lat2 = nn.Conv2d(32, 16, 1)
            self.lat3 = nn.Conv2d(32, 16, 1)
            self.head = nn.Conv2d(16, 1, 3, padding=1)

        def forward(self, image):
            h, w = image.shape[2], image.shape[3]
            x = F.interpolate(image, size=((h + 15) // 16 * 16, (w + 15) // 16 * 16), mode="bilinear",
                              align_corners=False)
            c1 = F.relu(self.c1(x))
            c2 = F.relu(self.c2(c1))
            c3 = F.relu(self.c3(c2))
            p2 = self.lat2(c2) + F.interpolate(self.lat3(c3), size=(c2.shape[2], c2.shape[3]), mode="nearest")
            up = F.interpolate(p2, scale_factor=2.0, mode="bilinear", align_corners=False)
            p1 = c1 + up[:, :, :c1.shape[2], :c1.shape[3]]
            prob = torch.sigmoid(self.head(p1))
            return F.interpolate(prob, size=(h, w), mode="bilinear", align_corners=False)

    def text_det():
        torch.manual_seed(202)
        net = TextDet().eval()
        r = np.random.RandomState(302)
        example = (f32(r.rand(1, 3, 64, 96)),)
        cases = [("B=%d H=%d W=%d" % (b, h, w), (f32(r.rand(b, 3, h, w)),))
                 for b, h, w in ((1, 32, 32), (1, 50, 70), (2, 17, 33), (1, 96, 128), (1, 7, 5))]
        return Spec("text_det", "DBNet-like text detector: resize to a multiple of 16 (size from H/W), 3 stride-2 "
                    "convs, FPN with nearest resize to the finer level's size and bilinear x2 + crop, sigmoid "
                    "map resized back to H x W (bilinear, half-pixel)",
                    ["Resize with sizes computed at run time (Shape/Gather/Div/Mul/Concat)",
                     "Resize with constant scales", "nearest and linear modes", "Slice with run-time ends",
                     "opset 11 Resize (roi and scales inputs)"],
                    net, "trace", 11, example, ["image"], ["prob_map"],
                    {"image": {0: "batch", 2: "height", 3: "width"},
                     "prob_map": {0: "batch", 2: "height", 3: "width"}},
                    cases, 1e-4, 1e-5, None, None)

    # 3. LSTM inside a scripted branch ------------------------------------------
    class LstmIf(nn.Module):
        """x [B,S,32] -> y [B,S,8]: an nn.LSTM (batch_first) for sequences
        longer than 4, a cheap Linear+tanh for short ones; then a Linear."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(32, 48, batch_first=True)
            self.proj = nn.Linear(32, 48)
            self.out = nn.Linear(48, 8)

        def forward(self, x: Tensor):
            if x.size(1) > 4:
                y, _ = self.lstm(x)
            else:
                y = torch.tanh(self.proj(x))
            return self.out(y)

    def lstm_if():
        torch.manual_seed(203)
        net = torch.jit.script(LstmIf().eval())
        r = np.random.RandomState(303)
        cases = [("B=%d S=%d -> %s" % (b, s, "LSTM" if s > 4 else "Linear"), (f32(r.randn(b, s, 32)),))
                 for b, s in ((1, 1), (2, 4), (1, 5), (3, 17), (2, 64))]
        return Spec("lstm_if", "scripted `if x.size(1) > 4`: nn.LSTM(32, 48, batch_first) in the then-branch "
                    "(with the exporter's weight Slice/Concat and zero initial state from the batch size), "
                    "Linear+tanh in the else-branch; a Linear after",
                    ["If on an input's size", "LSTM inside an If subgraph",
                     "subgraphs reading outer-scope initializers", "ConstantOfShape with a run-time shape"],
                    net, "script", 14, (f32(r.randn(2, 6, 32)),), ["x"], ["y"],
                    {"x": {0: "B", 1: "S"}}, cases, 1e-4, 1e-5, None, None)

    # 4. Log-mel audio front end ---------------------------------------------------
    class LogMel(nn.Module):
        """audio [B,samples] -> log-mel [B,40,frames]: centered STFT (n_fft 256,
        hop 64, periodic Hann, reflect padding), power, HTK mel filterbank
        (40 bands, 16 kHz), log(x + 1e-6).

        torch 1.13 cannot export torch.stft to ONNX (no STFT symbolic at any
        opset), so forward() does what exportable front ends do (nnAudio,
        Silero VAD): reflect Pad, then Conv1d with the windowed DFT basis
        (cos rows, then -sin rows). reference() is torch.stft itself."""

        def __init__(self, n_fft=256, hop=64, n_mels=40, sr=16000):
            super().__init__()
            self.n_fft, self.hop = n_fft, hop
            win = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
            k = torch.arange(n_fft // 2 + 1, dtype=torch.float64)[:, None]
            n = torch.arange(n_fft, dtype=torch.float64)[None, :]
            ang = 2 * math.pi * k * n / n_fft
            basis = torch.cat([torch.cos(ang) * win, -torch.sin(ang) * win], 0)
            self.register_buffer("basis", basis.float()[:, None, :])
            freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1, dtype=torch.float64)
            mel_max = 2595.0 * math.log10(1.0 + (sr / 2) / 700.0)
            hz = 700.0 * (10.0 ** (torch.linspace(0.0, mel_max, n_mels + 2, dtype=torch.float64) / 2595.0) - 1.0)
            fb = torch.zeros(n_mels, n_fft // 2 + 1, dtype=torch.float64)
            for i in range(n_mels):
                lo, c, hi = hz[i], hz[i + 1], hz[i + 2]
                fb[i] = torch.clamp(torch.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)), min=0)
            self.register_buffer("mel", fb.float())
            self.register_buffer("window", win.float())

        def forward(self, audio):
            x = F.pad(audio[:, None, :], (self.n_fft // 2, self.n_fft // 2), mode="reflect")
            spec = F.conv1d(x, self.basis, stride=self.hop)
            nf = self.n_fft // 2 + 1
            power = spec[:, :nf] ** 2 + spec[:, nf:] ** 2
            return torch.log(torch.matmul(self.mel, power) + 1e-6)

        def reference(self, audio):
            s = torch.stft(audio, self.n_fft, self.hop, window=self.window, center=True, pad_mode="reflect",
                           return_complex=True)
            return torch.log(torch.matmul(self.mel, s.abs() ** 2) + 1e-6)

    def logmel():
        net = LogMel().eval()
        r = np.random.RandomState(304)
        cases = []
        for b, n in ((1, 300), (2, 4000), (1, 16000), (3, 1029)):
            t = np.arange(n) / 16000.0
            tone = 0.5 * np.sin(2 * np.pi * r.uniform(100, 4000) * t)
            cases.append(("B=%d samples=%d -> frames %d" % (b, n, n // 64 + 1),
                          (f32(tone[None, :] + 0.1 * r.randn(b, n)),)))
        return Spec("logmel", "log-mel front end: reflect Pad, STFT as Conv1d with a DFT basis (258 x 1 x 256, "
                    "stride 64), |X|^2 from Slice/Pow/Add, mel MatMul (40 x 129), Log; the reference is "
                    "torch.stft",
                    ["Pad mode=reflect with a run-time length", "Conv1d with stride over a long signal",
                     "MatMul of a constant by a batched tensor", "Log",
                     "STFT written as Conv1d (torch 1.13 cannot export torch.stft)"],
                    net, "trace", 13, (f32(r.randn(2, 4000)),), ["audio"], ["log_mel"],
                    {"audio": {0: "batch", 1: "samples"}, "log_mel": {0: "batch", 2: "frames"}},
                    cases, 1e-4, 2e-4,
                    ("torch.stft (center, reflect, periodic Hann) + mel + log in eager PyTorch",
                     lambda audio: net.reference(audio)), None)

    # 5. Detector head: TopK with k from an input, then NMS ------------------------
    class DetHead(nn.Module):
        """boxes [n,4] (x1,y1,x2,y2), scores [n], k int64 scalar: the top
        min(k, n) by score, then torchvision NMS at IoU 0.5; returns the kept
        boxes, scores and their indices into the input."""

        def forward(self, boxes: Tensor, scores: Tensor, k: Tensor):
            kk = min(int(k), scores.size(0))
            top_scores, idx = torch.topk(scores, kk)
            cand = boxes[idx]
            keep = torchvision.ops.nms(cand, top_scores, 0.5)
            return cand[keep], top_scores[keep], idx[keep]

    def det_nms():
        net = torch.jit.script(DetHead().eval())
        r = np.random.RandomState(305)

        def boxes_scores(n, spread):
            xy = r.rand(n, 2) * spread
            wh = r.rand(n, 2) * 40 + 8
            # Distinct scores, none tied: the kept set is unique.
            scores = (r.permutation(n) + r.rand(n) * 0.5 + 1.0) / (n + 2.0)
            return f32(np.concatenate([xy, xy + wh], 1)), f32(scores)

        cases = []
        for n, k, spread in ((20, 10, 100), (50, 50, 60), (5, 10, 100), (1, 1, 10), (200, 100, 80), (30, 0, 50),
                             (0, 10, 10)):
            b, s = boxes_scores(n, spread)
            note = "n=%d k=%d" % (n, k)
            if n == 0:
                note += ": no candidates (boxes [0,4]), so TopK's K is 0"
            elif k == 0:
                note += ": TopK's K is 0"
            cases.append((note, (b, s, i64(k))))

        def check(args, outs):
            s = args[1].numpy()
            if np.unique(s).size != s.size:
                raise RuntimeError("det_nms: tied scores")

        ex = boxes_scores(20, 100)
        return Spec("det_nms", "detector head: k = min(k, n) (Shape/Min), TopK, Gather of the candidate boxes, "
                    "torchvision.ops.nms (IoU 0.5) -> NonMaxSuppression, Gather of the kept boxes/scores/"
                    "indices; two cases make TopK's K 0 (k = 0, and no candidate boxes at all): the ONNX spec "
                    "asks for a positive K, PyTorch returns empty outputs",
                    ["TopK with K from an input", "NonMaxSuppression", "outputs whose length depends on data",
                     "empty inputs and outputs (K = 0, n = 0)", "int64 0-d input", "opset 11"],
                    net, "script", 11, (ex[0], ex[1], i64(10)), ["boxes", "scores", "k"],
                    ["sel_boxes", "sel_scores", "sel_index"], {"boxes": {0: "n"}, "scores": {0: "n"}},
                    cases, 1e-5, 1e-5, None, check)

    # 6. Attention masking: bool masks, Where/Expand, gathers ------------------------
    class MaskedAttention(nn.Module):
        """A one-block causal LM as exported from Hugging-Face-style code:
        RoBERTa-style position ids from a CumSum of the mask, token and
        position embeddings (Gather), a causal mask sliced from a bool buffer
        (GPT-2 style) and-ed with the padding mask, expanded to [B,H,S,S] and
        applied with Where(mask, scores, finfo.min); the next token is the
        ArgMax of the logits at each row's last valid position (Range +
        GatherND-like indexing). Outputs: hidden [B,S,32] float, next token
        [B] int64, a bool mask [B,S] (special tokens that are not padding)."""

        def __init__(self, vocab=100, d=32, heads=2, max_pos=64):
            super().__init__()
            self.heads, self.d = heads, d
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(max_pos + 1, d, padding_idx=0)
            self.qkv = nn.Linear(d, 3 * d)
            self.o = nn.Linear(d, d)
            self.lm = nn.Linear(d, vocab)
            causal = torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
            self.register_buffer("causal", causal.view(1, 1, max_pos, max_pos))

        def forward(self, input_ids, attention_mask):
            b, s = input_ids.shape[0], input_ids.shape[1]
            m = attention_mask.to(torch.int64)
            pos = torch.cumsum(m, dim=1) * m
            h = self.tok(input_ids) + self.pos(pos)
            q, k, v = self.qkv(h).split(self.d, dim=2)
            hd = self.d // self.heads
            q, k, v = (t.view(b, s, self.heads, hd).transpose(1, 2) for t in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
            mask = self.causal[:, :, :s, :s] & attention_mask[:, None, None, :]
            mask = mask.expand(b, self.heads, s, s)
            scores = torch.where(mask, scores, torch.tensor(torch.finfo(torch.float32).min))
            ctx = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(b, s, self.d)
            h = h + self.o(ctx)
            logits = self.lm(h)
            last = m.sum(1) - 1
            next_token = logits[torch.arange(b), last].argmax(-1)
            special = (input_ids < 4) & attention_mask
            return h, next_token, special

    def attn_mask():
        torch.manual_seed(206)
        net = MaskedAttention().eval()
        r = np.random.RandomState(306)

        def batch(lengths, s):
            ids = r.randint(0, 100, (len(lengths), s))
            mask = np.arange(s)[None, :] < np.array(lengths)[:, None]
            ids[~mask] = 1  # a pad id, as tokenizers write
            return i64(ids), boolean(mask)

        cases = [("B=%d S=%d lengths %s" % (len(ls), s, ",".join(map(str, ls))), batch(ls, s))
                 for ls, s in (([1], 1), ([7, 5], 7), ([16, 3, 9], 16), ([64], 64), ([2, 2], 5))]

        def check(args, outs):
            # The argmax must not be a near-tie (float summation order).
            ids, mask = args
            with torch.no_grad():
                logits = net.lm(outs[0])
            last = mask.to(torch.int64).sum(1) - 1
            row = logits[torch.arange(ids.shape[0]), last]
            top2 = torch.topk(row, 2).values
            if float((top2[:, 0] - top2[:, 1]).min()) < 1e-3:
                raise RuntimeError("attn_mask: next-token logits nearly tie")

        return Spec("attn_mask", "one causal attention block, HF-style: CumSum position ids, Embedding "
                    "Gathers, causal bool buffer Slice & padding mask, Expand to [B,H,S,S], Where(mask, "
                    "scores, finfo.min), Softmax, ArgMax at each row's last valid token; bool input "
                    "attention_mask, bool output, and output names that are not file-name-safe",
                    ["bool input and bool output", "Where/Expand attention masking",
                     "CumSum and int64 index arithmetic (Sub, Range, Gather with computed indices)",
                     "Slice of a constant by run-time sizes", "ArgMax", "Split",
                     "an output named with a JSON-looking string, one with '/' and ':'"],
                    net, "trace", 14, batch([7, 5], 7), ["input_ids", "attention_mask"],
                    ["hidden", '{"name": "next_token", "dtype": "int64"}', "special/mask:0"],
                    {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                    cases, 1e-4, 2e-5, None, check)

    # 7. Masked mean pooling: bool in, bool out, awkward output names ---------------
    class MeanPool(nn.Module):
        """Sentence-embedding pooling as sentence-transformers exports it:
        tokens [B,S,D], mask bool [B,S] -> the mean of the unmasked tokens
        [B,D] (mask Unsqueeze/Cast/Expand, ReduceSum, count clamped to 1e-9),
        how many tokens each row has (int64 [B]) and which tokens are kept
        (bool [B,S]: masked in and with a positive first feature)."""

        def forward(self, tokens, mask):
            m = mask.unsqueeze(-1).expand(tokens.size()).float()
            summed = torch.sum(tokens * m, 1)
            count = torch.clamp(m.sum(1), min=1e-9)
            keep = mask & (tokens[:, :, 0] > 0)
            return summed / count, mask.sum(1), keep

    def mean_pool():
        net = MeanPool().eval()
        r = np.random.RandomState(309)

        def batch(lengths, s, d=24):
            mask = np.arange(s)[None, :] < np.array(lengths)[:, None]
            return f32(r.randn(len(lengths), s, d)), boolean(mask)

        cases = [("B=%d S=%d lengths %s" % (len(ls), s, ",".join(map(str, ls))), batch(ls, s))
                 for ls, s in (([1], 1), ([5, 2, 7], 7), ([0, 3], 4), ([40], 40))]
        return Spec("mean_pool", "masked mean pooling (sentence-transformers): bool mask Unsqueeze/Expand/Cast, "
                    "Mul, ReduceSum, Clip, Div; token counts as int64 ReduceSum of a bool; a bool output from "
                    "And/Greater; one row with no tokens (count 0, embedding 0)",
                    ["bool input and bool output", "ReduceSum of a bool mask cast to int64", "Expand to an "
                     "input's shape", "Clip with a min only", "a row with an all-false mask",
                     "output names with '/', ':', '{', '\"' and spaces (not file-name-safe)"],
                    net, "trace", 14, batch([3, 2], 3), ["tokens", "mask"],
                    ["sentence_embedding", "tokens/count:0", '{"output": "keep", "dtype": "bool"}'],
                    {"tokens": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}},
                    cases, 1e-5, 1e-6, None, None)

    # 8. CenterNet decode: int64 index math ------------------------------------------
    class CenterNetDecode(nn.Module):
        """heat [B,C,H,W] logits, wh [B,2,H,W], offset [B,2,H,W] -> the 16
        best peaks: boxes [B,16,4], scores [B,16], classes [B,16] int64. Peaks
        by 3x3 max-pool equality; class, row and column from the flat index by
        floor division and modulo (int64); wh/offset by GatherElements."""

        def __init__(self, k=16):
            super().__init__()
            self.k = k

        def forward(self, heat, wh, offset):
            b, _, h, w = heat.shape
            heat = torch.sigmoid(heat)
            hmax = F.max_pool2d(heat, 3, stride=1, padding=1)
            heat = heat * (hmax == heat).float()
            scores, inds = torch.topk(heat.reshape(b, -1), self.k)
            classes = torch.div(inds, h * w, rounding_mode="floor")
            pix = inds % (h * w)
            ys = torch.div(pix, w, rounding_mode="floor")
            xs = pix % w
            idx = pix[:, None, :].expand(b, 2, self.k)
            wh = wh.reshape(b, 2, h * w).gather(2, idx)
            off = offset.reshape(b, 2, h * w).gather(2, idx)
            cx = xs.float() + off[:, 0]
            cy = ys.float() + off[:, 1]
            boxes = torch.stack([cx - wh[:, 0] / 2, cy - wh[:, 1] / 2, cx + wh[:, 0] / 2, cy + wh[:, 1] / 2], 2)
            return boxes, scores, classes

    def centernet_decode():
        net = CenterNetDecode().eval()
        r = np.random.RandomState(307)

        def inputs(b, h, w):
            return (f32(r.randn(b, 3, h, w) * 2), f32(r.rand(b, 2, h, w) * 8 + 1), f32(r.rand(b, 2, h, w)))

        cases = [("B=%d H=%d W=%d" % s, inputs(*s)) for s in ((1, 8, 10), (2, 16, 12), (1, 31, 17), (1, 64, 64))]

        def check(args, outs):
            heat = torch.sigmoid(args[0])
            peaks = heat * (F.max_pool2d(heat, 3, stride=1, padding=1) == heat).float()
            for row in peaks.reshape(peaks.shape[0], -1).numpy():
                distinct_top(row, 16, "centernet_decode")

        return Spec("centernet_decode", "CenterNet decode: Sigmoid, MaxPool 3x3 peak test (Equal/Cast/Mul), TopK "
                    "16 over C*H*W, class/row/column from the flat index by floor Div and Mod (exported as "
                    "Div/Mod/Xor/Where), GatherElements of wh and offset with an Expand-ed index, Stack",
                    ["int64 floor division and modulo (Div, Mod, Less, Xor, Not, And, Where on int64)",
                     "GatherElements with run-time indices", "Expand with a run-time shape",
                     "TopK over a reshaped run-time size"],
                    net, "trace", 13, inputs(1, 8, 10), ["heat", "wh", "offset"],
                    ["boxes", "scores", "classes"],
                    {n: {0: "batch", 2: "h", 3: "w"} for n in ("heat", "wh", "offset")},
                    cases, 1e-5, 1e-5, None, check)

    # 9. YOLO grid decode: meshgrid, in-place slice writes ---------------------------
    class YoloDecode(nn.Module):
        """features [B,16,ny,nx] -> detections [B, 3*ny*nx, 9], as YOLOv5's
        Detect layer: 1x1 conv, view/permute to [B,3,ny,nx,9], sigmoid, and
        in-place writes of the decoded xy (grid from meshgrid(arange(ny),
        arange(nx))) and wh (anchors) into slices of the tensor."""

        def __init__(self, na=3, nc=4, stride=8.0):
            super().__init__()
            self.na, self.no, self.stride = na, nc + 5, stride
            self.conv = nn.Conv2d(16, na * (nc + 5), 1)
            self.register_buffer("anchors", torch.tensor([[10., 13.], [16., 30.], [33., 23.]]).view(1, na, 1, 1, 2))

        def forward(self, features):
            x = self.conv(features)
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
            grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
            y = x.sigmoid()
            y[..., 0:2] = (y[..., 0:2] * 2 - 0.5 + grid) * self.stride
            y[..., 2:4] = (y[..., 2:4] * 2) ** 2 * self.anchors
            return y.view(bs, -1, self.no)

    def yolo_decode():
        torch.manual_seed(208)
        net = YoloDecode().eval()
        r = np.random.RandomState(308)
        cases = [("B=%d ny=%d nx=%d" % (b, h, w), (f32(r.randn(b, 16, h, w)),))
                 for b, h, w in ((1, 8, 8), (2, 4, 6), (1, 13, 9), (1, 1, 1), (1, 40, 40))]
        return Spec("yolo_decode", "YOLOv5 Detect decode: Conv 1x1, Reshape/Transpose to [B,3,ny,nx,9], "
                    "Sigmoid, grid from meshgrid(Range(ny), Range(nx)) (Expand), in-place slice writes "
                    "exported as ScatterND with index tensors built from Range/Expand/Concat",
                    ["ScatterND with run-time indices", "Range with run-time limits", "Expand",
                     "Reshape with run-time shapes", "Pow", "opset 12",
                     "dynamic axes given as lists (the exporter names the dims)"],
                    net, "trace", 12, (f32(r.randn(1, 16, 8, 8)),), ["features"], ["detections"],
                    {"features": [0, 2, 3], "detections": [0, 1]}, cases, 1e-5, 1e-5, None, None)

    return {"vad": vad, "text_det": text_det, "lstm_if": lstm_if, "logmel": logmel, "det_nms": det_nms,
            "attn_mask": attn_mask, "mean_pool": mean_pool,
            "centernet_decode": centernet_decode, "yolo_decode": yolo_decode}


def _same(a, b, rtol, atol):
    import numpy as np

    a, b = a.detach().numpy(), b.detach().numpy()
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.all(np.abs(a.astype(np.float64) - b) <= atol + rtol * np.abs(b.astype(np.float64))))
    return bool(np.array_equal(a, b))


def _make(outdir, name, generator):
    """Exports model `name`, checks it, evaluates every case and writes the
    files; returns the relative paths written."""
    import onnx
    import torch

    from refmodels.files import as_tuple, clear_model, op_counts, tensor_entry, value_info

    torch.set_num_threads(1)  # one summation order on every machine
    spec = _models()[name]()
    clear_model(outdir, name)
    onnx_rel = name + ".onnx"
    with torch.no_grad():
        torch.onnx.export(spec.net, spec.example, os.path.join(outdir, onnx_rel), opset_version=spec.opset,
                          input_names=list(spec.inputs), output_names=list(spec.outputs),
                          dynamic_axes=spec.dynamic_axes, do_constant_folding=True)
    model = onnx.load(os.path.join(outdir, onnx_rel))
    onnx.checker.check_model(model, full_check=True)  # raises: a model the checker rejects is no test
    main_ops, nested_ops = op_counts(model)
    traced = None
    if spec.export == "trace":
        # What torch.onnx.export recorded is a trace; were it specialized to
        # the example's sizes, it would disagree with eager PyTorch on the
        # other cases, and Nimble would be blamed for the exporter.
        with torch.no_grad():
            traced = torch.jit.trace(spec.net, spec.example, check_trace=False)
    meta = {
        "name": name,
        "file": onnx_rel,
        "opset": spec.opset,
        "description": spec.description,
        "exercises": spec.exercises,
        "export": {"script": "torch.jit.script, then torch.onnx.export",
                   "trace": "torch.onnx.export of the eager module (tracing)"}[spec.export],
        "producer": "torch %s / onnx %s" % (torch.__version__, onnx.__version__),
        "generator": generator,
        "reference": spec.reference[0] if spec.reference else
        ("the TorchScript module that was exported" if spec.export == "script" else
         "PyTorch eager on the exported module"),
        "checker": "onnx.checker.check_model(full_check=True) passed",
        "inputs": [value_info(v) for v in model.graph.input],
        "outputs": [value_info(v) for v in model.graph.output],
        "op_types": main_ops,
        "subgraph_op_types": nested_ops,
        "all_op_types": sorted(set(main_ops) | set(nested_ops)),
        "tolerance": {"rtol": spec.rtol, "atol": spec.atol},
        "cases": [],
    }
    if [v["name"] for v in meta["inputs"]] != list(spec.inputs) or \
            [v["name"] for v in meta["outputs"]] != list(spec.outputs):
        raise RuntimeError("the exported graph's inputs/outputs are %s / %s, not %s / %s" % (
            [v["name"] for v in meta["inputs"]], [v["name"] for v in meta["outputs"]], spec.inputs, spec.outputs))
    written = [onnx_rel]
    for cid, (note, args) in enumerate(spec.cases):
        with torch.no_grad():
            outs = as_tuple(spec.net(*args))
            if spec.reference:
                ref = as_tuple(spec.reference[1](*args))
                for i, (o, r) in enumerate(zip(outs, ref)):
                    if not _same(o, r, spec.rtol / 4, spec.atol / 4):
                        raise RuntimeError("case %d: output %d of the exported formulation is not within a "
                                           "quarter of the tolerance of the reference" % (cid, i))
                outs = ref
            if traced is not None:
                for i, (o, t) in enumerate(zip(outs, as_tuple(traced(*args)))):
                    if not _same(o, t, spec.rtol / 4, spec.atol / 4):
                        raise RuntimeError("case %d: output %d of the trace differs from eager PyTorch (the "
                                           "export is specialized to the example)" % (cid, i))
        if len(outs) != len(spec.outputs):
            raise RuntimeError("case %d: %d outputs, expected %d" % (cid, len(outs), len(spec.outputs)))
        if spec.check:
            spec.check(args, outs)
        case_dir = "%s.ref/%d" % (name, cid)
        os.makedirs(os.path.join(outdir, case_dir), exist_ok=True)
        case = {"id": cid, "note": note, "inputs": {}, "outputs": {}}
        for kind, prefix, names, values in (("inputs", "input", spec.inputs, args),
                                            ("outputs", "output", spec.outputs, outs)):
            for i, (tname, value) in enumerate(zip(names, values)):
                rel = "%s/%s_%d.npy" % (case_dir, prefix, i)
                case[kind][tname] = tensor_entry(outdir, rel, value.detach().numpy(), keep_float64=True)
                written.append(rel)
        meta["cases"].append(case)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    written.append(name + ".json")
    return written


def main(argv):
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, HERE)
    from refmodels import stamp  # imports no numpy or torch

    stamp.pin_blas_kernels()  # before numpy or torch loads
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", nargs="?")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--force", action="store_true", help="regenerate even when up to date")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(MODEL_NAMES))
        return 0
    if not args.outdir:
        parser.error("OUTDIR is required")
    wanted = [n for n in args.only.split(",") if n] or list(MODEL_NAMES)
    unknown = [n for n in wanted if n not in MODEL_NAMES]
    if unknown:
        print("gen_real_models: unknown model(s) %s; known: %s" % (", ".join(unknown), ", ".join(MODEL_NAMES)),
              file=sys.stderr)
        return 2
    outdir = os.path.abspath(args.outdir)
    os.makedirs(outdir, exist_ok=True)
    return stamp.generate("gen_real_models", outdir, wanted, args.force, STAMP, generator_digest(), _make,
                          name_width=17)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Binary Tree-LSTM (Tai et al. 2015, N-ary variant with N = 2) and the
random parse trees it is evaluated on.

There is no ONNX export: the network recurses over a tree, which Nimble
expresses in its text IR with an algebraic data type. The reference is the
weights, the trees (nested lists: a leaf is a word id, an inner node is
[left, right]) and PyTorch's root h and c for every tree.
"""
import random

import torch
from torch import nn


class BinaryTreeLSTM(nn.Module):
    def __init__(self, vocab=1000, emb_dim=128, hidden=128):
        super().__init__()
        # Creation order (emb, leaf, node) fixes the weights for a seed.
        self.emb = nn.Embedding(vocab, emb_dim)
        self.leaf = nn.Linear(emb_dim, 3 * hidden)   # gates i, o, u
        self.node = nn.Linear(2 * hidden, 5 * hidden)  # gates i, fl, fr, o, u

    def _leaf(self, word):
        i, o, u = self.leaf(self.emb.weight[word].unsqueeze(0)).chunk(3, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u)
        return torch.sigmoid(o) * torch.tanh(c), c

    def _node(self, left, right):
        (hl, cl), (hr, cr) = left, right
        i, fl, fr, o, u = self.node(torch.cat([hl, hr], dim=1)).chunk(5, dim=1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(fl) * cl + torch.sigmoid(fr) * cr
        return torch.sigmoid(o) * torch.tanh(c), c

    def forward(self, tree):
        """tree: nested lists as described above; returns (h, c), [1, hidden]."""
        if isinstance(tree, int):
            return self._leaf(tree)
        return self._node(self.forward(tree[0]), self.forward(tree[1]))


def make_treelstm(seed):
    torch.manual_seed(seed)
    return BinaryTreeLSTM().eval()


def random_trees(seed, count=20, min_leaves=20, max_leaves=40, vocab=1000):
    """`count` random binary trees. Per tree: draw the leaf count, then every
    leaf's word, then split points in pre-order (left subtree first). The
    draw order is part of the contract: it reproduces the original set."""
    rng = random.Random(seed)
    trees = []
    for _ in range(count):
        n = rng.randint(min_leaves, max_leaves)
        words = [rng.randrange(vocab) for _ in range(n)]

        def split(lo, hi):
            if hi - lo == 1:
                return words[lo]
            mid = rng.randrange(lo + 1, hi)
            return [split(lo, mid), split(mid, hi)]

        trees.append(split(0, n))
    return trees


def count_leaves(tree):
    return 1 if isinstance(tree, int) else count_leaves(tree[0]) + count_leaves(tree[1])

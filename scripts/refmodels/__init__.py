"""Nimble's reference models: PyTorch definitions (nets, treelstm), the
catalog of models, seeds and cases (catalog), and the writer of the ONNX
files, json descriptions and .npy tensors (export). Driven by
scripts/gen_reference_models.py; see docs/reference-models.md. The .npy and
json helpers (files) and the stamp and generation loop (stamp) are shared
with scripts/gen_real_models.py."""

# The set, in generation order. Kept here, free of imports, so that a run
# that finds everything up to date never loads torch.
MODEL_NAMES = ("mlp", "cnn", "squeezenet1_0", "mobilenet_v2", "lstm", "lstm2", "gru", "bert_tiny",
               "bert_tiny_emb", "loop_if", "while_loop", "dyn_ops", "treelstm")

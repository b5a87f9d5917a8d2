"""One executable, many threads: each thread runs on its own VM."""
import threading

import numpy as np

import nimble
from conftest import assert_matches


def test_threads_share_one_executable_and_get_pytorchs_answers(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    cases = [(ref.inputs(c)["x"], ref.outputs(c)["y"]) for c in ref.cases]
    errors, vms = [], {}
    start = threading.Barrier(8)

    def work(k):
        try:
            start.wait()
            for i in range(15):
                x, want = cases[(k + i) % len(cases)]
                out = exe.run(x=x)["y"]
                assert_matches(out, want, ref.rtol, ref.atol, "thread %d run %d" % (k, i))
            vms[k] = exe._thread_vm().handle.value
        except BaseException as e:  # reported below, with the thread
            errors.append((k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(set(vms.values())) == 8  # one VM per thread


def test_threads_keep_their_outputs_apart(compile_model):
    # identity.nir returns its input: every thread must get its own buffer
    # back, however the runs interleave.
    from conftest import program
    exe = nimble.load(compile_model(program("identity.nir")))
    errors = []

    def work(k):
        try:
            for i in range(200):
                x = np.full((k + 1, 3), k * 1000 + i, np.float32)
                y = exe.run(x=x)[0]
                assert y.shape == (k + 1, 3) and (y == k * 1000 + i).all()
        except BaseException as e:
            errors.append((k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_outputs_may_be_released_on_another_thread(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    taken, freed = nimble.output_counts()
    outs = [exe.run_tensors(x=ref.inputs(ref.cases[0])["x"])["y"] for _ in range(4)]
    holder = [outs]
    del outs

    def drop():
        holder.clear()

    t = threading.Thread(target=drop)
    t.start()
    t.join()
    import gc
    gc.collect()
    assert nimble.output_counts() == (taken + 4, freed + 4)

"""The breakdown's kernel jobs run the public kernels on the models' own storage."""

import numpy as np

from benchmarks.speed_pa.breakdown import batch_call, kernel_arguments, kernel_job
from benchmarks.speed_pa.learners import dos, linear_pa
from benchmarks.streams import sparse_stream
from core import kernels


def test_a_batch_kernel_job_learns_what_learn_many_learns():
    stream = sparse_stream("s", 50, 8, 64, seed=0)
    model, reference = dos(3)(64), dos(3)(64)
    arguments = kernel_arguments(model)
    W = arguments["W"]
    np.testing.assert_array_equal(W, np.hstack([model.U_.T, model.V_.T]))
    call = batch_call(stream)[0]
    scores, nus = np.zeros(50), np.zeros(50)
    failed, done = kernels.dos_learn_batch(
        W, call["indptr"], call["indices"], call["values"], call["y"],
        arguments["mode"], arguments["C"], 0, scores, nus,
    )  # fmt: skip
    steps = reference.learn_many(stream.csr, stream.labels)
    assert (failed, done) == (-1, 50)
    np.testing.assert_array_equal(scores, steps.scores)
    np.testing.assert_array_equal(W, np.hstack([reference.U_.T, reference.V_.T]))


def test_kernel_jobs_run_on_a_linear_model_in_place():
    stream = sparse_stream("s", 30, 8, 64, seed=1)
    model, reference = linear_pa(64), linear_pa(64)
    kernel_job(kernels.linear_learn_batch, model, batch_call(stream))()
    reference.learn_many(stream.csr, stream.labels)
    np.testing.assert_array_equal(model.w_, reference.w_)

"""DenseCN3Conv on the fused Triton kernel (``impl="fused"``, what ``auto`` picks on CUDA) in Triton's
interpreter, against the same layer on the blockwise path: outputs, weights and every gradient.

Not collected by a plain ``pytest`` run (no ``test_`` prefix): ``TRITON_INTERPRET=1`` must be set before
``triton`` is first imported, so ``tests/nn/test_dense_cn3_conv.py::test_fused_kernel_in_the_interpreter``
runs this file in a subprocess. Directly::

    TRITON_INTERPRET=1 .venv/bin/python -m pytest -q tests/nn/fused_cases.py
"""

from __future__ import annotations

import copy
import os

import pytest
import torch

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 before triton is imported (run by tests/nn/test_dense_cn3_conv.py)",
                allow_module_level=True)
pytest.importorskip("triton")

from cn3.nn import DenseCN3Conv  # noqa: E402

TOL = {"atol": 2e-5, "rtol": 1e-4}  # the float32 kernel against the float32 blockwise path


@pytest.mark.parametrize("heads, concat, edge_types", [(1, True, 0), (2, True, 3), (2, False, 3)])
def test_fused_equals_blockwise(heads, concat, edge_types):
    torch.manual_seed(0)
    fused = DenseCN3Conv(5, 3, heads=heads, concat=concat, edge_types=edge_types, energy_dim=7 * heads,
                         impl="fused")
    blockwise = copy.deepcopy(fused)
    blockwise.impl = "blockwise"
    x = torch.randn(2, 6, 5, requires_grad=True)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    edge_type = torch.randint(0, 3, (2, 6, 6)) if edge_types else None
    out, alpha = fused(x, mask, edge_type=edge_type, return_attention_weights=True)
    ref_out, ref_alpha = blockwise(x, mask, edge_type=edge_type, return_attention_weights=True)
    torch.testing.assert_close(out, ref_out, **TOL)
    torch.testing.assert_close(alpha, ref_alpha.float(), **TOL)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, [x, *fused.parameters()], grad_out)
    ref_grads = torch.autograd.grad(ref_out, [x, *blockwise.parameters()], grad_out)
    for name, grad, ref in zip(["x", *dict(fused.named_parameters())], grads, ref_grads):
        torch.testing.assert_close(grad, ref, **TOL, msg=lambda m, name=name: f"{name}: {m}")

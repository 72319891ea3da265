"""The compiled step runs the recurrent layers eagerly: its graphs stay small at every length.

``torch.compile`` through AOTAutograd (forward and backward graphs, as the training step compiles
them) of the BiLSTM context layer in training: the graphs' node counts are the same at lengths 8
and 128 and small, because :func:`cn3.layers.lstm.run_direction` runs outside them. Traced, the
decomposed ``aten.lstm`` would add nodes per time step (thousands at 128). Outputs and gradients
equal the eager ones.
"""

from __future__ import annotations

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from cn3.layers.context import BiLSTMContext

pytestmark = pytest.mark.usefixtures("one_thread")
#: the most nodes any graph around the recurrent calls may have (a traced BiLSTM has hundreds at length 8)
MAX_NODES = 60


def _counting_backend(sizes: list[int]):
    """An AOTAutograd backend that records each forward and backward graph's node count and runs it as is."""
    def count(gm: torch.fx.GraphModule, _inputs):
        sizes.append(len(gm.graph.nodes))
        return make_boxed_func(gm.forward)

    return aot_autograd(fw_compiler=count, bw_compiler=count)


def _compiled_graph_sizes(module: torch.nn.Module, n: int) -> tuple[list[int], torch.Tensor, list[torch.Tensor]]:
    """Node counts of the graphs compiling ``module``'s forward and backward at length ``n`` (training
    mode, lengths below ``n`` in the batch), with the compiled output and gradients."""
    torch.manual_seed(0)
    x = torch.randn(4, n, 6, requires_grad=True)
    mask = torch.arange(n)[None, :] < torch.tensor([n, n - 3, 1, n // 2])[:, None]
    sizes: list[int] = []
    torch._dynamo.reset()
    fn = torch.compile(module, backend=_counting_backend(sizes), dynamic=False)
    with torch._dynamo.config.patch(allow_rnn=True):
        out = fn(x, mask)
    out.square().sum().backward()
    grads = [x.grad, *(p.grad for p in module.parameters())]
    return sizes, out, grads


@pytest.mark.parametrize("layers", [1, 2])
def test_compiled_bilstm_graphs_are_small_and_independent_of_length(layers):
    module = BiLSTMContext(6, 5, layers=layers).train()
    counts = {}
    for n in (8, 128):
        sizes, out, grads = _compiled_graph_sizes(module, n)
        assert sizes, "nothing was compiled"
        assert max(sizes) <= MAX_NODES, (n, sizes)
        counts[n] = sizes
        module.zero_grad(set_to_none=True)  # the eager reference on the same inputs
        torch.manual_seed(0)
        x = torch.randn(4, n, 6, requires_grad=True)
        mask = torch.arange(n)[None, :] < torch.tensor([n, n - 3, 1, n // 2])[:, None]
        ref = module(x, mask)
        ref.square().sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
        for g, r in zip(grads, [x.grad, *(p.grad for p in module.parameters())], strict=True):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-5)
        module.zero_grad(set_to_none=True)
    assert counts[8] == counts[128]


"""The simulator's SGD and Adam move parameters exactly as torch.optim's do (CPU)."""

from __future__ import annotations

import pytest
import torch

from gsd.simulator.optim import SGD, Adam


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: (SGD(ps, lr=0.5), torch.optim.SGD(ps, lr=0.5)),
        lambda ps: (SGD(ps, lr=0.1, momentum=0.9), torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
        lambda ps: (Adam(ps, lr=0.01), torch.optim.Adam(ps, lr=0.01)),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bit_identical_to_torch_optim(make, dtype):
    gen = torch.Generator().manual_seed(0)
    init = [torch.randn(50, generator=gen, dtype=dtype), torch.randn(4, 3, generator=gen, dtype=dtype)]
    ours = [torch.nn.Parameter(t.clone()) for t in init]
    ref = [torch.nn.Parameter(t.clone()) for t in init]
    opt, _ = make(ours)
    _, opt_ref = make(ref)
    for step in range(6):
        grads = [torch.randn(t.shape, generator=gen, dtype=dtype) for t in init]
        for q, r, g in zip(ours, ref, grads):
            q.grad, r.grad = g.clone(), g.clone()
        if step == 3:  # a parameter without a gradient is left alone (and keeps its state)
            ours[1].grad = ref[1].grad = None
        opt.step()
        opt_ref.step()
        for q, r in zip(ours, ref):
            assert torch.equal(q, r)
    state = opt.state_dict()  # a checkpoint round trip continues identically
    again = [torch.nn.Parameter(q.detach().clone()) for q in ours]
    opt2 = type(opt)(again, lr=opt.lr, **({"momentum": opt.momentum} if isinstance(opt, SGD) else {}))
    opt2.load_state_dict(state)
    g = [torch.randn(t.shape, generator=gen, dtype=dtype) for t in init]
    for q, r, gg in zip(again, ref, g):
        q.grad, r.grad = gg.clone(), gg.clone()
    opt2.step()
    opt_ref.step()
    for q, r in zip(again, ref):
        assert torch.equal(q, r)

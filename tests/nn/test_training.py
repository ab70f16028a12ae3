"""Stacked networks and the training loop: members train as if alone, each with its own early stopping."""

import pytest
import torch

from regret_gateway.nn.networks import StackedMLP
from regret_gateway.nn.training import TrainConfig, train_members


def test_stacked_members_train_independently_with_their_own_early_stopping():
    torch.manual_seed(0)
    net = StackedMLP(2, 3, 1, (4,))
    x, y = torch.randn(64, 3), torch.randn(64, 1)
    before = [p.detach().clone() for p in net.parameters()]

    def loss(idx):  # only member 0 has a loss; member 1's gradient is zero
        out = net(x[idx])
        return torch.stack([((out[0] - y[idx]) ** 2).mean(), out[1].sum() * 0])

    def val():
        out = net(x)
        return torch.stack([((out[0] - y) ** 2).mean(), torch.tensor(0.0)])

    result = train_members(net, 64, loss, val, TrainConfig(max_epochs=50, patience=5))
    after = list(net.parameters())
    assert all(torch.equal(b[1], a[1]) for b, a in zip(before, after))
    assert not all(torch.equal(b[0], a[0]) for b, a in zip(before, after))
    assert result.best_epoch[1] == 0 and result.best_epoch[0] > 0


def test_a_member_that_ran_out_of_patience_stays_stopped():
    """Per-member early stopping as if each network were trained alone: once member 0 has waited
    `patience` epochs without improving, a later better validation score must not revive it."""
    net = StackedMLP(2, 3, 1, (4,))
    x = torch.randn(32, 3)
    # member 0 improves at epoch 1, stalls for 3 epochs (patience 3), then would improve at epoch 6;
    # member 1 keeps improving until epoch 8
    scripted = iter(
        [
            [10.0, 10.0],
            [5.0, 9.0],
            [6.0, 8.0],
            [6.0, 7.0],
            [6.0, 6.0],
            [6.0, 5.0],
            [1.0, 4.0],
            [1.0, 3.0],
            [1.0, 2.0],
            [1.0, 2.0],
            [1.0, 2.0],
            [1.0, 2.0],
        ]
    )

    def val():
        return torch.tensor(next(scripted))

    result = train_members(net, 32, lambda idx: net(x[idx]).mean(dim=(1, 2)), val, TrainConfig(max_epochs=11, patience=3))
    assert result.best_epoch.tolist() == [1, 8]
    assert result.best_score.tolist() == [5.0, 2.0]
    assert result.epochs == 11 and net.active is None  # full compute again after training


def test_restricted_members_compute_the_same_and_take_no_gradient():
    torch.manual_seed(1)
    net = StackedMLP(3, 5, 2, (8,))
    x = torch.randn(10, 5)
    full = net(x).detach()
    net.restrict(torch.tensor([0, 2]))
    out = net(x)
    assert torch.allclose(out[[0, 2]], full[[0, 2]], atol=1e-6) and torch.equal(out[1], torch.zeros_like(out[1]))
    out.sum().backward()
    for p in net.parameters():
        assert torch.equal(p.grad[1], torch.zeros_like(p.grad[1])) and p.grad[0].abs().sum() > 0
    per_member_x = torch.randn(3, 10, 5)  # member-specific inputs (outcome models) are restricted too
    assert torch.allclose(net(per_member_x)[2], net.member(2)(per_member_x[2:3])[0], atol=1e-6)
    net.restrict(None)
    assert net(x).shape == (3, 10, 2) and torch.allclose(net(x), full, atol=1e-6)


def _fit(precision: str, seen: list) -> tuple[StackedMLP, float, float]:
    """A two-member regression fitted from one initialisation at ``precision``: the network, its validation
    loss and the target's variance (a constant's loss); ``seen`` gets, per call of the loss and of the
    validation score, the autocast dtype it ran under (None: none)."""
    torch.manual_seed(3)
    net = StackedMLP(2, 16, 1, (64, 64))
    x = torch.randn(512, 16)
    y = torch.sin(x[:, :1] * 2) + x[:, 1:2] ** 2

    def under() -> torch.dtype | None:
        return torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None

    def loss(idx):
        seen.append(("loss", under()))
        return ((net(x[idx]) - y[idx]) ** 2).mean(dim=(1, 2))

    def val():
        seen.append(("val", under()))
        return ((net(x) - y) ** 2).mean(dim=(1, 2))

    result = train_members(net, 512, loss, val, TrainConfig(batch_size=64, max_epochs=30, patience=30, precision=precision))
    return net, float(result.best_score.mean()), float(y.var())


def test_bfloat16_steps_multiply_in_bfloat16_and_learn_what_float32_does():
    """precision="bfloat16": each training step's products run under a bfloat16 autocast, while the validation
    scores, the parameters and the network's output stay float32; the fit reaches about float32's loss."""
    seen32: list = []
    seen16: list = []
    net32, loss32, _ = _fit("float32", seen32)
    net16, loss16, constant = _fit("bfloat16", seen16)
    assert {dtype for step, dtype in seen32} == {None}
    assert {dtype for step, dtype in seen16 if step == "loss"} == {torch.bfloat16}
    assert {dtype for step, dtype in seen16 if step == "val"} == {None}
    assert all(p.dtype == torch.float32 for p in net16.parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert net16(torch.randn(4, 16)).dtype == torch.float32
    assert not all(torch.equal(a, b) for a, b in zip(net32.parameters(), net16.parameters()))
    assert loss16 < 0.25 * constant and abs(loss16 - loss32) < 0.25 * loss32


def test_auto_precision_multiplies_in_bfloat16_only_where_the_cpu_does_natively(monkeypatch):
    import regret_gateway.nn.training as training

    monkeypatch.setattr(training, "native_bfloat16", lambda: False)
    assert training.step_dtype("auto") == torch.float32 and training.step_dtype("bfloat16") == torch.bfloat16
    monkeypatch.setattr(training, "native_bfloat16", lambda: True)
    assert training.step_dtype("auto") == torch.bfloat16 and training.step_dtype("float32") == torch.float32
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="half")


def test_retrain_fits_past_full_batch_sizes_in_auto_precision():
    """retrain's mini-batch fits (past 5,000 rows, where their time matters) use bfloat16 where the CPU has it,
    or the precision asked for (retrain --precision); its small full-batch fits stay float32."""
    from regret_gateway.retrain.fits import _train_config

    assert _train_config(5_000).precision == "float32" and _train_config(5_000, "bfloat16").precision == "float32"
    assert _train_config(5_001).precision == "auto" and _train_config(5_001).batch_size == 1024
    assert _train_config(5_001, "float32").precision == "float32"


def test_adam_updates_exactly_as_torch_optim_adam():
    """The training loop's Adam is torch.optim.Adam's update written out: the same parameters to the last bit
    after many steps, with weight decay, and with a parameter that has no gradient on some steps."""
    from regret_gateway.nn.training import Adam

    torch.manual_seed(3)
    ours, theirs = StackedMLP(2, 5, 3, (7,)), StackedMLP(2, 5, 3, (7,))
    theirs.load_state_dict(ours.state_dict())
    x, y = torch.randn(40, 5), torch.randn(40, 3)
    last_before = list(ours.parameters())[-1].detach().clone()
    opt_ours = Adam(list(ours.parameters()), lr=3e-3, weight_decay=0.01)
    opt_theirs = torch.optim.Adam(list(theirs.parameters()), lr=3e-3, weight_decay=0.01)
    for step in range(60):
        for net, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            ((net(x) - y) ** 2).mean().backward()
            if step % 3 == 0:  # the last bias has no gradient on these steps: left alone, its steps not counted
                list(net.parameters())[-1].grad = None
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(list(ours.parameters())[-1], last_before)  # the grad-less steps left it moving on the others


def test_training_does_not_import_torch_dynamo():
    """torch.optim's first use imports torch._dynamo (seconds, in every process that trains); the loop does not."""
    import subprocess
    import sys

    code = (
        "import sys, torch\n"
        "from regret_gateway.nn.networks import StackedMLP\n"
        "from regret_gateway.nn.training import TrainConfig, train_members\n"
        "net = StackedMLP(1, 3, 1, (4,)); x = torch.randn(16, 3)\n"
        "train_members(net, 16, lambda i: net(x[i]).pow(2).mean().reshape(1), lambda: net(x).pow(2).mean().reshape(1), "
        "TrainConfig(max_epochs=3))\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

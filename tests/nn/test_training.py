"""Stacked networks and the training loop: members train as if alone, each with its own early stopping."""

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

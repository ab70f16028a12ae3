"""The training objectives: the softmax regret tends to the argmax regret; argmax labels know ties."""

import numpy as np
import pytest
import torch

from regret_gateway.nn import objectives


def test_softmax_regret_tends_to_the_argmax_regret():
    torch.manual_seed(0)
    logits, Y = torch.randn(1, 50, 4), torch.randn(50, 4)
    hard = objectives.regret(Y, logits)
    assert torch.allclose(objectives.softmax_regret(logits, Y, tau=1e4), hard, atol=1e-4)
    uniform = (Y.max(-1).values - Y.mean(-1)).mean()
    assert torch.allclose(objectives.softmax_regret(logits, Y, tau=1e-6), uniform.reshape(1), atol=1e-4)


def test_tie_aware_labels():
    Y = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0]])
    cost = np.array([[2.0, 1.0, 0.0], [0.0, 5.0, 3.0]])
    assert np.allclose(objectives.argmax_labels(Y), [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]])
    assert np.allclose(objectives.argmax_labels(Y, ties="cheapest", cost=cost), [[0, 1, 0], [0, 0, 1]])
    assert np.allclose(objectives.argmax_labels(Y, ties="first"), [[1, 0, 0], [0, 1, 0]])
    with pytest.raises(ValueError, match="needs `cost`"):
        objectives.argmax_labels(Y, ties="cheapest")

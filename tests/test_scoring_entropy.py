"""Entropy in bits against closed forms (METHOD.md, "Score": log_softmax, chunked)."""

import math

import pytest

torch = pytest.importorskip("torch")

from iclr_cli.scoring.entropy import entropy_bits, head_entropies, logit_transform


@pytest.mark.parametrize("vocab", [2, 7, 49152])
def test_uniform_distribution_has_log2_v_bits(vocab):
    h = entropy_bits(torch.full((3, vocab), 1.7))
    assert torch.allclose(h, torch.full((3,), math.log2(vocab)), atol=1e-4)


def test_two_point_distribution():
    p = 0.25
    logits = torch.log(torch.tensor([[p, 1 - p]]))
    expected = -(p * math.log2(p) + (1 - p) * math.log2(1 - p))  # 0.8113 bits
    assert entropy_bits(logits).item() == pytest.approx(expected, abs=1e-6)


def test_two_points_among_many_with_impossible_rest_has_no_nan():
    logits = torch.full((1, 1000), -1e30)
    logits[0, 3] = 0.0
    logits[0, 9] = 0.0
    h = entropy_bits(logits)
    assert not torch.isnan(h).any()
    assert h.item() == pytest.approx(1.0, abs=1e-6)


def test_bf16_logits_are_computed_in_float32():
    h = entropy_bits(torch.zeros(2, 64, dtype=torch.bfloat16))
    assert h.dtype == torch.float32
    assert torch.allclose(h, torch.full((2,), 6.0), atol=1e-5)


def test_chunk_size_does_not_change_head_entropies():
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 300, bias=False)
    hidden = torch.randn(37, 16) * 3
    ref = entropy_bits(head(hidden))
    for chunk in (1, 5, 36, 37, 1000):
        assert torch.allclose(head_entropies(hidden, head, chunk_size=chunk), ref, atol=1e-5)


def test_head_entropies_rejects_bad_arguments():
    head = torch.nn.Linear(4, 8)
    with pytest.raises(ValueError):
        head_entropies(torch.zeros(2, 4), head, chunk_size=0)
    with pytest.raises(ValueError):
        head_entropies(torch.zeros(1, 2, 4), head)


class _Cfg:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_logit_transform_applies_scale_and_softcap():
    assert logit_transform(_Cfg()) is None
    assert logit_transform(_Cfg(final_logit_softcapping=None, logit_scale=None)) is None
    x = torch.tensor([[-100.0, 0.0, 100.0]])
    capped = logit_transform(_Cfg(final_logit_softcapping=30.0))(x)
    assert capped.abs().max().item() <= 30.0 and capped[0, 1].item() == 0.0
    scaled = logit_transform(_Cfg(logit_scale=0.5))(x)
    assert torch.equal(scaled, x * 0.5)
    # the entropy is taken of the transformed distribution
    flat = torch.tensor([[0.0, 10.0]])
    assert entropy_bits(logit_transform(_Cfg(logit_scale=0.0625))(flat)) > entropy_bits(flat)

"""Slices of a CPU batch shared out between threads (rankstudy.nn.slices): the results of a one-thread run, in
order, the thread setting restored, the caller's grad mode kept."""

import numpy as np
import pytest
import torch

from rankstudy.models import build_model
from rankstudy.nn.slices import map_slices, thread_slice_size


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_slices_come_back_in_order_with_the_threads_restored(two_threads):
    query, document = torch.arange(10).view(10, 1), torch.arange(10, 20).view(10, 1)
    seen = []

    def score(q, d):
        seen.append(torch.get_num_threads())
        return torch.cat([q, d], 1)

    parts = map_slices(score, query, document, 3)
    assert [part.shape[0] for part in parts] == [3, 3, 3, 1]
    assert torch.equal(torch.cat(parts), torch.cat([query, document], 1))
    assert set(seen) == {1} and torch.get_num_threads() == 2


def test_a_worker_failure_reaches_the_caller(two_threads):
    def score(q, d):
        if int(q[0]) == 6:
            raise ValueError("slice 6")
        return q

    with pytest.raises(ValueError, match="slice 6"):
        map_slices(score, torch.arange(10).view(10, 1), torch.zeros(10, 1), 3)
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("name, length, settings", [("tk", 40, {"cpu_slice_documents": 3}),
                                                    ("tkl", 130, {"cpu_slice_tokens": 400})])
def test_tk_and_tkl_score_on_two_threads_as_on_one(two_threads, name, length, settings):
    vectors = np.random.default_rng(0).standard_normal((200, 24), dtype=np.float32)
    vectors[:2] = 0
    torch.manual_seed(0)
    model = build_model(name, {"layers": 1, "heads": 2, "ff_dim": 16, **settings}, vectors).eval()
    generator = torch.Generator().manual_seed(1)
    query = torch.randint(2, 200, (1, 5), generator=generator).expand(10, -1)
    document = torch.randint(1, 200, (10, length), generator=generator)
    document[3, length // 2:] = 0
    with torch.inference_mode():
        two = model(query, document)
        torch.set_num_threads(1)
        one = model(query, document)
    assert torch.equal(one, two)
    with torch.no_grad():
        assert not model(query, document).requires_grad


def test_slice_sizes_give_every_thread_an_equal_share(two_threads):
    # 16 documents, at most 32 / 16 / 10 / 8 / 5 / 4 a slice (TKL's 16,000 positions at 500 ... 4,000 tokens)
    assert [thread_slice_size(16, most) for most in (32, 16, 10, 8, 5, 4)] == [8, 8, 8, 8, 4, 4]
    assert thread_slice_size(10, 3) == 3 and thread_slice_size(3, 8) == 2 and thread_slice_size(1, 8) == 8
    torch.set_num_threads(1)
    assert [thread_slice_size(16, most) for most in (32, 10, 5)] == [32, 10, 5]  # one thread: as configured


def test_tkl_shares_a_batch_that_fits_one_slice_between_the_threads(two_threads, monkeypatch):
    import rankstudy.models.tkl as tkl

    vectors = np.random.default_rng(0).standard_normal((200, 24), dtype=np.float32)
    vectors[:2] = 0
    torch.manual_seed(0)
    model = build_model("tkl", {"layers": 1, "heads": 2, "ff_dim": 16}, vectors).eval()  # 16,000 positions
    generator = torch.Generator().manual_seed(1)
    query = torch.randint(2, 200, (1, 5), generator=generator).expand(6, -1)
    document = torch.randint(1, 200, (6, 130), generator=generator)
    sizes = []
    monkeypatch.setattr(tkl, "map_slices",
                        lambda score, q, d, size: sizes.append(size) or map_slices(score, q, d, size))
    with torch.inference_mode():
        two = model(query, document)
        torch.set_num_threads(1)
        one = model(query, document)
    assert sizes == [3]  # two slices of 3 on two threads; one thread scores the 6 documents as one slice
    assert torch.allclose(one, two, atol=1e-5)

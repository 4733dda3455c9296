"""ops.butterworth against scipy.signal (butter, lfilter, filtfilt) and ops.gaps.fill_gaps against
a naive loop."""

import numpy as np
import pytest
import scipy.signal as ss
import torch

from tensorpose.ops.butterworth import butterworth, filtfilt, lfilter
from tensorpose.ops.gaps import fill_gaps


@pytest.mark.parametrize("order,cutoff,fps", [(2, 6, 60), (4, 6, 60), (2, 1, 1000), (3, 20, 50)])
def test_coefficients_equal_scipy_butter(order, cutoff, fps):
    b, a = butterworth(order, cutoff, fps)
    b_ref, a_ref = ss.butter(order, cutoff / (fps / 2))
    np.testing.assert_allclose(b, b_ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a, a_ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("T", [10, 64, 65, 500])
@pytest.mark.parametrize("padlen", [None, 0, 6])
def test_filtfilt_equals_scipy_batched(T, padlen):
    rng = np.random.default_rng(T)
    x = np.cumsum(rng.normal(size=(3, 2, T, 3)), axis=-2)  # people x joints x T x xyz
    b, a = butterworth(2, 6.0, 60.0)
    if padlen is None and T <= 9:
        with pytest.raises(ValueError, match="padlen"):
            filtfilt(torch.from_numpy(x), b, a)
        return
    ref = ss.filtfilt(b, a, x, axis=-2, padlen=padlen)
    got = filtfilt(torch.from_numpy(x), b, a, padlen=padlen).numpy()
    assert np.abs(got - ref).max() <= 1e-12 * np.ptp(x)
    causal = lfilter(torch.from_numpy(x), b, a).numpy()
    np.testing.assert_allclose(causal, ss.lfilter(b, a, x, axis=-2), atol=1e-10 * np.ptp(x))


def test_filtfilt_float32_close():
    x = np.cumsum(np.random.default_rng(1).normal(size=(4, 1000, 3)), axis=-2)
    b, a = butterworth(2, 6.0, 60.0)
    got = filtfilt(torch.from_numpy(x).float(), b, a).double().numpy()
    assert np.abs(got - ss.filtfilt(b, a, x, axis=-2)).max() < 1e-4 * np.ptp(x)


def test_bad_cutoff_and_order():
    with pytest.raises(ValueError, match="cutoff"):
        butterworth(2, 30.0, 60.0)
    with pytest.raises(ValueError, match="order"):
        butterworth(0, 6.0, 60.0)


def naive_fill(x, missing, max_gap):
    x, filled = x.copy(), np.zeros(missing.shape, bool)
    T, J = missing.shape
    for j in range(J):
        t = 0
        while t < T:
            if not missing[t, j]:
                t += 1
                continue
            end = t
            while end < T and missing[end, j]:
                end += 1
            if t > 0 and end < T and end - t <= max_gap:
                for k in range(t, end):
                    w = (k - (t - 1)) / (end - (t - 1))
                    x[k, j] = x[t - 1, j] + w * (x[end, j] - x[t - 1, j])
                    filled[k, j] = True
            t = end
    return x, filled


@pytest.mark.parametrize("max_gap", [0, 1, 3, 10])
def test_fill_gaps_equals_naive_loop(max_gap):
    rng = np.random.default_rng(max_gap)
    x = rng.normal(size=(60, 5, 3))
    missing = rng.random((60, 5)) < 0.3
    missing[:, 4] = True  # a joint never seen stays missing
    missing[20:35, 0] = True  # a long gap
    ref, ref_filled = naive_fill(x, missing, max_gap)
    got, filled = fill_gaps(torch.from_numpy(x), torch.from_numpy(missing), max_gap)
    np.testing.assert_array_equal(filled.numpy(), ref_filled)
    np.testing.assert_allclose(got.numpy()[ref_filled], ref[ref_filled], atol=1e-12)
    np.testing.assert_array_equal(got.numpy()[~missing], x[~missing])

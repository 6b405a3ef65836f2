"""Kernels of the INFIMNIST-style deformation stream (``core.datasets.DeformationStream``).

Elastic distortions after Simard, Steinkraus & Platt, "Best practices for convolutional neural
networks applied to visual document analysis" (ICDAR 2003): a random displacement field
``alpha * (G_sigma * noise)`` (white noise smoothed by a Gaussian) plus a small affine map,
resampled with bilinear interpolation. The smoothed field is drawn as ``B_rows Z B_cols^T``
with ``Z`` an r x r standard normal matrix and ``B`` the leading eigenvectors of the 1-D
smoothing covariance scaled by the square roots of their eigenvalues (``core.datasets``
builds them): the same Gaussian distribution as filtering white noise, truncated to the
components that carry >= 99.5 % of its variance, at O(r (H W + r H)) a field instead of
O(H W sigma).
"""

import numba
import numpy as np

from core.config import NJIT_OPTIONS


@numba.njit(**NJIT_OPTIONS)
def _datasets_field(basis_rows, basis_cols, Z, scratch, field):
    """field = basis_rows Z basis_cols^T, i.e. sum_ab Z_ab phi_a(i) psi_b(j)."""
    rank = Z.shape[0]
    height = basis_rows.shape[0]
    width = basis_cols.shape[0]
    for a in range(rank):
        for j in range(width):
            total = 0.0
            for b in range(rank):
                total += Z[a, b] * basis_cols[j, b]
            scratch[a, j] = total
    for i in range(height):
        for j in range(width):
            field[i, j] = 0.0
        for a in range(rank):
            c = basis_rows[i, a]
            for j in range(width):
                field[i, j] += c * scratch[a, j]


#: zero border added around the source images so that the bilinear lookups need no branch
PAD = 3


@numba.njit(**NJIT_OPTIONS)
def _datasets_deform_batch(padded, sources, noise, affine, basis_rows, basis_cols, alpha, out):
    """Deform source image ``sources[n]`` into ``out[n]`` (flattened, grey levels / 255).

    padded: uint8 (n_images, H + 2 PAD, W + 2 PAD), the source images inside a zero border of
    PAD pixels; sources: int64 (m,); noise: (m, 2, r, r) standard normal; affine: (m, 6) rows
    ``[a11, a12, a21, a22, tx, ty]`` mapping output to source coordinates about the image
    centre; basis_rows (H, r), basis_cols (W, r); out: float64 (m, H * W).

    Output pixel (i, j) samples the source at ``c + A (p - c) + t + alpha * d(p)`` with
    ``p = (j, i)``, ``d`` the smoothed displacement field; pixels outside the source are 0.
    """
    height = padded.shape[1] - 2 * PAD
    width = padded.shape[2] - 2 * PAD
    rank = noise.shape[2]
    cy = 0.5 * (height - 1)
    cx = 0.5 * (width - 1)
    scratch = np.empty((rank, width))
    dx = np.empty((height, width))
    dy = np.empty((height, width))
    for n in range(sources.shape[0]):
        image = padded[sources[n]]
        _datasets_field(basis_rows, basis_cols, noise[n, 0], scratch, dx)
        _datasets_field(basis_rows, basis_cols, noise[n, 1], scratch, dy)
        a11 = affine[n, 0]
        a12 = affine[n, 1]
        a21 = affine[n, 2]
        a22 = affine[n, 3]
        tx = affine[n, 4]
        ty = affine[n, 5]
        for i in range(height):
            v = i - cy
            for j in range(width):
                u = j - cx
                # source coordinates shifted into the padded frame; clamping to
                # [1, size + PAD + 1] keeps both neighbours in the zero border once outside
                sx = cx + a11 * u + a12 * v + tx + alpha * dx[i, j] + PAD
                sy = cy + a21 * u + a22 * v + ty + alpha * dy[i, j] + PAD
                sx = min(max(sx, 1.0), width + PAD + 1.0)
                sy = min(max(sy, 1.0), height + PAD + 1.0)
                x0 = int(sx)
                y0 = int(sy)
                fx = sx - x0
                fy = sy - y0
                top = (1.0 - fx) * image[y0, x0] + fx * image[y0, x0 + 1]
                bottom = (1.0 - fx) * image[y0 + 1, x0] + fx * image[y0 + 1, x0 + 1]
                # weights sum to 1, so only rounding can push the value past 255
                out[n, i * width + j] = min(((1.0 - fy) * top + fy * bottom) * (1.0 / 255.0), 1.0)

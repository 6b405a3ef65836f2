from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi

from core.datasets import (
    DATA_DIR_ENV,
    DeformationStream,
    SvmlightIndexError,
    data_dir,
    load_idx,
    load_mnist_test,
    load_svmlight,
    mnist_split,
    parse_svmlight,
    smoothing_basis,
    svmlight_batch,
)
from core.features import as_batch
from core.kernels.datasets import PAD, _datasets_deform_batch
from tests import naive


# -- data_dir ---------------------------------------------------------------------------------
def test_data_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    repo_root = Path(__file__).resolve().parents[2]
    assert data_dir() == repo_root.parent / "shared" / "data"
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert data_dir() == tmp_path


# -- svmlight ---------------------------------------------------------------------------------
def write(tmp_path, text: str):
    path = tmp_path / "data.svm"
    path.write_text(text)
    return path


def test_svmlight_small_file(tmp_path):
    path = write(
        tmp_path,
        "# a comment line\n"
        "+1 1:0.5 3:-2 # trailing comment\n"
        "\n"
        "-1 4:1e-3\t2:7\n"  # unsorted, tab separated
        "2.5\n"  # no features
        "-1 2:1 2:2 3:0\r\n",  # duplicate summed, explicit zero dropped, CRLF
    )
    X, y = load_svmlight(path)
    assert X.shape == (4, 4) and X.dtype == np.float64
    np.testing.assert_array_equal(y, [1.0, -1.0, 2.5, -1.0])
    expected = np.array(
        [[0.5, 0, -2, 0], [0, 7, 0, 1e-3], [0, 0, 0, 0], [0, 3, 0, 0]], dtype=np.float64
    )
    np.testing.assert_array_equal(X.toarray(), expected)
    assert X.has_sorted_indices and X.nnz == 5


def test_svmlight_n_features(tmp_path):
    path = write(tmp_path, "1 1:1 2:1\n-1 3:1\n")
    assert load_svmlight(path)[0].shape == (2, 3)
    X, _ = load_svmlight(path, n_features=10)
    assert X.shape == (2, 10)
    np.testing.assert_array_equal(X.toarray()[:, 3:], 0.0)
    with pytest.raises(ValueError, match="exceeds n_features=2"):
        load_svmlight(path, n_features=2)
    with pytest.raises(ValueError, match="n_features"):
        load_svmlight(path, n_features=2.5)


def test_svmlight_empty_file(tmp_path):
    X, y = load_svmlight(write(tmp_path, "# nothing\n\n"))
    assert X.shape == (0, 0) and y.shape == (0,)


@pytest.mark.parametrize(
    "line",
    [
        "1 3:abc",  # value not a number
        "1 3",  # no colon
        "1 3:",  # no value
        "x 1:2",  # label not a number
        "1 2:1:3",  # two colons
        "1 2:nan",  # non-finite value
        "inf 2:1",  # non-finite label
        "1 -2:1",  # negative index
        "1 2.5:1",  # fractional index
        "1 0:1",  # 0-based index
        "1 1:1,2:1",  # wrong separator
    ],
)
def test_svmlight_bad_lines_raise(tmp_path, line):
    path = write(tmp_path, f"1 1:1\n{line}\n-1 2:2\n")
    with pytest.raises(ValueError):
        load_svmlight(path)


def test_svmlight_error_names_the_line(tmp_path):
    path = write(tmp_path, "1 1:1\n-1 2:2\n1 3:abc\n")
    with pytest.raises(ValueError, match=r":3: not a svmlight row"):
        load_svmlight(path)


def outcome(parse, data: bytes, n_features=None):
    """What a parser gives: ("ok", arrays as raw bytes, shape) or ("error", message)."""
    try:
        X, y = parse(data, n_features, source="body")
    except ValueError as error:
        return "error", str(error)
    arrays = [X.data, X.indices, X.indptr, y]
    return "ok", [(a.dtype.str, a.tobytes()) for a in arrays], X.shape


def assert_same_as_reference(data: bytes, n_features=None):
    expected = outcome(naive.parse_svmlight, data, n_features)
    assert outcome(parse_svmlight, data, n_features) == expected, data


NUMBERS = [
    "0", "1", "-1", "+1", "2.5", "-0", "-0.0", ".5", "5.", "-.25", "+3.", "1e5", "1E-5",
    "2.5e+3", "0.1", "0.30000000000000004", "1.7976931348623157e308", "4.9e-324",
    "2.2250738585072011e-308", "2.2250738585072014e-308", "1e-320", "9007199254740993",
    "9007199254740992.5", "123456789012345678901234567890", "0.000000000000000000000000001",
    "1e22", "1e23", "1e-22", "1e-23", "3.14159265358979323846264338327950288",
    "8.98846567431158e307", "1e308", "0e999", "1.5000000000000000000000000", "00000012.50",
    "7e0", "1e+0", "5e-1", "123.456e-7", "0.1e1", "4503599627370497.5", "1e400", "-1e400",
]  # fmt: skip
BAD = ["x", "nan", "inf", "-inf", "1e", "1.2.3", "--1", "+", ".", "e5", "1,5", "0x10", "1_0"]


def random_number(rng) -> str:
    if rng.random() < 0.4:
        return NUMBERS[rng.integers(len(NUMBERS))]
    mantissa = f"{rng.integers(0, 10 ** int(rng.integers(1, 19)))}"
    if rng.random() < 0.6:
        cut = int(rng.integers(0, len(mantissa) + 1))
        mantissa = mantissa[:cut] + "." + mantissa[cut:]
        if mantissa == ".":
            mantissa = "0."
    if rng.random() < 0.3:
        mantissa += f"e{int(rng.integers(-330, 330))}"
    return ("-" if rng.random() < 0.4 else "") + mantissa


def random_body(rng, bad: float) -> bytes:
    lines = []
    for _ in range(int(rng.integers(0, 8))):
        kind = rng.random()
        if kind < 0.08:
            lines.append(rng.choice(["", "   ", "\t", "# a comment", " \r", "\x0b\x0c"]))
            continue
        label = random_number(rng) if rng.random() > bad else str(rng.choice(BAD))
        tokens = [label]
        for _ in range(int(rng.integers(0, 6))):
            index = str(int(rng.integers(0, 40)))
            value = random_number(rng)
            token = f"{index}:{value}"
            if rng.random() < bad:
                token = str(
                    rng.choice(
                        [f"{index}:{rng.choice(BAD)}", index, f"{index}:", f"-{index}:1",
                         f"{index}.5:1", f"{index}:1:2", f"{index} :1", f"{index}: 1",
                         f"{index}:1\r", "\x0b1:1", "\u00e91:1"]
                    )
                )  # fmt: skip
            tokens.append(token)
        separators = [str(rng.choice([" ", "\t", "  ", " \t"])) for _ in tokens]
        line = "".join(sep + tok for sep, tok in zip(separators, tokens, strict=True))[1:]
        if rng.random() < 0.3:
            line = str(rng.choice([" ", "\t", "\x0c", "\r"])) + line
        if rng.random() < 0.3:
            line += str(rng.choice([" ", "\t", "\r", " \r", " # comment", "#", "\x0b"]))
        lines.append(line)
    body = "\n".join(lines)
    if rng.random() < 0.5:
        body += "\n"
    return body.encode("utf-8")


@pytest.mark.parametrize("bad", [0.0, 0.02, 0.2])
def test_svmlight_parser_matches_the_reference(bad):
    """Random bodies, valid and not: bit-identical arrays, or the identical error."""
    rng = np.random.default_rng(int(bad * 100))
    errors = 0
    for _ in range(1500):
        body = random_body(rng, bad)
        n_features = None if rng.random() < 0.5 else int(rng.integers(0, 45))
        assert_same_as_reference(body, n_features)
        errors += outcome(parse_svmlight, body, n_features)[0] == "error"
    assert errors > (100 if bad else 0)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\n",
        b"\n\n\n",
        b"   \n\t\n",
        b"# only a comment",
        b"1",
        b"1\n",
        b"-1 3:1   \n",
        b"+1 1:0.5 2:1\t\t\n",
        b"1 1:1\r\n-1 2:2\r\n",
        b"1 1:1\r\n-1 2:2\r",
        b"1 1:1 \r \n",
        b"\r\n1 1:1",
        b"1 1:1e308 2:1e-308 3:4.9e-324 4:2e-324 5:1e-400 6:2.4703282292062327e-324",
        b"1 1:1e309",
        b"1e400 1:1",
        b"1 1:0.1000000000000000055511151231257827 2:12345678901234567890123",
        b"1 1:9007199254740993 2:9007199254740992 3:900719925474099.3",
        b"1 1:1e22 2:1e23 3:1e-22 4:1e-23 5:123456789e15 6:1.5e-30",
        b"1 1:0e99999999999999999999999 2:1e-99999999999999999999",
        b"1 1:1e99999999999999999999",
        b"1 00001:5 002:6",
        b"1 1:1 1:2 1:-3 2:0",
        b"1 1:1\x0b",
        b"1 1:1\x0b2:1",
        b"1 1:1 #c\n2#\n#\n 3 2:2#x#y",
        b"1 1:1\n\xff\xfe",
        b"1 1:1 " + b"2:1 " * 40 + b"x",
        b"1 0:1 2:1\n-1 0:2",
        b"1 3:1\n-1 0:2\n1 2:x",
        b"1 1:nan\n2 2:2 x",
        b"1\t\t",
        b"\t1\t1:1",
    ],
)
def test_svmlight_degenerate_bodies(body):
    for n_features in (None, 0, 3, 1 << 60):
        assert_same_as_reference(body, n_features)


def test_svmlight_values_are_those_of_float():
    tokens = NUMBERS + [random_number(np.random.default_rng(k)) for k in range(2000)]
    tokens = [t for t in tokens if np.isfinite(float(t))]
    body = "\n".join(f"{t} 1:{t}" for t in tokens).encode()
    X, y = parse_svmlight(body)
    expected = np.array([float(t) for t in tokens])
    np.testing.assert_array_equal(y.view(np.int64), expected.view(np.int64))
    dense = X.toarray()[:, 0]
    nonzero = expected != 0
    np.testing.assert_array_equal(dense[nonzero].view(np.int64), expected[nonzero].view(np.int64))


def float_tokens(rng, n: int) -> list[str]:
    """n decimal tokens as clients and tools write them, over the whole float64 range."""
    bits = rng.integers(0, 0x7FF0_0000_0000_0000, size=n // 8)  # finite, subnormals too
    x = bits.view(np.float64)
    x[rng.random(x.shape[0]) < 0.5] *= -1
    unit = rng.random(n // 8)
    scaled = rng.integers(0, 256, size=n // 8) / 255.0  # grey levels, as MNIST rows
    integers = rng.integers(-(1 << 62), 1 << 62, size=n // 8)
    small = rng.standard_normal(n // 8) * 10.0 ** rng.integers(-30, 30, size=n // 8)
    tokens = [repr(v) for v in x.tolist()]
    tokens += [f"{v:.17g}" for v in unit.tolist()] + [repr(v) for v in scaled.tolist()]
    tokens += [f"{v:.6g}" for v in small.tolist()] + [f"{v:.3e}" for v in x.tolist()]
    tokens += [f"{v:.3E}" for v in small.tolist()] + [str(v) for v in integers.tolist()]
    tokens += [f"{v:+.17e}".replace("e-0", "e-").replace("e+", "e") for v in unit.tolist()]
    return tokens


EDGES = [
    "1.7976931348623157e308", "-1.7976931348623157e308", "1.7976931348623158e308",
    "2.2250738585072014e-308", "2.2250738585072011e-308", "4.9406564584124654e-324",
    "5e-324", "2.4703282292062328e-324", "2.4703282292062327e-324", "1e-400", "-1e-400",
    "9007199254740993", "9007199254740995", "9007199254740992.5", "1e23", "-0", "-0.0",
    "+0e-5", "0000000000000000000000000001.5", "0.000000000000000000000000000000015",
    "0.1000000000000000055511151231257827",
    "1.00000000000000011102230246251565404236316680908203125",
    "123456789012345678901234567890e-10", "1E+2", "1e+022", "1.5E-7", "7.e3", ".5e-1",
    "2531199474027112.5", "5129832425396649.0", "1" + "0" * 64, "0." + "0" * 400 + "1e401",
]  # fmt: skip


def test_svmlight_values_are_those_of_float_for_a_million_tokens():
    """Labels (every token, zeros and signs kept) bit-identical to float(token), and the
    decimal="python" path (Python's float beyond Clinger's) identical to the default."""
    tokens = float_tokens(np.random.default_rng(7), 1 << 20) + EDGES
    body = "\n".join(tokens).encode()
    _, y = parse_svmlight(body)
    expected = np.array([float(t) for t in tokens])
    np.testing.assert_array_equal(y.view(np.int64), expected.view(np.int64))
    # as values too (zeros are left out of the matrix)
    body = "\n".join(f"0 1:{t}" for t in tokens[:200_000] + EDGES).encode()
    X, y = parse_svmlight(body)
    values = X.toarray()[:, 0]
    expected = np.array([float(t) for t in tokens[:200_000] + EDGES])
    np.testing.assert_array_equal(values.view(np.int64), (expected + 0.0).view(np.int64))
    X_python, y_python = parse_svmlight(body, decimal="python")
    assert X_python.data.tobytes() == X.data.tobytes() and y_python.tobytes() == y.tobytes()
    assert X_python.indptr.tobytes() == X.indptr.tobytes()


@pytest.mark.parametrize(
    "token", ["1e309", "-1e309", "1.7976931348623159e308", "1e400", "179769313486231580794e288"]
)
def test_svmlight_values_that_round_to_inf_are_refused(token):
    for body in (f"{token} 1:1", f"1 1:{token}", f"1 1:1 2:{token}"):
        for decimal in ("eisel-lemire", "python"):
            with pytest.raises(ValueError, match="labels and values must be finite"):
                parse_svmlight(body.encode(), source="body", decimal=decimal)
        assert_same_as_reference(body.encode())


def test_svmlight_decimal_option_is_checked():
    with pytest.raises(ValueError, match="decimal must be"):
        parse_svmlight(b"1 1:1", decimal="numpy")


@pytest.mark.parametrize("bad", [0.0, 0.2])
def test_svmlight_batch_matches_as_batch_of_parse_svmlight(bad):
    """svmlight_batch (no scipy matrix for rows in increasing index order) gives the arrays
    of as_batch(parse_svmlight(...)), or the same error."""
    rng = np.random.default_rng(11 + int(10 * bad))
    bodies = [random_body(rng, bad) for _ in range(800)]
    bodies += [
        b"1 1:0.5 3:-2 4:1\n-1 2:0.30000000000000004\n",  # canonical
        b"1 3:1 1:2\n",  # unsorted
        b"1 1:1 1:-1 2:0\n-1 2:2 2:3\n",  # duplicates summing to 0 and not
        b"1 1:0 2:0.0 3:-0\n",  # explicit zeros only: an empty row
        b"1 2:0.0 1:1\n",  # a zero out of order
        b"1 1:1 2:1e-400\n",  # a value that rounds to 0
        b"1 1:0.1000000000000000055511151231257827 2:" + b"0." + b"0" * 400 + b"1\n",
        b"",
    ]
    for body in bodies:
        n_features = int(rng.integers(1, 45))
        try:
            X, y = parse_svmlight(body, n_features, source="body")
            expected = as_batch(X, n_features), y
        except ValueError as error:
            with pytest.raises(ValueError) as raised:
                svmlight_batch(body, n_features, source="body")
            assert str(raised.value) == str(error)
            continue
        batch, labels = svmlight_batch(body, n_features, source="body")
        for got, want in zip(
            (batch.indptr, batch.indices, batch.values, labels),
            (expected[0].indptr, expected[0].indices, expected[0].values, expected[1]),
            strict=True,
        ):
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), body


def test_svmlight_indices_are_exact_integers():
    X, _ = parse_svmlight(b"1 9007199254740993:1", n_features=1 << 60)
    assert X.indices.tolist() == [9007199254740992] and X.shape == (1, 1 << 60)
    with pytest.raises(ValueError, match=r"body:2: feature index beyond"):
        parse_svmlight(b"1 1:1\n1 99999999999999999999:1", source="body")
    with pytest.raises(ValueError, match=r"not a svmlight row"):
        parse_svmlight(b"1 99999999999999999999:1\n1 x", source="body")


def test_svmlight_error_messages():
    cases = {
        b"1 1:1\n\n-1 2:x  # why\n": "body:3: not a svmlight row: '-1 2:x'",
        b"1 1:1\r\n1 2:1\r\n\t1 \xe9:1 \r\n": "body:3: not a svmlight row: '1 \ufffd:1'",
        b"1 1:nan": "body:1: not a svmlight row: '1 1:nan'",
        b"1 1:1e999": "body: labels and values must be finite",
        b"1 1:1\n# x\n2 2:1 0:1": "body: row 1: feature index 0; svmlight indices are 1-based",
        b"1 " + b"1:1 " * 30 + b"x": "body:1: not a svmlight row: '1 " + "1:1 " * 14 + "1:'",
    }
    for body, message in cases.items():
        with pytest.raises(ValueError) as error:
            parse_svmlight(body, source="body")
        assert str(error.value) == message
        assert_same_as_reference(body)
    with pytest.raises(ValueError, match="feature index 7 exceeds n_features=5"):
        parse_svmlight(b"1 7:1", n_features=5, source="body")


def test_an_index_above_n_features_names_the_first_line_and_index():
    """The first offending line and index in the text (blank and comment lines counted),
    not the largest index: the reported index was the body's largest before."""
    body = b"1 1:1 5:1\n\n# x\n-1 2:1 9:0 30:1\n1 99:1\n"
    with pytest.raises(SvmlightIndexError) as error:
        parse_svmlight(body, n_features=5, source="file")
    assert str(error.value) == "file:4: feature index 9 exceeds n_features=5"
    assert error.value.details == {"line": 4, "index": 9, "n_features": 5}
    assert_same_as_reference(body, 5)
    with pytest.raises(SvmlightIndexError, match="^body:4: feature index 9 exceeds"):
        svmlight_batch(body, 5, source="body")
    assert parse_svmlight(body, n_features=99)[0].shape == (3, 99)  # 99 itself is in range
    with pytest.raises(ValueError, match="n_features must be a non-negative integer"):
        parse_svmlight(b"1 1:1", n_features=-1)


def test_a9a_test_file_against_too_few_features_names_line_1_index_17():
    path = data_dir() / "a9a" / "a9a.t"
    with pytest.raises(SvmlightIndexError, match=r"a9a\.t:1: feature index 17 exceeds"):
        load_svmlight(path, n_features=16)


@pytest.mark.parametrize(
    ("name", "n_features", "shape", "n_classes"),
    [
        ("a9a/a9a", None, (32561, 123), 2),
        ("a9a/a9a.t", 123, (16281, 123), 2),
        ("letter/letter.scale", None, (15000, 16), 26),
        ("letter/letter.scale.t", 16, (5000, 16), 26),
        ("vowel/vowel.scale", None, (528, 10), 11),
        ("satimage/satimage.scale.t", 36, (2000, 36), 6),
        ("segment/segment.scale", None, (2310, 19), 7),
    ],
)
def test_svmlight_shared_data(name, n_features, shape, n_classes):
    X, y = load_svmlight(data_dir() / name, n_features=n_features)
    assert X.shape == shape
    assert y.shape == (shape[0],) and len(np.unique(y)) == n_classes
    assert np.all(np.isfinite(X.data))


def test_svmlight_a9a_test_needs_n_features():
    # the last feature never occurs in a9a.t, so without n_features it has 122 columns
    assert load_svmlight(data_dir() / "a9a" / "a9a.t")[0].shape == (16281, 122)


# -- MNIST ------------------------------------------------------------------------------------
def test_mnist_test_set_matches_readme():
    images, labels = load_mnist_test()
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (10000,) and set(np.unique(labels)) == set(range(10))
    assert images.max() == 255 and images.min() == 0
    assert labels[:5].tolist() == [7, 2, 1, 0, 4]  # the well-known start of t10k
    train_labels = load_idx(data_dir() / "mnist" / "train-labels-idx1-ubyte.gz")
    assert train_labels.shape == (60000,)


def test_mnist_split():
    (source, source_labels), (test, test_labels) = mnist_split()
    images, labels = load_mnist_test()
    assert source.shape == (8000, 28, 28) and test.shape == (2000, 28, 28)
    np.testing.assert_array_equal(np.concatenate([source, test]), images)
    np.testing.assert_array_equal(np.concatenate([source_labels, test_labels]), labels)


def test_load_idx_round_trip_and_errors(tmp_path):
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 0x08, 3]) + np.array([2, 3, 4], dtype=">u4").tobytes()
    (tmp_path / "ok.idx").write_bytes(header + array.tobytes())
    np.testing.assert_array_equal(load_idx(tmp_path / "ok.idx"), array)
    (tmp_path / "short.idx").write_bytes(header + array.tobytes()[:-1])
    with pytest.raises(ValueError, match="bytes"):
        load_idx(tmp_path / "short.idx")
    (tmp_path / "bad.idx").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX"):
        load_idx(tmp_path / "bad.idx")


# -- deformation stream -----------------------------------------------------------------------
def digits(n=20, seed=0):
    """Synthetic stroke images (no data needed): a few random bars per image."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    for image in images:
        for _ in range(3):
            r, c = rng.integers(6, 20, size=2)
            if rng.random() < 0.5:
                image[r : r + 2, c - 4 : c + 5] = 255
            else:
                image[r - 4 : r + 5, c : c + 2] = 200
    return images, np.arange(n) % 10


def row_correlations(A, B):
    A = A - A.mean(axis=1, keepdims=True)
    B = B - B.mean(axis=1, keepdims=True)
    return np.sum(A * B, axis=1) / np.sqrt(np.sum(A * A, axis=1) * np.sum(B * B, axis=1))


def test_stream_shapes_and_ranges():
    images, labels = digits()
    X, y = DeformationStream(images, labels, seed=0).take(500)
    assert X.shape == (500, 784) and X.dtype == np.float64 and X.flags.c_contiguous
    assert y.shape == (500,) and y.dtype == np.int64
    assert X.min() >= 0.0 and X.max() <= 1.0 and X.max() > 0.5
    assert set(y.tolist()) <= set(labels.tolist())


def test_stream_is_deterministic_and_chunk_invariant():
    images, labels = digits()
    X1, y1 = DeformationStream(images, labels, seed=3).take(300)
    stream = DeformationStream(images, labels, seed=3, n=300, chunk_size=70)
    chunks = list(stream)
    assert [len(c[1]) for c in chunks] == [70, 70, 70, 70, 20]
    np.testing.assert_array_equal(np.concatenate([c[0] for c in chunks]), X1)
    np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), y1)
    assert stream.n_generated_ == 300
    X3, _ = DeformationStream(images, labels, seed=4).take(300)
    assert not np.array_equal(X1, X3)


def test_stream_identity_reproduces_sources():
    images, labels = digits()
    identity = dict(alpha=0.0, max_rotation=0.0, max_scale=0.0, max_shear=0.0, max_shift=0.0)
    X, y = DeformationStream(images, labels, seed=1, **identity).take(50)
    flat = images.reshape(len(images), -1) / 255.0
    matches = [np.flatnonzero(np.all(flat == x, axis=1)) for x in X]
    assert all(len(m) >= 1 for m in matches)
    np.testing.assert_array_equal([labels[m[0]] for m in matches], y)


def test_deformation_changes_images_but_keeps_them_close():
    images, labels = digits(40)
    identity = dict(alpha=0.0, max_rotation=0.0, max_scale=0.0, max_shear=0.0, max_shift=0.0)
    # the sources come from their own generator: same seed, same sources
    sources, y0 = DeformationStream(images, labels, seed=5, **identity).take(400)
    deformed, y1 = DeformationStream(images, labels, seed=5).take(400)
    np.testing.assert_array_equal(y0, y1)
    correlation = row_correlations(sources, deformed)
    assert np.all(np.abs(deformed - sources).max(axis=1) > 0.05)  # every image moved
    assert np.median(correlation) > 0.5
    assert np.mean(correlation > 0.2) > 0.9


def test_deformed_mnist_digits_stay_close():
    (source, source_labels), _ = mnist_split()
    identity = dict(alpha=0.0, max_rotation=0.0, max_scale=0.0, max_shear=0.0, max_shift=0.0)
    clean, _ = DeformationStream(source, source_labels, seed=2, **identity).take(500)
    deformed, _ = DeformationStream(source, source_labels, seed=2).take(500)
    correlation = row_correlations(clean, deformed)
    assert np.median(correlation) > 0.5


def test_kernel_matches_numpy_reference():
    """The kernel against B Z B^T in numpy and scipy's bilinear map_coordinates."""
    images, _ = digits(5)
    rng = np.random.default_rng(0)
    m = 12
    basis = smoothing_basis(28, 5.0, variance=1.0 / 3.0)
    rank = basis.shape[1]
    sources = rng.integers(0, 5, size=m)
    noise = rng.standard_normal((m, 2, rank, rank))
    angle = rng.uniform(-0.2, 0.2, m)
    affine = np.stack(
        [np.cos(angle), -np.sin(angle), np.sin(angle), np.cos(angle)]
        + [rng.uniform(-2, 2, m), rng.uniform(-2, 2, m)],
        axis=1,
    )
    alpha = 40.0
    padded = np.pad(images, ((0, 0), (PAD, PAD), (PAD, PAD)))
    out = np.empty((m, 784))
    _datasets_deform_batch(padded, sources, noise, affine, basis, basis, alpha, out)
    rows, cols = np.mgrid[0:28, 0:28].astype(float)
    c = 13.5
    for n in range(m):
        dx = basis @ noise[n, 0] @ basis.T
        dy = basis @ noise[n, 1] @ basis.T
        a11, a12, a21, a22, tx, ty = affine[n]
        sx = c + a11 * (cols - c) + a12 * (rows - c) + tx + alpha * dx
        sy = c + a21 * (cols - c) + a22 * (rows - c) + ty + alpha * dy
        expected = ndi.map_coordinates(
            images[sources[n]].astype(float), [sy, sx], order=1, mode="grid-constant", cval=0.0
        )
        np.testing.assert_allclose(out[n], expected.ravel() / 255.0, atol=1e-12)


def test_smoothing_basis_matches_gaussian_filtered_noise():
    """B B^T against the covariance of scipy's gaussian_filter applied to white noise."""
    sigma, size = 5.0, 28
    basis = smoothing_basis(size, sigma)
    # variance of a filtered unit impulse response = covariance of filtered unit white noise
    impulses = np.eye(size + 80)[:, 40 : 40 + size]
    responses = ndi.gaussian_filter1d(impulses, sigma, axis=0, mode="constant", truncate=4.0)
    covariance = responses.T @ responses
    kept = np.trace(basis @ basis.T) / np.trace(covariance)
    assert np.sqrt(0.995) <= kept <= 1.0 + 1e-12
    np.testing.assert_allclose(basis @ basis.T, covariance, atol=0.01 * covariance.max())
    assert basis.shape[1] == 5


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(images=np.zeros((3, 28, 28))),  # not uint8
        dict(images=np.zeros((28, 28), dtype=np.uint8)),  # not 3-D
        dict(labels=np.zeros(2)),  # one label short
        dict(n=-1),
        dict(chunk_size=0),
        dict(sigma=0.0),
        dict(alpha=float("nan")),
        dict(max_scale=1.0),
    ],
)
def test_stream_rejects_bad_parameters(kwargs):
    images, labels = digits(3)
    arguments = dict(images=images, labels=labels, seed=0) | kwargs
    with pytest.raises(ValueError):
        DeformationStream(**arguments)


def test_take_rejects_negative_size():
    images, labels = digits(3)
    with pytest.raises(ValueError):
        DeformationStream(images, labels).take(-1)

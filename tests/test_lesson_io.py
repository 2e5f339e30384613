"""The C++ lesson's files: round trip and every malformed case."""

from __future__ import annotations

import numpy as np
import pytest

from convcheck.check.pipeline import check_stored_output
from convcheck.base.errors import BadInput
from convcheck.check.fill import make_inputs
from convcheck.problem.lesson_io import lesson_shapes, read_lesson, read_shapes, write_lesson
from convcheck.problem.descriptor import parse_descriptor
from convcheck.check.backends import numpy_ref


def _write(tmp_path, desc="mb2ic4ih9oc3oh5kh3sh2ph1"):
    p = parse_descriptor(desc)
    inputs = make_inputs(p, 4)
    y = numpy_ref.conv_forward(p, inputs.x, inputs.w).astype(np.float32)
    write_lesson(tmp_path, p, inputs.x, inputs.w, y)
    return p, inputs, y


def test_round_trip_and_the_stored_output_checks(tmp_path):
    p, inputs, y = _write(tmp_path)
    text = (tmp_path / "conv_shapes.txt").read_text()
    assert text.splitlines()[0] == "n 2" and "stride 2" in text and "pad 1" in text and "p 5" in text
    files = read_lesson(tmp_path)
    assert files.problem.output == p.output and files.problem.stride == p.stride
    assert np.array_equal(files.x, inputs.x) and np.array_equal(files.y, y)
    result = check_stored_output(files.problem, files.x, files.w, files.y, device="cpu")
    assert result.status == "passed"


def test_a_wrong_stored_output_fails(tmp_path):
    p, inputs, y = _write(tmp_path)
    y2 = y.copy()
    y2[0, 1, 2, 3] += 0.5
    y2.tofile(tmp_path / "conv_y.f32")
    files = read_lesson(tmp_path)
    result = check_stored_output(files.problem, files.x, files.w, files.y, device="cpu")
    assert result.status == "failed" and result.comparison.first_mismatch.index == (0, 1, 2, 3)


def test_missing_file(tmp_path):
    _write(tmp_path)
    (tmp_path / "conv_w.f32").unlink()
    with pytest.raises(BadInput, match=r"conv_w.f32: missing \(expected 432 bytes"):
        read_lesson(tmp_path)


def test_truncated_file_says_expected_and_found_bytes(tmp_path):
    _write(tmp_path)
    data = (tmp_path / "conv_y.f32").read_bytes()
    (tmp_path / "conv_y.f32").write_bytes(data[:-6])
    with pytest.raises(BadInput, match=rf"expected {len(data)} bytes .* found {len(data) - 6}"):
        read_lesson(tmp_path)


@pytest.mark.parametrize("content,fragment", [
    ("n 2\nc\n", "malformed line 'c'"),
    ("n 2\nc 4 5\n", "malformed line"),
    ("n two\n", "'two' for 'n' is not an integer"),
    ("n 2\nzz 3\n", "unknown key 'zz'"),
    ("n 0\n", "n = 0; expected a positive integer"),
    ("n 2\nc 4\n", "missing keys h w k r s p q stride pad dilation"),
])
def test_malformed_shapes(tmp_path, content, fragment):
    (tmp_path / "conv_shapes.txt").write_text(content)
    with pytest.raises(BadInput, match=fragment):
        read_shapes(tmp_path / "conv_shapes.txt")


def test_output_size_that_does_not_match_the_shapes(tmp_path):
    _write(tmp_path)
    path = tmp_path / "conv_shapes.txt"
    path.write_text(path.read_text().replace("p 5", "p 6"))
    with pytest.raises(BadInput, match="p=6 q=5 do not match"):
        read_lesson(tmp_path)


def test_not_a_directory(tmp_path):
    with pytest.raises(BadInput, match="not a directory"):
        read_lesson(tmp_path / "nowhere")


@pytest.mark.parametrize("desc,kw,fragment", [
    ("g2mb2ic4ih9oc4oh9kh3ph1", {}, "groups=2"),
    ("mb2ic4iw9oc4ow9kw3pw1", {}, "1-D"),
    ("mb2ic4ih9oc4oh9kh3ph1", {"mode": "conv"}, "true convolution"),
    ("mb2ic4ih9iw9oc4oh9ow9kh3kw3ph1pw0", {}, "differ between h and w"),
])
def test_problems_the_lesson_format_cannot_hold(desc, kw, fragment):
    with pytest.raises(BadInput, match=fragment):
        lesson_shapes(parse_descriptor(desc, **kw))

"""Your function in another framework's conventions, checked as written (--convention, convention=):
channels-last data, HWIO/OHWI weights, NumPy arrays, TensorFlow's 'SAME'/'VALID' padding, the other
arguments by their own names; and every way of getting it wrong is one line."""

from __future__ import annotations


import pytest

from convcheck import assert_conv_function, check_conv_function
from convcheck.base.errors import BadInput
from convcheck.campaign.records import record_key
from convcheck.check.backends.conventions import parse, tf_padding
from convcheck.problem.descriptor import parse_descriptor
from tests.conftest import REPO, records_of, run_cli
from tests import other_conventions as oc
from tests.question_numpy_conv import conv_forward_naive, conv_fp16_inside

QUESTION = f"{REPO / 'tests' / 'question_numpy_conv.py'}:conv_forward_naive"
OTHER = REPO / "tests" / "other_conventions.py"


def test_the_numpy_function_of_the_question_is_checked_as_written_and_its_fp16_copy_fails():
    """NHWC input, HWIO weights, NumPy in and out, called (x, w, stride, pad): at the question's 2x2 size
    and at a ResNet-50 layer, strided and padded too; the copy that casts to fp16 inside is caught."""
    problems = ["mb1ic1ih2oc1oh1kh2", "mb1ic64ih56oc64oh56kh3ph1", "mb2ic16ih14oc8oh7kh3sh2ph1"]
    records = assert_conv_function(conv_forward_naive, problems, convention="nhwc,hwio,numpy")
    assert [r["status"] for r in records] == ["passed"] * 3
    assert all(r["convention"] == "nhwc,hwio,numpy,explicit" for r in records)
    with pytest.raises(AssertionError, match="1 of 1 checks of your convolution failed"):
        assert_conv_function(conv_fp16_inside, problems[1:2], convention="nhwc,hwio,numpy")


def test_from_the_cli_too_and_torchs_way_refuses_it_in_one_line(tmp_path):
    done = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--backend", QUESTION, "--convention", "nhwc,hwio,numpy")
    assert done.returncode == 0 and "called as nhwc,hwio,numpy,explicit (convention)" in done.stdout, done.stdout
    plain = run_cli("check", "mb2ic16ih14oc8oh14kh3ph1", "--backend", QUESTION)
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1 and "--convention" in plain.stderr


@pytest.mark.parametrize("direction,function,convention", [
    ("fprop", "numpy_nhwc", "nhwc,ohwi,numpy"),
    ("dgrad", "nhwc_dgrad", "nhwc,hwio"),
    ("wgrad", "nhwc_wgrad", "nhwc,hwio"),
])
def test_every_direction_rank_group_and_dilation_in_channels_last(direction, function, convention):
    problems = ["mb2ic8ih9oc8oh9kh3ph1", "mb2g2ic8ih9oc4oh5kh3sh2ph1", "mb2ic4ih11oc4oh7kh3dh1", "mb2ic4iw12ow12oc4kw3pw1",
                "mb1ic4id5ih5iw5oc4od5oh5ow5kd3kh3kw3pd1ph1pw1"]
    records = check_conv_function(getattr(oc, function), problems, directions=(direction,), dims=(1, 2, 3),
                                  convention=convention)
    assert len(records) == len(problems) and all(r["status"] == "passed" for r in records), \
        [(r["problem"], r["status"], r.get("message")) for r in records]


def test_fp16_and_bf16_numpy_arrays():
    records = check_conv_function(oc.numpy_nhwc, ["mb2ic16ih9oc8oh9kh3ph1"], dtypes=("fp16", "bf16"),
                                  convention="nhwc,ohwi,numpy")
    assert [r["status"] for r in records] == ["passed", "passed"], [r.get("message") for r in records]


def test_same_and_valid_padding_as_tensorflow_says_it_and_other_paddings_declined():
    same_odd = parse_descriptor("mb2ic4ih14oc4oh7kh3sh2ph0")  # SAME at stride 2: nothing before, one row after
    assert tf_padding(same_odd) == "SAME" and tf_padding(parse_descriptor("mb2ic4ih9oc4oh9kh3ph1")) == "SAME"
    assert tf_padding(parse_descriptor("mb2ic4ih9oc4oh7kh3")) == "VALID"
    assert tf_padding(parse_descriptor("mb2ic4ih9oc4oh11kh3ph2")) is None
    records = check_conv_function(oc.tf_conv, ["mb2ic4ih14oc4oh7kh3sh2ph0", "mb2ic4ih9oc4oh9kh3ph1",
                                               "mb2ic4ih9oc4oh7kh3", "mb2ic4ih11oc4oh7kh3dh1", "mb2ic4ih9oc4oh11kh3ph2"],
                                  convention="nhwc,hwio,same")
    assert [r["status"] for r in records] == ["passed"] * 4 + ["unsupported"], [r.get("message") for r in records]
    assert "'SAME' or 'VALID'" in records[-1]["message"]
    done = run_cli("check", "mb2ic4ih9oc4oh11kh3ph2", "--backend", f"{OTHER}:tf_conv", "--convention", "nhwc,hwio,same")
    assert done.returncode == 3 and "UNSUPPORTED" in done.stdout


def test_a_problem_your_function_has_no_parameter_for_is_declined():
    records = check_conv_function(oc.no_dilation, ["mb2ic4ih11oc4oh7kh3dh1", "mb2ic4ih9oc4oh9kh3ph1"],
                                  convention="nhwc,ohwi,numpy")
    assert [r["status"] for r in records] == ["unsupported", "passed"]
    assert "no dilation parameter" in records[0]["message"]


@pytest.mark.parametrize("words,said", [
    ("nhwc,chwn", "'chwn' is no convention word"),
    ("nhwc,nchw", "nhwc and nchw both say how the same thing is passed"),
])
def test_a_wrong_convention_is_one_line(words, said):
    with pytest.raises(BadInput, match=said):
        parse(words)
    done = run_cli("check", "mb2ic4ih9oc4oh9kh3ph1", "--backend", QUESTION, "--convention", words)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr


def test_a_parameter_convcheck_cannot_fill_and_a_convention_for_torch_are_one_line(tmp_path):
    done = run_cli("sweep", "mb2ic4ih9oc4oh9kh3ph1", "--backend", f"{OTHER}:needs_a_name", "--convention", "nhwc",
                   "--out", str(tmp_path / "s.jsonl"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "parameter 'scale'" in done.stderr, done.stderr
    for command in (("check", "mb2ic4ih9oc4oh9kh3ph1"), ("sweep", "mb2ic4ih9oc4oh9kh3ph1", "--out", str(tmp_path / "t.jsonl"))):
        done = run_cli(*command, "--backend", "torch", "--convention", "nhwc")
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--convention" in done.stderr, done.stderr


def test_the_convention_is_in_the_record_key_and_rerun_calls_the_function_so_again(tmp_path):
    out = tmp_path / "s.jsonl"
    assert run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--backend", f"{OTHER}:numpy_nhwc", "--convention", "ohwi,nhwc,numpy",
                   "--out", str(out), "--quiet").returncode == 0
    [rec] = records_of(out)
    assert rec["convention"] == "nhwc,ohwi,numpy,explicit" and "|convention=nhwc,ohwi,numpy,explicit" in record_key(rec)
    assert record_key(rec) != record_key({k: v for k, v in rec.items() if k != "convention"})
    again = run_cli("rerun", str(out), "--index", "1", "--trust-backend")
    assert again.returncode == 0 and "reproduced exactly" in again.stderr, again.stderr
    script = run_cli("repro", str(out), "--index", "1", "-o", str(tmp_path / "r.py"))
    assert script.returncode == 2 and script.stderr.count("\n") == 1 and "torch's way only" in script.stderr


@pytest.mark.parametrize("function,said", [
    ("returns_a_list", "returned a list; expected an array: a torch tensor, or anything with __dlpack__"),
    ("returns_nchw", "returned shape (2, 8, 9, 9); the fprop of mb2ic8ih9"),
])
def test_an_answer_of_the_wrong_kind_or_order_is_one_line(function, said):
    done = run_cli("check", "mb2ic8ih9oc8oh9kh3ph1", "--backend", f"{OTHER}:{function}", "--convention", "nhwc,ohwi,numpy")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert "in NHWC order has shape (2, 9, 9, 8)" in done.stderr or function == "returns_a_list"


JAX_FUNCTIONS = '''
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", False)


def jax_nhwc(x, w, strides=1, padding=0, dilation_rate=1):
    """keras.ops.conv's arguments: NHWC data, HWIO weights, JAX arrays out."""
    pad = [(padding, padding)] * (x.ndim - 2) if isinstance(padding, int) else padding
    return jax.lax.conv_general_dilated(jnp.asarray(x), jnp.asarray(w), (strides,) * (x.ndim - 2), pad,
                                        rhs_dilation=(dilation_rate,) * (x.ndim - 2),
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        precision=jax.lax.Precision.HIGHEST)


class ArrayOnly:
    """An array that offers only __array__ (no DLPack): an older framework's tensor."""

    def __init__(self, a):
        self.a = np.asarray(a)

    def __array__(self, dtype=None, copy=None):
        return self.a if dtype is None else self.a.astype(dtype)


def array_only(x, w, strides=1, padding=0, dilation_rate=1):
    return ArrayOnly(jax_nhwc(x, w, strides, padding, dilation_rate))
'''


@pytest.mark.parametrize("name", ["jax_nhwc", "array_only"])
def test_a_framework_s_own_array_is_an_answer(tmp_path, name):
    """A function written for JAX, returning a JAX array (DLPack), or an object that offers only __array__,
    is judged as written: its dilation called dilation_rate, its strides strides."""
    pytest.importorskip("jax")
    source = tmp_path / "jaxconv.py"
    source.write_text(JAX_FUNCTIONS)
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "mb2ic8ih9oc8oh5kh3sh2ph1", "mb2ic8ih9oc8oh5kh3sh2ph3dh1", "--backend", f"{source}:{name}",
                   "--convention", "nhwc,hwio,numpy", "--bound", "elementwise", "--out", str(out), "--quiet")
    recs = records_of(out)
    assert done.returncode == 0 and [r["status"] for r in recs] == ["passed", "passed"], done.stderr

"""Your own convolution function as the implementation under test (issue: test it the way
convcheck tests cuDNN). The function is the example's unfold + matmul kernel, run for real."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings

from convcheck import assert_conv_function, check_conv_function, parse_descriptor
from convcheck.base.errors import BadInput
from convcheck.check.backends import user_function
from convcheck.check.fill import make_inputs
from convcheck.api.strategies import conv_problems

from .conftest import REPO, records_of, run_cli

EXAMPLE = REPO / "examples" / "11_your_conv_function.py"
ALL = ("fprop", "dgrad", "wgrad")
_spec = importlib.util.spec_from_file_location("example_11", EXAMPLE)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


@pytest.mark.parametrize("direction,name", [("fprop", "conv2d"), ("dgrad", "conv2d_input"), ("wgrad", "conv2d_weight")])
def test_a_correct_kernel_passes_the_resnet_50_sweep_at_batch_8(tmp_path, cases_dir, direction, name):
    out = tmp_path / "mine.jsonl"
    done = run_cli("sweep", "--batch", str(cases_dir / "shapes_resnet_50"), "--mb", "8", "--direction", direction,
                   "--backend", f"{EXAMPLE}:{name}", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    recs = records_of(out)
    assert len(recs) == 20 and all(r["status"] == "passed" for r in recs)
    # every record names the function, and the hash of the file that defines it
    info = recs[0]["backend_info"]
    assert recs[0]["backend"] == f"{EXAMPLE}:{name}" and info["implementation"] == f"your function {EXAMPLE}:{name}"
    assert len(info["sha256"]) == 64 and recs[0]["versions"]["user_function"].endswith(info["sha256"][:16])
    assert recs[0]["fill"] == "exact" and recs[0]["reference"] == "numpy"


def test_a_correct_kernel_passes_the_built_in_set_and_resnet_50_from_python():
    recs = assert_conv_function(example.kernel(), directions=ALL, dims=(1, 2))
    names = {r["name"] for r in recs}
    assert {"1-D", "groups 4", "depthwise", "negative back padding", "padding larger than the kernel",
            "output width 1", "asymmetric padding (back smaller)"} <= names
    assert len(assert_conv_function(example.kernel(), "resnet_50", directions=ALL, mb=2)) == 60


def _bits(problem, rec, fn):
    """The kernel's output on the check's own inputs (the record's seed and fill), as int32 bits."""
    from convcheck.check.backends import torch_conv

    inputs = make_inputs(problem, rec["seed"], kind=rec["fill"])
    x, w, dy, bias = torch_conv.as_checked(problem, inputs, "cpu")
    return user_function.compute(problem, fn, x, w, dy, bias)[0]


@pytest.mark.parametrize("bug", ["tf32", "bf16-accumulation", "padding", "stride"])
def test_each_bug_fails_on_every_resnet_50_layer_where_it_changes_the_answer(bug):
    correct, buggy = example.kernel(), example.kernel(bug)
    recs = check_conv_function(buggy, "resnet_50", directions=ALL, mb=1, diagnose=0)  # verdicts (causes: test_diagnosis)
    changed = caught = 0
    for rec in recs:
        p = parse_descriptor(rec["problem"], direction=rec["direction"])
        right, wrong = _bits(p, rec, correct[p.direction]), _bits(p, rec, buggy[p.direction])
        if tuple(wrong.shape) == tuple(right.shape) and torch.equal(wrong, right):
            assert rec["status"] == "passed", (bug, rec["problem"], rec["direction"])
        else:
            changed += 1
            caught += rec["status"] == "failed"
            assert rec["status"] == "failed", (bug, rec["problem"], rec["direction"], rec["status"], rec.get("message"))
    # measured: TF32 and bf16 accumulation change all 60 checks (20 layers x 3 directions), the padding
    # bug the 15 of the 5 padded layers (conv1 too: its unread back row no longer keeps the function's
    # own padding code from running), the stride bug 21 (the stride-2 layers; 1x1 stride-2 dgrad too)
    assert changed == {"tf32": 60, "bf16-accumulation": 60, "padding": 15, "stride": 21}[bug] and caught == changed


def test_the_assert_names_every_failing_problem_with_its_worst_element():
    deep = ['mb2ic256ih14oc256oh14kh3ph1n"depth 2304"', 'mb2ic32ih14oc64oh14kh1ph0n"1x1"']
    with pytest.raises(AssertionError) as e:
        assert_conv_function(example.kernel("tf32"), deep, directions=("fprop", "wgrad"))
    text = str(e.value)
    assert text.startswith("4 of 4 checks of your convolution failed:")
    assert text.count("depth 2304 [") == 2 and "worst element (" in text and "error/allowed inf" in text
    assert "first mismatch" in text and "(exact bound, seed 0)" in text


@settings(max_examples=40, deadline=None)
@given(problem=conv_problems(dims=(1, 2), directions=ALL))
def test_the_strategy_draws_problems_a_correct_kernel_passes(problem):
    recs = check_conv_function(example.kernel(), [problem], directions=(problem.direction,))
    assert [r["status"] for r in recs] in (["passed"], ["mistrusted"]), recs[0].get("message")


@settings(max_examples=30, deadline=None)
@given(problem=conv_problems(dims=(1, 2, 3)))
def test_the_strategy_s_problems_are_valid_for_torch(problem):
    assert all(o >= 1 for o in problem.output) and problem.ic % problem.groups == 0
    assert [r["status"] for r in check_conv_function({1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[problem.ndim], [problem])] \
        in (["passed"], ["mistrusted"])


def test_a_plant_wraps_your_function_and_model_takes_plant_too(tmp_path):
    planted = run_cli("check", "mb2ic64ih14oc64oh14kh3ph1", "--backend", f"{EXAMPLE}:conv2d", "--plant", "padding")
    assert planted.returncode == 1 and "PLANTED BUG: padding" in planted.stdout, planted.stdout + planted.stderr
    model = run_cli("model", "examples/09_small_net.py:SmallNet", "--input", "2,3,16,16", "--plant", "padding", "--quiet")
    assert model.returncode == 1 and "failed" in model.stdout, model.stdout + model.stderr
    mine = run_cli("model", "examples/09_small_net.py:SmallNet", "--input", "2,3,16,16", "--quiet",
                   "--backend", f"{EXAMPLE}:conv2d")
    assert mine.returncode == 0, mine.stdout + mine.stderr


BAD = '''
import torch
import torch.nn.functional as F

def raises(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    raise ValueError("no tile for this shape")

def wrong_shape(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)[..., :-1]

def wrong_dtype(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups).double()

def not_a_tensor(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups).tolist()

def two_args(a, b):
    return a

NUMBER = 3
'''


@pytest.mark.parametrize("name,expected", [
    ("raises", "raised ValueError: no tile for this shape (on mb2ic8ih9"),
    ("wrong_shape", "returned shape (2, 8, 9, 8); the fprop of mb2ic8ih9"),
    ("wrong_dtype", "returned float64; a fp32 check expects float32"),
    ("not_a_tensor", "returned a list; expected an array: a torch tensor, or anything with __dlpack__"),
    ("two_args", "it takes (a, b); expected 7 positional arguments"),
    ("NUMBER", "int is not callable"),
    ("missing", "has no 'missing'"),
])
def test_every_mistake_in_your_function_is_one_line(tmp_path, name, expected):
    bad = tmp_path / "bad.py"
    bad.write_text(BAD)
    done = run_cli("check", "mb2ic8ih9oc8oh9kh3ph1", "--backend", f"{bad}:{name}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    out = tmp_path / "s.jsonl"
    sweep = run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--backend", f"{bad}:{name}", "--out", str(out), "--quiet")
    if name in ("two_args", "NUMBER", "missing"):  # the backend itself is wrong: the sweep stops at once
        assert sweep.returncode == 2 and sweep.stderr.count("\n") == 1 and expected in sweep.stderr
    else:  # the function failed on this problem: an error record naming it, the sweep goes on
        [rec] = records_of(out)
        assert rec["status"] == "error" and expected in rec["message"] and sweep.returncode == 4


def test_missing_files_and_wrong_names_are_one_line(tmp_path):
    for backend, expected in ((f"{tmp_path}/none.py:f", "no such file"), ("not_a_module_xyz:f", "cannot import"),
                              ("nonsense", "expected auto")):
        done = run_cli("check", "mb2ic8ih9oc8oh9kh3ph1", "--backend", backend)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr


def test_a_changed_function_is_not_mistaken_for_the_same_one(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("import torch.nn.functional as F\nconv = F.conv2d\n")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--backend", f"{mine}:conv", "--out", str(a), "--quiet").returncode == 0
    mine.write_text("import torch.nn.functional as F\nconv = F.conv2d  # changed\n")
    assert run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--backend", f"{mine}:conv", "--out", str(b), "--quiet").returncode == 0
    [ra], [rb] = (records_of(p) for p in (a, b))
    assert ra["backend_info"]["sha256"] != rb["backend_info"]["sha256"]
    diff = run_cli("diff", str(a), str(b))
    assert "user_function" in diff.stdout, diff.stdout
    rerun = run_cli("rerun", str(b), "--index", "1", "--trust-backend")
    assert rerun.returncode == 0 and "reproduced exactly" in rerun.stderr, rerun.stderr


def test_the_readme_line_passes_a_correct_2d_function_and_says_what_it_left_out(capsys):
    """``assert_conv_function(my_conv2d)``: the first 1-D and 3-D problems are not taken (conv2d raises),
    the 2-D ones are, so those dimensions are left out, with a warning and a record saying so."""
    from tests import only_2d

    with pytest.warns(UserWarning, match=r"left out the 2 3-D problem\(s\).*dims=\(3,\)"):
        recs = assert_conv_function(only_2d.my_conv2d, progress=True)
    left = [r for r in recs if r["status"] == "unsupported"]
    assert sorted(r["name"] for r in left) == ["1-D", "3-D"] and all("pass dims=" in r["message"] for r in left)
    assert all(r["status"] == "passed" for r in recs if r not in left) and len(recs) == 16
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("[1/18] ") and said[-1].startswith("[16/16] ") and said[-1].endswith(": passed"), said  # 2 left out


def test_a_function_no_dimension_takes_fails_and_one_given_dims_is_checked_on_them_all():
    from tests import only_2d

    with pytest.raises(AssertionError, match="2 of 2 checks of your convolution failed"):
        assert_conv_function(only_2d.my_conv2d, ["mb2ic4iw9oc4ow9kw3pw1", "mb2ic4iw8oc4ow8kw3pw1"])
    with pytest.raises(AssertionError, match="raised RuntimeError"):
        assert_conv_function(only_2d.my_conv2d, dims=(1, 2))


def test_a_function_that_cannot_take_an_argument_is_told_what_it_was_called_with():
    from tests import only_2d

    (rec,) = check_conv_function(only_2d.stride_as_int, ["mb2ic4ih9oc4oh9kh3ph1"])
    assert rec["status"] == "error" and "stride must be an int, got (1, 1)" in rec["message"]
    assert ("called with input [2, 4, 9, 9] fp32, weight [4, 4, 3, 3] fp32, bias None, stride (1, 1), padding (1, 1), "
            "dilation (1, 1), groups 1") in rec["message"], rec["message"]


def test_problems_can_be_named_listed_or_a_file(tmp_path):
    batch = tmp_path / "b.txt"
    batch.write_text("mb2ic8ih9oc8oh9kh3ph1\n")
    assert len(check_conv_function(F.conv2d, str(batch))) == 1
    assert len(check_conv_function(F.conv2d, ["mb2ic8ih9oc8oh9kh3ph1", parse_descriptor("mb1ic4ih5oc4oh5kh1ph0")])) == 2
    from convcheck.base.errors import BadInput

    with pytest.raises(BadInput, match="bundled: .*resnet_50"):
        check_conv_function(F.conv2d, "resnet_5O")
    with pytest.raises(BadInput, match="no problem to check"):
        check_conv_function(F.conv2d, ["mb2ic8ih9oc8oh9kh3ph1"], dims=(3,))
    np.testing.assert_equal(len(check_conv_function(F.conv2d, "1x1", mb=1)) > 0, True)


def test_the_contract_a_function_was_judged_by_is_in_its_record_and_rerun_and_repro_keep_it(tmp_path):
    """fp16 dgrad: the staged contract (the taps summed in fp16) and the fp32 one (accumulate in fp32,
    round once) are two bounds; the record says which judged, and rerun and the standalone script
    judge by it again (before, both fell back to the default, and repro refused what it could carry)."""
    from convcheck.check.pipeline import run_check
    from convcheck.problem.descriptor import parse_descriptor
    from convcheck.output.repro import function_script
    from convcheck.campaign.rerun import rerun

    source = tmp_path / "fn.py"
    source.write_text(
        "import torch\n"
        "def conv_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):\n"
        "    return torch.nn.grad.conv2d_input(input_size, weight.float(), grad_output.float(), stride, padding,\n"
        "                                      dilation, groups).to(weight.dtype)\n")
    p = parse_descriptor("mb2ic16ih10oc8oh10kh3ph1").with_(dtype="fp16", direction="dgrad")
    said = {}
    for contract in ("fp32", "staged"):
        rec = run_check(p, backend=f"{source}:conv_input", reference="numpy", device="cpu", contract=contract).record()
        assert rec["status"] == "passed" and rec["contract"] == contract
        again = rerun(rec).record()
        assert again["contract"] == contract and again["comparison"]["derivation"] == rec["comparison"]["derivation"]
        said[contract] = rec["comparison"]["derivation"]
    assert said["fp32"] != said["staged"] and "contract fp32" in said["fp32"]
    assert "contract fp32" in function_script(rec | {"contract": "fp32"})
    assert "contract" not in run_check(p, backend="torch", reference="numpy", device="cpu").record()  # torch says itself


@pytest.mark.parametrize("how", ["NotImplementedError('no float16 here')", "convcheck.Unsupported('no float16 here')"])
def test_a_function_declines_a_problem_and_the_check_is_unsupported(tmp_path, how):
    """A function that cannot take a problem says so by raising NotImplementedError or convcheck's exported
    Unsupported: the check is unsupported (exit 3) with its message, and a sweep counts it so, never as an
    error."""

    from convcheck import run_check

    source = tmp_path / "picky.py"
    source.write_text("import convcheck\nimport torch\nimport torch.nn.functional as F\n\n"
                      "def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    if input.dtype == torch.float16:\n"
                      f"        raise {how}\n"
                      "    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)\n")
    fn = f"{source}:conv"
    r = run_check(parse_descriptor("mb2ic8ih9oc8oh9kh3ph1", dtype="fp16"), backend=fn, device="cpu", diagnose=0)
    assert r.status == "unsupported" and r.exit_code == 3 and "no float16 here" in r.message
    assert run_check(parse_descriptor("mb2ic8ih9oc8oh9kh3ph1"), backend=fn, device="cpu").status == "passed"
    done = run_cli("check", "mb2ic8ih9oc8oh9kh3ph1", "--dtype", "fp16", "--backend", fn)
    assert done.returncode == 3 and "no float16 here" in done.stdout + done.stderr, done.stderr
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "mb2ic8ih9oc8oh9kh3ph1", "--dtype", "fp16,fp32", "--backend", fn, "--out", str(out), "--quiet")
    statuses = sorted(r["status"] for r in records_of(out))
    assert statuses == ["passed", "unsupported"] and done.returncode == 0, done.stderr


def test_a_notimplementederror_a_library_raises_is_the_function_s_error_not_a_decline(tmp_path):
    """torch's own NotImplementedError (``.view`` of a sparse tensor: raised in C++ under the function's line) is
    an error naming where it was raised; the function's own ``raise NotImplementedError`` stays a decline. A sweep
    in which every problem was declined exits 3, as check does."""
    from convcheck import run_check

    source = tmp_path / "sparse.py"
    source.write_text("import torch\nimport torch.nn.functional as F\n\n"
                      "def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    if input.shape[0] == 2:\n"
                      "        input.to_sparse().view(-1)\n"
                      "    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)\n")
    with pytest.raises(BadInput, match="not by a raise statement"):
        run_check(parse_descriptor("mb2ic4ih6oc4oh6kh3ph1"), backend=f"{source}:conv", device="cpu", diagnose=0)
    out = tmp_path / "s.jsonl"
    done = run_cli("sweep", "mb2ic4ih6oc4oh6kh3ph1", "mb1ic4ih6oc4oh6kh3ph1", "--backend", f"{source}:conv",
                   "--out", str(out), "--quiet")
    recs = sorted(records_of(out), key=lambda r: r["status"])
    assert [r["status"] for r in recs] == ["error", "passed"] and done.returncode == 4, done.stderr
    assert "NotImplementedError raised in" in recs[0]["message"] and f"{source.name}:6" in recs[0]["message"]
    declines = tmp_path / "declines.py"
    declines.write_text("def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                        "    raise NotImplementedError('nothing here')\n")
    out = tmp_path / "d.jsonl"
    done = run_cli("sweep", "mb2ic4ih6oc4oh6kh3ph1", "mb1ic4ih6oc4oh6kh3ph1", "--backend", f"{declines}:conv",
                   "--out", str(out), "--quiet")
    assert [r["status"] for r in records_of(out)] == ["unsupported"] * 2 and done.returncode == 3, done.stderr
    assert "nothing could be checked" in done.stdout + done.stderr


def test_a_record_names_the_versions_of_the_packages_your_function_file_imports(tmp_path):
    """Read from the file's syntax tree, never by running it: an import inside a function counts, the
    standard library does not."""
    source = tmp_path / "mine.py"
    source.write_text("import math\nimport numpy as np\n\n"
                      "def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):\n"
                      "    import torch.nn.functional as F\n"
                      "    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)\n")
    (rec,) = check_conv_function(user_function.load(f"{source}:conv").fn, ["mb1ic4ih6oc4oh6kh3ph1"])
    # a function from a module loaded by its path: no worker can import it, so it runs here, and says so
    assert rec["status"] == "passed" and any("not on the import path" in n for n in rec["notes"]), rec
    imports = rec["versions"]["user_function_imports"]
    assert imports["numpy"] == np.__version__ and imports["torch"] == torch.__version__ and "math" not in imports


def test_two_sweeps_under_two_values_of_a_named_variable_are_two_checks(tmp_path):
    """--environment names what chooses your code's path: its value is in each record and its key, so a
    resumed sweep under another value checks again, and the known framework switches are recorded unasked."""
    from convcheck.campaign.records import read_records

    out = tmp_path / "r.jsonl"
    argv = ("sweep", "mb1ic4ih6oc4oh6kh3ph1", "--backend", "tests/only_2d.py:my_conv2d", "--environment", "MY_SWITCH",
            "--out", str(out), "--quiet")
    for value in ("a", "a", "b"):
        done = run_cli(*argv, "--resume", env={"MY_SWITCH": value, "KERAS_BACKEND": "jax"}, cwd=REPO)
        assert done.returncode == 0, done.stdout + done.stderr
    recs = read_records(out)
    assert [r["environment"] for r in recs] == ["KERAS_BACKEND=jax;MY_SWITCH=a", "KERAS_BACKEND=jax;MY_SWITCH=b"]
    assert recs[0]["key"] != recs[1]["key"]
    rerun = run_cli("rerun", str(out), "--index", "2", "--trust-backend", "--json", env={"MY_SWITCH": "b", "KERAS_BACKEND": "jax"}, cwd=REPO)
    assert rerun.returncode == 0 and json.loads(rerun.stdout.strip().splitlines()[-1])["environment"] == recs[1]["environment"], rerun.stderr


def _aligned_or_raise(*arrays):
    for a in arrays:
        address = a.data_ptr() if isinstance(a, torch.Tensor) else a.ctypes.data
        if address % 64:
            raise ValueError(f"Data is not aligned to 64 bytes (address {address} % 64 = {address % 64})")


def aligned_torch(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _aligned_or_raise(input, weight)
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)


def aligned_numpy(x, w, stride=1, padding=0, dilation=1, groups=1):
    _aligned_or_raise(x, w)
    y = F.conv2d(torch.from_numpy(np.ascontiguousarray(x).astype(np.float32)),
                 torch.from_numpy(np.ascontiguousarray(w).astype(np.float32)), None, stride, padding, dilation, groups)
    return y.numpy().astype(x.dtype)


def test_inputs_reach_a_function_aligned_to_64_bytes_as_framework_allocators_align_them():
    """A kernel that refuses data not aligned to 64 bytes (TVM does) passes every type, layout and convention."""
    problems = ["mb1ic3ih5oc2oh5kh3ph1", "mb2ic5ih7oc3oh7kh3ph1"]
    recs = check_conv_function(aligned_torch, problems, dtypes=("fp32", "fp16", "bf16"), layouts=("nchw", "nhwc"))
    assert {r["status"] for r in recs} == {"passed"}, [r.get("message") for r in recs]
    recs = check_conv_function(aligned_numpy, problems, dtypes=("fp32", "fp16"), convention="numpy")
    assert {r["status"] for r in recs} == {"passed"}, [r.get("message") for r in recs]


class _DLPackFails:
    """An answer whose ``__dlpack__`` raises ``error``, on the DLPack ``device`` it names (1: the CPU, 2: CUDA)."""

    shape = (1, 2, 5, 5)

    def __init__(self, device: int, error: Exception):
        self.device, self.error = device, error

    def __dlpack__(self, stream=None):
        raise self.error

    def __dlpack_device__(self):
        return (self.device, 0)


class _ArrayGivesAList:
    shape = (1, 2, 5, 5)

    def __array__(self, dtype=None, copy=None):
        return [[1.0]]


LIES = {
    "dlpack_raises": (lambda: _DLPackFails(1, KeyError("dlpack key")), "its __dlpack__ failed (KeyError"),
    "object_array": (lambda: np.empty((1, 2, 5, 5), dtype=object), "of dtype object; expected numbers"),
    "array_gives_a_list": (lambda: _ArrayGivesAList(), "whose __array__ raised ValueError: object __array__ method not"),
    "dlpack_on_a_gpu": (lambda: _DLPackFails(2, BufferError("no CUDA here")), "its DLPack says it is on device type 2"),
    "meta_tensor": (lambda: torch.empty((1, 2, 5, 5), device="meta"), "a tensor on the meta device"),
    "sparse_tensor": (lambda: torch.zeros((1, 2, 5, 5)).to_sparse(), "a sparse_coo tensor; expected a dense one"),
    "huge_broadcast": (lambda: np.broadcast_to(np.float32(0), (1 << 20, 1 << 20, 5, 5)), "returned shape (1048576, 1048576"),
}


@pytest.mark.parametrize("lie", sorted(LIES))
def test_an_answer_that_is_no_readable_array_is_refused_saying_what_the_function_returned(lie):
    """Refused before anything is allocated from it (a 4 TiB broadcast view by its shape alone), with a message
    that says the function returned it: an error record, never a library's own error."""
    make, says = LIES[lie]

    def lying(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        return make()

    (rec,) = check_conv_function(lying, ["mb1ic2ih5oc2oh5kh3ph1"])
    assert rec["status"] == "error" and "returned" in rec["message"] and says in rec["message"], rec["message"]

"""Descriptor parsing and ConvProblem validation, against real benchdnn lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from convcheck.base.errors import BadInput
from convcheck.problem.descriptor import ConvProblem, parse_descriptor, read_batch_file

# (descriptor, expected fields) from ../shared/cases/benchdnn, worked out by hand.
REAL_LINES = [
    ("mb2ic16ih28oc32oh28kh3ph1",
     dict(mb=2, ic=16, oc=32, input=(28, 28), kernel=(3, 3), stride=(1, 1), pad_pre=(1, 1), pad_post=(1, 1), dilation=(1, 1), output=(28, 28))),
    ('g1mb256ic3ih227iw227oc96oh55ow55kh11kw11sh4sw4ph0pw0n"alexnet:conv1"',
     dict(mb=256, ic=3, oc=96, input=(227, 227), kernel=(11, 11), stride=(4, 4), pad_pre=(0, 0), pad_post=(0, 0), output=(55, 55), name="alexnet:conv1")),
    ('g2mb256ic96ih27oc256oh27kh5ph2n"alexnet:conv2"',
     dict(groups=2, ic=96, oc=256, input=(27, 27), kernel=(5, 5), pad_pre=(2, 2), pad_post=(2, 2), output=(27, 27))),
    # padding larger than the kernel (shapes_regression_padding)
    ("mb1ic16oc16_ih10kh5_ph7sh1", dict(mb=1, input=(10, 10), kernel=(5, 5), pad_pre=(7, 7), pad_post=(7, 7), output=(20, 20))),
    # output size given: back padding deduced (shapes_large_padding)
    ("ic16oc16_iw1kw3ow100pw100", dict(mb=2, input=(1,), kernel=(3,), pad_pre=(100,), pad_post=(1,), output=(100,))),
    # dilation: dh2 means two gaps, torch dilation 3
    ("ic1oc64_ih55oh18kh30sh3ph29dh2", dict(input=(55, 55), kernel=(30, 30), stride=(3, 3), dilation=(3, 3), pad_pre=(29, 29), pad_post=(55, 55), output=(18, 18))),
    ("ic1oc64ih7oh7kh3ph1sh1dh0", dict(dilation=(1, 1), pad_post=(1, 1), output=(7, 7))),
    # negative deduced back padding: the last input row is never read
    ('g4mb1ic4ih2iw1oc4oh1ow1kh2kw1sh2sw1ph1pw0n"dw_2d_strided_padding_1_ph-bottom(-1)"',
     dict(groups=4, input=(2, 1), kernel=(2, 1), stride=(2, 1), pad_pre=(1, 0), pad_post=(-1, 0), output=(1, 1))),
    # 1-D and 3-D
    ('g2_ic32oc32_iw27kw2_n"1d_gconv_channel-block-16"', dict(groups=2, input=(27,), kernel=(2,), output=(26,))),
    ('ic16oc16_ih13kh3ph1_iw50kw3pw1_id10kd3pd1_n"3d_conv_pad:1"', dict(input=(10, 13, 50), kernel=(3, 3, 3), output=(10, 13, 50))),
    ("mb2ic8id6oc8od6kd3pd1", dict(input=(6, 6, 6), kernel=(3, 3, 3), output=(6, 6, 6))),  # cubic
    ("mb2ic8ih6oc8kh3  # trailing comment", dict(input=(6, 6), output=(4, 4))),
]


@pytest.mark.parametrize("text,expected", REAL_LINES)
def test_real_lines(text, expected):
    p = parse_descriptor(text)
    for key, value in expected.items():
        assert getattr(p, key) == value, (key, getattr(p, key), value)


def test_every_line_of_every_batch_file_parses_and_round_trips(cases_dir):
    counts = {1: 0, 2: 0, 3: 0}
    for path in sorted(cases_dir.glob("shapes_*")):
        for p in read_batch_file(path):
            counts[p.ndim] += 1
            assert parse_descriptor(p.descriptor()) == p.canonical() == p
            assert all(o > 0 for o in p.output)
    assert counts[2] > 2000 and counts[1] > 0 and counts[3] > 0


def test_mb_override():
    assert parse_descriptor("mb50ic64ih56oc64oh56kh1", mb=1).mb == 1


@pytest.mark.parametrize("text,fragment", [
    ("ic16ih2oc8kh3", "oh=0 <= 0"),
    ("g3mb2ic16ih14oc8kh3", "not divisible by groups"),
    ("mb2ic16ih14oc8kh3ph-1", "'ph-1' is negative"),
    ("mb2ic16ih14oc8kh3xq4", "unknown entry 'xq4'"),
    ("mb2ic16ih14oc8oh14kh3ph1zz", "unknown entry 'zz'"),
    ("mb2ih14oc8kh3", "'ic' and 'oc' must be given"),
    ("mb2ic4ih14oc8", "needs both ih and kh"),
    ("mb2ic4id4ih4oc4kd3kh3", "3-D problem gives d and one of h/w"),
    ("mb2ic4ih14oc4oh1kh1ph12", "crops away the whole input"),
    ("mb2ic4ih14oc4kh3sh0", "stride 'sh0' must be positive"),
    ("", "empty descriptor"),
    ("mb2ic4oc4", "no spatial size"),
])
def test_impossible_problems_are_rejected_with_the_entry_named(text, fragment):
    with pytest.raises(BadInput) as e:
        parse_descriptor(text)
    assert fragment in str(e.value)


def test_batch_file_error_names_file_and_line(tmp_path):
    f = tmp_path / "batch"
    f.write_text("# comment\nmb2ic16ih14oc8oh14kh3ph1\n\nmb2ic16ih14oc8kh3ph-1\n")
    with pytest.raises(BadInput, match=r"batch:4: "):
        read_batch_file(f)


def test_flags_construction_and_derived_facts():
    p = ConvProblem(mb=2, ic=16, oc=8, input=(14, 14), kernel=3, pad_pre=1, groups=2)
    assert p.output == (14, 14)
    assert p.w_shape == (8, 8, 3, 3)
    assert p.accumulation_depth == 8 * 9
    assert p.layout_name == "NCHW" and p.with_(layout="nxc").layout_name == "NHWC"
    assert ConvProblem(mb=1, ic=1, oc=1, input=(5,), kernel=2).layout_name == "NCW"
    with pytest.raises(BadInput, match="kernel has 1 values"):
        ConvProblem(mb=1, ic=1, oc=1, input=(5, 5), kernel=(2,))
    with pytest.raises(BadInput, match="mode"):
        ConvProblem(mb=1, ic=1, oc=1, input=(5, 5), kernel=2, mode="full")


def test_canonical_back_padding_is_the_smallest_with_the_same_output():
    p = ConvProblem(mb=1, ic=1, oc=1, input=(5,), kernel=(2,), stride=(2,))  # reads rows 0..3 only
    assert p.output == (2,) and p.canonical().pad_post == (-1,)


axis = st.tuples(st.integers(1, 12), st.integers(1, 4), st.integers(1, 3), st.integers(0, 4), st.integers(-2, 4), st.integers(1, 3))


@settings(max_examples=300, deadline=None)
@given(st.lists(axis, min_size=1, max_size=3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3))
def test_descriptor_round_trip_for_random_problems(axes, mb, cg, kg, g):
    fields = dict(mb=mb, ic=cg * g, oc=kg * g, groups=g,
                  input=tuple(a[0] for a in axes), kernel=tuple(a[1] for a in axes), stride=tuple(a[2] for a in axes),
                  pad_pre=tuple(a[3] for a in axes), pad_post=tuple(a[4] for a in axes), dilation=tuple(a[5] for a in axes))
    try:
        p = ConvProblem(**fields)
    except BadInput:
        return  # impossible combination: rejected, which is the point
    q = parse_descriptor(p.descriptor())
    assert q == p.canonical()
    assert q.output == p.output


def test_a_problem_stated_in_torch_s_own_arguments_wherever_a_descriptor_is_taken():
    from convcheck import CheckSpec, problem_from_torch
    from convcheck.api.function_check import problems_from
    from convcheck.base.errors import BadInput
    from convcheck.problem.descriptor import as_problem

    p = problem_from_torch((8, 64, 56, 56), (64, 16, 3, 3), stride=2, padding=1, groups=4, bias=True, name="mine")
    assert (p.mb, p.ic, p.oc, p.groups, p.kernel, p.stride, p.pad_pre, p.pad_post) == (8, 64, 64, 4, (3, 3), (2, 2), (1, 1), (1, 1))
    assert p.output == parse_descriptor("g4mb8ic64ih56oc64oh28kh3sh2ph1").output and p.fuse == ("bias",) and p.name == "mine"
    same = problem_from_torch((2, 8, 9, 9), (4, 8, 3, 3), padding="same", dilation=2)
    assert same.output == same.input and same.pad_pre == same.pad_post == (2, 2)
    args = {"input": (2, 8, 9, 9), "weight": (4, 8, 3, 3), "padding": 1}
    assert as_problem(args) == problems_from([args])[0] == CheckSpec(problem=args).problem == problem_from_torch(**args)
    for bad, said in (({"input": (2, 8, 9, 9)}, "takes input, weight"), ({**args, "kernel": 3}, "got input, kernel"),
                      ({"input": (2, 8, 9, 9), "weight": (4, 3, 3, 3)}, "groups=1")):
        with pytest.raises(BadInput, match=said):
            as_problem(bad)

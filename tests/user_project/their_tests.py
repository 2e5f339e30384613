"""A user's test file: convcheck's pytest plugin (the marker and its fixtures) and its Hypothesis strategies."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from convcheck import assert_conv_close
from convcheck.api.strategies import conv_inputs, conv_problems, torch_arguments

from their_conv import conv2d, conv2d_fp16_sum, conv2d_half_kernel, conv2d_no_groups, conv2d_tf32

LAYERS = ['mb2ic64ih14oc64oh14kh3ph1n"deep 3x3"', 'g4mb2ic16ih12oc16oh12kh3ph1n"groups 4"',
          {"input": (2, 32, 9, 9), "weight": (16, 32, 1, 1), "stride": 2, "name": "strided 1x1"}]


@pytest.mark.convcheck(LAYERS, directions=("fprop", "dgrad"))
def test_conv2d(conv_check):
    conv_check({"fprop": conv2d, "dgrad": torch.nn.grad.conv2d_input})


@pytest.mark.convcheck(LAYERS[1:2])
def test_conv2d_tf32(conv_check):
    conv_check(conv2d_tf32)


@pytest.mark.convcheck(LAYERS[:1])
def test_conv2d_fp16_sum(conv_check):
    conv_check(conv2d_fp16_sum)


@pytest.mark.convcheck(LAYERS[:1], dtypes=("fp16",))
def test_conv2d_half_kernel(conv_check):
    conv_check(conv2d_half_kernel)


@pytest.mark.convcheck(LAYERS)
def test_conv2d_no_groups(conv_check):
    conv_check(conv2d_no_groups)


@pytest.mark.convcheck("alexnet", mb=1)
def test_each_alexnet_layer_called_by_hand(conv_problem):
    x = torch.randn(conv_problem.x_shape)
    w = torch.randn(conv_problem.w_shape)
    args = {"stride": conv_problem.stride, "padding": conv_problem.pad_pre, "groups": conv_problem.groups}
    assert_conv_close(conv2d(x, w, **args), x, w, **args)


@settings(max_examples=5, deadline=None)
@given(st.data())
def test_any_data(data):
    problem = data.draw(conv_problems(dims=(2,), symmetric=True))
    inputs = data.draw(conv_inputs(problem, fill="any"))
    x, w = torch.from_numpy(inputs.x), torch.from_numpy(inputs.w)
    assert_conv_close(conv2d(x, w, **torch_arguments(problem)), x, w, **torch_arguments(problem))

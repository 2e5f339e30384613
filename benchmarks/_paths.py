"""Which torch CPU path a benchmark runs, chosen on its command line and printed with its tables.

``--onednn off`` runs torch's slow kernels on any CPU (the path an AVX2 machine takes in
fp16/bf16): ``CONVCHECK_ONEDNN=off`` for convcheck's calls, and oneDNN switched off for the
benchmark's own torch calls (its correct computations)."""

from __future__ import annotations

import os


def add_option(ap) -> None:
    ap.add_argument("--onednn", choices=("default", "off"), default="default",
                    help="off: torch without oneDNN (its slow kernels) on any CPU")


def apply(args) -> str:
    """Switch the path the options ask for; returns the line that names it."""
    import torch

    if args.onednn == "off":
        os.environ["CONVCHECK_ONEDNN"] = "off"
        torch._C._set_mkldnn_enabled(False)
        torch._C._set_nnpack_enabled(False)
    return describe()


def describe() -> str:
    import torch

    fp16, bf16 = torch.ops.mkldnn._is_mkldnn_fp16_supported(), torch.ops.mkldnn._is_mkldnn_bf16_supported()
    switched = not torch._C._get_mkldnn_enabled() or os.environ.get("CONVCHECK_ONEDNN") == "off"
    half = ("slow kernels (oneDNN switched off)" if switched else
            ", ".join(f"{t}: {'oneDNN' if ok else 'slow kernels (no oneDNN ' + t + ' on this CPU)'}"
                      for t, ok in (("fp16", fp16), ("bf16", bf16))))
    from convcheck.check.environment import cpu_facts

    cpu = cpu_facts()
    return f"torch {torch.__version__}, CPU {cpu['cpu']} ({cpu.get('cpu (torch)', '?')}); half precision: {half}"

"""How an example that needs a GPU ends on a machine without one: what the GPU would have done next,
step by step, then one line saying what could not run and why, and exit 3 (every example's "cannot run
here"; 0 is a run that did everything, 1 a check that failed)."""

from __future__ import annotations


def stop_here(what: str, reason: str, problem=None) -> int:
    """Print the steps a GPU would take with ``problem``'s graph (where given), then in one line what could
    not run here and why (no GPU, no frontend, a GPU without TF32); return 3."""
    if problem is not None:
        from convcheck.check.backends.cudnn_graph import gpu_steps

        print("\nwhat a GPU does next, step by step:")
        print("\n".join(f"  {line}" for line in gpu_steps(problem).splitlines()))
    print(f"not run here: {what}: {reason}")
    return 3

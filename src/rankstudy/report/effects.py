"""How large a reproduced effect is beside the paper's: the effect ratio and the delta of relative improvement of
Breuer et al., "How to Measure the Reproducibility of System-oriented IR Experiments" (SIGIR 2020), made for
comparisons across collections (the repro_eval package computes them over run files):

    ER  = (mean of A − mean of B, reproduced) / (mean of A − mean of B, original)
    RI  = (mean of A − mean of B) / mean of B
    ΔRI = RI(original) − RI(reproduced)

for an advanced system A over a baseline B (the mean of the per-topic improvements is the difference of the means,
so the two means of each side are all they need). ER 1 is the paper's effect size, 0 no effect, negative the
opposite direction; ΔRI 0 is the paper's relative improvement, positive a smaller one, negative a larger one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Effect:
    """ER and ΔRI of a reproduced pair against the original one; None where undefined: ER without an effect in the
    original pair, ΔRI with a baseline of 0 (no relative improvement)."""

    effect_ratio: float | None
    delta_ri: float | None


def effect(original_a: float, original_b: float, reproduced_a: float, reproduced_b: float) -> Effect:
    """ER and ΔRI of the reproduced means of A and B against the original ones."""
    original, reproduced = original_a - original_b, reproduced_a - reproduced_b
    if original == 0:
        return Effect(None, None)
    if original_b == 0 or reproduced_b == 0:
        return Effect(reproduced / original, None)
    return Effect(reproduced / original, original / original_b - reproduced / reproduced_b)

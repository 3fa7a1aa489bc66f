"""A new synthetic task in one file: rotate, the source with its first symbol moved to the end.

    zoo train paper-base --set d_model=64 --set d_ff=256 --plugin examples/zoo_examples --task rotate \
        --train steps=300 --out runs/rotate

It draws its sequences like copy, reverse and sort (SyntheticTask does that, from the seed alone), so
only the target rule is new; it is scored by exact match, by the plugin's own edit accuracy, and by
token accuracy, and its floors (identity, majority) come with SyntheticTask too.
"""

from zoo.data import SyntheticTask, register_task


@register_task("rotate")
class Rotate(SyntheticTask):
    """Move the first symbol to the end: 5 9 7 -> 9 7 5. A copy that must count one position."""

    metrics = ("exact_match", "edit_accuracy", "token_accuracy")

    def target(self, source: tuple[int, ...]) -> list[int]:
        return [*source[1:], *source[:1]]

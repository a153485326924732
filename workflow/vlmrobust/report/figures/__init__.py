"""Figures: views of the tidy metrics as PNG and PDF (matplotlib, no pyplot state)."""

from vlmrobust.report.figures.corruption import (
    corruption_figure_names,
    corruption_figures,
    write_corruption_figures,
)
from vlmrobust.report.figures.distraction import (
    distraction_figure_names,
    distraction_figures,
    write_distraction_figures,
)

__all__ = [
    "corruption_figure_names",
    "corruption_figures",
    "distraction_figure_names",
    "distraction_figures",
    "write_corruption_figures",
    "write_distraction_figures",
]

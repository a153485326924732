"""Tables: views of the tidy metrics as CSV, Markdown and LaTeX."""

from vlmrobust.report.tables.corruption import (
    corruption_table_names,
    corruption_tables,
    write_corruption_tables,
)
from vlmrobust.report.tables.distraction import (
    distraction_table_names,
    distraction_tables,
    write_distraction_tables,
)
from vlmrobust.report.tables.render import Table, write_table

__all__ = [
    "Table",
    "corruption_table_names",
    "corruption_tables",
    "distraction_table_names",
    "distraction_tables",
    "write_distraction_tables",
    "write_corruption_tables",
    "write_table",
]

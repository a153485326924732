"""The report layer: views of the metrics as tables (csv, md, tex) and figures (png,
pdf, html). It reads metric files and study specifications; it computes no metric."""

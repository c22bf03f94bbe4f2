"""The communication roofline of Yasuda et al. (004): machine descriptions, measurement, the
benchmark of 004 §4.2, charts, and the placement of traced applications."""

"""Scripts that run the catalogue through check and compare and reproduce the claims."""

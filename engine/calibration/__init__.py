"""pass@k and the solvability band, reports, and the exports trainers consume."""

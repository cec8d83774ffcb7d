"""Writes lgssm_params.json: a stable, well-conditioned 10-D linear-Gaussian system.

A is tridiagonal (0.7 on the diagonal, 0.1 beside it: spectral radius < 0.9); Q and R are
positive definite (diagonally dominant); B mixes neighbouring states.
"""
import json

d = 10
A = [[0.7 if i == j else 0.1 if abs(i - j) == 1 else 0.0 for j in range(d)] for i in range(d)]
Q = [[0.5 if i == j else 0.1 if abs(i - j) == 1 else 0.0 for j in range(d)] for i in range(d)]
B = [[1.0 if i == j else 0.2 if abs(i - j) == 1 else 0.0 for j in range(d)] for i in range(d)]
R = [[0.8 if i == j else 0.0 for j in range(d)] for i in range(d)]
def matrix(m):
    return "[\n" + ",\n".join("    " + json.dumps(row) for row in m) + "\n  ]"

with open("lgssm_params.json", "w") as f:
    body = ",\n".join(f'  "{k}": {matrix(v)}' for k, v in {"A": A, "Q": Q, "B": B, "R": R}.items())
    f.write("{\n" + body + "\n}\n")

"""The design matrix of sbibm's bernoulli_glm task (Lueckmann et al. 2021) for
examples/bernoulli_glm.ssm: a stimulus of 100 bins of Gaussian white noise (sbibm's: NumPy's
RandomState(42), in float32), and the matrix X whose row i is (1, I[i], I[i-1], ..., I[i-8])
(zero before the stimulus starts), so that X theta is an offset plus the stimulus filtered by
theta[1:]. Xt is its transpose: the simulator's summary X' y (the spike count and the
spike-triggered sums) is a matrix-vector product, and the language has no transpose."""
import json

import numpy as np

stimulus = np.random.RandomState(42).randn(100).astype(np.float32).astype(float)
X = np.zeros((100, 10))
X[:, 0] = 1
for j in range(9):
    X[j:, j + 1] = stimulus[:100 - j]
with open("bernoulli_glm.json", "w") as out:
    json.dump({"X": X.tolist(), "Xt": X.T.tolist()}, out)
    out.write("\n")

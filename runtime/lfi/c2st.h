// The classifier two-sample test (C2ST) as sbibm computes it (Lueckmann et al. 2021): a classifier
// tries to tell draws of A from draws of B; its cross-validated accuracy is 0.5 when they come
// from the same law and 1 when it separates them. An MLP with two hidden layers of 10 x dimension
// ReLU units on the pooled, standardised draws, 5-fold stratified cross-validation without
// shuffling, Adam with sklearn's MLPClassifier's defaults. With it, the distance between the means
// and the maximum mean discrepancy. `ssmc c2st A.csv B.csv` runs it (the lfi module's second entry
// point, opened by the driver).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace ssm::lfi {

struct C2stOptions {
  int64_t folds = 5;
  int64_t max_epochs = 1000;
  uint64_t seed = 1;
  int threads = 1;
};

struct C2stResult {
  double accuracy = 0; // the mean over the folds
  std::vector<double> fold_accuracy;
  // The distance between the means in units of B's standard deviation per component (B is the
  // reference), and the unbiased squared MMD of a Gaussian kernel whose bandwidth is the median
  // distance between the pooled standardised draws.
  double mean_error = 0, mmd2 = 0;
  int64_t n = 0, dimension = 0;
};

// a, b: [n, d] float64 draws, the same n.
C2stResult c2st(const torch::Tensor& a, const torch::Tensor& b, const C2stOptions& options);

// `ssmc c2st A.csv B.csv [--json] ...` with argv[0] the command's name; the exit status.
int c2st_main(int argc, char** argv);

} // namespace ssm::lfi

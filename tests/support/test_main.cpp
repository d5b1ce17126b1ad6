// gtest main for xtrain_tests: one intra-op thread unless a test asks for more, so results do
// not depend on the machine, and no OpenMP spinning between concurrent ctest processes.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  at::set_num_threads(1);
  return RUN_ALL_TESTS();
}

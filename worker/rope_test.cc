// FusedRope's checks on what it is given (its kernel is compared with the
// course's RoPE on a GPU: CudaOptionsTest.FusedRopeIsTheCoursesRope).
#include "worker/rope.h"

#include <gtest/gtest.h>

#include <string>

namespace benchd::worker {
namespace {

std::string ErrorOf(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  try {
    FusedRope(x, cos, sin);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

TEST(FusedRopeTest, RefusesWhatItCannotTakeAndSaysWhatItExpected) {
  const auto table = torch::zeros({8, 4});
  EXPECT_NE(
      ErrorOf(torch::zeros({2, 8, 8}), table, table).find("x must be [B, H, T, D] with even D"),
      std::string::npos);
  EXPECT_NE(ErrorOf(torch::zeros({1, 2, 8, 7}), table, table).find("with even D"),
            std::string::npos);
  EXPECT_NE(ErrorOf(torch::zeros({1, 2, 8, 8}), torch::zeros({8, 3}), table)
                .find("cos and sin must be contiguous float32 [T, D/2] = [8, 4]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(torch::zeros({1, 2, 8, 8}), table.to(at::kDouble), table).find("float32"),
            std::string::npos);
  // Right shapes on a CPU: the kernel is CUDA's (the model keeps the course's ops there).
  const std::string cpu = ErrorOf(torch::zeros({1, 2, 8, 8}), table, table);
  EXPECT_TRUE(cpu.find("must be on one CUDA device") != std::string::npos ||
              cpu.find("this build has no CUDA") != std::string::npos)
      << cpu;
}

}  // namespace
}  // namespace benchd::worker

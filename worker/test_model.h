// Test helper: a preset's ModelConfig, resolved as the daemon resolves it.
#ifndef BENCHD_WORKER_TEST_MODEL_H_
#define BENCHD_WORKER_TEST_MODEL_H_

#include <gtest/gtest.h>

#include <string>

#include "common/model_config.h"

namespace benchd::worker::testing {

inline v1::ModelConfig ResolvedPreset(const std::string& preset) {
  v1::ModelConfig in;
  in.set_preset(preset);
  auto out = ResolveModelConfig(in);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : in;
}

}  // namespace benchd::worker::testing

#endif  // BENCHD_WORKER_TEST_MODEL_H_

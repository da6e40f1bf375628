// Fashion-MNIST in tests: the example projects name Debian's copy
// (/usr/share/datasets/fashion-mnist); NETLOOM_FASHION_DIR, set by the build, is where
// this machine has it (a GPU machine may keep it elsewhere).
#pragma once

#include <filesystem>
#include <string>

#include "engine/proto/project.pb.h"

namespace netloom::testing {

inline bool haveFashion() {
  return std::filesystem::exists(std::string(NETLOOM_FASHION_DIR) + "/train-images-idx3-ubyte.gz");
}

// Points an IDX project's four files into NETLOOM_FASHION_DIR.
inline proto::Project withFashionDir(proto::Project p) {
  if (!p.data().has_idx()) return p;
  auto* idx = p.mutable_data()->mutable_idx();
  auto moved = [](const std::string& path) {
    return std::string(NETLOOM_FASHION_DIR) + "/" + std::filesystem::path(path).filename().string();
  };
  idx->set_train_images(moved(idx->train_images()));
  idx->set_train_labels(moved(idx->train_labels()));
  idx->set_test_images(moved(idx->test_images()));
  idx->set_test_labels(moved(idx->test_labels()));
  return p;
}

}  // namespace netloom::testing

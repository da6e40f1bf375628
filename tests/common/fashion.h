// Fashion-MNIST in tests: the example projects name Debian's copy
// (/usr/share/datasets/fashion-mnist); NETLOOM_FASHION_DIR, set by the build, is where
// this machine has it (a GPU machine may keep it elsewhere).
#pragma once

#include <filesystem>
#include <string>

#include "engine/io/project_file.h"
#include "engine/proto/project.pb.h"
#include "engine/train/trainer.h"

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

// projects/fashion-vit.nlproj on its first `train` and `test` samples, trained one
// step with its weights saved to `weights`; the project, or why it could not be.
inline Result<proto::Project> briefVit(const std::string& weights, int64_t train, int64_t test) {
  auto vit = loadProject(NETLOOM_SOURCE_DIR "/projects/fashion-vit.nlproj");
  if (!vit) return vit.error();
  proto::Project p = withFashionDir(*vit);
  p.mutable_data()->set_train_limit(train);
  p.mutable_data()->set_test_limit(test);
  TrainOptions o;
  o.maxSteps = 1;
  o.threads = 1;
  o.saveWeights = weights;
  auto trained = runTraining(p, o, [](const proto::TrainEvent&) {});
  if (!trained) return trained.error();
  return p;
}

}  // namespace netloom::testing

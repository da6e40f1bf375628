// Text generation from a trained language model: the project's model compiled to
// decode one token a step with a KV cache (CompileOptions::kvCache), so each new
// token costs attention over the positions so far, not the whole sequence again.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "engine/proto/project.pb.h"
#include "engine/util/status.h"

namespace netloom {

struct GenerateOptions {
  std::string prompt;
  std::string weights;     // a safetensors file (--save-weights) or a checkpoint folder
  std::string projectDir;  // relative data paths resolve against it
  int64_t maxTokens = 200;
  double temperature = 1.0;  // 0: always the likeliest token
  int topK = 0;              // 0: every token
  uint64_t seed = 1;
  // Set from another thread, ends the sampling after the token in progress.
  const std::atomic<bool>* stop = nullptr;
};

// One decoder: the compiled step and its caches, fed a token at a time.
class Decoder {
 public:
  static Result<Decoder> make(const proto::Project& project, const GenerateOptions& opts);
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;

  // Feeds `token` at the next position; returns the scores of the token after it.
  Result<std::vector<float>> step(int32_t token);
  int64_t position() const;
  int64_t capacity() const;  // positions the caches hold
  const std::vector<std::string>& vocab() const;
  bool bytes() const;  // a byte vocabulary

 private:
  struct Impl;
  explicit Decoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m;
};

// Samples a token from `scores` at `temperature` among the `topK` likeliest (0: all),
// drawing with `draw` in [0, 1); temperature 0 takes the likeliest.
int32_t sampleToken(const std::vector<float>& scores, double temperature, int topK, double draw);

// The prompt, then up to maxTokens sampled tokens (fewer where the caches fill),
// each passed to `onText` as it is sampled; returns the whole text.
Result<std::string> generateText(const proto::Project& project, const GenerateOptions& opts,
                                 const std::function<void(const std::string&)>& onText = {});

}  // namespace netloom

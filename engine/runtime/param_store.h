// Persistent tensors of a model: parameters and optimizer state, by name. Every
// plan compiled for the model (training, evaluation, other batch sizes) binds to
// the same store, so they share weights without copies.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/io/safetensors.h"

namespace netloom {

class ParamStore {
 public:
  struct Entry {
    std::string name;
    TensorDesc desc;
    ValueKind kind = ValueKind::Param;
    std::vector<float> data;
    TensorRef ref() { return TensorRef{data.data(), desc.shape, desc.dtype, desc.device}; }
  };

  Entry* find(const std::string& name);
  // Creates a zero-filled entry; the caller initialises it. Returns null when the
  // name exists with a different shape or layout.
  Entry* create(const std::string& name, const TensorDesc& desc, ValueKind kind);

  // An entry's values in PyTorch's layout, whatever layout the store keeps it in
  // (the compiler may pack convolution weights and their optimizer state).
  static std::vector<float> read(const Entry& e);
  // Sets an entry from values in PyTorch's layout.
  static void write(Entry& e, const float* values);
  // An entry as a file holds it: named, in PyTorch's layout.
  static NamedTensor toNamed(const Entry& e);
  const std::vector<std::unique_ptr<Entry>>& entries() const { return m_entries; }
  int64_t parameterCount() const;

  // Parameters and buffers (not optimizer state), in creation order, for safetensors.
  std::vector<NamedTensor> exportParams() const;
  // Loads parameters by name: every tensor in the file must match a parameter of the
  // model in name, dtype and shape, and every parameter must be present. PyTorch's
  // BatchNorm counter `<bn>.num_batches_tracked` (an integer scalar) is accepted and
  // ignored.
  Status importParams(const std::vector<NamedTensor>& tensors, const std::string& file);

 private:
  std::vector<std::unique_ptr<Entry>> m_entries;
  std::map<std::string, Entry*> m_byName;
};

}  // namespace netloom

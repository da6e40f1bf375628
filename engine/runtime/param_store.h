// Persistent tensors of a model: parameters and optimizer state, by name, in the
// memory of the device the model trains on. Every plan compiled for the model
// (training, evaluation, other batch sizes) binds to the same store, so they share
// weights without copies.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph/graph.h"
#include "engine/io/safetensors.h"
#include "kernels/core/communicator.h"
#include "kernels/core/device.h"

namespace netloom {

class ParamStore {
 public:
  struct Entry {
    std::string name;
    TensorDesc desc;
    ValueKind kind = ValueKind::Param;
    DeviceBuffer buffer;  // numel floats on the store's device, in desc's layout
    // Under tensor parallelism: this rank's part of the whole tensor (desc is the part).
    ValueShard shard;
    // Under ZeRO: this rank's shard of a bucket's optimizer state.
    std::shared_ptr<const FlatShard> flat;
    int64_t numel() const { return netloom::numel(desc.shape); }
    float* data() const { return buffer.f32(); }
    TensorRef ref() const { return TensorRef{buffer.data(), desc.shape, desc.dtype, desc.device}; }
  };

  // The store's tensors live on `device` (the CPU unless a plan runs elsewhere).
  explicit ParamStore(Device& device = cpuDevice()) : m_device(&device) {}
  Device& device() const { return *m_device; }

  Entry* find(const std::string& name);
  // Creates a zero-filled entry; the caller initialises it. Returns null when the
  // name exists with a different shape or layout; throws std::bad_alloc when the
  // device has no room (a compile ends with a refusal).
  Entry* create(const std::string& name, const TensorDesc& desc, ValueKind kind);

  // An entry's values in PyTorch's layout, whatever layout the store keeps it in
  // (the compiler may pack convolution weights and their optimizer state), on the host.
  static std::vector<float> read(const Entry& e);
  // Sets an entry from values in PyTorch's layout.
  static void write(Entry& e, const float* values);
  // The whole tensor's shape, and an entry set from the whole tensor's values (this
  // rank's part of them, under tensor parallelism).
  static const Shape& wholeShape(const Entry& e) {
    return e.shard.split() ? e.shard.full : e.desc.shape;
  }
  static void writeWhole(Entry& e, const float* whole);
  // The store with every split tensor whole, on the host: the parts gathered over
  // `parts`, the ranks they are split over, and ZeRO's state shards over `shards`,
  // the ranks that share them out, into each parameter's own state tensors (either
  // may be null: none). Every one of those ranks calls it.
  std::unique_ptr<ParamStore> gatherWhole(Communicator* parts, Communicator* shards) const;
  // Every rank of `stages` (a pipeline's) with the tensors of all of them, each rank
  // holding its own stage's; on the host. Every one of them calls it.
  std::unique_ptr<ParamStore> gatherStages(Communicator& stages) const;
  // A ZeRO state entry's shard cut from its parameters' whole states, `find` giving
  // each by name (null where missing: the error names it).
  static Status writeFlat(Entry& e,
                          const std::function<const std::vector<float>*(const std::string&)>& find);
  // An entry's values as stored (in its own layout), on the host, and back.
  static std::vector<float> stored(const Entry& e);
  static void setStored(Entry& e, const std::vector<float>& values);
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
  // `stage`: the store holds one pipeline stage's parameters, and the file's others
  // are the other stages'.
  Status importParams(const std::vector<NamedTensor>& tensors, const std::string& file,
                      bool stage = false);

 private:
  Device* m_device;
  std::vector<std::unique_ptr<Entry>> m_entries;
  std::map<std::string, Entry*> m_byName;
};

}  // namespace netloom

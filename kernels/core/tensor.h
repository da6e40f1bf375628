// The vocabulary every layer shares: element types, devices, shapes and views of
// tensor memory. Kernels see only these, never the engine's graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace netloom {

enum class DType : uint8_t { F32, I32, I64, U8 };

size_t dtypeSize(DType t);
const char* dtypeName(DType t);  // safetensors spelling: F32, I32, I64, U8

enum class DeviceKind : uint8_t { Cpu, Cuda };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string toString() const;  // "cpu", "cuda:1"
};

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shapeToString(const Shape& s);  // "64×32×14×14"

// A typed view of memory owned elsewhere (an arena, a parameter store).
struct TensorRef {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::F32;
  Device device;

  int64_t numel() const { return netloom::numel(shape); }
  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
};

}  // namespace netloom

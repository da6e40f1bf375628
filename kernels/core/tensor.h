// The vocabulary every layer shares: element types, devices, shapes and views of
// tensor memory. Kernels see only these, never the engine's graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace netloom {

// BF16 is the top half of an F32 (bfloat16), held only inside a compiled step: where
// mixed precision gives a matrix op 16-bit inputs in 16-bit storage (Cast).
enum class DType : uint8_t { F32, I32, I64, U8, BF16 };

size_t dtypeSize(DType t);
const char* dtypeName(DType t);  // safetensors spelling: F32, I32, I64, U8, BF16

enum class DeviceKind : uint8_t { Cpu, Cuda };

struct DeviceId {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  bool operator==(const DeviceId&) const = default;
  std::string toString() const;  // "cpu", "cuda:1"
};

using Shape = std::vector<int64_t>;

// The element count; for shapes whose size has been checked (every shape the graph
// infers is), since it does not guard the product.
int64_t numel(const Shape& s);
// The element count, or nullopt when a dimension is negative or the product does not
// fit in int64: for shapes that come straight from users or files.
std::optional<int64_t> checkedNumel(const Shape& s);
// numel × the element size, with the same checks.
std::optional<int64_t> checkedBytes(const Shape& s, DType t);
std::string shapeToString(const Shape& s);  // "64×32×14×14"

// A typed view of memory owned elsewhere (an arena, a parameter store).
struct TensorRef {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::F32;
  DeviceId device;

  int64_t numel() const { return netloom::numel(shape); }
  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }
};

}  // namespace netloom

// Concat and Slice on the CPU: block copies along one axis.
#include <cstring>

#include "kernels/cpu/cpu_util.h"

namespace netloom::cpu {
namespace {

struct Blocks {
  int64_t outer = 1, inner = 1;  // elements before and after the axis
};

Blocks blocks(const Shape& s, int64_t axis) {
  Blocks b;
  for (int64_t i = 0; i < axis; ++i) b.outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i) b.inner *= s[i];
  return b;
}

int64_t positiveAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + int64_t(rank) : axis;
}

}  // namespace

void registerShape(KernelRegistry& r) {
  r.add("Concat", DeviceKind::Cpu, kernel("cpu.concat", [](const KernelSig& s) -> KernelFn {
          const Shape& y = s.out[0].shape;
          int64_t axis = positiveAxis(s.attrs->i("axis"), y.size());
          Blocks b = blocks(y, axis);
          std::vector<int64_t> widths;  // elements each input contributes per outer index
          for (const auto& t : s.in) widths.push_back(t.shape[axis] * b.inner);
          size_t es = dtypeSize(s.out[0].dtype);
          int64_t rowWidth = y[axis] * b.inner;
          return [b, widths, es, rowWidth](const KernelIO& io) {
            char* out = static_cast<char*>(io.out[0].data);
            for (int64_t o = 0; o < b.outer; ++o) {
              int64_t at = o * rowWidth;
              for (size_t k = 0; k < widths.size(); ++k) {
                const char* src = static_cast<const char*>(io.in[k].data) + o * widths[k] * es;
                std::memcpy(out + at * es, src, widths[k] * es);
                at += widths[k];
              }
            }
          };
        }));
  r.add("Slice", DeviceKind::Cpu, kernel("cpu.slice", [](const KernelSig& s) -> KernelFn {
          const Shape& x = s.in[0].shape;
          int64_t axis = s.attrs->i("axis");
          Blocks b = blocks(x, axis);
          int64_t start = s.attrs->i("start") * b.inner, len = s.attrs->i("length") * b.inner;
          int64_t rowWidth = x[axis] * b.inner;
          size_t es = dtypeSize(s.in[0].dtype);
          return [b, start, len, rowWidth, es](const KernelIO& io) {
            const char* in = static_cast<const char*>(io.in[0].data);
            char* out = static_cast<char*>(io.out[0].data);
            for (int64_t o = 0; o < b.outer; ++o)
              std::memcpy(out + o * len * es, in + (o * rowWidth + start) * es, len * es);
          };
        }));
}

}  // namespace netloom::cpu

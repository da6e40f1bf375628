// Concat, Slice and nearest-neighbour Upsample on CUDA. Concat and Slice are block
// copies along one axis (of any element type), moved in the widest unit the
// addresses and sizes allow; Upsample's gradient sums each block in the CPU's order,
// so its results are the CPU's bit for bit.
#include "kernels/core/geometry.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/grids.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/reduce.cuh"

namespace netloom::cuda {
namespace {

// Row r of `width` units: from src + r·srcPitch to dst + r·dstPitch.
template <class U>
__global__ void copyBlocksKernel(const U* src, int64_t srcPitch, U* dst, int64_t dstPitch,
                                 int64_t rows, int64_t width) {
  int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / width, j = i - r * width;
    dst[r * dstPitch + j] = src[r * srcPitch + j];
  }
}

template <class U>
void copyBlocksAs(const void* src, int64_t srcPitch, void* dst, int64_t dstPitch, int64_t rows,
                  int64_t width, cudaStream_t s) {
  int64_t u = sizeof(U), n = rows * (width / u);
  copyBlocksKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<const U*>(src), srcPitch / u,
                                                 static_cast<U*>(dst), dstPitch / u, rows,
                                                 width / u);
  NL_CHECK_LAUNCH(copyBlocksKernel);
}

// `rows` blocks of `width` bytes, one every srcPitch bytes from src, to one every
// dstPitch bytes from dst.
void copyBlocks(const void* src, int64_t srcPitch, void* dst, int64_t dstPitch, int64_t rows,
                int64_t width, cudaStream_t s) {
  if (rows == 0 || width == 0) return;
  switch (copyUnit(
      {uint64_t(src), uint64_t(dst), uint64_t(srcPitch), uint64_t(dstPitch), uint64_t(width)})) {
    case 16: return copyBlocksAs<uint4>(src, srcPitch, dst, dstPitch, rows, width, s);
    case 8: return copyBlocksAs<uint2>(src, srcPitch, dst, dstPitch, rows, width, s);
    case 4: return copyBlocksAs<uint32_t>(src, srcPitch, dst, dstPitch, rows, width, s);
    case 2: return copyBlocksAs<uint16_t>(src, srcPitch, dst, dstPitch, rows, width, s);
    default: return copyBlocksAs<uint8_t>(src, srcPitch, dst, dstPitch, rows, width, s);
  }
}

// Elements before and after one axis.
struct Blocks {
  int64_t outer = 1, inner = 1;
  Blocks(const Shape& s, int64_t axis) {
    for (int64_t i = 0; i < axis; ++i) outer *= s[i];
    for (size_t i = size_t(axis) + 1; i < s.size(); ++i) inner *= s[i];
  }
};

KernelFn concat(const KernelSig& s) {
  const Shape& y = s.out[0].shape;
  int64_t axis = s.attrs->i("axis");
  if (axis < 0) axis += int64_t(y.size());
  Blocks b(y, axis);
  int64_t es = int64_t(dtypeSize(s.out[0].dtype));
  std::vector<int64_t> widths;  // bytes each input gives per outer index
  for (const TensorDesc& t : s.in) widths.push_back(t.shape[size_t(axis)] * b.inner * es);
  int64_t row = y[size_t(axis)] * b.inner * es;
  cudaStream_t st = streamOf(s);
  return [b, widths, row, st](const KernelIO& io) {
    auto* out = static_cast<char*>(io.out[0].data);
    int64_t at = 0;
    for (size_t k = 0; k < widths.size(); ++k) {
      copyBlocks(io.in[k].data, widths[k], out + at, row, b.outer, widths[k], st);
      at += widths[k];
    }
  };
}

KernelFn slice(const KernelSig& s) {
  const Shape& x = s.in[0].shape;
  int64_t axis = s.attrs->i("axis");
  Blocks b(x, axis);
  int64_t es = int64_t(dtypeSize(s.in[0].dtype));
  int64_t start = s.attrs->i("start") * b.inner * es, len = s.attrs->i("length") * b.inner * es;
  int64_t row = x[size_t(axis)] * b.inner * es;
  cudaStream_t st = streamOf(s);
  return [b, start, len, row, st](const KernelIO& io) {
    copyBlocks(static_cast<const char*>(io.in[0].data) + start, row, io.out[0].data, len, b.outer,
               len, st);
  };
}

// N·C·H input rows of iw elements; each becomes sh output rows of iw·sw.
struct UpsampleDims {
  int64_t rows, iw, sh = 1, sw = 1;
  UpsampleDims(const KernelSig& s, int xIndex) {
    const Shape& x = s.in[size_t(xIndex)].shape;
    rows = x[0] * x[1] * x[2], iw = x[3];
    pair2d(*s.attrs, "scale_factor", 2, sh, sw);
  }
};

__global__ void upsampleKernel(const float* x, float* y, int64_t n, UpsampleDims d) {
  int64_t ow = d.iw * d.sw;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t row = o / ow, col = o - row * ow;
    y[o] = x[row / d.sh * d.iw + col / d.sw];
  }
}

// dx[r][j]: the sh × sw block of dy, rows outer and columns inner from 0.f, as the CPU
// adds it.
__global__ void upsampleGradKernel(const float* dy, float* dx, int64_t n, UpsampleDims d) {
  int64_t ow = d.iw * d.sw;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / d.iw, j = i - r * d.iw;
    float acc = 0.f;
    for (int64_t a = 0; a < d.sh; ++a) {
      const float* block = dy + (r * d.sh + a) * ow + j * d.sw;
      for (int64_t k = 0; k < d.sw; ++k) acc += block[k];
    }
    dx[i] = acc;
  }
}

// `kernel` over the n elements of output 0, reading input 0; input `xIndex` has the
// forward input's shape.
template <class K>
KernelFn resample(const KernelSig& s, int xIndex, K kernel, const char* launch) {
  UpsampleDims d(s, xIndex);
  cudaStream_t st = streamOf(s);
  return [d, kernel, launch, st](const KernelIO& io) {
    int64_t n = io.out[0].numel();
    if (n == 0) return;
    kernel<<<gridFor(n), kBlock, 0, st>>>(io.in[0].f32(), io.out[0].f32(), n, d);
    check(cudaGetLastError(), launch);
  };
}

}  // namespace

void registerShape(KernelRegistry& r) {
  r.add("Concat", DeviceKind::Cuda, plainKernel("cuda.concat", concat));
  r.add("Slice", DeviceKind::Cuda, plainKernel("cuda.slice", slice));
  r.add("Upsample", DeviceKind::Cuda, plainKernel("cuda.upsample_nearest", [](const KernelSig& s) {
          return resample(s, 0, upsampleKernel, "launch of upsampleKernel");
        }));
  r.add("UpsampleGrad", DeviceKind::Cuda,
        plainKernel("cuda.upsample_nearest_grad", [](const KernelSig& s) {
          return resample(s, 1, upsampleGradKernel, "launch of upsampleGradKernel");
        }));
}

}  // namespace netloom::cuda

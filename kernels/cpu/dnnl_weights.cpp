// Packed convolution weights: naming the layout a oneDNN primitive prefers so the
// compiler can store a parameter in it, and rebuilding the memory descriptor from
// that name. A name is a oneDNN format tag plus what the tensor's PyTorch shape
// does not say: whether the weight belongs to a transposed convolution and its
// group count.
#include <oneapi/dnnl/dnnl_debug.h>

#include <cstdlib>
#include <cstring>
#include <map>

#include "kernels/cpu/dnnl_util.h"

namespace netloom::cpu {
namespace {

using tag = dnnl::memory::format_tag;

// Every format tag by name, built once.
const std::map<std::string, dnnl_format_tag_t>& tagsByName() {
  static const std::map<std::string, dnnl_format_tag_t> table = [] {
    std::map<std::string, dnnl_format_tag_t> t;
    for (int k = 1; k < int(dnnl_format_tag_last); ++k) {
      auto ft = dnnl_format_tag_t(k);
      t.emplace(dnnl_fmt_tag2str(ft), ft);
    }
    return t;
  }();
  return table;
}

constexpr const char* kDeconv = ";deconv";
constexpr const char* kGroups = ";g=";

}  // namespace

WeightGeometry weightGeometry(const Shape& shape, int64_t groups, bool transposed) {
  WeightGeometry g;
  g.transposed = transposed;
  g.groups = groups;
  int64_t o = transposed ? shape[1] * groups : shape[0];
  int64_t i = transposed ? shape[0] : shape[1] * groups;
  if (groups == 1) {
    g.dims = {o, i, shape[2], shape[3]};
    g.plain = dnnl::memory::desc(g.dims, dnnl::memory::data_type::f32,
                                 transposed ? tag::iohw : tag::oihw);
  } else {
    g.dims = {groups, o / groups, i / groups, shape[2], shape[3]};
    g.plain = dnnl::memory::desc(g.dims, dnnl::memory::data_type::f32,
                                 transposed ? tag::giohw : tag::goihw);
  }
  return g;
}

std::string packedFormat(const WeightGeometry& g, const dnnl::memory::desc& md) {
  if (md == g.plain || md.get_size() != g.plain.get_size()) return {};
  dnnl_memory_desc_t probe;
  const dnnl::memory::dims& d = g.dims;
  for (const auto& [name, ft] : tagsByName()) {
    if (dnnl_memory_desc_init_by_tag(&probe, int(d.size()), d.data(), dnnl_f32, ft) != dnnl_success)
      continue;
    if (!dnnl_memory_desc_equal(&probe, &md.data)) continue;
    std::string f = name;
    if (g.transposed) f += kDeconv;
    if (g.groups > 1) f += kGroups + std::to_string(g.groups);
    return f;
  }
  return {};
}

bool packedDesc(const TensorDesc& d, WeightGeometry& g, dnnl::memory::desc& md) {
  if (d.layout != Layout::Packed || d.shape.size() != 4) return false;
  std::string f = d.format;
  int64_t groups = 1;
  if (size_t at = f.find(kGroups); at != std::string::npos) {
    groups = std::atoll(f.c_str() + at + std::strlen(kGroups));
    f.erase(at);
  }
  bool transposed = false;
  if (size_t at = f.find(kDeconv); at != std::string::npos) {
    transposed = true;
    f.erase(at);
  }
  auto it = tagsByName().find(f);
  if (it == tagsByName().end() || groups < 1) return false;
  g = weightGeometry(d.shape, groups, transposed);
  dnnl_memory_desc_t c;
  if (dnnl_memory_desc_init_by_tag(&c, int(g.dims.size()), g.dims.data(), dnnl_f32, it->second) !=
      dnnl_success)
    return false;
  md = dnnl::memory::desc(c);
  return md.get_size() == g.plain.get_size();
}

}  // namespace netloom::cpu

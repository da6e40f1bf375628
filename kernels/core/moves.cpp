#include "kernels/core/moves.h"

#include <cstring>

#include "kernels/core/shard.h"

namespace netloom {

void Moves::copy(void* dst, const void* src, int64_t bytes) const {
  if (bytes <= 0 || dst == src) return;
  if (m_device)
    m_device->copyWithin(dst, src, bytes);
  else
    std::memmove(dst, src, size_t(bytes));
}

void Moves::zero(void* dst, int64_t bytes) const {
  if (bytes <= 0) return;
  if (m_device)
    m_device->fill(dst, 0, bytes);
  else
    std::memset(dst, 0, size_t(bytes));
}

void Moves::takePart(const void* whole, const Shape& shape, int axis, int index, int parts,
                     void* part, size_t elemBytes) const {
  if (!m_device) return netloom::takePart(whole, shape, axis, index, parts, part, elemBytes);
  const PartRuns p(shape, axis, index, parts, elemBytes);
  m_device->copyRows(part, p.run, static_cast<const char*>(whole) + p.offset, p.stride, p.run,
                     p.outer);
}

void Moves::putPart(const void* part, const Shape& shape, int axis, int index, int parts,
                    void* whole, size_t elemBytes) const {
  if (!m_device) return netloom::putPart(part, shape, axis, index, parts, whole, elemBytes);
  const PartRuns p(shape, axis, index, parts, elemBytes);
  m_device->copyRows(static_cast<char*>(whole) + p.offset, p.stride, part, p.run, p.run, p.outer);
}

std::shared_ptr<char> Moves::scratch(int64_t bytes) const {
  bytes = std::max<int64_t>(bytes, 1);
  if (!m_device)
    return std::shared_ptr<char>(new char[size_t(bytes)], std::default_delete<char[]>());
  Device* device = m_device;
  char* p = static_cast<char*>(device->allocate(bytes));
  if (!p) return nullptr;
  return std::shared_ptr<char>(p, [device](char* q) { device->release(q); });
}

std::string Moves::declines(Communicator* comm, const std::string& groupName) const {
  if (!comm) return "the run has no " + groupName;
  if (!speaker(comm)) return comm->describe() + " moves host memory only";
  return {};
}

}  // namespace netloom

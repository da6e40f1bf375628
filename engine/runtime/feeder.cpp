#include "engine/runtime/feeder.h"

#include <algorithm>
#include <new>

namespace netloom {

namespace {

// The byte offsets of a staged batch's parts: x, x as token ids (text), int32 labels,
// float labels.
struct Parts {
  int64_t x, ids, labels, floats, total;
};

Parts partsOf(int64_t size, int64_t features, int64_t labels, bool ids) {
  auto align = [](int64_t b) { return (b + 255) / 256 * 256; };
  Parts p;
  p.x = 0;
  p.ids = align(size * features * int64_t(sizeof(float)));
  p.labels = p.ids + (ids ? align(size * features * int64_t(sizeof(int32_t))) : 0);
  p.floats = p.labels + align(labels * int64_t(sizeof(int32_t)));
  p.total = p.floats + align(labels * int64_t(sizeof(float)));
  return p;
}

int64_t bytesOf(const std::vector<float>& v) {
  return int64_t(v.size() * sizeof(float));
}

}  // namespace

void feed(const Program& prog, const Batch& b) {
  Device& d = *prog.device;
  if (const TensorRef* x = prog.input("x")) {
    if (x->dtype == DType::I32 && !b.ids.empty())
      d.copyToDevice(x->data, b.ids.data(), int64_t(b.ids.size() * sizeof(int32_t)));
    else
      d.copyToDevice(x->data, b.x.data(), bytesOf(b.x));
  }
  if (const TensorRef* l = prog.input("label")) {
    if (l->dtype == DType::I32)
      d.copyToDevice(l->data, b.labels.data(), int64_t(b.labels.size() * sizeof(int32_t)));
    else
      d.copyToDevice(l->data, b.labelFloats.data(), bytesOf(b.labelFloats));
  }
  d.synchronize();  // the batch may change as soon as this returns
}

BatchFeeder::~BatchFeeder() {
  // Uploads may still read the pinned buffers. A device error here (the run is being
  // unwound by an earlier one) must not end the process from a destructor.
  try {
    m_device.finishUploads();
    m_device.synchronize();
  } catch (const std::exception&) {
  }
  for (Slot& s : m_slots)
    if (s.host) m_device.releaseHost(s.host);
}

void BatchFeeder::reserve(Slot& slot, int64_t bytes) {
  if (slot.capacity >= bytes) return;
  m_device.finishUploads();
  m_device.synchronize();  // nothing reads the old buffers any more
  if (slot.host) m_device.releaseHost(slot.host);
  slot.host = m_device.allocateHost(bytes);
  slot.device = DeviceBuffer(m_device, bytes);
  if (!slot.host || !slot.device.ok()) throw std::bad_alloc();
  slot.capacity = bytes;
}

void BatchFeeder::stage(const Batch& b) {
  if (m_device.hostAddressable()) return;
  Slot& slot = m_slots[m_next];
  m_next ^= 1;
  slot.size = b.size;
  slot.features = b.size > 0 ? int64_t(b.x.size()) / b.size : 0;
  slot.labels = int64_t(b.labels.size());
  slot.ids = !b.ids.empty();
  Parts p = partsOf(slot.size, slot.features, slot.labels, slot.ids);
  reserve(slot, p.total);
  // The pinned buffer was last read by the upload two batches ago: wait for it.
  m_device.finishUploads();
  char* host = static_cast<char*>(slot.host);
  std::copy(b.x.begin(), b.x.end(), reinterpret_cast<float*>(host + p.x));
  std::copy(b.ids.begin(), b.ids.end(), reinterpret_cast<int32_t*>(host + p.ids));
  std::copy(b.labels.begin(), b.labels.end(), reinterpret_cast<int32_t*>(host + p.labels));
  std::copy(b.labelFloats.begin(), b.labelFloats.end(), reinterpret_cast<float*>(host + p.floats));
  m_device.upload(slot.device.data(), slot.host, p.total);
}

void BatchFeeder::bind(const Program& prog, const Batch& b) {
  if (m_device.hostAddressable()) {
    feed(prog, b);
    return;
  }
  const Slot& slot = m_slots[m_next ^ 1];  // the last staged
  Parts p = partsOf(slot.size, slot.features, slot.labels, slot.ids);
  const char* from = static_cast<const char*>(slot.device.data());
  m_device.waitUploads();
  if (const TensorRef* x = prog.input("x")) {
    const bool ids = x->dtype == DType::I32 && slot.ids;
    m_device.copyWithin(x->data, from + (ids ? p.ids : p.x), slot.size * slot.features * 4);
  }
  if (const TensorRef* l = prog.input("label")) {
    bool ints = l->dtype == DType::I32;
    m_device.copyWithin(l->data, from + (ints ? p.labels : p.floats), slot.labels * 4);
  }
  // The next upload into this slot waits for these copies, not for the whole step.
  m_device.uploadsAfterWork();
}

ScalarRing::ScalarRing(Device& device, int width, int steps, bool hostKeeps)
    : m_device(device),
      m_width(width),
      m_steps(device.hostAddressable() && !hostKeeps ? 1 : steps) {
  if (!device.hostAddressable()) {
    m_ring = DeviceBuffer(device, int64_t(m_width) * m_steps * int64_t(sizeof(float)));
    if (!m_ring.ok()) throw std::bad_alloc();
  }
}

void ScalarRing::record(const Program& prog, const std::vector<RingScalar>& values,
                        bool withGuard) {
  const int n = int(values.size());
  auto at = [&](int k) { return prog.refs[values[k].value].f32() + values[k].element; };
  if (m_device.hostAddressable()) {
    if (m_count == 0) m_host.clear();
    size_t first = m_host.size();
    m_host.resize(first + size_t(m_width), 1.f);
    for (int k = 0; k < n && k < m_width; ++k) m_host[first + size_t(k)] = *at(k);
  } else {
    float* slot = m_ring.f32() + m_count * m_width;
    for (int k = 0; k < n && k < m_width; ++k) m_device.copyWithin(slot + k, at(k), sizeof(float));
    if (n < m_width) {
      const float up = 1.f;
      if (withGuard && prog.guard.ok())
        m_device.copyWithin(slot + m_width - 1, prog.guard.data(), sizeof(float));
      else
        m_device.writeValues(slot + m_width - 1, &up, sizeof up);
    }
  }
  m_count += 1;
}

std::vector<float> ScalarRing::drain() {
  std::vector<float> out;
  if (m_device.hostAddressable()) {
    if (m_count > 0) out = m_host;
  } else if (m_count > 0) {
    out = readFloats(m_device, m_ring.data(), m_count * m_width);
  }
  m_count = 0;
  return out;
}

}  // namespace netloom

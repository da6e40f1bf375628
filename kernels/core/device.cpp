#include "kernels/core/device.h"

#include <map>
#include <mutex>

#include "kernels/core/functors.h"

namespace netloom {

DeviceBuffer::DeviceBuffer(Device& device, int64_t bytes) : m_device(&device), m_bytes(bytes) {
  m_data = device.allocate(bytes);
  if (!m_data) m_bytes = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    m_device = o.m_device;
    m_data = o.m_data;
    m_bytes = o.m_bytes;
    o.m_data = nullptr;
    o.m_bytes = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (m_data) m_device->release(m_data);
  m_data = nullptr;
  m_bytes = 0;
}

std::vector<float> readFloats(Device& device, const void* src, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  if (count == 0) return out;
  device.copyToHost(out.data(), src, count * int64_t(sizeof(float)));
  device.synchronize();
  return out;
}

std::vector<float> readAsFloats(Device& device, const void* src, DType type, int64_t count) {
  if (type != DType::BF16) return readFloats(device, src, count);
  std::vector<uint16_t> half(static_cast<size_t>(count));
  if (count > 0) {
    device.copyToHost(half.data(), src, count * int64_t(sizeof(uint16_t)));
    device.synchronize();
  }
  std::vector<float> out(half.size());
  for (size_t i = 0; i < half.size(); ++i) out[i] = fn::FromBf16{}(half[i]);
  return out;
}

void writeFloats(Device& device, void* dst, const float* values, int64_t count) {
  if (count == 0) return;
  device.copyToDevice(dst, values, count * int64_t(sizeof(float)));
  device.synchronize();  // `values` may go as soon as this returns
}

const Backend* findBackend(DeviceKind kind) {
  for (const Backend& b : backends())
    if (b.kind == kind) return &b;
  return nullptr;
}

std::string parseDeviceId(const std::string& text, DeviceId& out) {
  auto colon = text.find(':');
  std::string kind = text.substr(0, colon);
  const Backend* backend = nullptr;
  for (const Backend& b : backends())
    if (b.name == kind) backend = &b;
  if (!backend) {
    std::string names;
    for (const Backend& b : backends()) names += (names.empty() ? "" : ", ") + b.name;
    return "unknown device '" + text + "' (devices: " + names + ", e.g. cpu or cuda:0)";
  }
  out.kind = backend->kind;
  out.index = 0;
  if (colon == std::string::npos) return {};
  std::string index = text.substr(colon + 1);
  if (index.empty() || index.size() > 4 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    return "device '" + text + "': the index after ':' must be a number (" + kind + ":0)";
  out.index = std::stoi(index);
  if (out.kind == DeviceKind::Cpu && out.index != 0)
    return "device '" + text + "': there is one CPU device, cpu:0";
  return {};
}

Device* openDevice(const DeviceId& id, std::string& error) {
  static std::mutex mutex;
  static std::map<std::pair<DeviceKind, int>, std::unique_ptr<Device>> open;
  std::lock_guard lock(mutex);
  auto key = std::make_pair(id.kind, id.index);
  if (auto it = open.find(key); it != open.end()) return it->second.get();
  const Backend* backend = findBackend(id.kind);
  if (!backend) {
    error = id.toString() + " is not available: this build has no backend for it";
    return nullptr;
  }
  DeviceProbe probe = backend->probe();
  if (!probe.unavailable.empty()) {
    error = id.toString() + " is not available: " + probe.unavailable;
    return nullptr;
  }
  if (id.index < 0 || id.index >= int(probe.devices.size())) {
    error = id.toString() + " is not available: this machine has " +
            std::to_string(probe.devices.size()) + " " + backend->name + " device" +
            (probe.devices.size() == 1 ? "" : "s");
    return nullptr;
  }
  std::string why;
  std::unique_ptr<Device> device = backend->open(id.index, why);
  if (!device) {
    error = id.toString() + " is not available: " + why;
    return nullptr;
  }
  return (open[key] = std::move(device)).get();
}

Device& cpuDevice() {
  static Device* cpu = [] {
    std::string error;
    return openDevice(DeviceId{}, error);
  }();
  return *cpu;
}

}  // namespace netloom

#include "engine/runtime/devices.h"

#include <sstream>

#include "engine/util/memory_budget.h"

namespace netloom {

std::string listDevices() {
  std::ostringstream o;
  for (const Backend& b : backends()) {
    DeviceProbe probe = b.probe();
    if (!probe.unavailable.empty()) {
      o << b.name << ": none (" << probe.unavailable << ")\n";
      continue;
    }
    for (const DeviceInfo& d : probe.devices) {
      o << d.id.toString() << ": " << d.name << " — " << formatBytes(d.totalBytes) << " ("
        << formatBytes(d.freeBytes) << " free)";
      if (!d.detail.empty()) o << ", " << d.detail;
      o << "\n";
    }
  }
  return o.str();
}

std::vector<ListedDevice> parseDeviceList(const std::string& text) {
  std::vector<ListedDevice> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(": ");
    if (colon == std::string::npos || colon == 0) continue;
    ListedDevice d{line.substr(0, colon), line.substr(colon + 2)};
    DeviceId id;
    if (!parseDeviceId(d.id, id).empty() || d.label.rfind("none (", 0) == 0) continue;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace netloom

// This machine's devices as `netloom-train --list-devices` prints them, and the IDE
// and remote hosts read them back: one line per device, "<id>: <name> — ...", and
// one "<kind>: none (<why>)" line for a kind with no device.
#pragma once

#include <string>
#include <vector>

#include "kernels/core/device.h"

namespace netloom {

std::string listDevices();

// A device line read back (from a remote host's --list-devices).
struct ListedDevice {
  std::string id;     // "cpu", "cuda:0"
  std::string label;  // the rest of the line: name, memory, capability
};
// The devices in `text` (what listDevices() printed); the "none" lines are skipped.
std::vector<ListedDevice> parseDeviceList(const std::string& text);

}  // namespace netloom

#include "engine/util/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

#include "kernels/core/checked.h"

namespace netloom {

namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// MemAvailable: what the kernel says can be allocated without swapping, page cache
// included. Older kernels lack it; free pages are the nearest figure there.
int64_t machineAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return saturatingMul(kib, 1024);
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? saturatingMul(pages, size) : kUnlimited;
}

std::string readFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What the tightest memory.max on this process's cgroup v2 path leaves (Slurm jobs
// and containers are limited there, while MemAvailable shows the whole machine).
int64_t cgroupRemaining() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return kUnlimited;
  int64_t best = kUnlimited;
  while (true) {
    std::string dir = "/sys/fs/cgroup" + (path == "/" ? std::string() : path);
    std::string max = readFirstLine(dir + "/memory.max");
    std::string current = readFirstLine(dir + "/memory.current");
    if (!max.empty() && max != "max" && !current.empty()) {
      char* end = nullptr;
      long long m = std::strtoll(max.c_str(), &end, 10),
                c = std::strtoll(current.c_str(), &end, 10);
      if (m > 0 && c >= 0) best = std::min<int64_t>(best, m > c ? m - c : 0);
    }
    if (path.empty() || path == "/") break;
    auto slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

// RLIMIT_AS counts address space, not memory: what is left of it is the limit less
// this process's virtual size now.
int64_t addressSpaceRemaining() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return kUnlimited;
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0;
  in >> pages;
  int64_t used = saturatingMul(pages, sysconf(_SC_PAGESIZE));
  auto limit = r.rlim_cur > uint64_t(kUnlimited) ? kUnlimited : int64_t(r.rlim_cur);
  return limit > used ? limit - used : 0;
}

}  // namespace

std::shared_ptr<MemoryBudget> MemoryBudget::forThisProcess(int64_t userLimit,
                                                           const std::string& userLimitName) {
  int64_t limit = machineAvailable();
  std::string text = "this machine has " + formatBytes(limit) + " available";
  if (int64_t c = cgroupRemaining(); c < limit) {
    limit = c;
    text = "its cgroup's memory.max leaves this process " + formatBytes(c);
  }
  if (int64_t a = addressSpaceRemaining(); a < limit) {
    limit = a;
    text = "RLIMIT_AS leaves this process " + formatBytes(a) + " of address space";
  }
  if (userLimit > 0 && userLimit <= limit) {
    limit = userLimit;
    text = (userLimitName.empty() ? std::string("the memory limit") : userLimitName) + " is " +
           formatBytes(userLimit);
  }
  return std::make_shared<MemoryBudget>(limit, std::move(text));
}

std::shared_ptr<MemoryBudget> MemoryBudget::forDevice(Device& device) {
  constexpr int64_t kLibraryMargin = int64_t(512) << 20;
  DeviceInfo info = device.info();
  int64_t limit = info.freeBytes > kLibraryMargin ? info.freeBytes - kLibraryMargin : 0;
  return std::make_shared<MemoryBudget>(
      limit, device.id().toString() + " (" + info.name + ") has " + formatBytes(info.freeBytes) +
                 " free, of which " + formatBytes(kLibraryMargin) + " is kept for its libraries");
}

MemoryBudget::MemoryBudget(int64_t limitBytes, std::string limitText)
    : m_limit(limitBytes), m_limitText(std::move(limitText)) {}

Status MemoryBudget::check(const std::string& what, int64_t bytes) const {
  int64_t total = saturatingAdd(m_planned, bytes);
  if (bytes >= 0 && total <= m_limit) return {};
  std::string msg = what + " needs " + formatBytes(bytes);
  if (m_planned > 0)
    msg += "; with the " + formatBytes(m_planned) + " planned before it, the run needs " +
           formatBytes(total);
  return makeRefusal(msg + ", but " + m_limitText);
}

Status MemoryBudget::reserve(const std::string& what, int64_t bytes) {
  if (Status s = check(what, bytes); !s) return s;
  m_planned += bytes;
  return {};
}

void MemoryBudget::release(int64_t bytes) {
  m_planned = bytes >= m_planned ? 0 : m_planned - bytes;
}

std::shared_ptr<MemoryBudget> budgetOrThisProcess(const std::shared_ptr<MemoryBudget>& budget) {
  return budget ? budget : MemoryBudget::forThisProcess();
}

std::string formatBytes(int64_t bytes) {
  if (bytes == kUnlimited) return "more than 8 EiB";
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes) / 1024;
  int k = 0;
  while (v >= 1024 && k < 5) v /= 1024, ++k;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[k]);
  return buf;
}

Result<int64_t> parseByteSize(const std::string& text, const std::string& field) {
  auto bad = [&] {
    return makeError(field + " '" + text +
                     "' is not a size: give bytes, or a number with K, M, G or T (as in 512M, 4G)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit((unsigned char)text[i]) || text[i] == '.')) ++i;
  if (i == 0) return bad();
  std::string number = text.substr(0, i), unit = text.substr(i);
  std::istringstream in(number);
  double value = 0;
  if (!(in >> value) || !in.eof() || !std::isfinite(value)) return bad();
  for (char& c : unit) c = char(std::toupper((unsigned char)c));
  int shift = 0;
  if (!unit.empty() && unit != "B") {
    std::string_view prefixes = "KMGTP";
    size_t p = prefixes.find(unit[0]);
    std::string rest = unit.substr(1);
    if (p == std::string_view::npos || !(rest.empty() || rest == "B" || rest == "IB")) return bad();
    shift = 10 * int(p + 1);
  }
  double bytes = std::ldexp(value, shift);
  if (bytes < 1) return makeError(field + " '" + text + "' must be at least one byte");
  if (bytes >= 9.2e18) return makeError(field + " '" + text + "' is larger than 8 EiB");
  return int64_t(bytes);
}

}  // namespace netloom

#include "engine/runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "kernels/core/checked.h"

namespace netloom {

namespace {

// "  123.4   61%" or blanks where the kernel does no counted arithmetic.
std::string rate(double flops, double seconds, double peak) {
  char cell[64];
  if (flops <= 0 || seconds <= 0) {
    std::snprintf(cell, sizeof cell, "%9s %7s", "-", "-");
  } else {
    double g = flops / seconds / 1e9;
    if (peak > 0)
      std::snprintf(cell, sizeof cell, "%9.1f %6.0f%%", g, 100.0 * g / peak);
    else
      std::snprintf(cell, sizeof cell, "%9.1f %7s", g, "-");
  }
  return cell;
}

}  // namespace

int64_t programFlops(const Program& p) {
  int64_t total = 0;
  for (const PlanStep& s : p.steps) total = saturatingAdd(total, s.flops);
  return total;
}

std::string profileTable(const std::vector<ProfiledProgram>& runs, double peakGflops,
                         const std::string& peakProbe) {
  struct Row {
    double seconds = 0, flops = 0;
    int64_t launches = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> byOp;  // (op, kernel)
  std::map<std::string, Row> byNode;                        // user node (backward folded in)
  double total = 0, totalFlops = 0;
  int64_t steps = 0;
  for (const ProfiledProgram& r : runs) {
    steps += r.runs;
    for (size_t i = 0; i < r.seconds.size(); ++i) {
      const PlanStep& s = r.program->steps[i];
      const Node& n = r.program->graph.nodes[s.node];
      double flops = double(s.flops) * double(r.runs);
      Row& row = byOp[{n.op->name, s.kernel}];
      row.seconds += r.seconds[i];
      row.flops += flops;
      row.launches += r.runs;
      Row& node = byNode[n.backward ? n.origin : n.name];
      node.seconds += r.seconds[i];
      node.flops += flops;
      total += r.seconds[i];
      totalFlops += flops;
    }
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Row>> rows(byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "profile: %lld training steps, %.3f s in kernels (%.3f ms/step)\n",
                (long long)steps, total, steps ? 1e3 * total / double(steps) : 0.0);
  out += line;
  if (peakGflops > 0 && total > 0) {
    double g = totalFlops / total / 1e9;
    std::snprintf(line, sizeof line,
                  "peak: %.1f GFLOP/s (%s); the kernels together: %.1f GFLOP/s, %.0f%% of it\n",
                  peakGflops, peakProbe.c_str(), g, 100.0 * g / peakGflops);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-26s %-36s %10s %12s %7s %9s %7s\n", "op", "kernel",
                "launches", "total ms", "share", "GFLOP/s", "peak");
  out += line;
  for (const auto& [key, row] : rows) {
    std::snprintf(line, sizeof line, "%-26s %-36s %10lld %12.1f %6.1f%% %s\n", key.first.c_str(),
                  key.second.c_str(), (long long)row.launches, 1e3 * row.seconds,
                  total > 0 ? 100.0 * row.seconds / total : 0.0,
                  rate(row.flops, row.seconds, peakGflops).c_str());
    out += line;
  }
  std::vector<std::pair<std::string, Row>> nodes(byNode.begin(), byNode.end());
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  out += "costliest nodes (forward and backward):\n";
  for (size_t i = 0; i < nodes.size() && i < 8; ++i) {
    std::snprintf(line, sizeof line, "  %-30s %12.1f ms %6.1f%% %s\n", nodes[i].first.c_str(),
                  1e3 * nodes[i].second.seconds,
                  total > 0 ? 100.0 * nodes[i].second.seconds / total : 0.0,
                  rate(nodes[i].second.flops, nodes[i].second.seconds, peakGflops).c_str());
    out += line;
  }
  return out;
}

}  // namespace netloom

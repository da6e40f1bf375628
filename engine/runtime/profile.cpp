#include "engine/runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace netloom {

std::string profileTable(const std::vector<ProfiledProgram>& runs) {
  struct Row {
    double seconds = 0;
    int64_t launches = 0;
  };
  std::map<std::pair<std::string, std::string>, Row> byOp;  // (op, kernel)
  std::map<std::string, double> byNode;                     // user node (backward folded in)
  double total = 0;
  int64_t steps = 0;
  for (const ProfiledProgram& r : runs) {
    steps += r.runs;
    for (size_t i = 0; i < r.seconds.size(); ++i) {
      const PlanStep& s = r.program->steps[i];
      const Node& n = r.program->graph.nodes[s.node];
      Row& row = byOp[{n.op->name, s.kernel}];
      row.seconds += r.seconds[i];
      row.launches += r.runs;
      byNode[n.backward ? n.origin : n.name] += r.seconds[i];
      total += r.seconds[i];
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
  std::snprintf(line, sizeof line, "%-26s %-36s %10s %12s %7s\n", "op", "kernel", "launches",
                "total ms", "share");
  out += line;
  for (const auto& [key, row] : rows) {
    std::snprintf(line, sizeof line, "%-26s %-36s %10lld %12.1f %6.1f%%\n", key.first.c_str(),
                  key.second.c_str(), (long long)row.launches, 1e3 * row.seconds,
                  total > 0 ? 100.0 * row.seconds / total : 0.0);
    out += line;
  }
  std::vector<std::pair<std::string, double>> nodes(byNode.begin(), byNode.end());
  std::sort(nodes.begin(), nodes.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  out += "costliest nodes (forward and backward):\n";
  for (size_t i = 0; i < nodes.size() && i < 8; ++i) {
    std::snprintf(line, sizeof line, "  %-30s %12.1f ms %6.1f%%\n", nodes[i].first.c_str(),
                  1e3 * nodes[i].second, total > 0 ? 100.0 * nodes[i].second / total : 0.0);
    out += line;
  }
  return out;
}

}  // namespace netloom

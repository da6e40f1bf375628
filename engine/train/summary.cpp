#include "engine/train/summary.h"

#include <cstdio>

#include "engine/graph/analyze.h"
#include "engine/graph/graph.h"
#include "kernels/core/checked.h"

namespace netloom {

Result<ModelSummary> summarizeModel(const proto::ModelDef& model, int64_t batch) {
  auto g = buildGraph(model, batch);
  if (!g) return g.error();
  ModelSummary s;
  s.batch = batch;
  for (const Node& n : g->nodes) {
    NodeSummary ns;
    ns.name = n.name;
    ns.op = n.op->name;
    ns.output = g->values[n.outputs[0]].desc.shape;
    NodeCost cost;
    measureNode(*g, n, cost);
    ns.parameters = cost.params;
    ns.flops = cost.flops;
    ns.activationBytes = cost.activationBytes;
    s.buffers = saturatingAdd(s.buffers, cost.buffers);
    s.parameters = saturatingAdd(s.parameters, ns.parameters);
    s.flops = saturatingAdd(s.flops, ns.flops);
    s.activationBytes = saturatingAdd(s.activationBytes, ns.activationBytes);
    s.nodes.push_back(std::move(ns));
  }
  return s;
}

namespace {
std::string grouped(int64_t v) {
  std::string d = std::to_string(v), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}
std::string human(double v, const char* unit) {
  const char* prefixes[] = {"", "K", "M", "G", "T"};
  int k = 0;
  while (v >= 1000 && k < 4) v /= 1000, ++k;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s%s", v, prefixes[k], unit);
  return buf;
}
}  // namespace

std::string ModelSummary::table() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-24s %-20s %-20s %14s %14s %12s\n", "node", "op", "output",
                "params", "FLOPs", "activations");
  out += line;
  out += std::string(109, '-') + "\n";
  for (const NodeSummary& n : nodes) {
    std::snprintf(line, sizeof line, "%-24s %-20s %-20s %14s %14s %12s\n", n.name.c_str(),
                  n.op.c_str(), shapeToString(n.output).c_str(), grouped(n.parameters).c_str(),
                  grouped(n.flops).c_str(), human(double(n.activationBytes), "B").c_str());
    out += line;
  }
  out += std::string(109, '-') + "\n";
  std::snprintf(line, sizeof line,
                "batch %lld: %s parameters (%s), %s buffer elements, forward %s, "
                "activations %s\n",
                (long long)batch, grouped(parameters).c_str(),
                human(double(parameters) * 4, "B").c_str(), grouped(buffers).c_str(),
                human(double(flops), "FLOPs").c_str(), human(double(activationBytes), "B").c_str());
  out += line;
  return out;
}

}  // namespace netloom

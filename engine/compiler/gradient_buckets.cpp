// Data parallelism: the gradients summed across the ranks in buckets, each started as
// its last gradient is written.
#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"

namespace netloom {

std::vector<GradientBucket> insertGradientBuckets(Graph& g, const std::map<ValueId, ValueId>& grads,
                                                  int64_t firstBytes, int64_t bytes,
                                                  const std::string& group) {
  std::map<ValueId, ValueId> paramOf;  // gradient -> parameter
  for (const auto& [param, grad] : grads) paramOf[grad] = param;
  // The gradients in the order they are written, each with its writer.
  std::vector<std::pair<ValueId, size_t>> written;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].outputs)
      if (paramOf.count(v)) written.push_back({v, i});
  std::vector<GradientBucket> buckets;
  std::vector<std::vector<ValueId>> members;
  std::map<size_t, std::vector<size_t>> startsAfter;  // node -> buckets whose last it writes
  int64_t cap = firstBytes;
  for (size_t k = 0; k < written.size(); ++k) {
    ValueId v = written[k].first;
    int64_t size = bytesOf(g.values[v].desc);
    if (buckets.empty() || (buckets.back().bytes > 0 && buckets.back().bytes + size > cap)) {
      if (!buckets.empty()) cap = bytes;
      buckets.push_back({});
      members.push_back({});
    }
    buckets.back().params.push_back(g.values[paramOf[v]].name);
    buckets.back().bytes += size;
    members.back().push_back(v);
    bool last = k + 1 == written.size();
    if (!last) {
      ValueId next = written[k + 1].first;
      int64_t nextSize = bytesOf(g.values[next].desc);
      last = buckets.back().bytes + nextSize > cap;
    }
    if (last) startsAfter[written[k].second].push_back(buckets.size() - 1);
  }
  for (size_t b = 0; b < buckets.size(); ++b)
    buckets[b].name = std::string(group == "all" ? "" : group + " ") + "bucket " +
                      std::to_string(b) + " (" + buckets[b].params.front() +
                      (buckets[b].params.size() > 1 ? " .. " + buckets[b].params.back() : "") + ")";
  const OpDef* start = &internal_ops::bucketStart();
  const OpDef* wait = &internal_ops::bucketWait();
  auto bucketNode = [&](const OpDef* op, size_t b) {
    Node n;
    n.name = buckets[b].name + (op == start ? "/start" : "/wait");
    n.op = op;
    n.backward = true;
    n.origin = buckets[b].params.front();
    n.attrs.set("bucket", buckets[b].name);
    n.attrs.set("group", group);
    n.inputs = members[b];
    g.addNode(std::move(n));  // no outputs: inference cannot fail
  };
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  for (size_t i = 0; i < old.size(); ++i) {
    for (ValueId v : old[i].outputs) g.values[v].producer = NodeId(g.nodes.size());
    g.nodes.push_back(std::move(old[i]));
    for (size_t b : startsAfter[i]) bucketNode(start, b);
  }
  for (size_t b = 0; b < buckets.size(); ++b) bucketNode(wait, b);
  return buckets;
}

}  // namespace netloom

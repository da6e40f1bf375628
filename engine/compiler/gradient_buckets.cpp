// Data parallelism: the gradients summed across the ranks in buckets, each started as
// its last gradient is written; under ZeRO-2 each bucket summed into one shard per
// rank there instead.
#include "engine/compiler/passes.h"
#include "engine/ops/internal_ops.h"

namespace netloom {

std::vector<GradientBucket> insertGradientBuckets(Graph& g, const std::map<ValueId, ValueId>& grads,
                                                  int64_t firstBytes, int64_t bytes,
                                                  const std::string& group, int zeroParts) {
  std::map<ValueId, ValueId> paramOf;  // gradient -> parameter
  for (const auto& [param, grad] : grads) paramOf[grad] = param;
  // The gradients in the order they are written, each with its writer.
  std::vector<std::pair<ValueId, size_t>> written;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].outputs)
      if (paramOf.count(v)) written.push_back({v, i});
  std::vector<GradientBucket> buckets;
  std::map<size_t, std::vector<size_t>> startsAfter;  // node -> buckets whose last it writes
  int64_t cap = firstBytes;
  for (size_t k = 0; k < written.size(); ++k) {
    ValueId v = written[k].first;
    int64_t size = bytesOf(g.values[v].desc);
    if (buckets.empty() || (buckets.back().bytes > 0 && buckets.back().bytes + size > cap)) {
      if (!buckets.empty()) cap = bytes;
      buckets.push_back({});
    }
    GradientBucket& b = buckets.back();
    b.params.push_back(g.values[paramOf[v]].name);
    b.bytes += size;
    b.grads.push_back(v);
    b.paramValues.push_back(paramOf[v]);
    bool last = k + 1 == written.size();
    if (!last) last = b.bytes + bytesOf(g.values[written[k + 1].first].desc) > cap;
    if (last) startsAfter[written[k].second].push_back(buckets.size() - 1);
  }
  for (size_t b = 0; b < buckets.size(); ++b)
    buckets[b].name = std::string(group == "all" ? "" : group + " ") + "bucket " +
                      std::to_string(b) + " (" + buckets[b].params.front() +
                      (buckets[b].params.size() > 1 ? " .. " + buckets[b].params.back() : "") + ")";
  auto bucketNode = [&](const OpDef* op, size_t b, const char* suffix) {
    Node n;
    n.name = buckets[b].name + suffix;
    n.op = op;
    n.backward = true;
    n.origin = buckets[b].params.front();
    n.inputs = buckets[b].grads;
    if (zeroParts > 0) {
      n.attrs.set("parts", int64_t(zeroParts));
      Value shard;
      shard.name = buckets[b].name + "/shard";
      shard.producer = NodeId(g.nodes.size());
      buckets[b].shard = g.addValue(std::move(shard));
      n.outputs = {buckets[b].shard};
    } else {
      n.attrs.set("bucket", buckets[b].name);
      n.attrs.set("group", group);
    }
    g.nodes.push_back(std::move(n));
    if (zeroParts > 0) (void)inferNode(g, NodeId(g.nodes.size() - 1));  // the shard's size
  };
  std::vector<Node> old = std::move(g.nodes);
  g.nodes.clear();
  for (size_t i = 0; i < old.size(); ++i) {
    for (ValueId v : old[i].outputs) g.values[v].producer = NodeId(g.nodes.size());
    g.nodes.push_back(std::move(old[i]));
    for (size_t b : startsAfter[i])
      zeroParts > 0 ? bucketNode(&internal_ops::zeroScatter(), b, "/scatter")
                    : bucketNode(&internal_ops::bucketStart(), b, "/start");
  }
  if (zeroParts == 0)
    for (size_t b = 0; b < buckets.size(); ++b) bucketNode(&internal_ops::bucketWait(), b, "/wait");
  return buckets;
}

}  // namespace netloom

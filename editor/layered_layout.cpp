#include "editor/layered_layout.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace netloom::editor {

namespace {

using Adjacency = std::vector<std::vector<int>>;

// The longest wire (in ranks crossed) that gets dummies.
constexpr int kMaxDummySpan = 64;

// Marks the edges that close a cycle (those into a node still on the depth-first
// path), searching from nodes in index order; the rest form a DAG.
std::vector<bool> backEdges(int n, const std::vector<std::pair<int, int>>& edges,
                            const Adjacency& out) {
  std::vector<bool> back(edges.size());
  std::vector<char> state(n, 0);  // 0 unseen, 1 on the path, 2 done
  std::vector<std::pair<int, size_t>> stack;
  for (int root = 0; root < n; ++root) {
    if (state[root]) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      if (next == out[v].size()) {
        state[v] = 2;
        stack.pop_back();
        continue;
      }
      int e = out[v][next++];
      int w = edges[e].second;
      if (state[w] == 1)
        back[e] = true;
      else if (state[w] == 0)
        state[w] = 1, stack.push_back({w, 0});
    }
  }
  return back;
}

// Minimises sum (y_i - want_i)^2 subject to y_i - y_{i-1} >= gap_i: with offsets
// taken out it is an isotonic regression, solved by pooling adjacent violators.
std::vector<double> fitInOrder(const std::vector<double>& want, const std::vector<double>& gap) {
  size_t n = want.size();
  std::vector<double> offset(n, 0);
  for (size_t i = 1; i < n; ++i) offset[i] = offset[i - 1] + gap[i];
  struct Pool {
    double sum;
    int count;
    double mean() const { return sum / count; }
  };
  std::vector<Pool> pools;
  for (size_t i = 0; i < n; ++i) {
    pools.push_back({want[i] - offset[i], 1});
    while (pools.size() > 1 && pools[pools.size() - 2].mean() > pools.back().mean()) {
      pools[pools.size() - 2].sum += pools.back().sum;
      pools[pools.size() - 2].count += pools.back().count;
      pools.pop_back();
    }
  }
  std::vector<double> y(n);
  size_t i = 0;
  for (const Pool& p : pools)
    for (int k = 0; k < p.count; ++k, ++i) y[i] = p.mean() + offset[i];
  return y;
}

double median(std::vector<double>& v) {
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double hi = v[mid];
  if (v.size() % 2) return hi;
  return (*std::max_element(v.begin(), v.begin() + mid) + hi) / 2;
}

}  // namespace

std::vector<std::pair<double, double>> layeredPositions(
    const std::vector<LayeredBox>& boxes, const std::vector<std::pair<int, int>>& edges,
    const LayeredSpacing& spacing) {
  const int n = int(boxes.size());
  if (n == 0) return {};
  Adjacency out(n);
  for (size_t e = 0; e < edges.size(); ++e) {
    auto [a, b] = edges[e];
    if (a >= 0 && b >= 0 && a < n && b < n && a != b) out[a].push_back(int(e));
  }
  std::vector<bool> back = backEdges(n, edges, out);
  Adjacency succ(n), pred(n);
  for (int v = 0; v < n; ++v)
    for (int e : out[v])
      if (!back[e]) succ[v].push_back(edges[e].second), pred[edges[e].second].push_back(v);

  // Ranks: the longest path from a source; a source then moves up to just before
  // its first user, so that a label read at the end does not span the drawing.
  std::vector<int> indegree(n), topo;
  for (int v = 0; v < n; ++v) indegree[v] = int(pred[v].size());
  for (int v = 0; v < n; ++v)
    if (!indegree[v]) topo.push_back(v);
  for (size_t i = 0; i < topo.size(); ++i)
    for (int w : succ[topo[i]])
      if (--indegree[w] == 0) topo.push_back(w);
  std::vector<int> rank(n, 0);
  for (int v : topo)
    for (int w : succ[v]) rank[w] = std::max(rank[w], rank[v] + 1);
  for (int v : topo)
    if (pred[v].empty() && !succ[v].empty()) {
      int first = std::numeric_limits<int>::max();
      for (int w : succ[v]) first = std::min(first, rank[w]);
      rank[v] = first - 1;
    }

  // The layered graph: wires spanning ranks pass through one dummy per rank, as
  // long as the dummies stay few (a source read across thousands of ranks would
  // need thousands); longer wires do not take part in the ordering.
  std::vector<int> layerOf = rank;
  std::vector<double> height(n), order(n);
  for (int v = 0; v < n; ++v) height[v] = boxes[v].height;
  for (int i = 0; i < n; ++i) order[topo[i]] = i;
  Adjacency up(n), down(n);
  int64_t dummies = 0;
  const int64_t maxDummies = 4 * int64_t(n) + 1000;
  for (int v : topo)
    for (int w : succ[v]) {
      int span = rank[w] - rank[v] - 1;
      if (span > 0 && (span > kMaxDummySpan || dummies + span > maxDummies)) continue;
      dummies += std::max(span, 0);
      int from = v;
      for (int r = rank[v] + 1; r < rank[w]; ++r) {
        int d = int(layerOf.size());
        layerOf.push_back(r);
        height.push_back(0);
        order.push_back(order[v] + 0.5);
        up.emplace_back(1, from);
        down.emplace_back();
        down[from].push_back(d);
        from = d;
      }
      down[from].push_back(w);
      up[w].push_back(from);
    }
  const int total = int(layerOf.size());
  int ranks = *std::max_element(layerOf.begin(), layerOf.end()) + 1;
  std::vector<std::vector<int>> layers(ranks);
  for (int v = 0; v < total; ++v) layers[layerOf[v]].push_back(v);

  // Order within ranks: barycentre sweeps down and up, from topological order.
  std::vector<double> pos(total);
  auto sortLayer = [&](std::vector<int>& layer, const std::vector<double>& key) {
    std::stable_sort(layer.begin(), layer.end(), [&](int a, int b) { return key[a] < key[b]; });
    for (size_t i = 0; i < layer.size(); ++i) pos[layer[i]] = double(i);
  };
  for (auto& layer : layers) sortLayer(layer, order);
  std::vector<double> key(total);
  auto sweep = [&](int r, const Adjacency& adj) {
    for (int v : layers[r]) {
      if (adj[v].empty()) {
        key[v] = pos[v];
        continue;
      }
      double sum = 0;
      for (int u : adj[v]) sum += pos[u];
      key[v] = sum / double(adj[v].size());
    }
    sortLayer(layers[r], key);
  };
  for (int iter = 0; iter < 4; ++iter) {
    for (int r = 1; r < ranks; ++r) sweep(r, up);
    for (int r = ranks - 2; r >= 0; --r) sweep(r, down);
  }

  // Positions within ranks: each node at the median of its neighbours' centres in
  // the rank before (or after), as near as the order and the gaps allow.
  std::vector<double> y(total);
  auto gapBefore = [&](const std::vector<int>& layer, size_t i) {
    int a = layer[i - 1], b = layer[i];
    double g = height[a] > 0 && height[b] > 0 ? spacing.nodeGap : spacing.nodeGap / 2;
    return (height[a] + height[b]) / 2 + g;
  };
  for (auto& layer : layers) {
    double at = 0;
    for (size_t i = 0; i < layer.size(); ++i) y[layer[i]] = at += i ? gapBefore(layer, i) : 0;
  }
  std::vector<double> near;
  auto place = [&](int r, const Adjacency& adj) {
    const std::vector<int>& layer = layers[r];
    std::vector<double> want(layer.size()), gap(layer.size(), 0);
    for (size_t i = 0; i < layer.size(); ++i) {
      int v = layer[i];
      near.clear();
      for (int u : adj[v]) near.push_back(y[u]);
      want[i] = near.empty() ? y[v] : median(near);
      if (i) gap[i] = gapBefore(layer, i);
    }
    std::vector<double> fit = fitInOrder(want, gap);
    for (size_t i = 0; i < layer.size(); ++i) y[layer[i]] = fit[i];
  };
  for (int pass = 0; pass < 3; ++pass) {
    for (int r = 1; r < ranks; ++r) place(r, up);
    for (int r = ranks - 2; r >= 0; --r) place(r, down);
  }

  std::vector<double> rankX(ranks, 0), rankWidth(ranks, 0);
  for (int v = 0; v < n; ++v) rankWidth[rank[v]] = std::max(rankWidth[rank[v]], boxes[v].width);
  for (int r = 1; r < ranks; ++r) rankX[r] = rankX[r - 1] + rankWidth[r - 1] + spacing.rankGap;
  double top = std::numeric_limits<double>::max();
  for (int v = 0; v < n; ++v) top = std::min(top, y[v] - height[v] / 2);
  std::vector<std::pair<double, double>> corners(n);
  for (int v = 0; v < n; ++v) corners[v] = {rankX[rank[v]], y[v] - height[v] / 2 - top};
  return corners;
}

}  // namespace netloom::editor

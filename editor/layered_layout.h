// A layered (Sugiyama-style) drawing computed here, in time close to linear in the
// graph's size, for graphs too large for Graphviz to lay out while a person waits:
// ranks by longest path (sources pulled next to their first user), dummy nodes along
// wires that span ranks, barycentre sweeps against crossings, and positions within a
// rank that sit each node at the median of its neighbours as closely as the order
// allows (an exact least-squares fit per rank, by pool-adjacent-violators).
#pragma once

#include <utility>
#include <vector>

namespace netloom::editor {

struct LayeredBox {
  double width = 0, height = 0;
};

struct LayeredSpacing {
  double rankGap = 100;  // between the columns of consecutive ranks
  double nodeGap = 25;   // between boxes in one rank
};

// Top-left corners (x, y) for `boxes`, ranks running left to right from x = 0 and
// the topmost box at y = 0. `edges` are (from, to) indices; wires that close a cycle
// are drawn but do not rank.
std::vector<std::pair<double, double>> layeredPositions(
    const std::vector<LayeredBox>& boxes, const std::vector<std::pair<int, int>>& edges,
    const LayeredSpacing& spacing = {});

}  // namespace netloom::editor

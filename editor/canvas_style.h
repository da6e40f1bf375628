// What the canvas's items and scene share (not exported): colours, the zoom below
// which they draw as plain shapes, and the shape of a wire.
#pragma once

#include <QColor>
#include <QPainterPath>
#include <QPointF>

namespace netloom::editor {

inline const QColor kCanvas(0x26, 0x28, 0x2c), kGridMinor(0x2e, 0x31, 0x36),
    kGridMajor(0x37, 0x3b, 0x41);
inline const QColor kBody(0x3a, 0x3e, 0x45), kHeader(0x4a, 0x6f, 0xa5), kUnknown(0x7a, 0x5a, 0x2a);
inline const QColor kBlockHeader(0x3f, 0x8a, 0x6e);
// Below this scale (screen pixels per scene unit) nodes and wires draw as plain shapes.
inline constexpr qreal kFarLod = 0.3;
inline const QColor kText(0xe8, 0xea, 0xed), kDim(0xa8, 0xad, 0xb5), kError(0xe0, 0x4f, 0x4f);
inline const QColor kWire(0x9a, 0xb4, 0xd6), kSelected(0xf0, 0xc0, 0x40);
// Parallel strategies: a boxing collective's glyph on a wire, a node whose weights are
// split over a tensor group, and each pipeline stage's own colour.
inline const QColor kBoxing(0xe8, 0x9a, 0x3c), kSplit(0xb5, 0x7c, 0xe0);
inline QColor stageColor(int stage) {
  return QColor::fromHsv((stage * 67 + 20) % 360, 150, 220);
}

// Out of a port and into one along the direction data flows: rightwards, or down.
QPainterPath wirePath(QPointF a, QPointF b, bool vertical);

}  // namespace netloom::editor

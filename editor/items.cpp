// The canvas's items: a node (header, summary, ports, problem badge; left to right or
// top to bottom) and a wire (its curve, its shape label, red when its port is at fault).
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <algorithm>
#include <cmath>

#include "editor/canvas_style.h"
#include "editor/scene.h"
#include "engine/graph/op.h"

namespace netloom::editor {

QPainterPath wirePath(QPointF a, QPointF b, bool vertical) {
  QPainterPath path(a);
  if (vertical) {
    qreal dy = std::max<qreal>(30, std::abs(b.y() - a.y()) * 0.5);
    path.cubicTo(a + QPointF(0, dy), b - QPointF(0, dy), b);
  } else {
    qreal dx = std::max<qreal>(40, std::abs(b.x() - a.x()) * 0.5);
    path.cubicTo(a + QPointF(dx, 0), b - QPointF(dx, 0), b);
  }
  return path;
}

namespace {

// A value as the one-line summary shows it: 3×3 for lists, 0.5 for floats.
QString valueText(const proto::AttrValue& v) {
  switch (v.value_case()) {
    case proto::AttrValue::kI: return QString::number(v.i());
    case proto::AttrValue::kF: return QString::number(v.f(), 'g', 4);
    case proto::AttrValue::kS: return QString::fromStdString(v.s());
    case proto::AttrValue::kB: return v.b() ? "on" : "off";
    case proto::AttrValue::kInts: {
      QStringList parts;
      for (int64_t x : v.ints().values()) parts << QString::number(x);
      return parts.join("×");
    }
    case proto::AttrValue::kFloats: {
      QStringList parts;
      for (double x : v.floats().values()) parts << QString::number(x, 'g', 3);
      return parts.join(", ");
    }
    default: return {};
  }
}

// The attributes a user set, in the op's declaration order (file order for unknown
// ops), e.g. "out_channels 32 · kernel_size 3×3".
QString attrSummary(const proto::NodeDef& def, const OpDef* op) {
  QStringList parts;
  auto add = [&](const std::string& key) {
    auto it = def.attrs().find(key);
    if (it == def.attrs().end() || key.rfind("__", 0) == 0) return;
    parts << QString::fromStdString(key) + " " + valueText(it->second);
  };
  if (op) {
    for (const AttrDef& a : op->attrs)
      if (!a.internal) add(a.name);
  } else {
    std::vector<std::string> keys;
    for (const auto& [k, v] : def.attrs()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) add(k);
  }
  return parts.join(" · ");
}

}  // namespace

// NodeItem --------------------------------------------------------------------------

NodeItem::NodeItem(GraphScene* scene, NodeId id) : m_scene(scene), m_id(id) {
  setFlags(ItemIsMovable | ItemIsSelectable | ItemSendsGeometryChanges);
  setCacheMode(DeviceCoordinateCache);
  setZValue(1);
  refresh();
}

void NodeItem::refresh() {
  const GraphDocument* doc = m_scene->document();
  const DocNode& n = doc->node(m_id);
  const OpDef* op = doc->opOf(n.def);
  m_name = QString::fromStdString(n.def.name());
  m_op = QString::fromStdString(n.def.op());
  m_known = op != nullptr;
  m_instance = doc->isInstance(m_id);
  m_summary = attrSummary(n.def, op);
  m_inputs.clear();
  m_outputs.clear();
  int nin = doc->inputPortCount(m_id), nout = doc->outputPortCount(m_id);
  for (int i = 0; i < nin; ++i) {
    QString name =
        op && !op->inputs.empty()
            ? QString::fromStdString(op->inputs[std::min<size_t>(i, op->inputs.size() - 1)].name)
            : QString("in %1").arg(i);
    if (op && !op->inputs.empty() && op->inputs.back().variadic && i >= int(op->inputs.size()) - 1)
      name += QString(" %1").arg(i - int(op->inputs.size()) + 2);
    // Left open, a label port reads the dataset's labels: the node says so.
    if (op && i < int(op->inputs.size()) && op->inputs[size_t(i)].dataLabels &&
        !doc->inputConnection(m_id, i))
      name += QObject::tr(" ← data");
    m_inputs << name;
  }
  std::vector<const PortDef*> visible;
  if (op)
    for (const PortDef& p : op->outputs)
      if (!p.hidden) visible.push_back(&p);
  for (int i = 0; i < nout; ++i)
    m_outputs << (i < int(visible.size()) ? QString::fromStdString(visible[i]->name)
                                          : QString("out %1").arg(i));
  m_problems.clear();
  m_badPorts.clear();
  for (const ModelProblem& p : doc->analysis().problems)
    if (p.node == n.def.name()) {
      m_problems << QString::fromStdString(p.message);
      if (p.port >= 0) m_badPorts.push_back(p.port);
    }
  m_vertical = doc->vertical();
  qreal height = NodeGeometry::heightFor(m_vertical, nin, nout);
  if (height != m_height) {
    prepareGeometryChange();
    m_height = height;
  }
  const ParallelLayout& par = doc->parallel();
  QString placement;
  m_placement = QColor();
  if (auto st = par.stage.find(n.def.name()); st != par.stage.end()) {
    m_placement = stageColor(st->second);
    placement = QObject::tr("pipeline stage %1 of %2").arg(st->second).arg(par.parts);
  } else if (par.splits(n.def.name())) {
    m_placement = kSplit;
    placement = QObject::tr("weights split over %1 ranks: %2")
                    .arg(par.parts)
                    .arg(QString::fromStdString(par.signature.at(n.def.name())));
  } else if (auto sig = par.signature.find(n.def.name()); sig != par.signature.end()) {
    placement = QObject::tr("on every rank: %1").arg(QString::fromStdString(sig->second));
  }
  QString tip = m_name + " (" + m_op + ")";
  if (!placement.isEmpty()) tip += "\n" + placement;
  if (op && !op->doc.empty()) tip += "\n" + QString::fromStdString(op->doc);
  if (!m_known) tip += "\n" + QObject::tr("Unknown op: kept as it is when the file is saved");
  if (!m_problems.isEmpty()) tip += "\n\n" + m_problems.join("\n");
  setToolTip(tip);
  update();
}

QRectF NodeItem::boundingRect() const {
  // The ports stick out left and right (or above and below), the error badge
  // (radius 8 about (width - 2, -2)) above and right: all of it inside, or its edge
  // stays on screen.
  qreal r = NodeGeometry::kPortRadius + 2;
  return QRectF(-r, -12, NodeGeometry::kWidth + 2 * r + 2, m_height + 12 + r);
}

void NodeItem::paint(QPainter* p, const QStyleOptionGraphicsItem* o, QWidget*) {
  QRectF body(0, 0, NodeGeometry::kWidth, m_height);
  // Zoomed far out, text and ports are too small to read: a box in the header's
  // colour, red when the node has problems, outlined when selected.
  if (o->levelOfDetailFromTransform(p->worldTransform()) < kFarLod) {
    p->fillRect(body, !m_problems.isEmpty() ? kError
                      : !m_known            ? kUnknown
                      : m_instance          ? kBlockHeader
                                            : kHeader);
    if (isSelected()) {
      p->setPen(QPen(kSelected, 0));
      p->drawRect(body);
    }
    return;
  }
  p->setRenderHint(QPainter::Antialiasing);
  QPen border(isSelected() ? kSelected : (m_problems.isEmpty() ? QColor(0x1c, 0x1e, 0x21) : kError),
              isSelected() || !m_problems.isEmpty() ? 2 : 1);
  if (!m_known) border.setStyle(Qt::DashLine);
  p->setPen(border);
  p->setBrush(kBody);
  p->drawRoundedRect(body, 5, 5);
  QPainterPath header;
  header.addRoundedRect(QRectF(0, 0, NodeGeometry::kWidth, NodeGeometry::kHeader), 5, 5);
  p->fillPath(header, !m_known ? kUnknown : m_instance ? kBlockHeader : kHeader);
  if (m_placement.isValid()) {  // its placement: a band along the header
    p->setPen(Qt::NoPen);
    p->setBrush(m_placement);
    p->drawRoundedRect(QRectF(0, NodeGeometry::kHeader - 4, NodeGeometry::kWidth, 4), 2, 2);
  }
  if (m_instance) {  // a second frame: the node stands for a group of nodes
    p->setPen(QPen(kBlockHeader, 1));
    p->setBrush(Qt::NoBrush);
    p->drawRoundedRect(body.adjusted(3, 3, -3, -3), 4, 4);
  }

  QFont f = p->font();
  f.setPointSizeF(9);
  f.setBold(true);
  p->setFont(f);
  p->setPen(kText);
  QFontMetricsF fm(f);
  QRectF caption(8, 0, NodeGeometry::kWidth - 16, NodeGeometry::kHeader);
  p->drawText(caption, Qt::AlignVCenter | Qt::AlignLeft,
              fm.elidedText(m_name, Qt::ElideRight, caption.width() * 0.6));
  f.setBold(false);
  f.setPointSizeF(8);
  p->setFont(f);
  p->setPen(m_known ? kDim : kText);
  p->drawText(caption, Qt::AlignVCenter | Qt::AlignRight,
              m_known ? m_op : QObject::tr("%1 (unknown)").arg(m_op));
  // Top to bottom, a row of input names (when there are several) comes first.
  const qreal namesIn = m_vertical && m_inputs.size() > 1 ? NodeGeometry::kRow : 0;
  QRectF line(8, NodeGeometry::kHeader + namesIn, NodeGeometry::kWidth - 16,
              NodeGeometry::kSummary);
  p->setPen(kDim);
  p->drawText(line, Qt::AlignVCenter | Qt::AlignLeft,
              QFontMetricsF(f).elidedText(m_summary, Qt::ElideRight, line.width()));

  auto port = [&](QPointF c, bool bad) {
    p->setPen(QPen(bad ? kError : QColor(0x1c, 0x1e, 0x21), bad ? 2 : 1));
    p->setBrush(bad ? kError : kWire);
    p->drawEllipse(c, NodeGeometry::kPortRadius, NodeGeometry::kPortRadius);
  };
  p->setPen(kText);
  if (m_vertical) {
    // Names only where a side has several ports, each over its port.
    auto names = [&](const QStringList& list, qreal top, bool inputs) {
      qreal w = NodeGeometry::kWidth / qreal(list.size());
      for (int i = 0; i < list.size(); ++i) {
        bool bad = inputs && std::find(m_badPorts.begin(), m_badPorts.end(), i) != m_badPorts.end();
        p->setPen(bad ? kError : kText);
        QRectF r(NodeGeometry::portX(i, int(list.size())) - w / 2, top, w, NodeGeometry::kRow);
        p->drawText(r, Qt::AlignCenter,
                    QFontMetricsF(f).elidedText(list[i], Qt::ElideRight, w - 2));
      }
    };
    if (m_inputs.size() > 1) names(m_inputs, NodeGeometry::kHeader, true);
    if (m_outputs.size() > 1) names(m_outputs, line.bottom(), false);
    for (int i = 0; i < m_inputs.size(); ++i)
      port(QPointF(NodeGeometry::portX(i, int(m_inputs.size())), 0),
           std::find(m_badPorts.begin(), m_badPorts.end(), i) != m_badPorts.end());
    for (int i = 0; i < m_outputs.size(); ++i)
      port(QPointF(NodeGeometry::portX(i, int(m_outputs.size())), m_height), false);
  }
  for (int i = 0; i < m_inputs.size() && !m_vertical; ++i) {
    bool bad = std::find(m_badPorts.begin(), m_badPorts.end(), i) != m_badPorts.end();
    port(QPointF(0, NodeGeometry::portY(i)), bad);
    p->setPen(bad ? kError : kText);
    p->drawText(QRectF(10, NodeGeometry::portY(i) - 8, 80, 16), Qt::AlignVCenter, m_inputs[i]);
  }
  for (int i = 0; i < m_outputs.size() && !m_vertical; ++i) {
    port(QPointF(NodeGeometry::kWidth, NodeGeometry::portY(i)), false);
    p->setPen(kText);
    p->drawText(QRectF(NodeGeometry::kWidth - 90, NodeGeometry::portY(i) - 8, 80, 16),
                Qt::AlignVCenter | Qt::AlignRight, m_outputs[i]);
  }
  if (!m_problems.isEmpty()) {  // the error badge
    QPointF c(NodeGeometry::kWidth - 2, -2);
    p->setPen(Qt::NoPen);
    p->setBrush(kError);
    p->drawEllipse(c, 8, 8);
    f.setBold(true);
    p->setFont(f);
    p->setPen(Qt::white);
    p->drawText(QRectF(c.x() - 8, c.y() - 8, 16, 16), Qt::AlignCenter, "!");
  }
}

QPointF NodeItem::inputPos(int port) const {
  if (m_vertical) return mapToScene(QPointF(NodeGeometry::portX(port, int(m_inputs.size())), 0));
  return mapToScene(QPointF(0, NodeGeometry::portY(port)));
}

QPointF NodeItem::outputPos(int port) const {
  if (m_vertical)
    return mapToScene(QPointF(NodeGeometry::portX(port, int(m_outputs.size())), m_height));
  return mapToScene(QPointF(NodeGeometry::kWidth, NodeGeometry::portY(port)));
}

std::pair<bool, int> NodeItem::portAt(QPointF scenePos) const {
  qreal reach = NodeGeometry::kPortRadius + 4;
  auto near = [&](QPointF c) { return QLineF(c, scenePos).length() <= reach; };
  for (int i = 0; i < m_outputs.size(); ++i)
    if (near(outputPos(i))) return {true, i};
  for (int i = 0; i < m_inputs.size(); ++i)
    if (near(inputPos(i))) return {false, i};
  return {false, -1};
}

QVariant NodeItem::itemChange(GraphicsItemChange change, const QVariant& value) {
  if (change == ItemPositionChange && !m_scene->m_syncing && m_scene->snapToGrid())
    return m_scene->snapped(value.toPointF());
  if (change == ItemPositionHasChanged) m_scene->nodeDragged(m_id);
  return QGraphicsItem::itemChange(change, value);
}

// WireItem --------------------------------------------------------------------------

namespace {

// A wire's shape label, left out when zoomed too far out to read.
class WireLabel : public QGraphicsSimpleTextItem {
 public:
  using QGraphicsSimpleTextItem::QGraphicsSimpleTextItem;
  void paint(QPainter* p, const QStyleOptionGraphicsItem* o, QWidget* w) override {
    if (o->levelOfDetailFromTransform(p->worldTransform()) >= kFarLod)
      QGraphicsSimpleTextItem::paint(p, o, w);
  }
};

}  // namespace

WireItem::WireItem(GraphScene* scene, const Connection& c)
    : m_scene(scene),
      m_c(c),
      m_label(new WireLabel(this)),
      m_box(new QGraphicsEllipseItem(-4.5, -4.5, 9, 9, this)) {
  setZValue(0);
  m_box->setBrush(kBoxing);
  m_box->setPen(QPen(QColor(0x1c, 0x1e, 0x21), 1));
  m_box->setVisible(false);
  QFont f = m_label->font();
  f.setPointSizeF(8);
  m_label->setFont(f);
  m_label->setBrush(kDim);
  refresh();
}

void WireItem::paint(QPainter* p, const QStyleOptionGraphicsItem* o, QWidget* w) {
  if (o->levelOfDetailFromTransform(p->worldTransform()) >= kFarLod)
    return QGraphicsPathItem::paint(p, o, w);
  p->setPen(QPen(pen().color(), 0));
  const QPainterPath& path = this->path();
  p->drawLine(QPointF(path.elementAt(0)), path.currentPosition());
}

void WireItem::refresh() {
  NodeItem* from = m_scene->itemFor(m_c.from);
  NodeItem* to = m_scene->itemFor(m_c.to);
  if (!from || !to) return;
  QPointF a = from->outputPos(m_c.fromPort), b = to->inputPos(m_c.toPort);
  setPath(wirePath(a, b, m_scene->document()->vertical()));
  relabel();
}

// Under the project's parallel strategy: the wire's SBP and per-rank shape for its
// label, and the boxing into its reader (or a message between pipeline stages) as a
// glyph near the reader's end.
void WireItem::relabelParallel(QString& label) {
  const GraphDocument* doc = m_scene->document();
  const ParallelLayout& par = doc->parallel();
  const std::string& from = doc->node(m_c.from).def.name();
  const std::string& to = doc->node(m_c.to).def.name();
  QString box;
  if (auto w = par.wires.find({from, m_c.fromPort}); w != par.wires.end())
    label = QString::fromStdString(w->second);
  if (auto b = par.boxings.find({to, m_c.toPort}); b != par.boxings.end())
    box = QString::fromStdString(b->second.what);
  auto a = par.stage.find(from), b = par.stage.find(to);
  if (a != par.stage.end() && b != par.stage.end() && a->second != b->second)
    box = QObject::tr("sent from pipeline stage %1 to stage %2, its gradient back")
              .arg(a->second)
              .arg(b->second);
  m_box->setVisible(!box.isEmpty());
  m_box->setToolTip(box);
  if (!box.isEmpty()) {
    const QPointF s = path().elementAt(0), e = path().currentPosition();
    m_box->setPos(s + (e - s) * 0.8);
  }
}

void WireItem::relabel() {
  const GraphDocument* doc = m_scene->document();
  const std::string& name = doc->node(m_c.from).def.name();
  QString label;
  auto it = doc->analysis().nodes.find(name);
  if (it != doc->analysis().nodes.end() && m_c.fromPort < int(it->second.outputs.size())) {
    const TensorDesc& d = it->second.outputs[m_c.fromPort];
    label = QString::fromStdString(shapeToString(d.shape));
    if (d.dtype != DType::F32) label += " " + QString(dtypeName(d.dtype)).toLower();
  }
  relabelParallel(label);
  if (label != m_label->text()) m_label->setText(label);
  // The wire's curve is symmetric (see wirePath): its middle is halfway between its
  // ends, found without measuring the curve.
  QPointF mid = (QPointF(path().elementAt(0)) + path().currentPosition()) / 2;
  QRectF r = m_label->boundingRect();
  // Above a wire that runs across, beside one that runs down.
  QPointF at = doc->vertical() ? QPointF(mid.x() + 6, mid.y() - r.height() / 2)
                               : QPointF(mid.x() - r.width() / 2, mid.y() - r.height() - 2);
  if (m_label->pos() != at) m_label->setPos(at);
  bool bad = false;
  if (!doc->analysis().problems.empty()) {
    const std::string& target = doc->node(m_c.to).def.name();
    for (const ModelProblem& p : doc->analysis().problems)
      bad = bad || (p.node == target && p.port == m_c.toPort);
  }
  QPen pen(bad ? kError : kWire, bad ? 2.5 : 1.6);
  if (this->pen() != pen) setPen(pen);
  if (m_label->brush().color() != (bad ? kError : kDim)) m_label->setBrush(bad ? kError : kDim);
}

}  // namespace netloom::editor

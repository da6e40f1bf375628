#include "editor/scene.h"

#include <QApplication>
#include <QGraphicsSceneMouseEvent>
#include <QGraphicsView>
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <utility>

#include "editor/view.h"
#include "engine/ops/op.h"

namespace netloom::editor {

namespace {

const QColor kCanvas(0x26, 0x28, 0x2c), kGridMinor(0x2e, 0x31, 0x36), kGridMajor(0x37, 0x3b, 0x41);
const QColor kBody(0x3a, 0x3e, 0x45), kHeader(0x4a, 0x6f, 0xa5), kUnknown(0x7a, 0x5a, 0x2a);
const QColor kBlockHeader(0x3f, 0x8a, 0x6e);
// Below this scale (screen pixels per scene unit) nodes and wires draw as plain shapes.
constexpr qreal kFarLod = 0.3;
const QColor kText(0xe8, 0xea, 0xed), kDim(0xa8, 0xad, 0xb5), kError(0xe0, 0x4f, 0x4f);
const QColor kWire(0x9a, 0xb4, 0xd6), kSelected(0xf0, 0xc0, 0x40);

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
    for (const AttrDef& a : op->attrs) add(a.name);
  } else {
    std::vector<std::string> keys;
    for (const auto& [k, v] : def.attrs()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) add(k);
  }
  return parts.join(" · ");
}

// Out of a port and into one along the direction data flows: rightwards, or down.
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
  QString tip = m_name + " (" + m_op + ")";
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
    : m_scene(scene), m_c(c), m_label(new WireLabel(this)) {
  setZValue(0);
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

// GraphScene ------------------------------------------------------------------------

GraphScene::GraphScene(GraphDocument* doc, QObject* parent) : QGraphicsScene(parent), m_doc(doc) {
  setItemIndexMethod(QGraphicsScene::BspTreeIndex);
  connect(doc, &GraphDocument::reset, this, &GraphScene::rebuild);
  connect(doc, &GraphDocument::directionChanged, this, &GraphScene::rebuild);
  connect(doc, &GraphDocument::nodeAdded, this, &GraphScene::addItemFor);
  connect(doc, &GraphDocument::nodeRemoved, this, &GraphScene::removeItemFor);
  connect(doc, &GraphDocument::nodeMoved, this, [this](NodeId id) {
    if (NodeItem* it = itemFor(id)) {
      m_syncing = true;
      it->setPos(m_doc->node(id).pos);
      m_syncing = false;
    }
  });
  connect(doc, &GraphDocument::nodeAdded, this, [this] { m_added = true; });
  connect(doc, &GraphDocument::nodeChanged, this, [this](NodeId id) { m_edited.push_back(id); });
  connect(doc, &GraphDocument::changed, this, &GraphScene::syncEditedWires);
  connect(doc, &GraphDocument::analysisChanged, this, &GraphScene::refreshAll);
  rebuild();
}

NodeItem* GraphScene::itemFor(NodeId id) const {
  auto it = m_items.find(id);
  return it == m_items.end() ? nullptr : it->second;
}

std::vector<WireItem*> GraphScene::wires() const {
  std::vector<WireItem*> out;
  for (const auto& [key, w] : m_wires) out.push_back(w);
  return out;
}

WireItem* GraphScene::wireInto(NodeId to, int port) const {
  auto it = m_wires.find({to, port});
  return it == m_wires.end() ? nullptr : it->second;
}

std::vector<NodeId> GraphScene::selectedNodes() const {
  std::vector<NodeId> ids;
  for (NodeId id : m_doc->nodes())  // document order, so copies keep it
    if (NodeItem* it = itemFor(id); it && it->isSelected()) ids.push_back(id);
  return ids;
}

void GraphScene::selectNodes(const std::vector<NodeId>& ids) {
  clearSelection();
  for (NodeId id : ids)
    if (NodeItem* it = itemFor(id)) it->setSelected(true);
}

QRectF GraphScene::nodesRect(const std::vector<NodeId>& ids) const {
  QRectF r;
  auto add = [&](NodeItem* it) {
    if (it) r = r.united(it->sceneBoundingRect());
  };
  if (ids.empty())
    for (const auto& [id, it] : m_items) add(it);
  for (NodeId id : ids) add(itemFor(id));
  return r;
}

QPointF GraphScene::snapped(QPointF p) const {
  return QPointF(std::round(p.x() / kGrid) * kGrid, std::round(p.y() / kGrid) * kGrid);
}

NodeId GraphScene::addNodeAt(const std::string& op, QPointF scenePos, NodeId from, int fromPort) {
  QPointF pos = m_snap ? snapped(scenePos) : scenePos;
  if (from < 0 || !m_doc->contains(from)) return m_doc->addNode(op, pos);
  QUndoStack* undo = m_doc->undoStack();
  undo->beginMacro(tr("Add %1").arg(QString::fromStdString(op)));
  NodeId id = m_doc->addNode(op, pos);
  QString why;
  if (m_doc->inputPortCount(id) > 0 && !m_doc->connectPorts(from, fromPort, id, 0, &why))
    emit refused(why);
  undo->endMacro();
  selectNodes({id});
  return id;
}

void GraphScene::rebuild() {
  m_stale.clear();
  for (auto& [key, w] : m_wires) delete w;
  m_wires.clear();
  m_wiresOf.clear();
  for (auto& [id, it] : m_items) delete it;
  m_items.clear();
  for (NodeId id : m_doc->nodes()) addItemFor(id);
  syncWires();
}

void GraphScene::addItemFor(NodeId id) {
  if (itemFor(id)) return;
  auto* it = new NodeItem(this, id);
  m_syncing = true;
  it->setPos(m_doc->node(id).pos);
  m_syncing = false;
  addItem(it);
  m_items[id] = it;
}

void GraphScene::removeItemFor(NodeId id) {
  // Through the index, so deleting many nodes at once stays linear.
  if (auto found = m_wiresOf.find(id); found != m_wiresOf.end()) {
    std::vector<WireItem*> gone = std::move(found->second);
    m_wiresOf.erase(found);
    for (WireItem* w : gone) {
      Connection c = w->connection();
      if (NodeId other = c.from == id ? c.to : c.from; other != id) {
        auto& list = m_wiresOf[other];
        list.erase(std::remove(list.begin(), list.end(), w), list.end());
      }
      m_wires.erase({c.to, c.toPort});
      delete w;
    }
  }
  if (NodeItem* it = itemFor(id)) {
    delete it;
    m_items.erase(id);
  }
}

// Brings the wires in line with the document's connections.
void GraphScene::syncWires() {
  std::map<std::tuple<NodeId, int>, Connection> want;
  for (const Connection& c : m_doc->connections())
    if (itemFor(c.from) && itemFor(c.to)) want[{c.to, c.toPort}] = c;
  for (auto it = m_wires.begin(); it != m_wires.end();) {
    auto w = want.find(it->first);
    if (w == want.end() || !(w->second == it->second->connection())) {
      delete it->second;
      it = m_wires.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, c] : want)
    if (!m_wires.count(key)) {
      auto* w = new WireItem(this, c);
      addItem(w);
      m_wires[key] = w;
    }
  indexWires();
}

void GraphScene::syncEditedWires() {
  std::vector<NodeId> edited = std::move(m_edited);
  m_edited.clear();
  m_editedLast = edited;
  if (std::exchange(m_added, false)) return syncWires();
  for (NodeId id : edited) syncWiresInto(id);
}

void GraphScene::syncWiresInto(NodeId id) {
  if (!m_doc->contains(id)) return;
  auto dropWire = [&](std::map<std::tuple<NodeId, int>, WireItem*>::iterator it) {
    WireItem* w = it->second;
    for (NodeId end : {w->connection().from, w->connection().to})
      if (auto found = m_wiresOf.find(end); found != m_wiresOf.end()) {
        auto& list = found->second;
        list.erase(std::remove(list.begin(), list.end(), w), list.end());
      }
    delete w;
    return m_wires.erase(it);
  };
  int ports = m_doc->node(id).def.inputs_size();
  for (auto it = m_wires.lower_bound({id, 0}); it != m_wires.end() && std::get<0>(it->first) == id;)
    it = std::get<1>(it->first) >= ports ? dropWire(it) : std::next(it);
  for (int port = 0; port < ports; ++port) {
    std::optional<Connection> c = m_doc->inputConnection(id, port);
    if (c && !itemFor(c->from)) c.reset();
    auto it = m_wires.find({id, port});
    if (it != m_wires.end() && c && it->second->connection() == *c) continue;
    if (it != m_wires.end()) dropWire(it);
    if (!c) continue;
    auto* w = new WireItem(this, *c);
    addItem(w);
    m_wires[{id, port}] = w;
    m_wiresOf[c->from].push_back(w);
    if (c->to != c->from) m_wiresOf[c->to].push_back(w);
  }
}

void GraphScene::refreshAll() {
  const std::vector<NodeId>* changed = m_doc->analysisChangedNodes();
  if (!changed) syncWires();
  const std::vector<NodeId>& ids = changed ? *changed : m_doc->nodes();
  constexpr size_t kEager = 400;  // about what a frame can redraw
  if (ids.size() <= kEager && m_stale.empty()) {
    for (NodeId id : ids) refreshNode(id);
    return;
  }
  m_stale.insert(ids.begin(), ids.end());
  // What the edit itself touched may have changed shape: never left for later.
  std::vector<NodeId> now = std::move(m_editedLast);
  m_editedLast.clear();
  std::vector<QRectF> seen;
  for (QGraphicsView* v : views())
    if (!dynamic_cast<MiniMap*>(v))  // it shows everything, too small to read
      seen.push_back(v->mapToScene(v->viewport()->rect()).boundingRect());
  for (NodeId id : ids)
    if (NodeItem* it = itemFor(id);
        it && std::any_of(seen.begin(), seen.end(),
                          [&](const QRectF& r) { return r.intersects(it->sceneBoundingRect()); }))
      now.push_back(id);
  for (NodeId id : now)
    if (m_stale.erase(id)) refreshNode(id);
  if (!m_stale.empty() && !std::exchange(m_staleQueued, true))
    QTimer::singleShot(0, this, &GraphScene::refreshStale);
}

void GraphScene::refreshNode(NodeId id) {
  if (NodeItem* it = itemFor(id)) it->refresh();
  if (auto found = m_wiresOf.find(id); found != m_wiresOf.end())
    for (WireItem* w : found->second) w->relabel();
}

// A batch at a time, so the event loop (and the user) is not held up.
void GraphScene::refreshStale() {
  m_staleQueued = false;
  constexpr int kBatch = 500;
  for (int i = 0; i < kBatch && !m_stale.empty(); ++i) {
    NodeId id = *m_stale.begin();
    m_stale.erase(m_stale.begin());
    refreshNode(id);
  }
  if (!m_stale.empty())
    m_staleQueued = true, QTimer::singleShot(0, this, &GraphScene::refreshStale);
  else
    emit refreshFinished();
}

void GraphScene::finishRefresh() {
  if (m_stale.empty()) return;
  std::unordered_set<NodeId> stale = std::move(m_stale);
  m_stale.clear();
  for (NodeId id : stale) refreshNode(id);
  emit refreshFinished();
}

void GraphScene::indexWires() {
  m_wiresOf.clear();
  for (const auto& [key, w] : m_wires) {
    m_wiresOf[w->connection().from].push_back(w);
    if (w->connection().to != w->connection().from) m_wiresOf[w->connection().to].push_back(w);
  }
}

void GraphScene::nodeDragged(NodeId id) {
  auto it = m_wiresOf.find(id);
  if (it == m_wiresOf.end()) return;
  for (WireItem* w : it->second) w->refresh();
}

NodeItem* GraphScene::nodeAt(QPointF scenePos) const {
  for (QGraphicsItem* it : items(scenePos))
    if (auto* n = dynamic_cast<NodeItem*>(it)) return n;
  // Ports stick out of the node's body: look a little around.
  for (QGraphicsItem* it :
       items(QRectF(scenePos - QPointF(10, 10), QSizeF(20, 20)), Qt::IntersectsItemBoundingRect))
    if (auto* n = dynamic_cast<NodeItem*>(it); n && n->portAt(scenePos).second >= 0) return n;
  return nullptr;
}

void GraphScene::drawBackground(QPainter* p, const QRectF& rect) {
  p->fillRect(rect, kCanvas);
  qreal scale = views().isEmpty() ? 1.0 : views().first()->transform().m11();
  if (scale < 0.3) return;  // far out, the grid is noise
  auto lines = [&](qreal step, const QColor& c) {
    QVector<QLineF> ls;
    for (qreal x = std::floor(rect.left() / step) * step; x < rect.right(); x += step)
      ls.append(QLineF(x, rect.top(), x, rect.bottom()));
    for (qreal y = std::floor(rect.top() / step) * step; y < rect.bottom(); y += step)
      ls.append(QLineF(rect.left(), y, rect.right(), y));
    p->setPen(QPen(c, 0));
    p->drawLines(ls);
  };
  if (scale >= 0.6) lines(kGrid, kGridMinor);
  lines(kGrid * 8, kGridMajor);
}

void GraphScene::mousePressEvent(QGraphicsSceneMouseEvent* e) {
  if (e->button() == Qt::LeftButton) {
    if (NodeItem* n = nodeAt(e->scenePos())) {
      auto [output, port] = n->portAt(e->scenePos());
      if (port >= 0) {
        // From an input that is wired, the drag picks the wire up from its source.
        m_dragFromOutput = output;
        m_dragFrom = n->id();
        m_dragPort = port;
        if (!output)
          if (auto c = m_doc->inputConnection(n->id(), port)) {
            m_doc->disconnectInput(n->id(), port);
            m_dragFrom = c->from, m_dragPort = c->fromPort, m_dragFromOutput = true;
          }
        m_pending = addPath(QPainterPath(), QPen(kWire, 1.6, Qt::DashLine));
        m_pending->setZValue(2);
        e->accept();
        return;
      }
    }
  }
  QGraphicsScene::mousePressEvent(e);
  m_dragStart.clear();
  for (NodeId id : selectedNodes()) m_dragStart[id] = m_doc->node(id).pos;
  ++m_dragId;
  m_pressScreen = e->screenPos();
  m_dragging = false;
}

void GraphScene::mouseMoveEvent(QGraphicsSceneMouseEvent* e) {
  if (m_pending) {
    NodeItem* from = itemFor(m_dragFrom);
    if (!from) return;
    QPointF a = m_dragFromOutput ? from->outputPos(m_dragPort) : e->scenePos();
    QPointF b = m_dragFromOutput ? e->scenePos() : from->inputPos(m_dragPort);
    m_pending->setPath(wirePath(a, b, m_doc->vertical()));
    return;
  }
  // A hand's jitter during a click is not a drag: nodes move (and snap) only once
  // the pointer has gone the platform's drag distance.
  if ((e->buttons() & Qt::LeftButton) && !m_dragging) {
    if ((e->screenPos() - m_pressScreen).manhattanLength() < QApplication::startDragDistance())
      return;
    m_dragging = true;
  }
  QGraphicsScene::mouseMoveEvent(e);
}

void GraphScene::mouseReleaseEvent(QGraphicsSceneMouseEvent* e) {
  if (m_pending) {
    delete m_pending;
    m_pending = nullptr;
    NodeItem* target = nodeAt(e->scenePos());
    if (!target) {
      if (m_dragFromOutput) emit quickAddRequested(e->scenePos(), m_dragFrom, m_dragPort);
      return;
    }
    auto [output, port] = target->portAt(e->scenePos());
    if (port < 0) {
      // Dropped on a node's body: its first free input (or its first input).
      output = !m_dragFromOutput;
      port = 0;
      if (m_dragFromOutput)
        for (int i = 0; i < m_doc->inputPortCount(target->id()); ++i)
          if (!m_doc->inputConnection(target->id(), i)) {
            port = i;
            break;
          }
    }
    if (output == m_dragFromOutput) {
      emit refused(output ? tr("an output can only feed an input")
                          : tr("an input can only take an output"));
      return;
    }
    QString why;
    bool ok = m_dragFromOutput
                  ? m_doc->connectPorts(m_dragFrom, m_dragPort, target->id(), port, &why)
                  : m_doc->connectPorts(target->id(), port, m_dragFrom, m_dragPort, &why);
    if (!ok) emit refused(why);
    return;
  }
  QGraphicsScene::mouseReleaseEvent(e);
  if (!m_dragging) {  // a click: nothing moved
    m_dragStart.clear();
    return;
  }
  m_dragging = false;
  // A node drag ends: one undoable move for everything that moved.
  std::map<NodeId, QPointF> moved;
  for (const auto& [id, start] : m_dragStart)
    if (NodeItem* it = itemFor(id); it && it->pos() != m_doc->node(id).pos) moved[id] = it->pos();
  m_dragStart.clear();
  if (!moved.empty()) m_doc->moveNodes(moved, m_dragId);
}

}  // namespace netloom::editor

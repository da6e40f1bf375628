#include "gui/attention_view.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QSpinBox>
#include <QToolTip>
#include <QVBoxLayout>
#include <cmath>

#include "gui/evaluation.h"

namespace netloom::gui {

namespace {

constexpr int kTitleHeight = 18;

}  // namespace

HeatMap::HeatMap(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
}

void HeatMap::setMap(const AttentionMap* map, int64_t head, QStringList queries, QStringList keys,
                     const QString& title) {
  m_map = map;
  m_head = head;
  m_queries = std::move(queries);
  m_keys = std::move(keys);
  m_title = title;
  // The cells drawn once, a pixel each; each paint only scales them.
  m_image = QImage(int(map ? map->keys : 0), int(map ? map->queries : 0), QImage::Format_RGB32);
  for (int64_t i = 0; map && i < map->queries; ++i)
    for (int64_t j = 0; j < map->keys; ++j) {
      // A square root spreads the small weights most rows are made of.
      const double w = std::sqrt(std::clamp(double(map->at(head, i, j)), 0.0, 1.0));
      m_image.setPixelColor(int(j), int(i),
                            QColor::fromRgbF(float(1 - 0.85 * w), float(1 - 0.7 * w), 1.f));
    }
  updateGeometry();
  update();
}

int HeatMap::cell() const {
  if (!m_map || m_map->queries == 0 || m_map->keys == 0) return 1;
  const int side = std::min(width(), height() - kTitleHeight);
  return std::max(1, side / int(std::max(m_map->queries, m_map->keys)));
}

QRect HeatMap::grid() const {
  if (!m_map) return {};
  return QRect(0, kTitleHeight, cell() * int(m_map->keys), cell() * int(m_map->queries));
}

QRect HeatMap::cellRect(int64_t query, int64_t key) const {
  const int c = cell();
  return QRect(int(key) * c, kTitleHeight + int(query) * c, c, c);
}

QSize HeatMap::sizeHint() const {
  const int n = m_map ? int(std::max(m_map->queries, m_map->keys)) : 8;
  const int side = std::clamp(n * 12, 96, 320);
  return QSize(side, side + kTitleHeight);
}

QString HeatMap::describe(QPoint pos) const {
  const QRect g = grid();
  if (!m_map || !g.contains(pos)) return {};
  const int64_t key = (pos.x() - g.x()) / cell(), query = (pos.y() - g.y()) / cell();
  if (query >= m_map->queries || key >= m_map->keys) return {};
  return tr("%1, query %2 → key %3: %4")
      .arg(m_title, m_queries.value(int(query)), m_keys.value(int(key)))
      .arg(double(m_map->at(m_head, query, key)), 0, 'f', 3);
}

void HeatMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.drawText(QRect(0, 0, width(), kTitleHeight), Qt::AlignLeft | Qt::AlignVCenter, m_title);
  if (!m_map) return;
  p.drawImage(grid(), m_image);  // scaled without smoothing: one block per cell
  p.setPen(palette().color(QPalette::Mid));
  p.drawRect(grid().adjusted(0, 0, -1, -1));
}

void HeatMap::mouseMoveEvent(QMouseEvent* e) {
  const QString text = describe(e->position().toPoint());
  if (text.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(e->globalPosition().toPoint(), text, this);
}

AttentionView::AttentionView(QWidget* parent)
    : QWidget(parent),
      m_prompt(new QLineEdit),
      m_sample(new QSpinBox),
      m_go(new QPushButton(tr("Show"))),
      m_layer(new QComboBox),
      m_image(new QLabel),
      m_status(new QLabel),
      m_grid(new QGridLayout) {
  setObjectName("attentionView");
  m_prompt->setPlaceholderText(tr("A prompt to look at"));
  m_sample->setRange(0, 1 << 24);
  m_sample->setPrefix(tr("sample "));
  m_status->setWordWrap(true);
  auto* top = new QHBoxLayout;
  top->addWidget(m_prompt, 1);
  top->addWidget(m_sample);
  top->addWidget(m_go);
  top->addWidget(new QLabel(tr("Layer")));
  top->addWidget(m_layer);
  auto* body = new QHBoxLayout;
  body->addWidget(m_image, 0, Qt::AlignTop);
  body->addLayout(m_grid, 1);
  auto* box = new QVBoxLayout(this);
  box->addLayout(top);
  box->addWidget(m_status);
  box->addLayout(body, 1);
  connect(m_go, &QPushButton::clicked, this, [this] { inspect(); });
  connect(m_prompt, &QLineEdit::returnPressed, this, [this] { inspect(); });
  connect(m_layer, &QComboBox::currentIndexChanged, this, [this](int i) { showLayer(i); });
}

Status AttentionView::showRun(const proto::Project& project, const TrainOptions& opts,
                              const QString& weightsPath) {
  m_project = project;
  m_opts = opts;
  m_weights = weightsPath;
  const bool text = project.data().has_text();
  m_prompt->setVisible(text);
  m_sample->setVisible(!text);
  if (text && m_prompt->text().isEmpty()) m_prompt->setText(tr("The quick brown fox"));
  return inspect();
}

Status AttentionView::inspect() {
  if (m_weights.isEmpty()) return makeError("evaluate a run first: its weights give the maps");
  AttentionQuery q{m_prompt->text().toStdString(), m_sample->value()};
  auto maps = attentionMaps(m_project, m_opts, m_weights.toStdString(), q);
  if (!maps) {
    m_status->setText(QString::fromStdString(maps.error().message));
    return maps.error();
  }
  m_maps = std::move(*maps);
  const QImage img = sampleImage(m_maps.sample, 0);
  m_image->setVisible(!img.isNull());
  if (!img.isNull()) m_image->setPixmap(QPixmap::fromImage(img.scaled(112, 112)));
  m_status->setText(tr("%n attention layer(s); hover a cell for its query, key and weight", "",
                       int(m_maps.layers.size())));
  const QString keep = m_layer->currentText();
  QSignalBlocker quiet(m_layer);
  m_layer->clear();
  for (const AttentionMap& m : m_maps.layers) m_layer->addItem(QString::fromStdString(m.node));
  m_layer->setCurrentIndex(std::max(0, m_layer->findText(keep)));
  showLayer(m_layer->currentIndex());
  return {};
}

// Tokens by their spelling; an image's patches by their place in a square grid.
QStringList AttentionView::labels(int64_t n) const {
  QStringList out;
  if (!m_maps.tokens.empty()) {
    for (int64_t i = 0; i < n; ++i)
      out << tr("%1 %2").arg(i).arg(tokenLabel(m_maps.tokens[size_t(i)]));
    return out;
  }
  const int64_t side = int64_t(std::lround(std::sqrt(double(n))));
  for (int64_t i = 0; i < n; ++i)
    out << (side * side == n ? tr("patch %1 (row %2, column %3)").arg(i).arg(i / side).arg(i % side)
                             : tr("position %1").arg(i));
  return out;
}

void AttentionView::showLayer(int index) {
  for (HeatMap* h : m_heads) delete h;
  m_heads.clear();
  if (index < 0 || index >= int(m_maps.layers.size())) return;
  const AttentionMap& m = m_maps.layers[size_t(index)];
  const int columns = int(std::ceil(std::sqrt(double(m.heads))));
  for (int64_t h = 0; h < m.heads; ++h) {
    auto* map = new HeatMap;
    map->setMap(&m, h, labels(m.queries), labels(m.keys),
                tr("%1, head %2").arg(QString::fromStdString(m.node)).arg(h));
    m_grid->addWidget(map, int(h) / columns, int(h) % columns);
    m_heads.push_back(map);
  }
}

}  // namespace netloom::gui

// The attention maps of a run, in the evaluation window: for a prompt (a language
// model) or a sample of the data (an image's patches), each attention layer's heads
// side by side as heat maps, queries down and keys across. Hovering a cell names the
// query and key (the tokens, or the patches' rows and columns) and the weight.
#pragma once

#include <QImage>
#include <QWidget>
#include <vector>

#include "engine/train/attention_maps.h"

class QComboBox;
class QGridLayout;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace netloom::gui {

// One head's weights as a grid of cells, darker for more weight.
class HeatMap : public QWidget {
  Q_OBJECT

 public:
  explicit HeatMap(QWidget* parent = nullptr);
  // `queries` and `keys` name the rows and columns (one each).
  void setMap(const AttentionMap* map, int64_t head, QStringList queries, QStringList keys,
              const QString& title);
  // The pair and weight of the cell at `pos`, e.g. "query 3 't' → key 1 'a': 0.412";
  // empty outside the cells.
  QString describe(QPoint pos) const;
  QRect cellRect(int64_t query, int64_t key) const;
  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent* e) override;

 private:
  int cell() const;
  QRect grid() const;

  const AttentionMap* m_map = nullptr;
  int64_t m_head = 0;
  QStringList m_queries, m_keys;
  QString m_title;
  QImage m_image;  // a pixel per cell
};

class AttentionView : public QWidget {
  Q_OBJECT

 public:
  explicit AttentionView(QWidget* parent = nullptr);

  // Looks at `weightsPath` of a run of `project`: its first sample, or for a
  // language model the prompt typed (a default one at first).
  Status showRun(const proto::Project& project, const TrainOptions& opts,
                 const QString& weightsPath);
  Status inspect();  // again, for the prompt or sample now set

  QLineEdit* prompt() const { return m_prompt; }
  QSpinBox* sample() const { return m_sample; }
  QComboBox* layer() const { return m_layer; }
  QLabel* status() const { return m_status; }
  const std::vector<HeatMap*>& heads() const { return m_heads; }
  const AttentionMaps& maps() const { return m_maps; }

 private:
  void showLayer(int index);
  QStringList labels(int64_t n) const;

  QLineEdit* m_prompt;
  QSpinBox* m_sample;
  QPushButton* m_go;
  QComboBox* m_layer;
  QLabel *m_image, *m_status;
  QGridLayout* m_grid;
  std::vector<HeatMap*> m_heads;
  proto::Project m_project;
  TrainOptions m_opts;
  QString m_weights;
  AttentionMaps m_maps;
};

}  // namespace netloom::gui

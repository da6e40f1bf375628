#include "gui/parallel_toolbar.h"

#include <QComboBox>
#include <QLabel>
#include <QMenu>
#include <QSpinBox>
#include <QToolBar>

#include "editor/document.h"
#include "editor/scene.h"
#include "engine/train/parallel_layout.h"
#include "gui/main_window.h"

namespace netloom::gui {
namespace {

enum Strategy { kData, kTensor, kPipeline, kZero1, kZero2 };

// The edit `train` makes, or why the model cannot be planned so.
QString problemOf(const editor::GraphDocument& doc, const proto::TrainDef& train) {
  proto::Project p = doc.toProject();
  *p.mutable_train() = train;
  return QString::fromStdString(layoutParallel(p).error);
}

}  // namespace

ParallelToolbar::ParallelToolbar(MainWindow* window, editor::GraphDocument* doc,
                                 editor::GraphScene* scene)
    : QObject(window), m_window(window), m_doc(doc), m_scene(scene) {}

void ParallelToolbar::build(QMenu* menu) {
  QToolBar* bar = m_window->addToolBar(tr("Parallel"));
  bar->setObjectName("parallelToolBar");
  bar->addWidget(new QLabel(tr(" Ranks "), bar));
  m_ranks = new QSpinBox(bar);
  m_ranks->setObjectName("parallelRanks");
  m_ranks->setRange(1, 4096);
  m_ranks->setToolTip(tr("Ranks the run trains on (train.distributed.ranks)"));
  bar->addWidget(m_ranks);
  m_strategy = new QComboBox(bar);
  m_strategy->setObjectName("parallelStrategy");
  m_strategy->addItems(
      {tr("Data parallel"), tr("Tensor parallel"), tr("Pipeline"), tr("ZeRO-1"), tr("ZeRO-2")});
  m_strategy->setToolTip(tr("How the whole model spreads over the ranks"));
  bar->addWidget(m_strategy);
  m_group = new QSpinBox(bar);
  m_group->setObjectName("parallelGroup");
  m_group->setRange(2, 4096);
  m_group->setToolTip(tr("Ranks a tensor group splits each model over, or a pipeline's stages"));
  bar->addWidget(m_group);
  for (QSpinBox* s : {m_ranks, m_group})
    connect(s, &QSpinBox::editingFinished, this, &ParallelToolbar::applyWhole);
  connect(m_strategy, &QComboBox::activated, this, &ParallelToolbar::applyWhole);
  const std::pair<const char*, QString> splits[] = {{"column", tr("Split by &Columns")},
                                                    {"row", tr("Split by &Rows")},
                                                    {"heads", tr("Split by &Heads")},
                                                    {"data", tr("Split by &Batch")},
                                                    {"", tr("&Clear Splits")}};
  for (const auto& [kind, text] : splits) {
    const QString k = kind;
    QAction* a = m_window->makeAction(
        menu, k.isEmpty() ? "clearSplits" : "split" + k.left(1).toUpper() + k.mid(1), text, {},
        [this, k] { splitSelection(k); }, this);
    bar->addAction(a);
  }
  m_stage = new QSpinBox(bar);
  m_stage->setObjectName("parallelStage");
  m_stage->setRange(0, 4095);
  m_stage->setPrefix(tr("stage "));
  m_stage->setToolTip(tr("The pipeline stage Place in Stage puts the selected nodes in"));
  bar->addWidget(m_stage);
  bar->addAction(m_window->makeAction(
      menu, "placeInStage", tr("&Place in Stage"), {}, [this] { placeSelection(m_stage->value()); },
      this));
  connect(m_doc, &editor::GraphDocument::settingsChanged, this, &ParallelToolbar::reload);
  connect(m_doc, &editor::GraphDocument::reset, this, &ParallelToolbar::reload);
  reload();
}

void ParallelToolbar::reload() {
  if (!m_ranks) return;
  m_loading = true;
  const proto::Distributed& d = m_doc->train().distributed();
  m_ranks->setValue(std::max(1, d.ranks()));
  const int strategy = d.pipeline_stages() > 1   ? kPipeline
                       : d.tensor_parallel() > 1 ? kTensor
                       : d.zero() == 1           ? kZero1
                       : d.zero() == 2           ? kZero2
                                                 : kData;
  m_strategy->setCurrentIndex(strategy);
  m_group->setValue(std::max(2, std::max(d.tensor_parallel(), d.pipeline_stages())));
  m_group->setEnabled(strategy == kTensor || strategy == kPipeline);
  m_loading = false;
}

bool ParallelToolbar::commit(const QString& text, const proto::TrainDef& train) {
  if (QString why = problemOf(*m_doc, train); !why.isEmpty()) {
    m_window->showMessage(tr("Refused: %1").arg(why));
    reload();
    return false;
  }
  m_doc->setSettings(train, m_doc->data(), text);
  return true;
}

void ParallelToolbar::applyWhole() {
  if (m_loading) return;
  proto::TrainDef train = m_doc->train();
  proto::Distributed* d = train.mutable_distributed();
  const int strategy = m_strategy->currentIndex();
  d->set_ranks(m_ranks->value());
  d->set_tensor_parallel(strategy == kTensor ? m_group->value() : 0);
  d->set_pipeline_stages(strategy == kPipeline ? m_group->value() : 0);
  d->set_zero(strategy == kZero1 ? 1 : strategy == kZero2 ? 2 : 0);
  if (train.SerializeAsString() == m_doc->train().SerializeAsString()) return;
  commit(tr("Parallel: %1 on %2 ranks").arg(m_strategy->currentText()).arg(m_ranks->value()),
         train);
}

bool ParallelToolbar::splitSelection(const QString& kind) {
  std::vector<editor::NodeId> selected = m_scene->selectedNodes();
  if (selected.empty()) {
    m_window->showMessage(tr("Select the nodes to split first"));
    return false;
  }
  proto::TrainDef train = m_doc->train();
  proto::Distributed* d = train.mutable_distributed();
  if (!kind.isEmpty() && d->tensor_parallel() < 2) {  // a split needs a tensor group
    d->set_ranks(std::max(2, d->ranks()));
    d->set_tensor_parallel(d->ranks());
    d->set_pipeline_stages(0);
    d->set_zero(0);
  }
  const proto::Project project = m_doc->toProject();
  for (editor::NodeId id : selected) {
    const std::string name = m_doc->node(id).def.name();
    std::string sig;
    if (!kind.isEmpty()) {
      sig = signatureFor(project, name, kind.toStdString(), d->tensor_parallel());
      if (sig.empty()) {
        m_window->showMessage(
            tr("Refused: node '%1' cannot be split by %2").arg(QString::fromStdString(name), kind));
        return false;
      }
    }
    auto* hints = d->mutable_sbp();
    for (int k = hints->size() - 1; k >= 0; --k)
      if (hints->Get(k).node() == name) hints->DeleteSubrange(k, 1);
    if (!sig.empty()) {
      proto::SbpHint* h = hints->Add();
      h->set_node(name);
      h->set_signature(sig);
    }
  }
  return commit(kind.isEmpty() ? tr("Clear splits") : tr("Split by %1").arg(kind), train);
}

bool ParallelToolbar::placeSelection(int stage) {
  std::vector<editor::NodeId> selected = m_scene->selectedNodes();
  if (selected.empty()) {
    m_window->showMessage(tr("Select the nodes to place first"));
    return false;
  }
  proto::TrainDef train = m_doc->train();
  proto::Distributed* d = train.mutable_distributed();
  if (stage >= 0 && d->pipeline_stages() < stage + 1) {  // a stage needs a pipeline that long
    d->set_pipeline_stages(std::max(2, stage + 1));
    d->set_ranks(std::max(d->ranks(), d->pipeline_stages()));
    d->set_tensor_parallel(0);
    d->set_zero(0);
  }
  for (editor::NodeId id : selected) {
    const std::string name = m_doc->node(id).def.name();
    auto* hints = d->mutable_stages();
    for (int k = hints->size() - 1; k >= 0; --k)
      if (hints->Get(k).node() == name) hints->DeleteSubrange(k, 1);
    if (stage < 0) continue;
    proto::StageHint* h = hints->Add();
    h->set_node(name);
    h->set_stage(stage);
  }
  return commit(stage < 0 ? tr("Clear stage placements") : tr("Place in stage %1").arg(stage),
                train);
}

}  // namespace netloom::gui

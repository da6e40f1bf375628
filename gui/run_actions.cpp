#include "gui/run_actions.h"

#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QRegularExpression>
#include <QTabWidget>
#include <QTableWidget>
#include <QToolBar>
#include <QVBoxLayout>

#include "editor/document.h"
#include "editor/panels.h"
#include "engine/train/attention_maps.h"
#include "gui/attention_view.h"
#include "gui/charts.h"
#include "gui/evaluation.h"
#include "gui/hosts_dialog.h"
#include "gui/main_window.h"
#include "gui/run_comparison.h"
#include "gui/run_controller.h"
#include "gui/screen_fit.h"
#include "gui/target_selector.h"
#include "remote/hosts.h"

namespace netloom::gui {

RunActions::RunActions(MainWindow* window, editor::GraphDocument* doc, RunController* runs)
    : QObject(window), m_window(window), m_doc(doc), m_runs(runs) {}

void RunActions::build() {
  m_menu = m_window->menuBar()->addMenu(tr("&Run"));
  addRunMenu(m_menu);
  addRunListActions();
  setHostPrompts();
}

void RunActions::addRunMenu(QMenu* run) {
  auto make = [this, run](const QString& name, const QString& text, QKeySequence key,
                          std::function<void()> fn) {
    return m_window->makeAction(run, name, text, key, std::move(fn), this);
  };
  make("run", tr("&Run"), QKeySequence(Qt::Key_F5), [this] { startRun(false); });
  make("pauseRun", tr("&Pause / Continue"), QKeySequence(Qt::Key_F6), [this] {
    if (m_runs->paused())
      m_runs->resume();
    else
      m_runs->pause();
  });
  make("stopRun", tr("&Stop"), QKeySequence(Qt::SHIFT | Qt::Key_F5), [this] { m_runs->stop(); });
  make("cancelRun", tr("C&ancel"), {}, [this] { m_runs->cancel(); });
  addRemoteActions(run);
  // The toolbar comes before Hosts…, whose dialog changes what its selector offers.
  addToolBar();
  make("resumeRun", tr("Resume from &Checkpoint"), {}, [this] { startRun(true); });
  make("evaluateRun", tr("&Evaluate Run"), QKeySequence(Qt::Key_F7), [this] { evaluateRun(); });
  run->addSeparator();
  QAction* child = make("childProcess", tr("Train in a Separate &Process"), {}, [this] {
    m_runs->setChildProcess(m_window->action("childProcess")->isChecked());
  });
  child->setCheckable(true);
  make("compareRuns", tr("Co&mpare Checked Runs…"), {}, [this] {
    auto runs = m_runs->checkedRuns();
    if (runs.size() < 2)
      return m_window->showMessage(tr("Check two or more runs in the Runs list"));
    compareRuns(runs);
  });
}

void RunActions::addRemoteActions(QMenu* run) {
  m_window->makeAction(
      run, "reattachRun", tr("Reattach to the Checked Remote Run"), {},
      [this] {
        auto checked = m_runs->checkedRuns();
        if (checked.size() != 1) return m_window->showMessage(tr("Check one remote run to follow"));
        if (m_runs->running()) return m_window->showMessage(tr("A run is in progress"));
        if (!m_runs->reattach(checked[0]->dir))
          m_window->showMessage(
              tr("Run %1 is not a remote run that is still going").arg(checked[0]->name));
      },
      this);
  m_window->makeAction(
      run, "deleteRemoteJob", tr("&Delete Job Folder on Host"), {},
      [this] {
        auto checked = m_runs->checkedRuns();
        const RunRecord* r = checked.size() == 1 ? checked[0] : m_runs->current();
        if (!r) return m_window->showMessage(tr("Check the run whose job folder to delete"));
        QApplication::setOverrideCursor(Qt::WaitCursor);
        Status s = m_runs->deleteRemoteJob(*r);
        QApplication::restoreOverrideCursor();
        m_window->showMessage(s ? tr("Deleted the job folder of run %1 on its host").arg(r->name)
                                : QString::fromStdString(s.message()));
      },
      this);
}

void RunActions::addToolBar() {
  QToolBar* bar = m_window->addToolBar(tr("Run"));
  bar->setObjectName("runToolBar");
  bar->addAction(m_window->action("run"));
  bar->addAction(m_window->action("pauseRun"));
  bar->addAction(m_window->action("stopRun"));
  // Where runs go: this computer, or a saved host.
  m_targets = new TargetSelector(m_window, m_doc, m_runs, m_window->action("run"));
  bar->addWidget(m_targets->combo());
  QAction* hosts = m_window->makeAction(
      m_menu, "manageHosts", tr("&Hosts…"), {},
      [this] {
        HostsDialog dialog(QString::fromStdString(remote::defaultHostsPath()), m_window);
        dialog.exec();
        m_targets->reloadHosts();
      },
      this);
  bar->addAction(hosts);
  m_targets->reloadHosts();
}

void RunActions::setHostPrompts() {
  m_runs->acceptHostKey = [this](const remote::HostKey& k) {
    return m_window->ask(
               tr("Unknown host key"),
               tr("The authenticity of the host can't be established.\n%1 key fingerprint:\n%2\n\n"
                  "Trust it and connect?")
                   .arg(QString::fromStdString(k.type), QString::fromStdString(k.fingerprint)),
               QMessageBox::Yes | QMessageBox::No) == QMessageBox::Yes;
  };
  m_runs->askPassphrase = [this](const QString& keyFile) {
    return QInputDialog::getText(m_window, tr("SSH"), tr("The %1:").arg(keyFile),
                                 QLineEdit::Password);
  };
}

// The Runs list's own: on the selected run (else the single checked one).
void RunActions::addRunListActions() {
  changeRun("renameRun", tr("Rename…"), [this](RunRecord& r) {
    QString t = askText(tr("Rename run %1").arg(r.name), r.label());
    if (!t.isNull()) r.title = t.trimmed() == r.name ? QString() : t.trimmed();
  });
  changeRun("tagRun", tr("Tags…"), [this](RunRecord& r) {
    QString t =
        askText(tr("Tags of run %1 (separated by spaces)").arg(r.label()), r.tags.join(" "));
    if (!t.isNull()) r.tags = t.split(QRegularExpression("[\\s,#]+"), Qt::SkipEmptyParts);
  });
  changeRun("noteRun", tr("Note…"), [this](RunRecord& r) {
    QString t = askText(tr("Note on run %1").arg(r.label()), r.note);
    if (!t.isNull()) r.note = t;
  });
  QAction* del = new QAction(tr("Delete Run…"), m_window);
  del->setObjectName("deleteRun");
  connect(del, &QAction::triggered, this, &RunActions::deleteRun);
  m_runs->history()->addAction(del);
  m_runs->history()->setContextMenuPolicy(Qt::ActionsContextMenu);
}

void RunActions::changeRun(const char* name, const QString& text,
                           std::function<void(RunRecord&)> change) {
  QAction* a = new QAction(text, m_window);
  a->setObjectName(name);
  connect(a, &QAction::triggered, this, [this, change] {
    const RunRecord* run = m_runs->runHistory()->selected();
    if (!run) return m_window->showMessage(tr("Select a run in the Runs list"));
    RunRecord copy = *run;
    change(copy);
    if (Status s = saveRunMeta(copy); !s)
      return m_window->showMessage(QString::fromStdString(s.message()));
    m_runs->reloadHistory();
  });
  m_runs->history()->addAction(a);
}

QString RunActions::askText(const QString& title, const QString& now) const {
  return m_window->namePrompt()
             ? m_window->namePrompt()(title, now)
             : QInputDialog::getText(m_window, title, title, QLineEdit::Normal, now);
}

void RunActions::deleteRun() {
  const RunRecord* run = m_runs->runHistory()->selected();
  if (!run) return m_window->showMessage(tr("Select a run in the Runs list"));
  if (m_runs->running() && m_runs->current() && m_runs->current()->dir == run->dir)
    return m_window->showMessage(tr("Run %1 is in progress: stop it first").arg(run->label()));
  if (m_window->ask(
          tr("Delete run %1?").arg(run->label()),
          tr("Its folder %1 goes, with its events, checkpoints and weights.").arg(run->dir),
          QMessageBox::Yes | QMessageBox::No) != QMessageBox::Yes)
    return;
  const QString label = run->label();
  if (Status s = deleteRunFolder(*run); !s)
    return m_window->showMessage(QString::fromStdString(s.message()));
  m_runs->reloadHistory();
  m_window->showMessage(tr("Deleted run %1").arg(label));
}

const RunRecord* RunActions::runToUse() const {
  auto checked = m_runs->checkedRuns();
  return checked.size() == 1      ? checked[0]
         : m_runs->current()      ? m_runs->current()
         : m_runs->runs().empty() ? nullptr
                                  : &m_runs->runs().back();
}

// A table in the spirit of TensorBoard's HParams: one column per run, first how each
// ended, then one row per setting that differs between them. It scrolls, and stays
// open beside the charts.
void RunActions::compareRuns(const std::vector<const RunRecord*>& runs) {
  SettingsDiff d = compareSettings(runs);
  auto* dialog = new QDialog(m_window);
  dialog->setObjectName("compareDialog");
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  QStringList names;
  for (const RunRecord* r : runs) names << r->name;
  dialog->setWindowTitle(tr("Compare runs %1").arg(names.join(", ")));
  auto* table = new QTableWidget(int(d.results.size() + d.keys.size()), int(runs.size()));
  table->setObjectName("compareTable");
  table->setHorizontalHeaderLabels(names);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  QStringList rows;
  // How each run ended stands out by the palette's own alternate shade and bold text,
  // so it reads in a light theme and a dark one.
  const QPalette pal = table->palette();
  QFont bold = table->font();
  bold.setBold(true);
  auto fill = [&](int row, const std::string& key, const std::vector<std::string>& values,
                  bool result) {
    rows << settingLabel(key);
    for (size_t c = 0; c < values.size(); ++c) {
      auto* it = new QTableWidgetItem(values[c].empty() ? QString("—")
                                                        : QString::fromStdString(values[c]));
      if (result) {
        it->setBackground(pal.color(QPalette::AlternateBase));
        it->setForeground(pal.color(QPalette::Text));
        it->setFont(bold);
      }
      it->setToolTip(QString::fromStdString(key));
      table->setItem(row, int(c), it);
    }
  };
  int row = 0;
  for (size_t i = 0; i < d.results.size(); ++i) fill(row++, d.results[i], d.resultValues[i], true);
  for (size_t i = 0; i < d.keys.size(); ++i) fill(row++, d.keys[i], d.values[i], false);
  table->setVerticalHeaderLabels(rows);
  table->resizeColumnsToContents();
  auto* layout = new QVBoxLayout(dialog);
  if (d.keys.empty()) layout->addWidget(new QLabel(tr("The runs' settings are the same.")));
  layout->addWidget(table);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::close);
  layout->addWidget(buttons);
  // As large as it needs, never larger than most of the window.
  fitToScreen(dialog, QSize(std::min(m_window->width() * 9 / 10, 260 + 160 * int(runs.size())),
                            std::min(m_window->height() * 8 / 10, 120 + 26 * (row + 1))));
  dialog->show();
}

QString RunActions::weightsOf(const RunRecord* run) {
  // The final weights, or while a run goes (or after one stopped early) its latest
  // checkpoint.
  // A remote run in progress: its latest checkpoint comes from the host first.
  if (run && m_runs->remoteRun() && m_runs->current() && run->dir == m_runs->current()->dir) {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    Status fetched = m_runs->fetchRemoteCheckpoints();
    QApplication::restoreOverrideCursor();
    if (!fetched) m_window->showMessage(QString::fromStdString(fetched.message()));
  }
  return run && QFileInfo::exists(run->weightsPath()) ? run->weightsPath()
         : run                                        ? latestCheckpoint(*run)
                                                      : QString();
}

Result<GenerateSource> RunActions::generateSource() {
  const RunRecord* run = runToUse();
  if (!run) return makeError("There is no run to sample from yet: train the model first");
  QString weights = weightsOf(run);
  if (weights.isEmpty())
    return makeError("Run " + run->label().toStdString() +
                     " has no weights or checkpoint yet: set Checkpoints in Training Setup "
                     "to sample from a model while it trains");
  return GenerateSource{run->project, QFileInfo(m_doc->filePath()).absolutePath(), weights,
                        run->label()};
}

// Classification runs: the test set's confusion matrix and samples. Models with
// attention: their attention maps too; a language model has those alone.
bool RunActions::evaluateRun() {
  const RunRecord* run = runToUse();
  QString weights = weightsOf(run);
  if (weights.isEmpty()) {
    m_window->showMessage(tr("No run with weights or a checkpoint to evaluate"));
    return false;
  }
  TrainOptions o;
  o.projectDir = QFileInfo(m_doc->filePath()).absolutePath().toStdString();
  const bool text = run->project.data().has_text();
  const bool attention = hasAttention(run->project.model());
  QApplication::setOverrideCursor(Qt::WaitCursor);
  Status s = text ? Status{} : m_window->evaluation()->evaluateRun(run->project, o, weights);
  Status maps =
      attention && s ? m_window->attention()->showRun(run->project, o, weights) : Status{};
  QApplication::restoreOverrideCursor();
  if (!s || !maps) {
    m_window->showMessage(tr("Evaluation of %1 failed: %2")
                              .arg(run->name, QString::fromStdString((!s ? s : maps).message())));
    return false;
  }
  QTabWidget* tabs = m_window->evaluationTabs();
  tabs->setTabEnabled(0, !text);
  tabs->setTabEnabled(1, attention);
  tabs->setCurrentIndex(text ? 1 : 0);
  fitToScreen(m_window->evaluationWindow(), QSize(1100, 760));
  m_window->evaluationWindow()->show();
  m_window->evaluationWindow()->raise();
  if (text)
    m_window->showMessage(tr("Run %1: attention maps of the prompt").arg(run->name));
  else
    m_window->showMessage(tr("Run %1: test accuracy %2 on %3 samples")
                              .arg(run->name)
                              .arg(m_window->evaluation()->evaluation().accuracy, 0, 'f', 4)
                              .arg(m_window->evaluation()->predictions().samples.size()));
  return true;
}

void RunActions::startRun(bool resume) {
  const RunRecord* from = nullptr;
  if (resume) {
    from = runToUse();
    if (!from) return m_window->showMessage(tr("There is no run to resume"));
  }
  // Runs are kept beside the project: an untitled one is saved first, then trains.
  if (!from && m_doc->filePath().isEmpty() && !m_window->saveAs()) {
    m_window->showMessage(
        tr("Not started: a run needs the project saved, since its runs are kept "
           "beside it"));
    return m_window->raiseDockOf(m_window->problems());
  }
  Status s = m_runs->start(from);
  if (!s) m_window->showMessage(QString::fromStdString(s.message()));
  // The charts come to the front when a run starts; the problems when it cannot.
  QWidget* front = s ? static_cast<QWidget*>(m_runs->charts()) : m_window->problems();
  m_window->raiseDockOf(front);
}

}  // namespace netloom::gui

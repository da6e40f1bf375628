// The main window's Run menu and toolbar: running on this computer or a saved
// host, pausing, stopping, evaluating, comparing runs, and the device selector.
#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalBlocker>
#include <QTableWidget>
#include <QThread>
#include <QToolBar>
#include <QVBoxLayout>

#include "editor/panels.h"
#include "gui/charts.h"
#include "gui/evaluation.h"
#include "gui/hosts_dialog.h"
#include "gui/main_window.h"
#include "gui/remote_target.h"
#include "gui/run_comparison.h"
#include "gui/run_controller.h"
#include "gui/screen_fit.h"
#include "remote/hosts.h"

namespace netloom::gui {

namespace {
constexpr int kAllHosts = -2;  // the device selector's "all saved hosts" item
}  // namespace

void MainWindow::buildRunActions() {
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  auto make = [&](const char* name, const QString& text, QKeySequence key,
                  std::function<void()> fn) {
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    if (!key.isEmpty()) a->setShortcut(key);
    connect(a, &QAction::triggered, this, fn);
    run->addAction(a);
    return a;
  };
  QAction* runAction =
      make("run", tr("&Run"), QKeySequence(Qt::Key_F5), [this] { startRun(false); });
  make("pauseRun", tr("&Pause / Continue"), QKeySequence(Qt::Key_F6), [this] {
    if (m_runs->paused())
      m_runs->resume();
    else
      m_runs->pause();
  });
  QAction* stopAction = make("stopRun", tr("&Stop"), QKeySequence(Qt::SHIFT | Qt::Key_F5),
                             [this] { m_runs->stop(); });
  make("cancelRun", tr("C&ancel"), {}, [this] { m_runs->cancel(); });
  make("reattachRun", tr("Reattach to the Checked Remote Run"), {}, [this] {
    auto checked = m_runs->checkedRuns();
    if (checked.size() != 1) return showMessage(tr("Check one remote run to follow"));
    if (m_runs->running()) return showMessage(tr("A run is in progress"));
    if (!m_runs->reattach(checked[0]->dir))
      showMessage(tr("Run %1 is not a remote run that is still going").arg(checked[0]->name));
  });
  make("deleteRemoteJob", tr("&Delete Job Folder on Host"), {}, [this] {
    auto checked = m_runs->checkedRuns();
    const RunRecord* run = checked.size() == 1 ? checked[0] : m_runs->current();
    if (!run) return showMessage(tr("Check the run whose job folder to delete"));
    QApplication::setOverrideCursor(Qt::WaitCursor);
    Status s = m_runs->deleteRemoteJob(*run);
    QApplication::restoreOverrideCursor();
    showMessage(s ? tr("Deleted the job folder of run %1 on its host").arg(run->name)
                  : QString::fromStdString(s.message()));
  });
  // The Runs list's own: on the selected run (else the single checked one).
  auto selectedRun = [this]() -> const RunRecord* {
    QListWidgetItem* it = m_runs->history()->currentItem();
    auto checked = m_runs->checkedRuns();
    const QString dir = it                    ? it->data(Qt::UserRole).toString()
                        : checked.size() == 1 ? checked[0]->dir
                                              : QString();
    for (const RunRecord& r : m_runs->runs())
      if (r.dir == dir) return &r;
    return nullptr;
  };
  auto edit = [this, selectedRun](const char* name, const QString& text,
                                  std::function<void(RunRecord&)> change) {
    QAction* a = new QAction(text, this);
    a->setObjectName(name);
    connect(a, &QAction::triggered, this, [this, selectedRun, change] {
      const RunRecord* run = selectedRun();
      if (!run) return showMessage(tr("Select a run in the Runs list"));
      RunRecord copy = *run;
      change(copy);
      if (Status s = saveRunMeta(copy); !s) return showMessage(QString::fromStdString(s.message()));
      m_runs->reloadHistory();
    });
    m_runs->history()->addAction(a);
    return a;
  };
  auto ask = [this](const QString& title, const QString& now) {
    return m_namePrompt ? m_namePrompt(title, now)
                        : QInputDialog::getText(this, title, title, QLineEdit::Normal, now);
  };
  edit("renameRun", tr("Rename…"), [ask](RunRecord& r) {
    QString t = ask(tr("Rename run %1").arg(r.name), r.label());
    if (!t.isNull()) r.title = t.trimmed() == r.name ? QString() : t.trimmed();
  });
  edit("tagRun", tr("Tags…"), [ask](RunRecord& r) {
    QString t = ask(tr("Tags of run %1 (separated by spaces)").arg(r.label()), r.tags.join(" "));
    if (!t.isNull()) r.tags = t.split(QRegularExpression("[\\s,#]+"), Qt::SkipEmptyParts);
  });
  edit("noteRun", tr("Note…"), [ask](RunRecord& r) {
    QString t = ask(tr("Note on run %1").arg(r.label()), r.note);
    if (!t.isNull()) r.note = t;
  });
  QAction* del = new QAction(tr("Delete Run…"), this);
  del->setObjectName("deleteRun");
  connect(del, &QAction::triggered, this, [this, selectedRun] {
    const RunRecord* run = selectedRun();
    if (!run) return showMessage(tr("Select a run in the Runs list"));
    if (m_runs->running() && m_runs->current() && m_runs->current()->dir == run->dir)
      return showMessage(tr("Run %1 is in progress: stop it first").arg(run->label()));
    if (m_prompt(tr("Delete run %1?").arg(run->label()),
                 tr("Its folder %1 goes, with its events, checkpoints and weights.").arg(run->dir),
                 QMessageBox::Yes | QMessageBox::No) != QMessageBox::Yes)
      return;
    const QString label = run->label();
    if (Status s = deleteRunFolder(*run); !s)
      return showMessage(QString::fromStdString(s.message()));
    m_runs->reloadHistory();
    showMessage(tr("Deleted run %1").arg(label));
  });
  m_runs->history()->addAction(del);
  m_runs->history()->setContextMenuPolicy(Qt::ActionsContextMenu);

  QToolBar* bar = addToolBar(tr("Run"));
  bar->setObjectName("runToolBar");
  bar->addAction(runAction);
  bar->addAction(action("pauseRun"));
  bar->addAction(stopAction);
  // Where runs go: this computer, or a saved host.
  m_device = new QComboBox;
  m_device->setObjectName("deviceSelector");
  m_device->setToolTip(
      tr("Where Run trains: this computer's CPU or GPUs, or a host reached over SSH (its GPUs "
         "are listed once Hosts… > Test Connection has found them)"));
  bar->addWidget(m_device);
  connect(m_device, &QComboBox::currentIndexChanged, this, [this] {
    const QVariantList target = m_device->currentData().toList();
    const int host = target.value(0, -1).toInt();
    std::vector<remotepb::Host> rankHosts;
    if (host == kAllHosts)  // a rank on every saved host, rank 0 on the first
      rankHosts.assign(m_hosts.hosts().begin(), m_hosts.hosts().end());
    if (host >= 0 && host < m_hosts.hosts_size())
      m_runs->setRemoteHost(m_hosts.hosts(host));
    else if (!rankHosts.empty())
      m_runs->setRemoteHost(rankHosts[0]);
    else
      m_runs->setRemoteHost(std::nullopt);
    m_runs->setRankHosts(rankHosts);
    m_runs->setDevice(target.value(1).toString().toStdString());
    m_runs->setRanks(target.value(2, 1).toInt());
    m_runs->setThreadRanks(target.value(3, false).toBool());
    // Run says where it trains, and the project remembers it for next time.
    const QString where = m_device->currentText();
    QAction* run = action("run");
    run->setText(tr("&Run on %1").arg(where.size() > 32 ? where.left(31) + "…" : where));
    run->setToolTip(tr("Run on %1 (F5)").arg(where));
    if (!m_restoringTarget && !m_doc.filePath().isEmpty())
      QSettings().setValue("targets/" + QFileInfo(m_doc.filePath()).absoluteFilePath(), where);
  });
  QAction* hosts = make("manageHosts", tr("&Hosts…"), {}, [this] {
    HostsDialog dialog(QString::fromStdString(remote::defaultHostsPath()), this);
    dialog.exec();
    reloadHosts();
  });
  bar->addAction(hosts);
  for (ListedDevice& d : parseDeviceList(listDevices()))
    if (d.id != "cpu") m_localDevices.push_back(std::move(d));
  reloadHosts();
  m_runs->acceptHostKey = [this](const remote::HostKey& k) {
    return m_prompt(
               tr("Unknown host key"),
               tr("The authenticity of the host can't be established.\n%1 key fingerprint:\n%2\n\n"
                  "Trust it and connect?")
                   .arg(QString::fromStdString(k.type), QString::fromStdString(k.fingerprint)),
               QMessageBox::Yes | QMessageBox::No) == QMessageBox::Yes;
  };
  m_runs->askPassphrase = [this](const QString& keyFile) {
    return QInputDialog::getText(this, tr("SSH"), tr("The %1:").arg(keyFile), QLineEdit::Password);
  };
  make("resumeRun", tr("Resume from &Checkpoint"), {}, [this] { startRun(true); });
  make("evaluateRun", tr("&Evaluate Run"), QKeySequence(Qt::Key_F7), [this] { evaluateRun(); });
  run->addSeparator();
  QAction* child = make("childProcess", tr("Train in a Separate &Process"), {},
                        [this] { m_runs->setChildProcess(action("childProcess")->isChecked()); });
  child->setCheckable(true);
  make("compareRuns", tr("Co&mpare Checked Runs…"), {}, [this] {
    auto runs = m_runs->checkedRuns();
    if (runs.size() < 2) return showMessage(tr("Check two or more runs in the Runs list"));
    compareRuns(runs);
  });
}

// A table in the spirit of TensorBoard's HParams: one column per run, first how each
// ended, then one row per setting that differs between them. It scrolls, and stays
// open beside the charts.
void MainWindow::compareRuns(const std::vector<const RunRecord*>& runs) {
  SettingsDiff d = compareSettings(runs);
  auto* dialog = new QDialog(this);
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
  fitToScreen(dialog, QSize(std::min(width() * 9 / 10, 260 + 160 * int(runs.size())),
                            std::min(height() * 8 / 10, 120 + 26 * (row + 1))));
  dialog->show();
}

bool MainWindow::evaluateRun() {
  auto checked = m_runs->checkedRuns();
  const RunRecord* run = checked.size() == 1      ? checked[0]
                         : m_runs->current()      ? m_runs->current()
                         : m_runs->runs().empty() ? nullptr
                                                  : &m_runs->runs().back();
  // The final weights, or while a run goes (or after one stopped early) its latest
  // checkpoint.
  // A remote run in progress: its latest checkpoint comes from the host first.
  if (run && m_runs->remoteRun() && m_runs->current() && run->dir == m_runs->current()->dir) {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    Status fetched = m_runs->fetchRemoteCheckpoints();
    QApplication::restoreOverrideCursor();
    if (!fetched) showMessage(QString::fromStdString(fetched.message()));
  }
  QString weights = run && QFileInfo::exists(run->weightsPath()) ? run->weightsPath()
                    : run                                        ? latestCheckpoint(*run)
                                                                 : QString();
  if (weights.isEmpty()) {
    showMessage(tr("No run with weights or a checkpoint to evaluate"));
    return false;
  }
  TrainOptions o;
  o.projectDir = QFileInfo(m_doc.filePath()).absolutePath().toStdString();
  QApplication::setOverrideCursor(Qt::WaitCursor);
  Status s = m_evaluation->evaluateRun(run->project, o, weights);
  QApplication::restoreOverrideCursor();
  if (!s) {
    showMessage(
        tr("Evaluation of %1 failed: %2").arg(run->name, QString::fromStdString(s.message())));
    return false;
  }
  fitToScreen(m_evaluationWindow, QSize(1100, 760));
  m_evaluationWindow->show();
  m_evaluationWindow->raise();
  showMessage(tr("Run %1: test accuracy %2 on %3 samples")
                  .arg(run->name)
                  .arg(m_evaluation->evaluation().accuracy, 0, 'f', 4)
                  .arg(m_evaluation->predictions().samples.size()));
  return true;
}

void MainWindow::startRun(bool resume) {
  const RunRecord* from = nullptr;
  if (resume) {
    auto checked = m_runs->checkedRuns();
    from = checked.size() == 1      ? checked[0]
           : m_runs->current()      ? m_runs->current()
           : m_runs->runs().empty() ? nullptr
                                    : &m_runs->runs().back();
    if (!from) return showMessage(tr("There is no run to resume"));
  }
  // Runs are kept beside the project: an untitled one is saved first, then trains.
  if (!from && m_doc.filePath().isEmpty() && !saveAs()) {
    showMessage(
        tr("Not started: a run needs the project saved, since its runs are kept "
           "beside it"));
    return raiseDockOf(m_problems);
  }
  Status s = m_runs->start(from);
  if (!s) showMessage(QString::fromStdString(s.message()));
  // The charts come to the front when a run starts; the problems when it cannot.
  QWidget* front = s ? static_cast<QWidget*>(m_runs->charts()) : m_problems;
  raiseDockOf(front);
}

void MainWindow::raiseDockOf(QWidget* w) {
  // A dock holds its widget in a scroll area.
  for (QDockWidget* d : findChildren<QDockWidget*>())
    if (d->widget() == w || (d->widget() && d->widget()->isAncestorOf(w))) d->show(), d->raise();
}

void MainWindow::restoreTarget() {
  QString want =
      QSettings().value("targets/" + QFileInfo(m_doc.filePath()).absoluteFilePath()).toString();
  // Following a remote run: its host, whatever was picked last.
  if (auto* t = qobject_cast<RemoteTarget*>(m_runs->target()); t && m_runs->remoteRun())
    want = QString::fromStdString(t->host().name());
  const int at = want.isEmpty() ? -1 : m_device->findText(want);
  if (at < 0 || at == m_device->currentIndex()) return;
  m_restoringTarget = true;
  m_device->setCurrentIndex(at);
  m_restoringTarget = false;
}

void MainWindow::reloadHosts() {
  auto loaded = remote::loadHosts(remote::defaultHostsPath());
  if (!loaded) showMessage(QString::fromStdString(loaded.error().message));
  m_hosts = loaded ? *loaded : remotepb::HostList();
  const QString was = m_device->currentText();
  QSignalBlocker block(m_device);
  m_device->clear();
  // Each item's data: {host index (-1: this computer), device ("": the project's), ranks,
  // whether the ranks are threads of one process}.
  m_device->addItem(tr("This computer"), QVariantList{-1, QString()});
  // Data-parallel CPU ranks, one core each at least: processes, or threads of one.
  for (int n = 2; n <= QThread::idealThreadCount(); n *= 2) {
    m_device->addItem(tr("This computer — %1 CPU ranks (data parallel)").arg(n),
                      QVariantList{-1, QString("cpu"), n});
    m_device->addItem(tr("This computer — %1 CPU ranks in one process (data parallel)").arg(n),
                      QVariantList{-1, QString("cpu"), n, true});
  }
  // And on GPUs, one rank per device.
  if (m_localDevices.size() >= 2)
    m_device->addItem(tr("This computer — %1 GPUs (data parallel)").arg(int(m_localDevices.size())),
                      QVariantList{-1, QString("cuda"), int(m_localDevices.size())});
  for (const ListedDevice& d : m_localDevices)
    m_device->addItem(tr("This computer — %1 (%2)")
                          .arg(QString::fromStdString(d.id), QString::fromStdString(d.label)),
                      QVariantList{-1, QString::fromStdString(d.id)});
  for (int i = 0; i < m_hosts.hosts_size(); ++i) {
    const remotepb::Host& h = m_hosts.hosts(i);
    m_device->addItem(QString::fromStdString(h.name()), QVariantList{i, QString()});
    std::string lines;
    for (const std::string& line : h.devices()) lines += line + "\n";
    for (const ListedDevice& d : parseDeviceList(lines))
      if (d.id != "cpu")
        m_device->addItem(tr("%1 — %2 (%3)")
                              .arg(QString::fromStdString(h.name()), QString::fromStdString(d.id),
                                   QString::fromStdString(d.label)),
                          QVariantList{i, QString::fromStdString(d.id)});
  }
  if (m_hosts.hosts_size() > 1)
    m_device->addItem(tr("All saved hosts — %1 ranks (data parallel)").arg(m_hosts.hosts_size()),
                      QVariantList{kAllHosts, QString(), m_hosts.hosts_size()});
  m_device->setCurrentIndex(std::max(0, m_device->findText(was)));
  block.unblock();
  emit m_device->currentIndexChanged(m_device->currentIndex());
}

}  // namespace netloom::gui

#include "gui/target_selector.h"

#include <QAction>
#include <QFileInfo>
#include <QSettings>
#include <QSignalBlocker>
#include <QThread>
#include <climits>

#include "editor/document.h"
#include "gui/main_window.h"
#include "gui/remote_target.h"
#include "gui/run_controller.h"
#include "remote/hosts.h"

namespace netloom::gui {

namespace {
constexpr int kAllHosts = -2;  // the "all saved hosts" item
}  // namespace

TargetSelector::TargetSelector(MainWindow* window, editor::GraphDocument* doc, RunController* runs,
                               QAction* run)
    : QObject(window),
      m_window(window),
      m_doc(doc),
      m_runs(runs),
      m_run(run),
      m_combo(new QComboBox) {
  m_combo->setObjectName("deviceSelector");
  m_combo->setToolTip(
      tr("Where Run trains: this computer's CPU or GPUs, or a host reached over SSH (its GPUs "
         "are listed once Hosts… > Test Connection has found them)"));
  connect(m_combo, &QComboBox::currentIndexChanged, this, &TargetSelector::apply);
  for (ListedDevice& d : parseDeviceList(listDevices()))
    if (d.id != "cpu") m_localDevices.push_back(std::move(d));
}

void TargetSelector::apply() {
  const QVariantList target = m_combo->currentData().toList();
  const int host = target.value(0, -1).toInt(), perHost = target.value(4, 1).toInt();
  std::vector<remotepb::Host> rankHosts;
  if (host == kAllHosts)  // ranks on every saved host, rank 0 on the first
    rankHosts.assign(m_hosts.hosts().begin(), m_hosts.hosts().end());
  else if (host >= 0 && host < m_hosts.hosts_size() && perHost > 1)  // a rank per GPU there
    rankHosts = {m_hosts.hosts(host)};
  if (host >= 0 && host < m_hosts.hosts_size())
    m_runs->setRemoteHost(m_hosts.hosts(host));
  else if (!rankHosts.empty())
    m_runs->setRemoteHost(rankHosts[0]);
  else
    m_runs->setRemoteHost(std::nullopt);
  m_runs->setRankHosts(rankHosts, perHost);
  m_runs->setDevice(target.value(1).toString().toStdString());
  m_runs->setRanks(target.value(2, 1).toInt());
  m_runs->setThreadRanks(target.value(3, false).toBool());
  // Run says where it trains, and the project remembers it for next time.
  const QString where = m_combo->currentText();
  m_run->setText(tr("&Run on %1").arg(where.size() > 32 ? where.left(31) + "…" : where));
  m_run->setToolTip(tr("Run on %1 (F5)").arg(where));
  if (!m_restoring && !m_doc->filePath().isEmpty())
    QSettings().setValue("targets/" + QFileInfo(m_doc->filePath()).absoluteFilePath(), where);
}

void TargetSelector::restoreTarget() {
  QString want =
      QSettings().value("targets/" + QFileInfo(m_doc->filePath()).absoluteFilePath()).toString();
  // Following a remote run: its host, whatever was picked last.
  if (auto* t = qobject_cast<RemoteTarget*>(m_runs->target()); t && m_runs->remoteRun())
    want = QString::fromStdString(t->host().name());
  const int at = want.isEmpty() ? -1 : m_combo->findText(want);
  if (at < 0 || at == m_combo->currentIndex()) return;
  m_restoring = true;
  m_combo->setCurrentIndex(at);
  m_restoring = false;
}

void TargetSelector::reloadHosts() {
  auto loaded = remote::loadHosts(remote::defaultHostsPath());
  if (!loaded) m_window->showMessage(QString::fromStdString(loaded.error().message));
  m_hosts = loaded ? *loaded : remotepb::HostList();
  const QString was = m_combo->currentText();
  QSignalBlocker block(m_combo);
  m_combo->clear();
  // Each item's data: {host index (-1: this computer), device ("": the project's), ranks,
  // whether the ranks are threads of one process, ranks on each host}.
  m_combo->addItem(tr("This computer"), QVariantList{-1, QString()});
  // Data-parallel CPU ranks, one core each at least: processes, or threads of one.
  for (int n = 2; n <= QThread::idealThreadCount(); n *= 2) {
    m_combo->addItem(tr("This computer — %1 CPU ranks (data parallel)").arg(n),
                     QVariantList{-1, QString("cpu"), n});
    m_combo->addItem(tr("This computer — %1 CPU ranks in one process (data parallel)").arg(n),
                     QVariantList{-1, QString("cpu"), n, true});
  }
  // And on GPUs, one rank per device.
  if (m_localDevices.size() >= 2)
    m_combo->addItem(tr("This computer — %1 GPUs (data parallel)").arg(int(m_localDevices.size())),
                     QVariantList{-1, QString("cuda"), int(m_localDevices.size())});
  for (const ListedDevice& d : m_localDevices)
    m_combo->addItem(tr("This computer — %1 (%2)")
                         .arg(QString::fromStdString(d.id), QString::fromStdString(d.label)),
                     QVariantList{-1, QString::fromStdString(d.id)});
  int fewestGpus = m_hosts.hosts_size() > 0 ? INT_MAX : 0;  // GPUs listed on every host
  for (int i = 0; i < m_hosts.hosts_size(); ++i) {
    const remotepb::Host& h = m_hosts.hosts(i);
    const QString name = QString::fromStdString(h.name());
    m_combo->addItem(name, QVariantList{i, QString()});
    std::string lines;
    for (const std::string& line : h.devices()) lines += line + "\n";
    int gpus = 0;
    for (const ListedDevice& d : parseDeviceList(lines))
      if (d.id != "cpu") {
        ++gpus;
        m_combo->addItem(
            tr("%1 — %2 (%3)")
                .arg(name, QString::fromStdString(d.id), QString::fromStdString(d.label)),
            QVariantList{i, QString::fromStdString(d.id)});
      }
    if (gpus >= 2)  // a rank on each GPU (netloom-job's --ranks-per-host)
      m_combo->addItem(tr("%1 — %2 GPUs (a rank each)").arg(name).arg(gpus),
                       QVariantList{i, QString("cuda"), gpus, false, gpus});
    fewestGpus = std::min(fewestGpus, gpus);
  }
  const int hosts = m_hosts.hosts_size();
  if (hosts > 1)
    m_combo->addItem(tr("All saved hosts — %1 ranks (data parallel)").arg(hosts),
                     QVariantList{kAllHosts, QString(), hosts});
  if (hosts > 1 && fewestGpus >= 2)
    m_combo->addItem(
        tr("All saved hosts — %1 GPUs each, %2 ranks").arg(fewestGpus).arg(hosts * fewestGpus),
        QVariantList{kAllHosts, QString("cuda"), hosts * fewestGpus, false, fewestGpus});
  m_combo->setCurrentIndex(std::max(0, m_combo->findText(was)));
  block.unblock();
  emit m_combo->currentIndexChanged(m_combo->currentIndex());
}

}  // namespace netloom::gui

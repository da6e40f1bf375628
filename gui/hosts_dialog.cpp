#include "gui/hosts_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QEventLoop>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QThread>

#include "gui/screen_fit.h"
#include "remote/hosts.h"
#include "remote/jobs.h"

namespace netloom::gui {

using namespace netloom::remote;

HostsDialog::HostsDialog(const QString& hostsPath, QWidget* parent)
    : QDialog(parent), m_path(hostsPath) {
  setWindowTitle(tr("Hosts"));
  setObjectName("hostsDialog");
  m_list = new QListWidget;
  m_list->setObjectName("hostList");
  auto line = [](const char* name, const QString& hint) {
    auto* e = new QLineEdit;
    e->setObjectName(name);
    e->setPlaceholderText(hint);
    return e;
  };
  m_name = line("hostName", tr("what you call it, e.g. gpu1"));
  m_address = line("hostAddress", tr("host name, IP or ~/.ssh/config alias"));
  m_user = line("hostUser", tr("empty: ~/.ssh/config's, else yours"));
  m_identity = line("hostIdentity", tr("empty: ssh-agent, then ~/.ssh's keys"));
  m_jump = line("hostJump", tr("[user@]host[:port] to go through, or empty"));
  m_trainer = line("hostTrainer", tr("empty: netloom-train on the host's PATH"));
  m_workDir = line("hostWorkDir", tr("empty: $HOME/netloom"));
  m_port = new QSpinBox;
  m_port->setObjectName("hostPort");
  m_port->setRange(0, 65535);
  m_port->setSpecialValueText(tr("default (~/.ssh/config, else 22)"));
  m_env = new QPlainTextEdit;
  m_env->setObjectName("hostEnv");
  m_env->setPlaceholderText(tr("shell lines run first, e.g. module load cuda"));
  m_env->setMaximumHeight(70);
  m_hostData =
      new QCheckBox(tr("Use the host's copy of a dataset file when it has one at the same path"));
  m_hostData->setObjectName("hostPreferData");
  m_partition = line("slurmPartition", tr("empty: the cluster's default"));
  m_account = line("slurmAccount", tr("empty: your default account"));
  m_qos = line("slurmQos", tr("empty: the default QoS"));
  m_timeLimit =
      line("slurmTime", tr("as sbatch --time: 30, 2:00:00, 1-12; empty: the partition's"));
  auto count = [](const char* name, int max, const QString& zero) {
    auto* b = new QSpinBox;
    b->setObjectName(name);
    b->setRange(0, max);
    b->setSpecialValueText(zero);
    return b;
  };
  m_nodes = count("slurmNodes", 100000, tr("1"));
  m_gpusPerNode = count("slurmGpusPerNode", 64, tr("none: CPU ranks"));
  m_tasksPerNode = count("slurmTasksPerNode", 4096, tr("1 (CPU ranks per node)"));
  m_cpusPerTask = count("slurmCpusPerTask", 4096, tr("the cluster's default"));
  m_sbatch = new QPlainTextEdit;
  m_sbatch->setObjectName("slurmExtra");
  m_sbatch->setPlaceholderText(tr("further sbatch options, one per line, e.g. --mem=32G"));
  m_sbatch->setMaximumHeight(60);
  m_slurm = new QGroupBox(tr("Slurm cluster: jobs go through sbatch on this login node"));
  m_slurm->setObjectName("slurmSettings");
  m_slurm->setCheckable(true);
  m_slurm->setChecked(false);
  auto* slurmForm = new QFormLayout(m_slurm);
  slurmForm->addRow(tr("Partition"), m_partition);
  slurmForm->addRow(tr("Account"), m_account);
  slurmForm->addRow(tr("QoS"), m_qos);
  slurmForm->addRow(tr("Time limit"), m_timeLimit);
  slurmForm->addRow(tr("Nodes"), m_nodes);
  slurmForm->addRow(tr("GPUs per node"), m_gpusPerNode);
  slurmForm->addRow(tr("Tasks per node"), m_tasksPerNode);
  slurmForm->addRow(tr("CPUs per task"), m_cpusPerTask);
  slurmForm->addRow(tr("#SBATCH"), m_sbatch);
  m_report = new QPlainTextEdit;
  m_report->setObjectName("hostReport");
  m_report->setReadOnly(true);

  auto* browse = new QPushButton(tr("…"));
  connect(browse, &QPushButton::clicked, this, [this] {
    QString f = QFileDialog::getOpenFileName(this, tr("Private key"), QDir::homePath() + "/.ssh");
    if (!f.isEmpty()) m_identity->setText(f);
  });
  auto* identityRow = new QHBoxLayout;
  identityRow->addWidget(m_identity);
  identityRow->addWidget(browse);

  auto* form = new QFormLayout;
  form->addRow(tr("Name"), m_name);
  form->addRow(tr("Address"), m_address);
  form->addRow(tr("Port"), m_port);
  form->addRow(tr("User"), m_user);
  form->addRow(tr("Identity file"), identityRow);
  form->addRow(tr("Jump host"), m_jump);
  form->addRow(tr("netloom-train"), m_trainer);
  form->addRow(tr("Work directory"), m_workDir);
  form->addRow(tr("Environment"), m_env);
  form->addRow(QString(), m_hostData);

  auto* add = new QPushButton(tr("&Add"));
  auto* remove = new QPushButton(tr("&Remove"));
  auto* test = new QPushButton(tr("&Test Connection"));
  test->setObjectName("testConnection");
  connect(add, &QPushButton::clicked, this, [this] {
    remotepb::Host h;
    h.set_name("host" + std::to_string(m_hosts.hosts_size() + 1));
    addHost(h);
  });
  connect(remove, &QPushButton::clicked, this, &HostsDialog::removeCurrent);
  connect(test, &QPushButton::clicked, this, &HostsDialog::testConnection);
  auto* listButtons = new QHBoxLayout;
  listButtons->addWidget(add);
  listButtons->addWidget(remove);
  auto* left = new QVBoxLayout;
  left->addWidget(m_list);
  left->addLayout(listButtons);
  auto* right = new QVBoxLayout;
  right->addLayout(form);
  right->addWidget(m_slurm);
  right->addWidget(test);
  right->addWidget(m_report);
  auto* top = new QHBoxLayout;
  top->addLayout(left, 1);
  top->addLayout(right, 2);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, this, &HostsDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  // The host's fields scroll; Save and Cancel stay below them, always on screen.
  auto* fields = new QWidget;
  fields->setLayout(top);
  auto* scroll = new QScrollArea;
  scroll->setWidget(fields);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* all = new QVBoxLayout(this);
  all->addWidget(scroll, 1);
  all->addWidget(buttons);
  fitToScreen(this, QSize(820, 640));

  connect(m_list, &QListWidget::currentRowChanged, this, [this](int row) {
    storeForm();
    showHost(row);
  });
  connect(m_name, &QLineEdit::textEdited, this, [this](const QString& t) {
    if (QListWidgetItem* it = m_list->item(m_row)) it->setText(t);
  });
  acceptHostKey = [this](const HostKey& k, const QString& host) {
    return QMessageBox::question(
               this, tr("Unknown host key"),
               tr("The authenticity of %1 can't be established.\n%2 key fingerprint:\n%3\n\n"
                  "Trust it and connect? Compare the fingerprint with the one the host's "
                  "administrator gives you.")
                   .arg(host, QString::fromStdString(k.type),
                        QString::fromStdString(k.fingerprint)),
               QMessageBox::Yes | QMessageBox::No, QMessageBox::No) == QMessageBox::Yes;
  };
  load();
}

void HostsDialog::load() {
  auto loaded = loadHosts(m_path.toStdString());
  if (!loaded) {
    m_report->setPlainText(QString::fromStdString(loaded.error().message));
    return;
  }
  m_hosts = *loaded;
  m_row = -1;
  m_list->clear();
  for (const auto& h : m_hosts.hosts()) m_list->addItem(QString::fromStdString(h.name()));
  if (m_hosts.hosts_size() > 0) m_list->setCurrentRow(0);
}

void HostsDialog::showHost(int row) {
  m_row = row;
  const bool have = row >= 0 && row < m_hosts.hosts_size();
  const remotepb::Host h = have ? m_hosts.hosts(row) : remotepb::Host();
  m_name->setText(QString::fromStdString(h.name()));
  m_address->setText(QString::fromStdString(h.address()));
  m_port->setValue(h.port());
  m_user->setText(QString::fromStdString(h.user()));
  m_identity->setText(QString::fromStdString(h.identity()));
  m_jump->setText(QString::fromStdString(h.jump()));
  m_trainer->setText(QString::fromStdString(h.trainer()));
  m_workDir->setText(QString::fromStdString(h.work_dir()));
  QStringList env;
  for (const auto& e : h.env()) env << QString::fromStdString(e);
  m_env->setPlainText(env.join("\n"));
  m_hostData->setChecked(h.prefer_host_data());
  const remotepb::SlurmSettings& sl = h.slurm();
  m_slurm->setChecked(h.has_slurm());
  m_partition->setText(QString::fromStdString(sl.partition()));
  m_account->setText(QString::fromStdString(sl.account()));
  m_qos->setText(QString::fromStdString(sl.qos()));
  m_timeLimit->setText(QString::fromStdString(sl.time_limit()));
  m_nodes->setValue(sl.nodes());
  m_gpusPerNode->setValue(sl.gpus_per_node());
  m_tasksPerNode->setValue(sl.tasks_per_node());
  m_cpusPerTask->setValue(sl.cpus_per_task());
  QStringList extra;
  for (const auto& e : sl.extra()) extra << QString::fromStdString(e);
  m_sbatch->setPlainText(extra.join("\n"));
}

void HostsDialog::storeForm() {
  if (m_row < 0 || m_row >= m_hosts.hosts_size()) return;
  remotepb::Host* h = m_hosts.mutable_hosts(m_row);
  const std::string knownHosts = h->known_hosts();
  h->Clear();
  h->set_known_hosts(knownHosts);  // not in the form; kept as the file has it
  h->set_name(m_name->text().trimmed().toStdString());
  h->set_address(m_address->text().trimmed().toStdString());
  h->set_port(m_port->value());
  h->set_user(m_user->text().trimmed().toStdString());
  h->set_identity(m_identity->text().trimmed().toStdString());
  h->set_jump(m_jump->text().trimmed().toStdString());
  h->set_trainer(m_trainer->text().trimmed().toStdString());
  h->set_work_dir(m_workDir->text().trimmed().toStdString());
  for (const QString& e : m_env->toPlainText().split('\n', Qt::SkipEmptyParts))
    if (!e.trimmed().isEmpty()) h->add_env(e.toStdString());
  h->set_prefer_host_data(m_hostData->isChecked());
  if (!m_slurm->isChecked()) return;
  remotepb::SlurmSettings* sl = h->mutable_slurm();
  sl->set_partition(m_partition->text().trimmed().toStdString());
  sl->set_account(m_account->text().trimmed().toStdString());
  sl->set_qos(m_qos->text().trimmed().toStdString());
  sl->set_time_limit(m_timeLimit->text().trimmed().toStdString());
  sl->set_nodes(m_nodes->value());
  sl->set_gpus_per_node(m_gpusPerNode->value());
  sl->set_tasks_per_node(m_tasksPerNode->value());
  sl->set_cpus_per_task(m_cpusPerTask->value());
  for (const QString& e : m_sbatch->toPlainText().split('\n', Qt::SkipEmptyParts))
    if (!e.trimmed().isEmpty()) sl->add_extra(e.trimmed().toStdString());
}

int HostsDialog::addHost(const remotepb::Host& h) {
  storeForm();
  *m_hosts.add_hosts() = h;
  m_list->addItem(QString::fromStdString(h.name()));
  const int row = m_hosts.hosts_size() - 1;
  m_row = -1;  // the new row's form comes from the list, not from the old form
  m_list->setCurrentRow(row);
  showHost(row);
  return row;
}

void HostsDialog::select(int row) {
  m_list->setCurrentRow(row);
}

void HostsDialog::removeCurrent() {
  const int row = m_row;
  if (row < 0 || row >= m_hosts.hosts_size()) return;
  m_hosts.mutable_hosts()->DeleteSubrange(row, 1);
  m_row = -1;
  delete m_list->takeItem(row);
  showHost(m_list->currentRow());
}

Status HostsDialog::save() {
  storeForm();
  Status s = saveHosts(m_path.toStdString(), m_hosts);
  m_report->setPlainText(s ? tr("Saved to %1").arg(m_path) : QString::fromStdString(s.message()));
  return s;
}

void HostsDialog::accept() {
  if (save()) QDialog::accept();
}

QString HostsDialog::report() const {
  return m_report->toPlainText();
}

QString HostsDialog::testConnection() {
  storeForm();
  if (m_row < 0 || m_row >= m_hosts.hosts_size()) return {};
  const remotepb::Host host = m_hosts.hosts(m_row);
  if (std::string why = checkHost(host); !why.empty()) {
    m_report->setPlainText(QString::fromStdString(why));
    return report();
  }
  m_report->setPlainText(tr("Connecting to %1…").arg(QString::fromStdString(hostTitle(host))));
  QString result;
  std::vector<std::string> found;  // the devices the host's trainer lists
  // The connection runs on a worker; the dialog stays live, and the key question
  // comes back here to be asked.
  QEventLoop loop;
  QThread* worker = QThread::create([&] {
    HostSpec spec = hostSpec(host);
    auto session = openSession(spec, [&](const HostKey& k) {
      bool yes = false;
      QMetaObject::invokeMethod(
          this,
          [&] { yes = acceptHostKey && acceptHostKey(k, QString::fromStdString(spec.label())); },
          Qt::BlockingQueuedConnection);
      return yes;
    });
    if (!session) {
      result = QString::fromStdString(session.error().message);
      return;
    }
    auto info = probeHost(**session, host);
    if (info) found = info->devices;
    result =
        info ? tr("Connected to %1; host key known.\n").arg(QString::fromStdString(spec.label())) +
                   QString::fromStdString(info->summary())
             : QString::fromStdString(info.error().message);
  });
  connect(worker, &QThread::finished, &loop, &QEventLoop::quit);
  worker->start();
  loop.exec();
  worker->wait();
  delete worker;
  // Kept with the host (saved with the list), so the Run toolbar offers its GPUs.
  // (The list may have changed while the dialog stayed live: found by name.)
  remotepb::Host* tested = nullptr;
  for (int i = 0; i < m_hosts.hosts_size(); ++i)
    if (m_hosts.hosts(i).name() == host.name()) tested = m_hosts.mutable_hosts(i);
  if (tested && !found.empty()) {
    tested->clear_devices();
    for (const std::string& d : found) tested->add_devices(d);
  }
  m_report->setPlainText(result);
  return result;
}

}  // namespace netloom::gui

// The Hosts dialog: the saved training hosts (name, address, port, user, identity
// file or ssh-agent, jump host, remote netloom-train, work directory, environment
// lines), edited in a form and saved to the hosts file (user-only permissions, no
// secrets). "Test connection" connects, checks the host key (an unknown one is
// shown with its fingerprint and asked about), and reports netloom-train's
// version, the host's CPUs, memory, free disk and GPUs, or what to install.
#pragma once

#include <QDialog>
#include <functional>

#include "engine/util/status.h"
#include "remote/remote.pb.h"

class QCheckBox;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;

namespace netloom::remote {
struct HostKey;
}

class QGroupBox;

namespace netloom::gui {

class HostsDialog : public QDialog {
  Q_OBJECT

 public:
  explicit HostsDialog(const QString& hostsPath, QWidget* parent = nullptr);

  const remotepb::HostList& hosts() const { return m_hosts; }
  // Adds a host (selected, for the form to edit); returns its row.
  int addHost(const remotepb::Host& h);
  void removeCurrent();
  void select(int row);
  // Writes the hosts file; the reason when a host is not usable.
  Status save();
  // Tests the selected host as the form has it; returns the report (also shown).
  QString testConnection();
  QString report() const;

  // Asked when a host's key is unknown; unset: refused. Tests answer it.
  std::function<bool(const remote::HostKey&, const QString& host)> acceptHostKey;

  void accept() override;  // saves, and stays open when that fails

 private:
  void load();
  void showHost(int row);
  void storeForm();  // the form into the selected host

  QString m_path;
  remotepb::HostList m_hosts;
  int m_row = -1;
  QListWidget* m_list;
  QLineEdit *m_name, *m_address, *m_user, *m_identity, *m_jump, *m_trainer, *m_workDir;
  QSpinBox* m_port;
  QPlainTextEdit* m_env;
  QCheckBox* m_hostData;
  // A Slurm cluster's login node: checked, jobs go through sbatch with these settings.
  QGroupBox* m_slurm;
  QLineEdit *m_partition, *m_account, *m_qos, *m_timeLimit;
  QSpinBox *m_nodes, *m_gpusPerNode, *m_tasksPerNode, *m_cpusPerTask;
  QPlainTextEdit* m_sbatch;  // further sbatch options, one per line
  QPlainTextEdit* m_report;
};

}  // namespace netloom::gui

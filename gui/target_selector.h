// Where Run trains, as the Run toolbar's device selector offers it: this computer
// (its CPU, its GPUs, data-parallel ranks), a saved host and its GPUs, or a rank on
// every saved host. The choice goes to the RunController and is remembered for each
// project.
#pragma once

#include <QComboBox>
#include <QObject>
#include <vector>

#include "engine/runtime/devices.h"
#include "remote/remote.pb.h"

class QAction;

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

class MainWindow;
class RunController;

class TargetSelector : public QObject {
  Q_OBJECT

 public:
  // `run`: the Run action, which says where it trains.
  TargetSelector(MainWindow* window, editor::GraphDocument* doc, RunController* runs, QAction* run);

  QComboBox* combo() const { return m_combo; }  // "deviceSelector", for the toolbar
  void reloadHosts();                           // the choices again, from the hosts file
  // The target the project last ran on (or the host of the remote run it follows).
  void restoreTarget();

 private:
  void apply();  // the chosen target to the controller and the Run action

  MainWindow* m_window;
  editor::GraphDocument* m_doc;
  RunController* m_runs;
  QAction* m_run;
  QComboBox* m_combo;
  remotepb::HostList m_hosts;
  std::vector<ListedDevice> m_localDevices;  // this computer's GPUs, found at start
  bool m_restoring = false;
};

}  // namespace netloom::gui

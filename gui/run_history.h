// The Runs list: a project's run folders (runs/<project>/ beside it), oldest first,
// each with how it ended, its tags and the host it ran on. Check marks pick the runs
// overlaid on the charts and compared; they survive a reload.
#pragma once

#include <QListWidget>
#include <QObject>
#include <vector>

#include "gui/charts.h"
#include "gui/runs.h"

namespace netloom::gui {

class RunHistory : public QObject {
  Q_OBJECT

 public:
  explicit RunHistory(QObject* parent = nullptr);

  // The list widget; it belongs to whoever shows it (the window's Runs dock).
  QListWidget* list() const { return m_list; }
  const std::vector<RunRecord>& runs() const { return m_runs; }

  // Where a project's runs are kept: each project's own folder, so two projects in
  // one folder never see each other's runs. Empty for an untitled project.
  static QString dirFor(const QString& projectPath);

  // The run in progress, listed as it is now ("paused", "pending (Priority)") rather
  // than as its stream says; an empty `dir`: none.
  struct Active {
    QString dir;
    QString state;
  };
  // Reads the runs again, with those of a project named `projectName` kept directly
  // in runs/ (from before each project had a folder of its own).
  void reload(const QString& runsDir, const std::string& projectName, const Active& active);
  // Forgets the list, check marks included (another project was opened).
  void clear();

  std::vector<const RunRecord*> checked() const;
  // The selected run, else the single checked one; null when neither.
  const RunRecord* selected() const;
  // The checked runs other than `except` (a run folder), as chart overlays.
  std::vector<TrainingCharts::Overlay> overlays(const QString& except) const;

 signals:
  void checksChanged();  // a run was checked or unchecked

 private:
  void fill(const Active& active);

  QListWidget* m_list;
  std::vector<RunRecord> m_runs;
};

}  // namespace netloom::gui

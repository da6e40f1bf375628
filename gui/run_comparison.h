// Comparing runs by what they were set to do: the settings of their frozen projects
// that differ, and how each ended, as Compare Checked Runs… shows them (in the spirit
// of TensorBoard's HParams).
#pragma once

#include <QString>
#include <string>
#include <vector>

#include "engine/proto/project.pb.h"
#include "gui/runs.h"

namespace netloom::gui {

// The settings of a run's frozen project that differ between runs, one row per
// setting ("train.optimizer.lr"), one column per run.
struct SettingsDiff {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values;  // [row][run]; "" where unset
  // How each run ended ("result.state", "result.test_accuracy", ...), every row.
  std::vector<std::string> results;
  std::vector<std::vector<std::string>> resultValues;
};
SettingsDiff compareSettings(const std::vector<const RunRecord*>& runs);
// A row of that table as a person reads it: "Test accuracy", "Training › optimizer › lr".
QString settingLabel(const std::string& key);
// An attribute as a person reads it: 5, [5, 5], relu, true, 0.1.
std::string attrText(const proto::AttrValue& v);

}  // namespace netloom::gui

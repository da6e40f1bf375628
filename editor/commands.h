// The one undo command every gesture is made of: the states of the nodes it touches
// before and after. Undo and redo restore those states exactly, so the document's
// serialized text after an undo is the text it had before the gesture.
#pragma once

#include <QUndoCommand>

#include "editor/document.h"

namespace netloom::editor {

// Merge kinds: commands of the same kind and the same non-zero merge id combine into
// one undo step (one drag, one burst of typing into one field).
enum MergeKind { NoMerge = 0, MergeMove = 1, MergeAttr = 2, MergeSettings = 3 };

class EditCommand : public QUndoCommand {
 public:
  EditCommand(GraphDocument* doc, const QString& text, std::vector<NodeState> before,
              std::vector<NodeState> after, int mergeKind, int mergeId,
              std::vector<BlockState> blocksBefore = {}, std::vector<BlockState> blocksAfter = {},
              std::optional<SettingsState> settingsBefore = std::nullopt,
              std::optional<SettingsState> settingsAfter = std::nullopt);

  void undo() override { m_doc->applyStates(m_before, m_blocksBefore, m_settingsBefore); }
  void redo() override { m_doc->applyStates(m_after, m_blocksAfter, m_settingsAfter); }
  int id() const override { return m_kind == NoMerge ? -1 : m_kind; }
  bool mergeWith(const QUndoCommand* other) override;

 private:
  GraphDocument* m_doc;
  std::vector<NodeState> m_before, m_after;
  int m_kind, m_mergeId;
  std::vector<BlockState> m_blocksBefore, m_blocksAfter;
  std::optional<SettingsState> m_settingsBefore, m_settingsAfter;
};

}  // namespace netloom::editor

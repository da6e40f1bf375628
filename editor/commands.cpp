#include "editor/commands.h"

#include <algorithm>

namespace netloom::editor {

EditCommand::EditCommand(GraphDocument* doc, const QString& text, std::vector<NodeState> before,
                         std::vector<NodeState> after, int mergeKind, int mergeId,
                         std::vector<BlockState> blocksBefore, std::vector<BlockState> blocksAfter,
                         std::optional<SettingsState> settingsBefore,
                         std::optional<SettingsState> settingsAfter)
    : QUndoCommand(text),
      m_doc(doc),
      m_before(std::move(before)),
      m_after(std::move(after)),
      m_kind(mergeKind),
      m_mergeId(mergeId),
      m_blocksBefore(std::move(blocksBefore)),
      m_blocksAfter(std::move(blocksAfter)),
      m_settingsBefore(std::move(settingsBefore)),
      m_settingsAfter(std::move(settingsAfter)) {}

bool EditCommand::mergeWith(const QUndoCommand* other) {
  auto* o = dynamic_cast<const EditCommand*>(other);
  if (!o || o->m_kind != m_kind || m_mergeId == 0 || o->m_mergeId != m_mergeId) return false;
  auto find = [](std::vector<NodeState>& v, NodeId id) {
    return std::find_if(v.begin(), v.end(), [id](const NodeState& s) { return s.id == id; });
  };
  // The first command's "before" stands; the later command's "after" wins.
  if (o->m_settingsAfter) m_settingsAfter = o->m_settingsAfter;
  for (const NodeState& s : o->m_before)
    if (find(m_before, s.id) == m_before.end()) m_before.push_back(s);
  for (const NodeState& s : o->m_after) {
    auto it = find(m_after, s.id);
    if (it == m_after.end())
      m_after.push_back(s);
    else
      *it = s;
  }
  return true;
}

}  // namespace netloom::editor

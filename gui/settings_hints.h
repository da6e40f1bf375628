// How the Training and Data docks present the schema's fields to a person: a label
// and a line of help for each, the value a field shows as words (0 threads is "All
// cores", an unset batch size the 32 a run uses), the choices a text field offers,
// and the rows that only apply to one optimizer or schedule. The docks are generated
// from the schema; this table is what reflection cannot know.
#pragma once

#include <QString>
#include <QStringList>
#include <string>
#include <vector>

namespace google::protobuf {
class EnumValueDescriptor;
}

namespace netloom::gui {

struct FieldHint {
  const char* path;   // in TrainDef or DataDef, e.g. "optimizer.lr"
  const char* label;  // null: the field's name with spaces
  const char* tip = nullptr;
  // The lowest value a number takes, and the words shown for it (0 threads: "All
  // cores"); no words: the value is shown as the number it is.
  double minimum = -1e9;
  const char* minimumText = nullptr;
  double unsetValue = 0;  // an optional number the project leaves unset: what a run uses
  // A text field picked among these values ("fp32|Float32 (full precision)").
  std::vector<const char*> choices = {};
  // The row applies only while this other field has one of these enum values
  // ("optimizer.kind" SGD), unset counting as its first value.
  const char* onlyWhen = nullptr;
  std::vector<int> onlyValues = {};
  bool hidden = false;  // set by other means (the run toolbar, the dataset picker)
};

// The hint for a field of the training (`train`) or data settings; null when none.
const FieldHint* fieldHint(bool train, const std::string& path);

// An enum value as a person reads it: "Adam", "Cosine", "Centre crop"; the value 0
// ("KIND_UNSPECIFIED") as what a run does with it: "Adam (default)", "None".
QString enumText(const google::protobuf::EnumValueDescriptor* value);

// A field's label where no hint gives one: "train_path" reads "Train path".
QString fieldLabel(const std::string& name);

}  // namespace netloom::gui

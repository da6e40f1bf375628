// Data ▸ Use Image Folder… and Use Image List…: picks a folder of class folders (or
// a CSV of path,label lines), lists it off the GUI thread, and previews what it holds
// (images per class, a row of samples per class, anything odd) before the project's
// data source becomes it.
#pragma once

#include <QDialog>
#include <QFutureWatcher>
#include <QImage>

#include "engine/data/dataset.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QSpinBox;
class QTableWidget;

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

class ImageDataDialog : public QDialog {
  Q_OBJECT

 public:
  enum class Kind { Folder, List };
  ImageDataDialog(editor::GraphDocument* doc, Kind kind, QWidget* parent = nullptr);
  ~ImageDataDialog() override;

  // The training folder or list, as typed or browsed; listing starts at once.
  void setTrainPath(const QString& path);
  // The source the dialog describes, paths relative to the project's folder where
  // they lie inside it.
  proto::ImageSource source() const;
  // Makes the project's data source this one (one undoable step); false with the
  // reason shown when the listing failed.
  bool apply();

  static constexpr int kSamplesPerClass = 6;

  struct Listing {
    Result<ImageIndex> index = makeError("not listed");
    std::vector<std::vector<QImage>> samples;  // per class, up to kSamplesPerClass
  };

 signals:
  void previewReady();  // the listing and its samples are shown

 private:
  void relist();
  void show(const Listing& l);
  QString projectDir() const;

  editor::GraphDocument* m_doc;
  Kind m_kind;
  QLineEdit* m_train;
  QLineEdit* m_test;
  QDoubleSpinBox* m_testFraction;
  QComboBox* m_channels;
  QSpinBox* m_height;
  QSpinBox* m_width;
  QComboBox* m_fit;
  QCheckBox* m_cache;
  QCheckBox* m_skip;
  QLabel* m_summary;
  QTableWidget* m_classes;
  QListWidget* m_samples;
  QFutureWatcher<Listing> m_watcher;
  std::vector<std::string> m_classNames;
  bool m_listed = false;
};

}  // namespace netloom::gui

// Data ▸ Use Image Folder… and Use Image List…: picks a folder of class folders (or
// a CSV of path,label lines), lists it off the GUI thread, and previews what it holds
// (images per class, a row of samples per class, anything odd) before the project's
// data source becomes it.
#pragma once

#include <QDialog>
#include <QFuture>
#include <QImage>
#include <functional>
#include <memory>

#include "engine/data/dataset.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QSpinBox;
class QTableWidget;
class QTimer;

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

  // The training folder or list, as typed or browsed. Any listing under way is
  // cancelled at once; the new one starts when the path has stopped changing for the
  // debounce delay, so typing "/home/me/pictures" does not list "/" and "/home" first.
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

  // Test seams. The delay between the last edit of the path and the listing
  // (default 250 ms); an edit-free wait already under way restarts with it.
  void setDebounceMs(int ms);
  // Called on the worker thread at every entry a listing started from now on reads
  // (ListControl::onEntry): a test blocks in it to hold a listing part-way.
  void setListHook(std::function<void(size_t entries)> hook);
  // Listings started so far, and the latest one: it stays valid after the dialog is
  // gone, so a test can see a cancelled worker end.
  int listingsStarted() const { return m_listingsStarted; }
  QFuture<Listing> latestListing() const { return m_latest; }

 public slots:
  // Closing, either way, cancels the listing and never waits for it.
  void done(int result) override;

 signals:
  void previewReady();  // the listing and its samples are shown

 private:
  void pathEdited();
  void cancelListing();
  void startListing();
  void showListing(const Listing& l);
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
  QTimer* m_debounce;
  // The running listing's control, shared with its worker so that a worker outliving
  // the dialog touches nothing freed; null when none runs. A result whose control is
  // not this one is stale and dropped.
  std::shared_ptr<ListControl> m_running;
  std::function<void(size_t)> m_listHook;
  QFuture<Listing> m_latest;
  int m_listingsStarted = 0;
  std::vector<std::string> m_classNames;
  bool m_listed = false;
};

}  // namespace netloom::gui

// Data ▸ Choose Dataset…: the one place a newcomer picks what a network learns from.
// It offers the installed Fashion-MNIST, IDX files, a CSV file or an image folder,
// each path with a Browse button; loads the choice off the GUI thread and previews
// it (samples with their class names, counts per class, the sample shape); and
// applies it as one undoable step: the data source, the class names, a normalisation
// computed from the training split, and the model's Input shaped for the samples
// (added when the model has none). Labels need no input of their own: a loss reads
// them by default (engine/graph/data_labels.h).
#pragma once

#include <QDialog>
#include <QFutureWatcher>
#include <QImage>
#include <memory>

#include "engine/data/dataset.h"

class QLabel;
class QLineEdit;
class QCheckBox;
class QComboBox;
class QSpinBox;
class QListWidget;
class QStackedWidget;
class QTableWidget;

namespace netloom::editor {
class GraphDocument;
}

namespace netloom::gui {

// Where Debian's dataset-fashion-mnist puts the files; empty when it is not installed.
QString installedFashionMnist();

// Makes `data` the project's data and shapes the model's Input (the first not reading
// labels; added above the graph where there is none) for samples of shape `sample`:
// one undoable step named `text`.
void setDatasetOf(editor::GraphDocument& doc, const proto::DataDef& data, const Shape& sample,
                  const QString& text);

class DatasetDialog : public QDialog {
  Q_OBJECT

 public:
  enum class Source { Fashion, Idx, Csv, ImageFolder, Text };
  DatasetDialog(editor::GraphDocument* doc, QWidget* parent = nullptr);
  ~DatasetDialog() override;

  void choose(Source s);  // as a click on the source list
  Source source() const;
  // The data the dialog describes now, paths relative to the project where inside it.
  proto::DataDef dataDef() const;

  // What a preview found: the splits' sizes, the sample shape, the classes with
  // their counts and a few samples each, and the training split's mean and std.
  struct Preview {
    Status status;
    Shape sampleShape;
    bool bytes = false;  // samples are bytes (images): scaled by 1/255 first
    int64_t trainSize = 0, testSize = 0;
    std::vector<std::string> classNames;
    std::vector<int64_t> perClass;
    std::vector<std::vector<QImage>> samples;
    double mean = 0, std = 1;
    // Text: the classes are the vocabulary's tokens, counted over the training part.
    bool text = false;
    std::vector<std::string> vocab;
    int64_t tokens = 0;
    std::string excerpt;  // the training text's first characters
  };
  const Preview& preview() const { return m_preview; }
  QTableWidget* classTable() const { return m_classes; }
  QLineEdit* textPath() const { return m_textPath; }
  QSpinBox* textContext() const { return m_textContext; }
  QListWidget* sampleGrid() const { return m_samples; }
  // Applies the previewed dataset (one undoable step); false, with the reason shown,
  // when there is none yet or it failed to load.
  bool apply();

  static constexpr int kSamplesPerClass = 4;

 signals:
  void previewReady();  // a preview (or its failure) is shown

 private:
  QWidget* pathRow(QLineEdit* edit, bool folder, const QString& filter);
  QWidget* textPage();  // the Text source's page
  void reload();        // loads the current choice off the GUI thread
  void showPreview(const Preview& p);
  QString projectDir() const;

  editor::GraphDocument* m_doc;
  QListWidget* m_sources;
  QStackedWidget* m_pages;
  QLineEdit *m_idxTrainImages, *m_idxTrainLabels, *m_idxTestImages, *m_idxTestLabels;
  QLineEdit *m_csvTrain, *m_csvTest, *m_csvLabel;
  QCheckBox* m_csvHeader;
  QLineEdit* m_textPath;
  QComboBox* m_textVocab;
  QSpinBox* m_textContext;
  QLabel* m_summary;
  QTableWidget* m_classes;
  QListWidget* m_samples;
  QFutureWatcher<Preview> m_watcher;
  int m_generation = 0;  // a preview of an older choice is dropped
  Preview m_preview;
  bool m_ready = false;
};

}  // namespace netloom::gui

#include "gui/generate_panel.h"

#include <QDir>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTextCursor>
#include <QVBoxLayout>

#include "engine/train/generate.h"

namespace netloom::gui {

GeneratePanel::GeneratePanel(QWidget* parent)
    : QWidget(parent),
      m_prompt(new QLineEdit),
      m_maxTokens(new QSpinBox),
      m_topK(new QSpinBox),
      m_seed(new QSpinBox),
      m_temperature(new QDoubleSpinBox),
      m_button(new QPushButton(tr("Generate"))),
      m_output(new QPlainTextEdit),
      m_status(new QLabel) {
  setObjectName("generatePanel");
  m_prompt->setPlaceholderText(tr("Prompt: the text the model continues"));
  m_maxTokens->setRange(1, 100000);
  m_maxTokens->setValue(200);
  m_maxTokens->setToolTip(tr("Tokens to sample; fewer where the model's context fills"));
  m_temperature->setRange(0, 10);
  m_temperature->setSingleStep(0.1);
  m_temperature->setValue(0.8);
  m_temperature->setToolTip(tr("0 always takes the likeliest token; higher is more varied"));
  m_topK->setRange(0, 1 << 20);
  m_topK->setSpecialValueText(tr("all"));
  m_topK->setToolTip(tr("Sample among the k likeliest tokens; all: among every token"));
  m_seed->setRange(0, 1 << 30);
  m_seed->setValue(1);
  m_seed->setToolTip(tr("The same seed, weights and settings give the same text"));
  m_output->setReadOnly(true);
  m_output->setPlaceholderText(
      tr("Sampled text appears here as it is generated, from the run's weights or, while it "
         "trains, its latest checkpoint."));
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* settings = new QHBoxLayout;
  auto labelled = [&](const QString& text, QWidget* w) {
    auto* l = new QLabel(text);
    l->setBuddy(w);
    settings->addWidget(l);
    settings->addWidget(w);
  };
  labelled(tr("&Tokens"), m_maxTokens);
  labelled(tr("T&emperature"), m_temperature);
  labelled(tr("Top-&k"), m_topK);
  labelled(tr("&Seed"), m_seed);
  settings->addStretch();
  auto* top = new QHBoxLayout;
  top->addWidget(m_prompt, 1);
  top->addWidget(m_button);
  auto* box = new QVBoxLayout(this);
  box->addLayout(top);
  box->addLayout(settings);
  box->addWidget(m_output, 1);
  box->addWidget(m_status);

  connect(m_button, &QPushButton::clicked, this, [this] { running() ? stop() : (void)generate(); });
  connect(m_prompt, &QLineEdit::returnPressed, this, [this] {
    if (!running()) generate();
  });
}

GeneratePanel::~GeneratePanel() {
  stop();
  join();
}

void GeneratePanel::join() {
  if (m_thread.joinable()) m_thread.join();
}

bool GeneratePanel::generate() {
  if (running()) return false;
  join();
  auto fail = [this](const QString& why) {
    m_status->setText(why);
    return false;
  };
  if (!m_source) return fail(tr("No run to sample from"));
  auto source = m_source();
  if (!source) return fail(QString::fromStdString(source.error().message));
  if (!source->project.data().has_text())
    return fail(tr("Generation needs a language model: this project's data is not text"));
  GenerateOptions o;
  o.prompt = m_prompt->text().toStdString();
  o.weights = source->weights.toStdString();
  o.projectDir = source->projectDir.toStdString();
  o.maxTokens = m_maxTokens->value();
  o.temperature = m_temperature->value();
  o.topK = m_topK->value();
  o.seed = uint64_t(m_seed->value());
  o.stop = &m_stop;
  m_stop = false;
  m_done = false;
  m_promptShown = false;
  m_runName = source->runName;
  m_weights = source->weights;
  m_output->clear();
  m_button->setText(tr("Stop"));
  m_status->setText(tr("Sampling from %1…").arg(QDir::toNativeSeparators(source->weights)));
  // Each piece crosses to the GUI thread as a queued call; the panel joins the
  // thread before it is destroyed, and Qt drops calls queued to a deleted object.
  m_thread = std::thread([this, project = source->project, o]() {
    auto text = generateText(project, o, [this](const std::string& piece) {
      QMetaObject::invokeMethod(
          this, [this, p = QString::fromStdString(piece)] { appendPiece(p, m_promptShown); },
          Qt::QueuedConnection);
    });
    QString error = text ? QString() : QString::fromStdString(text.error().message);
    QMetaObject::invokeMethod(
        this, [this, error] { done(error); }, Qt::QueuedConnection);
  });
  return true;
}

void GeneratePanel::stop() {
  m_stop = true;
}

void GeneratePanel::appendPiece(const QString& piece, bool sampled) {
  QTextCursor c(m_output->document());
  c.movePosition(QTextCursor::End);
  QTextCharFormat f;
  if (!sampled) f.setFontWeight(QFont::Bold);  // the prompt
  c.insertText(piece, f);
  m_promptShown = true;
  m_output->ensureCursorVisible();
  emit pieceShown(piece);
}

void GeneratePanel::done(const QString& error) {
  join();
  m_done = true;
  m_button->setText(tr("Generate"));
  if (error.isEmpty())
    m_status->setText(m_stop ? tr("Stopped (run %1)").arg(m_runName)
                             : tr("Sampled from run %1").arg(m_runName));
  else
    m_status->setText(tr("Generation failed: %1").arg(error));
  emit finished(error.isEmpty());
}

}  // namespace netloom::gui

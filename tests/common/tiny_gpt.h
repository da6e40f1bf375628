// A small GPT project over a text file, for the tests of generation and attention
// maps: learned and sinusoidal positions, RMSNorm, two heads with rotary queries and
// keys, causal attention, a tied output layer; context kContext.
#pragma once

#include <QDir>
#include <QFile>
#include <string>

#include "engine/data/dataset.h"

namespace testutil {

constexpr int kContext = 8;

inline std::string gptProject(const std::string& textPath, int vocab) {
  auto ints = [](const char* k, const char* v) {
    return std::string("attrs { key: '") + k + "' value { ints { values: [" + v + "] } } } ";
  };
  auto i = [](const char* k, int v) {
    return std::string("attrs { key: '") + k + "' value { i: " + std::to_string(v) + " } } ";
  };
  auto node = [](const char* n, const char* op, const std::string& in, const std::string& a = "") {
    return std::string("nodes { name: '") + n + "' op: '" + op + "' " + in + " " + a + " } ";
  };
  const std::string heads = ints("shape", "-1, 2, 8"), swap = ints("perm", "0, 2, 1, 3");
  return "name: 'tiny-gpt' model { name: 'gpt' " +
         node("tokens", "Input", "",
              ints("shape", "8") + "attrs { key: 'dtype' value { s: 'int32' } }") +
         node("next", "Input", "",
              ints("shape", "8") +
                  "attrs { key: 'dtype' value { s: 'int32' } } attrs { key: "
                  "'field' value { s: 'label' } }") +
         node("wte", "Embedding", "inputs: 'tokens'",
              i("num_embeddings", vocab) + i("embedding_dim", 16)) +
         node("wpe", "PositionEmbedding", "inputs: 'wte'", i("max_len", kContext)) +
         node("sin", "PositionEmbedding", "inputs: 'wpe'",
              "attrs { key: 'kind' value { s: 'sinusoidal' } }") +
         node("norm", "RMSNorm", "inputs: 'sin'") +
         node("q", "Linear", "inputs: 'norm'", i("out_features", 16)) +
         node("k", "Linear", "inputs: 'norm'", i("out_features", 16)) +
         node("v", "Linear", "inputs: 'norm'", i("out_features", 16)) +
         node("qh", "Reshape", "inputs: 'q'", heads) + node("kh", "Reshape", "inputs: 'k'", heads) +
         node("vh", "Reshape", "inputs: 'v'", heads) +
         node("qt", "Transpose", "inputs: 'qh'", swap) +
         node("kt", "Transpose", "inputs: 'kh'", swap) +
         node("vt", "Transpose", "inputs: 'vh'", swap) +
         node("qr", "RotaryEmbedding", "inputs: 'qt'") +
         node("kr", "RotaryEmbedding", "inputs: 'kt'") +
         node("att", "ScaledDotProductAttention", "inputs: ['qr', 'kr', 'vt']",
              "attrs { key: 'causal' value { b: true } }") +
         node("back", "Transpose", "inputs: 'att'", swap) +
         node("merged", "Reshape", "inputs: 'back'", ints("shape", "-1, 16")) +
         node("res", "Add", "inputs: ['norm', 'merged']") +
         node("logits", "Linear", "inputs: 'res'", i("out_features", vocab)) +
         node("loss", "SoftmaxCrossEntropy", "inputs: ['logits', 'next']") +
         "outputs: 'logits' shared { param: 'logits.weight' with: 'wte.weight' } } "
         "data { text { path: '" +
         textPath +
         "' } validation_fraction: 0.2 } "
         "train { loss: 'loss' optimizer { kind: ADAMW lr: 0.01 } batch_size: 4 epochs: 1 seed: 9 "
         "}";
}

// A corpus of repeated sentences and the project over it, written into `dir`;
// empty paths where a file cannot be written.
struct TinyGpt {
  std::string text, project;
  int vocab = 0;
};
inline TinyGpt writeTinyGpt(const QString& dir) {
  QByteArray text;
  for (int k = 0; k < 40; ++k) text += "the cat sat on the mat; a dog ran. ";
  TinyGpt g;
  g.text = QDir(dir).filePath("corpus.txt").toStdString();
  QFile f(QString::fromStdString(g.text));
  if (!f.open(QIODevice::WriteOnly) || f.write(text) != text.size()) return {};
  f.close();
  auto t = netloom::readText(g.text, netloom::proto::TextSource::CHAR, {}, 0.2);
  if (!t.ok()) return {};
  g.vocab = int(t->vocab.size());
  g.project = QDir(dir).filePath("gpt.nlproj").toStdString();
  QFile p(QString::fromStdString(g.project));
  const QByteArray body = QByteArray::fromStdString(gptProject(g.text, g.vocab));
  if (!p.open(QIODevice::WriteOnly) || p.write(body) != body.size()) return {};
  return g;
}

}  // namespace testutil

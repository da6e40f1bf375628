// Small helpers for tests that write models and projects as text.
#pragma once

#include <QtTest>
#include <string>

#include "engine/compiler/compile.h"
#include "engine/io/project_file.h"

namespace testutil {

// Parses a ModelDef given in text format (the body of `model { ... }`).
inline netloom::proto::ModelDef model(const std::string& body) {
  auto p = netloom::parseProject("model { " + body + " }", "test");
  return p.ok() ? p->model() : netloom::proto::ModelDef{};
}

inline std::string input(const std::string& name, const std::string& shape,
                         const std::string& field = "x", const std::string& dtype = "float32") {
  return "nodes { name: '" + name + "' op: 'Input' attrs { key: 'shape' value { ints { values: [" +
         shape + "] } } } attrs { key: 'field' value { s: '" + field +
         "' } } attrs { key: 'dtype' value { s: '" + dtype + "' } } } ";
}

inline std::string labels(const std::string& name = "label") {
  return "nodes { name: '" + name +
         "' op: 'Input' attrs { key: 'field' value { s: 'label' } } attrs { key: 'dtype' value { "
         "s: 'int32' } } } ";
}

inline std::string node(const std::string& name, const std::string& op, const std::string& inputs,
                        const std::string& attrs = "") {
  std::string s = "nodes { name: '" + name + "' op: '" + op + "'";
  std::string rest = inputs;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    s += " inputs: '" + rest.substr(0, comma) + "'";
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  return s + " " + attrs + " } ";
}

inline std::string intAttr(const std::string& key, long long v) {
  return "attrs { key: '" + key + "' value { i: " + std::to_string(v) + " } }";
}

// The message of compiling a model with default options; empty when it compiles.
inline std::string compileError(const std::string& body) {
  netloom::ParamStore store;
  auto r = netloom::compile(model(body), netloom::CompileOptions{}, store);
  return r.ok() ? std::string() : r.error().message;
}

// Fails the current test unless compiling `body` fails with every one of `mentions`.
inline void expectCompileError(const std::string& body, const QStringList& mentions) {
  std::string err = compileError(body);
  QVERIFY2(!err.empty(), "the model was accepted");
  for (const QString& m : mentions)
    QVERIFY2(err.find(m.toStdString()) != std::string::npos,
             qPrintable("'" + m + "' missing from: " + QString::fromStdString(err)));
}

// After a run of a plan that keeps its gradients: the loss, then every gradient's
// elements in parameter order.
inline std::vector<float> lossAndGradients(const netloom::Program& p) {
  std::vector<float> all{p.scalar(p.loss)};
  for (const auto& [name, v] : p.gradients) {
    const float* g = p.refs[v].f32();
    all.insert(all.end(), g, g + p.refs[v].numel());
  }
  return all;
}

}  // namespace testutil

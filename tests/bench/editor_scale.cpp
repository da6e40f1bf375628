// The editor at scale: generates a deep residual stack of N nodes (conv, BatchNorm,
// ReLU, conv, BatchNorm, Add, ReLU per block) as a project file, then times what a
// user waits for: opening it (parse, document, live analysis, scene), validating it
// again, laying it out with Graphviz's dot, framing it, drawing a frame fitted and
// at 1:1 while panning, and edits with the scene and the panels alive: an attribute
// that keeps the shapes (a keystroke in the inspector), a rename, a rewire, and the
// worst case, a kernel size that changes every shape below it.
// Usage: bench_editor_scale [N ...]   (default: 1000 10000); run with
// QT_QPA_PLATFORM=offscreen where there is no display.
#include <QApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QPainter>
#include <QTemporaryDir>
#include <cstdio>

#include "editor/autolayout.h"
#include "editor/document.h"
#include "editor/panels.h"
#include "editor/scene.h"
#include "editor/view.h"

using namespace netloom;
using namespace netloom::editor;

namespace {

std::string residualStack(int nodes) {
  std::string s = "train { batch_size: 32 }\nmodel {\n";
  s += "  nodes { name: 'x' op: 'Input' attrs { key: 'shape' value { ints { values: [16, 8, 8] "
       "} } } }\n";
  std::string prev = "x";
  auto conv = [&](const std::string& name, const std::string& in) {
    s += "  nodes { name: '" + name + "' op: 'Conv2d' inputs: '" + in +
         "' attrs { key: 'out_channels' value { i: 16 } } attrs { key: 'kernel_size' value { ints "
         "{ values: [3] } } } attrs { key: 'padding' value { ints { values: [1] } } } }\n";
  };
  auto unary = [&](const std::string& name, const char* op, const std::string& in) {
    s += "  nodes { name: '" + name + "' op: '" + op + "' inputs: '" + in + "' }\n";
  };
  int count = 1;
  for (int b = 0; count + 7 <= nodes; ++b, count += 7) {
    std::string p = "b" + std::to_string(b) + "_";
    conv(p + "c1", prev);
    unary(p + "n1", "BatchNorm", p + "c1");
    unary(p + "r1", "ReLU", p + "n1");
    conv(p + "c2", p + "r1");
    unary(p + "n2", "BatchNorm", p + "c2");
    s +=
        "  nodes { name: '" + p + "add' op: 'Add' inputs: '" + p + "n2' inputs: '" + prev + "' }\n";
    unary(p + "out", "ReLU", p + "add");
    prev = p + "out";
  }
  for (; count < nodes; ++count)
    unary("tail" + std::to_string(count), "Identity", prev), prev = "tail" + std::to_string(count);
  return s + "}\n";
}

double ms(QElapsedTimer& t) {
  return double(t.nsecsElapsed()) / 1e6;
}

double drawFrame(GraphView& view) {
  QImage img(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
  QPainter p(&img);
  QElapsedTimer t;
  t.start();
  view.render(&p, QRectF(), view.viewport()->rect());
  return ms(t);
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {1000, 10000};
  QTemporaryDir dir;
  std::printf("%8s %9s %9s %9s %10s %9s %11s %11s %8s %9s %9s %10s %9s\n", "nodes", "load ms",
              "scene ms", "valid ms", "layout ms", "frame ms", "draw fit ms", "draw 1:1 ms",
              "edit ms", "rename ms", "rewire ms", "reshape ms", "+ idle ms");
  for (int n : sizes) {
    QString path = dir.filePath(QString("stack-%1.nlproj").arg(n));
    QFile f(path);
    f.open(QIODevice::WriteOnly);
    f.write(QByteArray::fromStdString(residualStack(n)));
    f.close();

    QElapsedTimer t;
    GraphDocument doc;
    t.start();
    if (Status s = doc.load(path); !s) {
      std::fprintf(stderr, "load failed: %s\n", s.error().message.c_str());
      return 1;
    }
    double load = ms(t);
    if (!doc.analysis().ok()) {
      std::fprintf(stderr, "generated graph has problems: %s\n",
                   doc.analysis().problems[0].message.c_str());
      return 1;
    }
    t.restart();
    GraphScene scene(&doc);
    GraphView view(&scene);
    view.resize(1600, 1000);
    view.show();
    double sceneMs = ms(t);

    t.restart();
    ModelAnalysis a = analyzeModel(doc.toProject().model(), doc.batch());
    double validate = ms(t);

    t.restart();
    QString why;
    if (!autoLayout(doc, {}, &why)) {
      std::fprintf(stderr, "layout failed: %s\n", qPrintable(why));
      return 1;
    }
    double layout = ms(t);

    t.restart();
    view.frameAll();
    double frame = ms(t);
    double fit = drawFrame(view);
    // Panning at 1:1: the mean of a few frames along the stack.
    view.resetTransform();
    double pan = 0;
    const int frames = 8;
    QRectF all = scene.nodesRect({});
    for (int i = 0; i < frames; ++i) {
      view.centerOn(all.left() + all.width() * (i + 0.5) / frames, all.center().y());
      pan += drawFrame(view);
    }
    pan /= frames;

    // Edits, with the scene and the panels that follow the analysis alive, as in the
    // IDE: the document revalidates, the scene and the panels redraw what changed.
    SummaryWidget summary(&doc);
    ProblemsWidget problems(&doc);
    InspectorWidget inspector(&doc);
    // A keystroke in the inspector: a conv mid-stack loses and regains its bias; the
    // shapes stay.
    NodeId mid = doc.findNode("b" + std::to_string(n / 14) + "_c1");
    inspector.showNode(mid);
    const int edits = 10;
    double edit = 0;
    for (int i = 0; i < edits; ++i) {
      proto::AttrValue bias;
      bias.set_b(i % 2 != 0);
      t.restart();
      doc.setAttr(mid, "bias", bias);
      edit += ms(t) / edits;
    }
    // A rename: every reference is rewritten and the wiring resolved again.
    double rename = 0;
    for (int i = 0; i < edits; ++i) {
      t.restart();
      doc.renameNode(mid, i % 2 ? "b" + std::to_string(n / 14) + "_c1" : "renamed");
      rename += ms(t) / edits;
    }
    // A rewire near the end, as a drag from port to port: the connection is checked,
    // every node's references are resolved again and the order redone.
    const std::string lastBlock = "b" + std::to_string((n - 1) / 7 - 1) + "_";
    NodeId out = doc.findNode(lastBlock + "out");
    NodeId sum = doc.findNode(lastBlock + "add"), n2 = doc.findNode(lastBlock + "n2");
    double rewire = 0;
    for (int i = 0; i < edits; ++i) {
      t.restart();
      doc.connectPorts(i % 2 ? sum : n2, 0, out, 0);
      rewire += ms(t) / edits;
    }
    // The worst case: the first conv's kernel changes the shape of everything below
    // it (the first Add then fails, and everything under it is unknown), and the
    // padding brings it back.
    NodeId conv = doc.findNode("b0_c1");
    // Nodes out of view are redrawn in idle batches after the edit returns: `rest`
    // is that work, done here at once.
    double reshape = 0, rest = 0;
    for (int i = 0; i < edits; ++i) {
      proto::AttrValue k, pad;
      k.mutable_ints()->add_values(i % 2 ? 3 : 1);
      pad.mutable_ints()->add_values(i % 2 ? 1 : 0);
      t.restart();
      doc.setAttr(conv, "kernel_size", k);
      reshape += ms(t) / (2 * edits);
      t.restart();
      scene.finishRefresh();
      rest += ms(t) / (2 * edits);
      t.restart();
      doc.setAttr(conv, "padding", pad);
      reshape += ms(t) / (2 * edits);
      t.restart();
      scene.finishRefresh();
      rest += ms(t) / (2 * edits);
    }
    std::printf("%8d %9.1f %9.1f %9.1f %10.1f %9.1f %11.1f %11.1f %8.2f %9.2f %9.2f %10.2f %9.2f\n",
                int(doc.nodes().size()), load, sceneMs, validate, layout, frame, fit, pan, edit,
                rename, rewire, reshape, rest);
    std::fflush(stdout);
    (void)a;
  }
  return 0;
}

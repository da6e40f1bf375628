// netloom: the IDE. `netloom [PROJECT.nlproj]` opens the editor, on the project when
// one is given. `--run` starts training it once it is open; `--screenshot FILE`
// (with --run) saves the window as an image after `--screenshot-steps` training
// steps, stops the run and quits: the README's screenshot is made this way.
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>

#include "editor/scene.h"
#include "editor/view.h"
#include "gui/charts.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("NetLoom");
  QApplication::setApplicationName("netloom");
  QApplication::setApplicationVersion(NETLOOM_VERSION);
  QCommandLineParser cli;
  cli.setApplicationDescription("NetLoom: design neural networks by drawing them, then train them");
  cli.addHelpOption();
  cli.addVersionOption();
  cli.addPositionalArgument("project", "the .nlproj file to open");
  QCommandLineOption run("run", "start training the project once it is open");
  QCommandLineOption shot("screenshot", "with --run: save the window to FILE mid-training, quit",
                          "FILE");
  QCommandLineOption shotSteps("screenshot-steps", "training steps before the screenshot", "N",
                               "300");
  cli.addOptions({run, shot, shotSteps});
  cli.process(app);
  netloom::gui::MainWindow w;
  w.show();
  if (!cli.positionalArguments().isEmpty() && !w.openFile(cli.positionalArguments().first()))
    return 1;
  if (cli.isSet(run)) {
    w.action("run")->trigger();
    if (!w.runs()->running()) {
      std::fprintf(stderr, "netloom: %s\n", qPrintable(w.lastMessage()));
      return 1;
    }
  }
  QTimer watch;
  if (cli.isSet(run) && cli.isSet(shot)) {
    QString file = cli.value(shot);
    int steps = cli.value(shotSteps).toInt();
    QObject::connect(&watch, &QTimer::timeout, &w, [&] {
      bool enough = w.runs()->charts()->lossPoints() >= steps;
      if (!enough && w.runs()->running()) return;
      watch.stop();
      // The start of the graph at full size, so its shapes can be read.
      QRectF all = w.scene()->nodesRect({});
      w.view()->resetTransform();
      w.view()->centerOn(all.left() + w.view()->viewport()->width() / 2.0 - 40, all.center().y());
      w.runs()->charts()->replotNow();
      QApplication::processEvents();
      bool saved = w.grab().save(file);
      std::fprintf(stderr, "netloom: %s %s\n", saved ? "saved" : "could not save",
                   qPrintable(file));
      w.runs()->stopAndWait();
      QApplication::exit(saved ? 0 : 1);
    });
    watch.start(200);
  }
  return app.exec();
}

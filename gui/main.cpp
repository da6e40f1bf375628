// netloom: the IDE. `netloom [PROJECT.nlproj]` opens the editor, on the project when
// one is given. `--run` starts training it once it is open; `--screenshot FILE`
// (with --run) saves the window as an image after `--screenshot-steps` training
// steps (0: when the run has ended), stops the run and quits: the README's
// screenshots are made this way.
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
  QCommandLineOption shotSteps(
      "screenshot-steps", "training steps before the screenshot; 0: once the run ends", "N", "300");
  QCommandLineOption size("window-size", "open the window at this size, as WIDTHxHEIGHT", "SIZE");
  cli.addOptions({run, shot, shotSteps, size});
  cli.process(app);
  netloom::gui::MainWindow w;
  if (cli.isSet(size)) {
    QStringList wh = cli.value(size).split('x');
    if (wh.size() != 2 || wh[0].toInt() <= 0 || wh[1].toInt() <= 0) {
      std::fprintf(stderr, "netloom: --window-size wants WIDTHxHEIGHT, e.g. 1366x768\n");
      return 2;
    }
    w.resize(wh[0].toInt(), wh[1].toInt());
  }
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
      bool enough = steps > 0 && w.runs()->charts()->lossPoints() >= steps;
      if (!enough && w.runs()->running()) return;
      watch.stop();
      // The graph as opening it shows it: whole if it can be read so, else its start.
      w.view()->frameForReading();
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

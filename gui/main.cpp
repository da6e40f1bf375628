// netloom: the IDE. `netloom [PROJECT.nlproj]` opens the editor, on the project when
// one is given. `--run` starts training it once it is open; `--screenshot FILE`
// (with --run) saves the window as an image after `--screenshot-steps` training
// steps (0: when the run has ended), stops the run and quits: the README's
// screenshots are made this way.
#include <CLI/CLI.hpp>
#include <QApplication>
#include <cstdio>
#include <optional>
#include <string>

#include "editor/scene.h"
#include "editor/view.h"
#include "gui/charts.h"
#include "gui/main_window.h"
#include "gui/run_controller.h"

namespace {

struct IdeArgs {
  std::string project, screenshot;
  int screenshotSteps = 300;
  int width = 0, height = 0;  // --window-size; 0: the saved or default size
  bool run = false;
};

// Parses what Qt left of the command line (it takes its own options, such as
// -platform, first). An exit code where the program ends here.
std::optional<int> parseIdeArgs(int argc, char** argv, IdeArgs& a) {
  CLI::App cli{"NetLoom: design neural networks by drawing them, then train them", "netloom"};
  cli.set_version_flag("--version", std::string("netloom ") + NETLOOM_VERSION);
  cli.add_option("project", a.project, "the .nlproj file to open")->type_name("PROJECT");
  cli.add_flag("--run", a.run, "start training the project once it is open");
  auto* shot = cli.add_option("--screenshot", a.screenshot,
                              "with --run: save the window to FILE mid-training, then quit")
                   ->type_name("FILE");
  cli.add_option("--screenshot-steps", a.screenshotSteps,
                 "training steps before the screenshot; 0: once the run ends")
      ->type_name("N")
      ->check(CLI::Range(0, 1000000000))
      ->capture_default_str();
  cli.add_option_function<std::string>(
         "--window-size",
         [&a](const std::string& v) {
           int w = 0, h = 0;
           char x = 0, rest = 0;
           if (std::sscanf(v.c_str(), "%d%c%d%c", &w, &x, &h, &rest) != 3 || x != 'x' || w <= 0 ||
               h <= 0)
             throw CLI::ValidationError("--window-size", "wants WIDTHxHEIGHT, e.g. 1366x768");
           a.width = w;
           a.height = h;
         },
         "open the window at this size")
      ->type_name("WIDTHxHEIGHT");
  shot->needs("--run");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cli.exit(e);  // --help, --version
    std::fprintf(stderr, "netloom: %s\n(netloom --help lists the options)\n", e.what());
    return 2;
  }
  return std::nullopt;
}

// --run --screenshot: once the run has trained `steps` steps (or ended), saves the
// window as the project reads on opening, stops the run and quits.
void screenshotWhenReady(netloom::gui::MainWindow& w, const IdeArgs& a) {
  auto* runs = w.runs();
  auto take = [&w, runs, file = QString::fromStdString(a.screenshot)] {
    // The graph as opening it shows it: whole if it can be read so, else its start.
    w.view()->frameForReading();
    runs->charts()->replotNow();
    QApplication::processEvents();
    bool saved = w.grab().save(file);
    std::fprintf(stderr, "netloom: %s %s\n", saved ? "saved" : "could not save", qPrintable(file));
    runs->stopAndWait();
    QApplication::exit(saved ? 0 : 1);
  };
  auto once = std::make_shared<bool>(false);
  auto maybeTake = [once, take, runs, steps = a.screenshotSteps] {
    bool enough = steps > 0 && runs->charts()->lossPoints() >= steps;
    if (*once || (!enough && runs->running())) return;
    *once = true;
    // After the signal that brought us here has been delivered everywhere.
    QMetaObject::invokeMethod(runs, take, Qt::QueuedConnection);
  };
  QObject::connect(runs, &netloom::gui::RunController::eventsAppended, &w, maybeTake);
  QObject::connect(runs, &netloom::gui::RunController::runEnded, &w, maybeTake);
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("NetLoom");
  QApplication::setApplicationName("netloom");
  QApplication::setApplicationVersion(NETLOOM_VERSION);
  IdeArgs a;
  if (auto rc = parseIdeArgs(argc, argv, a)) return *rc;
  netloom::gui::MainWindow w;
  if (a.width > 0) w.resize(a.width, a.height);
  w.show();
  if (!a.project.empty() && !w.openFile(QString::fromStdString(a.project))) return 1;
  if (a.run) {
    w.action("run")->trigger();
    if (!w.runs()->running()) {
      std::fprintf(stderr, "netloom: %s\n", qPrintable(w.lastMessage()));
      return 1;
    }
    if (!a.screenshot.empty()) screenshotWhenReady(w, a);
  }
  return app.exec();
}

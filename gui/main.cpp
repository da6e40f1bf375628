// netloom: the IDE. `netloom [PROJECT.nlproj]` opens the editor, on the project when
// one is given.
#include <QApplication>
#include <QCommandLineParser>

#include "gui/main_window.h"

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
  cli.process(app);
  netloom::gui::MainWindow w;
  w.show();
  if (!cli.positionalArguments().isEmpty() && !w.openFile(cli.positionalArguments().first()))
    return 1;
  return app.exec();
}

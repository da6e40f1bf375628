// Windows that fit the screen they open on: a dialog asks for the size it would
// like and gets at most the screen's available area, wholly on it, so its buttons
// are never off a 1366×768 laptop screen.
#pragma once

#include <QSize>

class QWidget;

namespace netloom::gui {

// Resizes `w` to `preferred`, capped at its screen's available geometry less a margin
// for the window frame, and moves it onto that screen where it would stick out.
void fitToScreen(QWidget* w, QSize preferred);

// Whether `w`'s frame lies wholly within its screen's available geometry.
bool onScreen(const QWidget* w);

}  // namespace netloom::gui

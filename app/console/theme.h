// Light and dark palettes for the console. "system" keeps the platform's own palette
// (and follows it); "light" and "dark" use the Fusion style with a fixed palette, so the
// console reads the same everywhere. Widgets and charts take their colours from the
// palette, so a switch repaints everything at once.
#pragma once

#include <QPalette>
#include <QString>

namespace scalelab::app {

enum class Theme { System, Light, Dark };

QString themeName(Theme theme); // "system" | "light" | "dark"
bool themeFromName(const QString &name, Theme *theme);
void applyTheme(Theme theme); // QApplication must exist
// Whether a palette draws light text on a dark window (the dark theme, or a dark system one).
bool isDarkPalette(const QPalette &palette);

} // namespace scalelab::app

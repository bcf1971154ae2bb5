// Helpers for the tests of the console's widgets (label gui).
#pragma once

#include "metric_chart.h"

#include <QCoreApplication>
#include <QTest>
#include <QWidget>

namespace scalelab::test {

// True once every chart under `root` has drawn what it was given: no redraw is scheduled on
// its coalescing timer. Events already posted (a palette change, a resize) are delivered
// first, since they may schedule one. Use as QTRY_VERIFY(test::chartsSettled(&view)) instead
// of a fixed wait for the charts' timer.
inline bool chartsSettled(QWidget *root)
{
    QCoreApplication::sendPostedEvents();
    const auto charts = root->findChildren<app::MetricChart *>();
    for (const app::MetricChart *chart : charts)
        if (chart->redrawPending())
            return false;
    return true;
}

// Shows `root` and waits until it is on screen and its charts have drawn: before a grab().
[[nodiscard]] inline bool showAndSettle(QWidget *root, int timeoutMs = 10'000)
{
    root->show();
    return QTest::qWaitForWindowExposed(root, timeoutMs)
        && QTest::qWaitFor([root] { return chartsSettled(root); }, timeoutMs);
}

} // namespace scalelab::test

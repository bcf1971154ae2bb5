// A parallel-coordinates chart: one vertical axis per hyperparameter (log scale for the
// ones drawn in log space, words spread evenly), the metric as the last axis, and one
// line per trial through its values, coloured by its metric (a colour bar says how).
// Faded lines are trials the scheduler stopped. Hovering a line names its trial.
// Plain QPainter: Qt Charts has no such chart.
#pragma once

#include <QColor>
#include <QList>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <optional>

namespace scalelab::app {

class ParallelCoordinates : public QWidget {
    Q_OBJECT
public:
    struct Axis {
        QString label;
        bool log = false;
        QStringList words; // a categorical axis (precision): values are indices into it
    };
    struct Line {
        QString id;
        QString label; // for the hover text
        QList<double> values; // one per axis (NaN: the trial has none), the metric last
        bool faded = false;
        bool best = false;
    };

    explicit ParallelCoordinates(QWidget *parent = nullptr);

    // `axes` includes the metric's axis, last; `maximize`: higher metric is better (the
    // brightest colour).
    void setData(const QList<Axis> &axes, const QList<Line> &lines, bool maximize);
    const QList<Axis> &axes() const { return m_axes; }
    const QList<Line> &lines() const { return m_lines; }

    // The colour a metric value is drawn in, from the metric axis' range.
    QColor colorFor(double metric) const;
    // Where line `index` crosses each axis, in widget coordinates (for tests and hover).
    QList<QPointF> polyline(int index) const;
    // The line under `position` (within a few pixels), if any.
    std::optional<int> lineAt(const QPointF &position) const;

protected:
    void paintEvent(QPaintEvent *event) override;
    void mouseMoveEvent(QMouseEvent *event) override;
    void leaveEvent(QEvent *event) override;

private:
    struct Range {
        double low = 0;
        double high = 1;
    };
    QRectF plotArea() const;
    double axisX(int axis) const;
    double axisY(int axis, double value) const; // NaN when the value cannot be placed

    QList<Axis> m_axes;
    QList<Line> m_lines;
    QList<Range> m_ranges;
    bool m_maximize = true;
    int m_hovered = -1;
};

} // namespace scalelab::app
